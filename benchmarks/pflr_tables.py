"""Tables 8.1 and 8.2 of Xu (2021) on Adult: LR, FairLR, PrivLR, PFLR, PFLR*.

    python benchmarks/pflr_tables.py [--runs 10] [--out benchmarks/results/pflr_tables.json]

Prints JSON: accuracy and |RD| (mean, sd over runs; each run a fresh 80/20 split and fresh
noise) per method and ε ∈ {0.1, 1, 10, 100}, next to the paper's numbers, whether each is
within one paper sd, the majority-class baseline and the positive-prediction rate.

Differences from the dissertation, all deliberate (see privfair/learn/functional.py):
add/remove neighbours (no factor 2), the contract's one-hot encoding with the exact row norm
||x||_1 = 12 instead of d = 40 (both cut the noise scale by ~16x), the fairness term as the
library's named settings (``learn.functional.FAIRNESS_SETTINGS``): ``xu2021``, Eq. 8.1's
α |Σ(s_i − c) x_iᵀw| with α = 1 (the paper's and the default), and ``signed-shift``, Alg. 6's
linear shift at α = 1 (issue 40: it overshoots), a DP estimate of P(S = 1) (2% of ε),
spectral trimming at the noise level. FairLR is Zafar et al.'s
covariance-constrained LR (non-private, covariance forced to 0), fitted with SLSQP.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _common import emit
from _learn_common import adult_model_data, group_scores, split
from scipy.optimize import minimize

from privfair.core.accounting import PrivacyLedger
from privfair.learn.functional import FAIRNESS_SETTINGS, FunctionalLogisticRegression

EPSILONS = (0.1, 1.0, 10.0, 100.0)
# (accuracy mean, sd), (RD mean, sd) from Tables 8.1/8.2 (Adult); sd missing at ε = 1 in 8.2
# comes from Table 8.1.
PAPER = {
    "LR": {None: ((0.8380, 0.0023), (0.1577, 0.0064))},
    "FairLR": {None: ((0.7739, 0.0521), (0.0095, 0.0071))},
    "PrivLR": {0.1: ((0.6263, 0.1480), (0.0883, 0.0805)), 1.0: ((0.7238, 0.0612),
               (0.0502, 0.0581)), 10.0: ((0.7270, 0.0877), (0.1459, 0.0798)),
               100.0: ((0.8295, 0.0032), (0.1624, 0.0116))},
    "PFLR": {0.1: ((0.6172, 0.1187), (0.0351, 0.0493)), 1.0: ((0.7400, 0.0182),
             (0.0213, 0.0258)), 10.0: ((0.7631, 0.0155), (0.0338, 0.0255)),
             100.0: ((0.7835, 0.0318), (0.0332, 0.0243))},
    "PFLR*": {0.1: ((0.7491, 0.0040), (0.0028, 0.0039)), 1.0: ((0.7552, 0.0092),
              (0.0053, 0.0070)), 10.0: ((0.7632, 0.0093), (0.0204, 0.0140)),
              100.0: ((0.7913, 0.0200), (0.0234, 0.0189))},
}


def _logistic_fit(x: np.ndarray, y: np.ndarray, s: np.ndarray | None) -> np.ndarray:
    """L2-regularised LR (1e-4); with ``s``, Zafar's constraint Σ(s_i − s̄)x_iᵀw = 0."""
    n, d = x.shape

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w
        p = 1 / (1 + np.exp(-z))
        value = np.mean(np.logaddexp(0, z) - y * z) + 1e-4 * w @ w
        return value, x.T @ (p - y) / n + 2e-4 * w

    constraints = []
    if s is not None:
        cov = (s - s.mean()) @ x / n
        constraints = [{"type": "eq", "fun": lambda w: cov @ w, "jac": lambda w: cov}]
    method = "SLSQP" if constraints else "L-BFGS-B"
    return minimize(loss, np.zeros(d), jac=True, method=method, constraints=constraints,
                    options={"maxiter": 500}).x


def _summary(rows: list[dict[str, float]]) -> dict[str, float]:
    out = {}
    for key in rows[0]:
        values = np.array([r[key] for r in rows])
        out[key] = float(values.mean())
        out[f"{key}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return out


def _compare(ours: dict[str, float], paper: tuple) -> dict[str, object]:
    (acc, acc_sd), (rd, rd_sd) = paper
    return {"paper_accuracy": acc, "paper_accuracy_sd": acc_sd, "paper_rd": rd,
            "paper_rd_sd": rd_sd,
            "accuracy_within_1sd": abs(ours["accuracy"] - acc) <= acc_sd,
            "rd_within_1sd": abs(ours["risk_difference"] - rd) <= rd_sd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    start = time.perf_counter()
    x, y, s, bound = adult_model_data()
    y, s_float = y.astype(float), s.astype(float)
    results: dict[str, dict] = {}
    baselines = []
    for name, fair in (("LR", False), ("FairLR", True)):
        rows = []
        for run in range(args.runs):
            train, test = split(len(x), run)
            w = _logistic_fit(x[train], y[train], s_float[train] if fair else None)
            rows.append(group_scores(y[test], (x[test] @ w > 0).astype(float), s[test]))
        summary = _summary(rows)
        results[name] = {"non-private": summary | _compare(summary, PAPER[name][None])}
    for run in range(args.runs):
        _, test = split(len(x), run)
        baselines.append(max(y[test].mean(), 1 - y[test].mean()))
    variants = [("PrivLR", "privlr", "xu2021"), ("PFLR", "pflr", "xu2021"),
                ("PFLR", "pflr", "signed-shift"), ("PFLR*", "pflr-star", "xu2021"),
                ("PFLR*", "pflr-star", "signed-shift")]
    for label, variant, setting in variants:
        key = label if variant == "privlr" else f"{label} ({setting})"
        results[key] = {}
        for eps in EPSILONS:
            rows, trimmed = [], []
            for run in range(args.runs):
                train, test = split(len(x), run)
                model = FunctionalLogisticRegression(
                    epsilon=eps, variant=variant, row_l1_bound=bound,
                    rng=np.random.default_rng([run, int(eps * 10)]),
                    **FAIRNESS_SETTINGS[setting].kwargs())
                ledger = PrivacyLedger(epsilon_budget=eps, delta=1e-6, accounting="rdp")
                model.fit(x[train], y[train], s_float[train], ledger=ledger)
                rows.append(group_scores(y[test], model.predict(x[test]).astype(float),
                                         s[test]))
                trimmed.append(model.trimmed_)
            summary = _summary(rows) | {"trimmed_directions": float(np.mean(trimmed))}
            results[key][f"epsilon={eps:g}"] = summary | _compare(summary, PAPER[label][eps])
    emit({
        "benchmark": "Xu 2021 Tables 8.1/8.2, Adult (45,222 complete rows, 80/20 splits)",
        "runs": args.runs,
        "inputs": int(x.shape[1]), "row_l1_bound": int(bound),
        "majority_baseline_accuracy": float(np.mean(baselines)),
        "fairness_share_pflr_star": 0.5, "centre_share": 0.02,
        "neighbours": "add/remove one row (the paper's Δ uses replace-one: twice ours)",
        "results": results,
        "seconds": round(time.perf_counter() - start, 1),
    }, args.out)


if __name__ == "__main__":
    main()
