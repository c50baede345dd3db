"""Xu 2021 ch. 8, Tables 8.1 / 8.2: PrivLR, PFLR, PFLR* on Adult (accuracy, |RD|).

Complete-case Adult (45,222 rows), one-hot features of the packaged contract
(``benchmarks/_learn_common``), 80/20 splits, one per seed. ``paper accounting``: the
dissertation's Δ uses replace-one neighbours and d = 40 min-max features, Δ_PrivLR =
2 (d/2 + d²/8) = 440, where ours (add/remove, exact one-hot norm B = 12) is B/2 + B²/8 = 24.
The same noise the paper adds at its ε is ours at ε · 24/440, and that column runs there:
it is the paper's analysis, not our guarantee.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_pflr"
TITLE = "Xu 2021 Tables 8.1 / 8.2 (ch. 8): PrivLR, PFLR, PFLR*"
MODELS = {"PrivLR": "privlr", "PFLR": "pflr", "PFLR*": "pflr-star"}
PAPER_SCALE = 24 / 440


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 2 if mode == "quick" else 10
    out = [cell(NAME, {"model": m, "epsilon": "none"}, s)
           for m in ("LR", "FairLR") for s in range(1 if mode == "quick" else seeds)]
    # Table 8.1's LR under the functional mechanism's objective (its 2nd-order Taylor
    # loss) without noise: which of the two losses the paper's "LR" row matches.
    out += [cell(NAME, {"model": "LR", "epsilon": "none", "loss": "taylor"}, s)
            for s in range(1 if mode == "quick" else seeds)]
    for model in MODELS:
        for eps in (0.1, 1.0, 10.0, 100.0):
            runs = [("ours", 1.0), ("paper", 1.0)]
            if model != "PrivLR":
                runs.append(("ours", 0.3))
            for accounting, alpha in runs:
                out += [cell(NAME, {"model": model, "epsilon": eps, "accounting": accounting,
                                    "alpha": alpha}, s) for s in range(seeds)]
    return out


@functools.lru_cache(maxsize=1)
def _data():
    from _learn_common import adult_model_data

    return adult_model_data()


def run(c: dict[str, Any]) -> dict[str, Any]:
    from _learn_common import group_scores, split
    from pflr_tables import _logistic_fit

    from privfair.core.accounting import PrivacyLedger
    from privfair.learn.functional import FunctionalLogisticRegression

    s = c["setting"]
    x, y, group, bound = _data()
    train, test = split(len(x), c["seed"])
    if s.get("loss") == "taylor":
        # ε = 1e12: Laplace scale 24/1e12 on the coefficients, no noise to speak of.
        model = FunctionalLogisticRegression(epsilon=1e12, variant="privlr", row_l1_bound=bound,
                                             rng=np.random.default_rng(c["seed"]))
        model.fit(x[train], y[train].astype(float), group[train].astype(float),
                  ledger=PrivacyLedger(epsilon_budget=1e12, delta=1e-6, accounting="rdp"))
        pred = model.predict(x[test]).astype(float)
    elif s["epsilon"] == "none":
        w = _logistic_fit(x[train], y[train].astype(float),
                          group[train].astype(float) if s["model"] == "FairLR" else None)
        logit = x[test] @ w
        pred = (logit > 0).astype(float)
        target = _paper_accuracy(s["model"])
        if target is not None:
            # The same model's |RD| where a higher threshold brings its accuracy down to the
            # paper's (the accuracy–fairness trade-off at the paper's operating point).
            cuts = np.linspace(0.0, 6.0, 601)
            acc = np.array([np.mean((logit > t) == y[test]) for t in cuts])
            at = (logit > cuts[int(np.argmin(np.abs(acc - target)))]).astype(float)
            shifted = group_scores(y[test], at, group[test])
            return {**group_scores(y[test], pred, group[test]),
                    "rd_at_paper_accuracy": shifted["risk_difference"],
                    "accuracy_at_paper_accuracy": shifted["accuracy"]}
    else:
        eps = s["epsilon"] * (PAPER_SCALE if s["accounting"] == "paper" else 1.0)
        model = FunctionalLogisticRegression(
            epsilon=eps, variant=MODELS[s["model"]], row_l1_bound=bound, alpha=s["alpha"],
            rng=np.random.default_rng([c["seed"], int(s["epsilon"] * 10)]))
        model.fit(x[train], y[train].astype(float), group[train].astype(float),
                  ledger=PrivacyLedger(epsilon_budget=s["epsilon"], delta=1e-6,
                                       accounting="rdp"))
        pred = model.predict(x[test]).astype(float)
    return group_scores(y[test], pred, group[test])


def _paper_accuracy(model: str) -> float | None:
    row = {(r["method"], r["epsilon"], r["metric"]): r
           for r in paper_table("xu_table8_1_8_2")}.get((model, "none", "accuracy"))
    return row["value"] if row else None


def table81_why(model: str, metric: str, runs: list[dict[str, Any]],
                taylor: list[dict[str, Any]]) -> str | None:
    """Measured reading of a Table 8.1 |RD| gap: the same LR under the functional mechanism's
    Taylor loss (no noise) and the model's |RD| at the paper's accuracy."""
    if metric != "rd" or not runs:
        return None
    shifted = [m["rd_at_paper_accuracy"] for m in runs if "rd_at_paper_accuracy" in m]
    acc = [m["accuracy_at_paper_accuracy"] for m in runs if "rd_at_paper_accuracy" in m]
    parts = []
    if model == "LR" and taylor:
        parts.append(
            f"the same LR fitted on the functional mechanism's 2nd-order Taylor loss (the "
            f"objective PrivLR/PFLR optimise), without noise, has |RD| "
            f"{np.mean([m['risk_difference'] for m in taylor]):.4f} at accuracy "
            f"{np.mean([m['accuracy'] for m in taylor]):.4f} over {len(taylor)} splits: the "
            "paper's LR row matches that objective better than the exact logistic loss")
    if shifted and model == "FairLR":
        parts.append(
            f"at the paper's accuracy ({np.mean(acc):.4f}, a higher decision threshold) ours "
            f"has |RD| {np.mean(shifted):.4f}: the paper's operating point trades accuracy "
            "for disparity")
    return "; ".join(parts) or None


ONE_CLASS_WHY = "the model predicts one class for every test row (positive rate 0 or 1)"


def one_class(metrics: dict[str, Any]) -> bool | None:
    """Whether a cell's model predicts one class (None where the cell lacks the rate)."""
    rate = metrics.get("positive_prediction_rate")
    if rate is None:
        return None
    return bool(rate <= 0.0 or rate >= 1.0)


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["method"], r["epsilon"], r["metric"]): r
             for r in paper_table("xu_table8_1_8_2")}
    rows = []
    taylor = ok_metrics(records, model="LR", epsilon="none", loss="taylor")
    for model in ("LR", "FairLR"):
        runs = ok_metrics(records, model=model, epsilon="none", loss=None)
        for metric, key in (("accuracy", "accuracy"), ("rd", "risk_difference")):
            rows.append(compare_row(f"Table 8.1, {model} (non-private)", metric,
                                    [m[key] for m in runs], paper.get((model, "none", metric)),
                                    better="higher" if metric == "accuracy" else "abs_lower",
                                    abs_tol=0.01, why=table81_why(model, metric, runs, taylor),
                                    trivial=[one_class(m) for m in runs],
                                    trivial_why=ONE_CLASS_WHY))
    for metric, key in (("accuracy", "accuracy"), ("rd", "risk_difference")):
        if taylor:
            rows.append(compare_row(
                "Table 8.1, LR (non-private) on the Taylor loss of the functional mechanism",
                metric, [m[key] for m in taylor], paper.get(("LR", "none", metric)),
                better="higher" if metric == "accuracy" else "abs_lower", abs_tol=0.01,
                at_paper_setting=False, trivial=[one_class(m) for m in taylor],
                trivial_why=ONE_CLASS_WHY))
    for model in MODELS:
        for eps in (0.1, 1.0, 10.0, 100.0):
            ours = ok_metrics(records, model=model, epsilon=eps, accounting="ours", alpha=1.0)
            theirs = ok_metrics(records, model=model, epsilon=eps, accounting="paper")
            low = ok_metrics(records, model=model, epsilon=eps, accounting="ours", alpha=0.3)
            for metric, key in (("accuracy", "accuracy"), ("rd", "risk_difference")):
                rows.append(compare_row(
                    f"Table 8.2, {model} α=1, ε={eps:g}", metric, [m[key] for m in ours],
                    paper.get((model, f"{eps:g}", metric)),
                    better="higher" if metric == "accuracy" else "abs_lower", abs_tol=0.01,
                    paper_accounting=[m[key] for m in theirs],
                    trivial=[one_class(m) for m in ours], trivial_why=ONE_CLASS_WHY,
                    why="our noise at the same ε is 440/24 ≈ 18× smaller (add/remove "
                        "neighbours, exact row norm); see the paper-accounting column"))
                if low:
                    rows.append(compare_row(
                        f"Table 8.2, {model} α=0.3 (privfair default), ε={eps:g}", metric,
                        [m[key] for m in low], paper.get((model, f"{eps:g}", metric)),
                        better="higher" if metric == "accuracy" else "abs_lower",
                        abs_tol=0.01, at_paper_setting=False,
                        trivial=[one_class(m) for m in low], trivial_why=ONE_CLASS_WHY,
                        why="signed fairness term (erratum): α = 1 overshoots "
                                          "into reverse disparity, α = 0.3 does not"))
    notes = [__doc__.split("\n\n")[1].replace("\n", " "),
             "The fairness term is the signed covariance (erratum of §8.2): the paper's α = 1 "
             "with its absolute-value term carries no group contrast, ours with α = 1 "
             "overshoots into reverse disparity (|RD| ≈ .27 at large ε), so α = 0.3 rows are "
             "shown too. The majority-class baseline is ≈ .752; RD 0 at accuracy .752 is the "
             "majority classifier (every direction of the noisy Hessian trimmed)."]
    return {"name": NAME, "title": TITLE,
            "source": "Xu 2021, Table 8.1 (p. 109), Table 8.2 (p. 110)", "rows": rows,
            "notes": notes, "plots": [], "failed": failed_rows(records)}
