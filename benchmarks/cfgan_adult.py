"""Table 7.1 trends on Adult: CFGAN(TE) and CFGAN(SE) against the fairness-blind dpgan.

The DAG is the one the packaged Adult contract declares (``causal_graph:``), with S = sex and
Y = income. ``--contract adult`` uses the 13 contract attributes at their declared domains;
``--contract adult_pse_dr`` the paper's setting: PSE-DR's 11 attributes, each binarised (the
thresholds are that contract's own, stated in it; PSE-DR's are not published with the data).
For each method and ε the script reports, on the synthetic table and on the real training
split with the same estimator (truncated factorisation on the DAG): TE (total effect of sex on
income), IE (indirect discrimination: the path-specific effect through the redlining set
R = {marital-status}), the mean χ² distance of the 2-way marginals to the real ones and the
TSTR accuracy of a logistic regression. When the full joint has at most 4,096 cells (the
binarised view: 2^11) it adds Table 7.1's own columns: χ² over the joint,
Σ (N_gen − N_real)² / N_real over cells with N_real > 0 at equal n, and the TSTR accuracy of
SVM (linear), DT, LR and RF, tested on the real 20 %. NOT privacy-protected (it scores on
real data).

    .venv/bin/python benchmarks/cfgan_adult.py --epsilons inf 10 \
        --out benchmarks/results/cfgan_adult.json
    .venv/bin/python benchmarks/cfgan_adult.py --contract adult_pse_dr --epsilons inf 10 \
        --out benchmarks/results/cfgan_table71_binarised.json
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from _common import emit
from _gan_config import gan_overrides

REDLINING = ("marital-status",)
VARIANTS = {"dpgan": {"method": "dpgan"}, "fairgan": {"method": "fairgan"},
            "cfgan-te": {"method": "cfgan", "effect": "te"},
            "cfgan-se": {"method": "cfgan", "effect": "se", "redlining": REDLINING}}


def chi2_2way(real: dict, synthetic: dict, domain) -> float:
    """Mean over attribute pairs of Σ (p − q)² / p (cells with p > 0)."""
    values = []
    for a, b in itertools.combinations(domain.attributes, 2):
        shape = (domain.size(a), domain.size(b))
        p = np.bincount(np.ravel_multi_index((real[a], real[b]), shape),
                        minlength=math.prod(shape)) / len(real[a])
        q = np.bincount(np.ravel_multi_index((synthetic[a], synthetic[b]), shape),
                        minlength=math.prod(shape)) / len(synthetic[a])
        keep = p > 0
        values.append(float(((p[keep] - q[keep]) ** 2 / p[keep]).sum()))
    return float(np.mean(values))


def chi2_joint(real: dict, synthetic: dict, domain) -> float:
    """Table 7.1's χ²: Σ (N_gen − N_real)² / N_real over the joint's cells with N_real > 0,
    the synthetic counts rescaled to the real row count."""
    shape = tuple(domain.size(a) for a in domain)
    size = math.prod(shape)

    def counts(codes: dict) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(codes[a] for a in domain), shape)
        return np.bincount(flat, minlength=size).astype(float)

    n_real, n_gen = counts(real), counts(synthetic)
    n_gen *= n_real.sum() / n_gen.sum()
    keep = n_real > 0
    return float(((n_gen[keep] - n_real[keep]) ** 2 / n_real[keep]).sum())


def four_classifiers(train: dict, test: dict, domain, seed: int) -> dict:
    """TSTR accuracy of Table 7.1's SVM, DT, LR and RF (one-hot X, Y = income)."""
    from _gan_metrics import one_hot
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    features = [a for a in domain if a != "income"]
    x_train, x_test = one_hot(train, domain, features), one_hot(test, domain, features)
    y_train, y_test = train["income"], test["income"]
    models = {"svm": LinearSVC(C=1.0, max_iter=5000, random_state=seed),
              "dt": DecisionTreeClassifier(max_depth=10, random_state=seed),
              "lr": LogisticRegression(max_iter=1000),
              "rf": RandomForestClassifier(n_estimators=100, max_depth=12, n_jobs=1,
                                           random_state=seed)}
    out = {}
    for name, model in models.items():
        if len(np.unique(y_train)) < 2:
            out[name] = float(np.mean(y_test == y_train[0]))
            continue
        out[name] = float(np.mean(model.fit(x_train, y_train).predict(x_test) == y_test))
    return out


