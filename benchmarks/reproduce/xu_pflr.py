"""Xu 2021 ch. 8, Tables 8.1 / 8.2: PrivLR, PFLR, PFLR* on Adult (accuracy, |RD|).

Complete-case Adult (45,222 rows), one-hot features of the packaged contract
(``benchmarks/_learn_common``), 80/20 splits, one per seed. ``paper accounting``: the
dissertation's Δ uses replace-one neighbours and d = 40 min-max features, Δ_PrivLR =
2 (d/2 + d²/8) = 440, where ours (add/remove, exact one-hot norm B = 12) is B/2 + B²/8 = 24.
The same noise the paper adds at its ε is ours at ε · 24/440, and that column runs there:
it is the paper's analysis, not our guarantee.

PFLR and PFLR* run the library's named setting ``xu2021`` (``learn.functional.PAPER_SETTING``:
Eq. 8.1's α |g_D(w)| with α = 1, ε_f = ε/2), which is also the library's default, against the
paper's cells. The signed shift of Alg. 6 at α = 1 (setting ``signed-shift``, the term before
issue 40) runs beside it as a counter-run, in the notes, not against the paper's cells.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, mean_sd, note, ok_metrics, paper_table
from .xu_dpsgd import DUTCH_WHY

NAME = "xu_pflr"
TITLE = "Xu 2021 Tables 8.1 / 8.2 (ch. 8): PrivLR, PFLR, PFLR*"
MODELS = {"PrivLR": "privlr", "PFLR": "pflr", "PFLR*": "pflr-star"}
PAPER_SCALE = 24 / 440
EPSILONS = (0.1, 1.0, 10.0, 100.0)
#: The fairness setting run against the paper's cells, and the counter-run beside it.
PAPER_FAIRNESS = "xu2021"
COUNTER_FAIRNESS = "signed-shift"


def _fairness_runs() -> list[tuple[str, str]]:
    """(setting, accounting) of the PFLR / PFLR* cells: the paper's setting at both
    accountings, the library default where its knobs differ from the paper's, the counter-run."""
    from privfair.learn.functional import DEFAULT_SETTING, FAIRNESS_SETTINGS, PAPER_SETTING

    assert PAPER_SETTING == PAPER_FAIRNESS
    runs = [(PAPER_FAIRNESS, "ours"), (PAPER_FAIRNESS, "paper")]
    if FAIRNESS_SETTINGS[DEFAULT_SETTING].kwargs() != FAIRNESS_SETTINGS[PAPER_SETTING].kwargs():
        runs.append((DEFAULT_SETTING, "ours"))
    return [*runs, (COUNTER_FAIRNESS, "ours")]


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 2 if mode == "quick" else 10
    out = [cell(NAME, {"model": m, "epsilon": "none"}, s)
           for m in ("LR", "FairLR") for s in range(1 if mode == "quick" else seeds)]
    # Table 8.1's LR under the functional mechanism's objective (its 2nd-order Taylor
    # loss) without noise: which of the two losses the paper's "LR" row matches.
    out += [cell(NAME, {"model": "LR", "epsilon": "none", "loss": "taylor"}, s)
            for s in range(1 if mode == "quick" else seeds)]
    for model in MODELS:
        for eps in EPSILONS:
            runs: list[tuple[str | None, str]] = (
                [(None, "ours"), (None, "paper")] if model == "PrivLR" else _fairness_runs())
            for fairness, accounting in runs:
                setting = {"model": model, "epsilon": eps, "accounting": accounting}
                if fairness is not None:
                    setting["fairness"] = fairness
                out += [cell(NAME, setting, s) for s in range(seeds)]
    return out


@functools.lru_cache(maxsize=1)
def _data():
    from _learn_common import adult_model_data

    return adult_model_data()


def run(c: dict[str, Any]) -> dict[str, Any]:
    from _learn_common import group_scores, split
    from pflr_tables import _logistic_fit

    from privfair.core.accounting import PrivacyLedger
    from privfair.learn.functional import FAIRNESS_SETTINGS, FunctionalLogisticRegression

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
        knobs = FAIRNESS_SETTINGS[s["fairness"]].kwargs() if "fairness" in s else {}
        model = FunctionalLogisticRegression(
            epsilon=eps, variant=MODELS[s["model"]], row_l1_bound=bound,
            rng=np.random.default_rng([c["seed"], int(s["epsilon"] * 10)]), **knobs)
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


