"""Table 6.1 / 6.2 trends for the DP GANs on the embedded Adult (prints JSON lines).

For each method and ε: train on 80% of Adult (contract codes, S = sex, Y = income), sample as
many rows, and report data fairness of the synthetic table (RD(D), BER of a logistic
regression predicting S from X), a logistic regression trained on the synthetic table and
tested on the real 20% (accuracy, RD(η), DTPR, DFPR), the average 1/2/3-way TVD to the train
split, the DP-SGD parameters, fit time and the process's peak RSS. ``--epsilons inf`` means a
ledger so large that σ is tiny (the non-private reference). NOT privacy-protected: it scores
against real data.

    .venv/bin/python benchmarks/gan_adult.py --methods dpgan fairgan --epsilons inf 1 10
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time

import numpy as np
from _gan_config import gan_overrides
from _gan_metrics import classifier_scores, marginal_tvd


def _progress(label):
    def report(epoch, epochs, info):
        print(f"{label} epoch {epoch}/{epochs} shift {info['marginal_shift']:.4f}",
              file=sys.stderr, flush=True)
    return report


def main() -> None:
    from privfair.contracts.datasets import load_codes
    from privfair.core.accounting import PrivacyLedger
    from privfair.evaluation.evaluate import train_test_split
    from privfair.generative.gan import GANConfig, fit_gan
    from privfair.release.kinds.gan.stages import data_fairness

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--methods", nargs="+", default=["dpgan", "fairgan"])
    parser.add_argument("--epsilons", nargs="+", default=["inf", "1", "10"])
    parser.add_argument("--epochs", type=int, default=None, help="default: shipped default")
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="override GANConfig fields, e.g. fairness_weight=8")
    args = parser.parse_args()
    overrides = gan_overrides(args.set)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    frame, contract = load_codes("adult")
    domain = contract.domain()
    protected, outcome = "sex", "income"
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    train_codes = {a: train[a].to_numpy() for a in domain}
    test_codes = {a: test[a].to_numpy() for a in domain}
    real = data_fairness(train_codes, domain, protected=protected, outcome=outcome,
                         rng=np.random.default_rng(args.seed))
    print(json.dumps({"method": "real", "rd": real["rd"], "ber": real["ber"],
                      **classifier_scores(train_codes, test_codes, domain,
                                          protected=protected, outcome=outcome)}), flush=True)
    for method in args.methods:
        for eps_text in args.epsilons:
            epsilon = math.inf if eps_text == "inf" else float(eps_text)
            ledger = PrivacyLedger(epsilon_budget=1e6 if math.isinf(epsilon) else epsilon,
                                   delta=args.delta)
            config = GANConfig(method=method, **({"epochs": args.epochs} if args.epochs
                                                 else {}), **overrides)
            start, cpu = time.perf_counter(), time.process_time()
            fitted = fit_gan(train_codes, domain, protected=protected, outcome=outcome,
                             ledger=ledger, rng=np.random.default_rng(args.seed),
                             config=config, progress=_progress(f"{method} eps={eps_text}"))
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            synthetic = fitted.sample(len(train), rng=np.random.default_rng(args.seed + 1))
            fairness = data_fairness(synthetic, domain, protected=protected, outcome=outcome,
                                     rng=np.random.default_rng(args.seed))
            dp = fitted.privacy["dp_sgd"]
            print(json.dumps({
                "method": method, "epsilon": eps_text, "overrides": overrides, "delta": args.delta,
                "epsilon_spent": ledger.epsilon_spent(), "rd": fairness["rd"],
                "ber": fairness["ber"],
                **{f"tvd_{k}": marginal_tvd(train_codes, synthetic, domain, k=k)
                   for k in (1, 2, 3)},
                **classifier_scores(synthetic, test_codes, domain, protected=protected,
                                    outcome=outcome),
                "sigma": dp["noise_multiplier"], "clip": dp["max_grad_norm"],
                "q": dp["sample_rate"], "steps": dp["steps"], "steps_run": dp["steps_run"],
                "epochs_run": len(fitted.history),
                "history": [{k: round(v, 4) for k, v in h.items()} for h in fitted.history],
                "fit_seconds": round(seconds, 1),
                "fit_cpu_seconds": round(cpu, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }), flush=True)


if __name__ == "__main__":
    main()
