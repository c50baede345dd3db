"""Xu 2021 ch. 6, Tables 6.1 and 6.2: FairGAN and FairGAN+ on Adult (S = sex, Y = income).

Table 6.1 (data fairness RD(D), BER of predicting S) and Table 6.2 (RD(η) and accuracy of a
logistic regression trained on the generated rows, tested on the real 20 %) are the paper's
*non-private* GANs; ``epsilon = inf`` is that setting (a ledger so large that σ is
negligible), ε = 1 is privfair's DP version. ``dpgan`` stands in for the fairness-blind
ACGAN. Metrics reuse ``benchmarks/_gan_metrics`` and the GAN kind's ``data_fairness``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_gan"
TITLE = "Xu 2021 Tables 6.1 / 6.2 (ch. 6): FairGAN, FairGAN+ (and dpgan for ACGAN)"
METHODS = ("dpgan", "fairgan", "fairgan-plus")


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 1 if mode == "quick" else 5
    eps_list = ("inf",) if mode == "quick" else ("inf", "1")
    return [cell(NAME, {"method": m, "epsilon": e, "epochs": 0}, s)  # 0: shipped default
            for m in METHODS for e in eps_list for s in range(seeds)]


@functools.lru_cache(maxsize=1)
def _data():
    from privfair.contracts.datasets import load_codes
    from privfair.evaluation.evaluate import train_test_split

    frame, contract = load_codes("adult")
    domain = contract.domain()
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    return ({a: train[a].to_numpy() for a in domain}, {a: test[a].to_numpy() for a in domain},
            domain)


def run(c: dict[str, Any]) -> dict[str, Any]:
    import torch
    from _gan_metrics import classifier_scores

    from privfair.core.accounting import PrivacyLedger
    from privfair.generative.gan import GANConfig, fit_gan
    from privfair.release.gan.stages import data_fairness

    torch.set_num_threads(1)
    s = c["setting"]
    train, test, domain = _data()
    eps = math.inf if s["epsilon"] == "inf" else float(s["epsilon"])
    ledger = PrivacyLedger(epsilon_budget=1e6 if math.isinf(eps) else eps, delta=1e-9)
    config = GANConfig(method=s["method"], **({"epochs": s["epochs"]} if s["epochs"] else {}))
    fitted = fit_gan(train, domain, protected="sex", outcome="income", ledger=ledger,
                     rng=np.random.default_rng(c["seed"]), config=config)
    synthetic = fitted.sample(len(train["sex"]), rng=np.random.default_rng(c["seed"] + 1))
    fair = data_fairness(synthetic, domain, protected="sex", outcome="income",
                         rng=np.random.default_rng(c["seed"]))
    scores = classifier_scores(synthetic, test, domain, protected="sex", outcome="income")
    y_test = test["income"] == domain.size("income") - 1
    majority = float(max(y_test.mean(), 1 - y_test.mean()))
    return {"RD_D": fair["rd"], "BER": fair["ber"], "RD_eta": scores.get("rd_eta"),
            "accuracy": scores["accuracy"],
            "trivial": bool(not scores["accuracy"] > majority + 0.002)}


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["dataset"], r["metric"]): r
             for name in ("xu_table6_1", "xu_table6_2") for r in paper_table(name)}
    better = {"RD_D": "abs_lower", "RD_eta": "abs_lower", "BER": "higher",
              "accuracy": "higher"}
    rows = []
    for eps in sorted({r["setting"]["epsilon"] for r in records}):
        for method in METHODS:
            runs = ok_metrics(records, method=method, epsilon=eps)
            useful = [m for m in runs if not m.get("trivial")]
            for metric in ("RD_D", "BER", "RD_eta", "accuracy"):
                table = "6.1" if metric in ("RD_D", "BER") else "6.2"
                row = compare_row(
                    f"Table {table}, {method}, ε={eps}", metric,
                    [m.get(metric) for m in (runs if metric == "accuracy" else useful)],
                    paper.get((method, metric)), better=better[metric], abs_tol=0.02,
                    rel_tol=0.0 if metric == "accuracy" else 0.1)
                if metric != "accuracy" and len(useful) < len(runs):
                    row["why"] += (f"; {len(runs) - len(useful)} of {len(runs)} generated "
                                   "tables were trivial (their LR predicts the majority "
                                   "class) and are left out of the fairness means")
                rows.append(row)
    notes = [__doc__.split("\n\n")[1].replace("\n", " "),
             "Accounting: the paper's GANs are not private, so there is no paper-accounting "
             "column; ε = 1 rows are privfair's DP-SGD on D1 only."]
    return {"name": NAME, "title": TITLE, "source": "Xu 2021, Tables 6.1 (p. 83), 6.2 (p. 85)",
            "rows": rows, "notes": notes, "plots": [], "failed": failed_rows(records)}