def counter_note(records: list[dict[str, Any]]) -> str:
    """The counter-run of issue 40, measured: Alg. 6's signed shift at α = 1 beside the paper's
    setting (mean ± standard error over seeds, our accounting)."""
    parts = []
    for model in ("PFLR", "PFLR*"):
        for eps in EPSILONS:
            cells = {name: ok_metrics(records, model=model, epsilon=eps, accounting="ours",
                                      fairness=name)
                     for name in (PAPER_FAIRNESS, COUNTER_FAIRNESS)}
            if not all(cells.values()):
                continue
            text = []
            for name, runs in cells.items():
                acc, acc_sd, n = mean_sd([m["accuracy"] for m in runs])
                rd, rd_sd, _ = mean_sd([m["risk_difference"] for m in runs])
                se = 1 / np.sqrt(max(n, 1))
                text.append(f"{name} accuracy {acc:.4f} ± {acc_sd * se:.4f}, |RD| {rd:.4f} ± "
                            f"{rd_sd * se:.4f}")
            parts.append(f"{model} ε={eps:g}: " + "; ".join(text))
    return ("Counter-run (issue 40), mean ± standard error: Alg. 6's signed shift α μᵀw at "
            "α = 1 moves the fit past zero decision-boundary covariance into reverse "
            "disparity; Eq. 8.1's |μᵀw| stops there. " + " | ".join(parts))


def dutch_rows() -> list[dict[str, Any]]:
    """Tables 8.1 / 8.2's Dutch cells, each printed cell one row: not comparable (the Dutch
    census is not shipped by any registry package; see ``xu_dpsgd.DUTCH_WHY``)."""
    rows = []
    for r in paper_table("xu_table8_1_8_2_dutch"):
        eps = "non-private" if r["epsilon"] == "none" else f"ε={r['epsilon']}"
        row = compare_row(f"Table {r['table']} Dutch, {r['method']}, {eps}", r["metric"], [], r)
        row["why"] = DUTCH_WHY
        rows.append(row)
    return rows


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
        fairness = {} if model == "PrivLR" else {"fairness": PAPER_FAIRNESS}
        label = ("" if model == "PrivLR" else
                 f" ({PAPER_FAIRNESS}: Eq. 8.1's α|g(w)|, α=1; the library default)")
        for eps in EPSILONS:
            ours = ok_metrics(records, model=model, epsilon=eps, accounting="ours", **fairness)
            theirs = ok_metrics(records, model=model, epsilon=eps, accounting="paper",
                                **fairness)
            for metric, key in (("accuracy", "accuracy"), ("rd", "risk_difference")):
                row = compare_row(
                    f"Table 8.2, {model}{label}, ε={eps:g}", metric, [m[key] for m in ours],
                    paper.get((model, f"{eps:g}", metric)),
                    better="higher" if metric == "accuracy" else "abs_lower", abs_tol=0.01,
                    paper_accounting=[m[key] for m in theirs],
                    trivial=[one_class(m) for m in ours], trivial_why=ONE_CLASS_WHY)
                # A gap is put down to the accounting only where the counter-run at the
                # paper's accounting, in this report, lands within the paper's spread.
                if row.get("paper_accounting_verdict") == "within":
                    note(row, "our noise at the same ε is 440/24 ≈ 18× smaller (add/remove "
                                 "neighbours, exact row norm); at the paper's accounting the "
                                 "same setting is within")
                rows.append(row)
    rows += dutch_rows()
    notes = [__doc__.split("\n\n")[1].replace("\n", " "),
             __doc__.split("\n\n")[2].replace("\n", " "),
             counter_note(records),
             "The majority-class baseline is ≈ .752; RD 0 at accuracy .752 is the majority "
             "classifier (every direction of the noisy Hessian trimmed)."]
    return {"name": NAME, "title": TITLE,
            "source": "Xu 2021, Table 8.1 (p. 109), Table 8.2 (p. 110); Adult compared, Dutch "
                      "not comparable", "rows": rows,
            "notes": notes, "plots": [], "failed": failed_rows(records)}