def effects(codes: dict, domain, dag, seed: int) -> dict:
    from privfair.generative.effects import causal_effect

    paths = dag.path_edges("sex", "income", through=REDLINING)
    kwargs = {"protected": "sex", "outcome": "income"}
    return {"te": causal_effect(codes, domain, dag, rng=np.random.default_rng(seed), **kwargs),
            "ie": causal_effect(codes, domain, dag, paths=paths,
                                rng=np.random.default_rng(seed), **kwargs)}


def main() -> None:
    from _gan_metrics import classifier_scores

    from privfair.contracts.datasets import load_codes
    from privfair.core.accounting import PrivacyLedger
    from privfair.evaluation.evaluate import train_test_split
    from privfair.generative.dag import parse_dag
    from privfair.generative.gan import GANConfig, fit_gan

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--epsilons", nargs="+", default=["inf", "10"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contract", default="adult", choices=["adult", "adult_pse_dr"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="override GANConfig fields for every variant, e.g. "
                             "fairness_weight=16")
    args = parser.parse_args()
    overrides = gan_overrides(args.set)
    frame, contract = load_codes(args.contract)
    domain = contract.domain()
    joint_cells = math.prod(domain.size(a) for a in domain)
    table71 = joint_cells <= 4096
    graph = contract.causal_graph.as_mapping()
    dag = parse_dag(graph, domain, protected=("sex",), outcome=("income",))
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    real = {a: train[a].to_numpy() for a in domain}
    held_out = {a: test[a].to_numpy() for a in domain}
    rows = [{"variant": "real", **effects(real, domain, dag, args.seed),
             **({"chi2_joint": 0.0, **four_classifiers(real, held_out, domain, args.seed)}
                if table71 else {})}]
    for variant in args.variants:
        for eps_text in args.epsilons:
            epsilon = math.inf if eps_text == "inf" else float(eps_text)
            ledger = PrivacyLedger(epsilon_budget=1e6 if math.isinf(epsilon) else epsilon,
                                   delta=1e-9)
            config = GANConfig(**{**VARIANTS[variant], **overrides})
            start = time.perf_counter()
            fitted = fit_gan(real, domain, protected="sex", outcome="income", ledger=ledger,
                             rng=np.random.default_rng(args.seed), config=config,
                             dag=graph if config.method == "cfgan" else None)
            seconds = time.perf_counter() - start
            synthetic = fitted.sample(len(train), rng=np.random.default_rng(args.seed + 1))
            row = {"variant": variant, "epsilon": eps_text, "fit_s": round(seconds, 1),
                   **effects(synthetic, domain, dag, args.seed),
                   "chi2_2way": chi2_2way(real, synthetic, domain),
                   "tstr_accuracy": classifier_scores(synthetic, held_out, domain,
                                                      protected="sex",
                                                      outcome="income")["accuracy"]}
            if table71:
                row["chi2_joint"] = chi2_joint(real, synthetic, domain)
                row.update(four_classifiers(synthetic, held_out, domain, args.seed))
            print(row, file=sys.stderr, flush=True)
            rows.append(row)
    emit({"benchmark": "cfgan_adult", "contract": args.contract, "overrides": overrides,
          "attributes": list(domain.attributes), "joint_cells": joint_cells,
          "redlining": list(REDLINING), "delta": 1e-9,
          "load_avg": list(os.getloadavg()), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
