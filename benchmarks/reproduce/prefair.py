"""PreFair Tables 2–3 and Fig. 7 (Pujol et al. 2023): MST vs Greedy/Exponential-PreFair.

Table 3 is Greedy-PreFair as a percentage of MST at ε = 1 with an MLP; its fairness columns
are Table 2's measures. A percentage is the paper's: Greedy's mean over the seeds divided by
MST's mean (the paper averages every value over its 10 instances), with the delta-method
standard error (:func:`ratio_runs`).

The compared rows run the paper's protocol (§5.1): each synthesizer fits the whole real table
and every MLP "was tested against the underlying true data", the whole table
(:func:`privfair.evaluation.evaluate.load_embedded` with ``test_rows="all"``). privfair's
default, fit on an 80 % split (seed 2023) and test on the held-out 20 %, runs beside the
Table 3 cells (shown, not counted). Each cell samples ``rows ×`` the fitted table's size and
scores it with :func:`privfair.evaluation.evaluate.evaluate_synthetic` (reusing
``benchmarks/prefair_table3.headline``). The 1×/3×/10× rows (80/20 split) measure
docs/results.md's claim that the conditional disparities left at 1× are sampling noise:
sampling is post-processing, so more rows cost no privacy, and a fair tree's Bayes classifier
has CDP = 0 exactly.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table, png_of

NAME = "prefair"
TITLE = "PreFair Tables 2–3 and Fig. 7: MST vs Greedy/Exponential-PreFair"
COLUMNS = ("tvd1", "tvd2", "acd", "accuracy", "DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB")
BETTER = {"tvd1": "lower", "tvd2": "lower", "acd": "lower", "accuracy": "higher"}
#: The MLP's epochs (privfair's default); --quick trains the 3×/10× rows' MLP for
#: ``QUICK_MLP_EPOCHS // rows`` epochs, the 1× number of gradient steps.
QUICK_MLP_EPOCHS = 20


#: The paper's protocol (§5.1): fit on the whole table, test on the whole table.
PAPER_TEST_ROWS = "all"


#: Seeds of the compared Table 3 cells (--full): the paper's 10 instances on Adult; 30 on
#: COMPAS, whose cells take a fifth of a second and whose percentages 10 seeds leave at ±15–35
#: points (a standard error wider than the 10 % tolerance, so the verdict is a coin toss).
FULL_SEEDS = {"adult": 10, "compas": 30}


def cells(mode: str) -> list[dict[str, Any]]:
    # privfair's 80/20 default beside the paper's protocol (shown, never counted)
    default_seeds = 1 if mode == "quick" else 5
    out = []
    for dataset in ("adult", "compas"):
        seeds = 2 if mode == "quick" else FULL_SEEDS[dataset]
        for method in ("mst", "prefair-greedy"):
            for seed in range(seeds):
                out.append(cell(NAME, {"dataset": dataset, "method": method, "epsilon": 1.0,
                                       "rows": 1, "test_rows": PAPER_TEST_ROWS}, seed))
            for seed in range(default_seeds):
                out.append(cell(NAME, {"dataset": dataset, "method": method, "epsilon": 1.0,
                                       "rows": 1}, seed))
    for rows in (3, 10):
        setting = {"dataset": "adult", "epsilon": 1.0, "rows": rows}
        if mode == "quick":
            # The MLP's 20 epochs over 10× rows are 80 % of --quick's time; as many
            # gradient steps as at 1× keep the finding (10×, 2 epochs, seed 0: CDP of
            # Greedy 0, of MST .005) at a fifth of the cost.
            setting["mlp_epochs"] = QUICK_MLP_EPOCHS // rows
        for method in ("mst", "prefair-greedy"):
            # context rows, never counted; 10× rows are two thirds of the section's time
            for seed in range(1 if mode == "quick" else 3):
                out.append(cell(NAME, {**setting, "method": method}, seed))
    for eps in (0.1, 10.0):
        for method in ("mst", "prefair-greedy", "prefair-exact"):
            for seed in range(1 if mode == "quick" else 5):
                out.append(cell(NAME, {"dataset": "adult", "method": method, "epsilon": eps,
                                       "rows": 1, "mlp": mode != "quick",
                                       "test_rows": PAPER_TEST_ROWS}, seed))
    return out


@functools.lru_cache(maxsize=4)
def _data(name: str, test_rows: str = "held-out"):
    from privfair.evaluation.evaluate import load_embedded

    return load_embedded(name, split_seed=2023, test_rows=test_rows)


def run(c: dict[str, Any]) -> dict[str, Any]:
    from prefair_table3 import headline

    from privfair.evaluation.evaluate import evaluate_synthetic
    from privfair.synth.synthesizer import FairSynthesizer

    s = c["setting"]
    data = _data(s["dataset"], s.get("test_rows", "held-out"))
    fit_rng, sample_rng = np.random.default_rng([c["seed"], 17]).spawn(2)
    synth = FairSynthesizer(domain=data.domain, roles=data.roles, epsilon=s["epsilon"],
                            delta=1e-9, method=s["method"]).fit(data.train, rng=fit_rng)
    synthetic = synth.sample(round(s["rows"] * len(data.train)), rng=sample_rng)
    # what the uninformative check reads: the released table's fingerprint (methods whose
    # outputs are byte-identical compare nothing); cells run before it lack the key
    fingerprint = hashlib.sha256(pd.util.hash_pandas_object(synthetic, index=False)
                                 .to_numpy().tobytes()).hexdigest()
    with_mlp = s.get("mlp", True)
    options = {"mlp": {"epochs": s["mlp_epochs"]}} if "mlp_epochs" in s else None
    record = evaluate_synthetic(synthetic, real_train=data.train, real_test=data.test,
                                domain=data.domain, roles=data.roles,
                                privileged=data.privileged,
                                classifiers=("mlp",) if with_mlp else (), seed=c["seed"],
                                classifier_options=options, tvd_orders=(1, 2))
    # whether the fitted tree itself is fair (MST's often is on COMPAS): read by the notes
    fair_tree = bool(synth.structure_.fairness.passed)
    if not with_mlp:
        return {**{k: record[k] for k in ("tvd1", "tvd2", "acd")},
                "synthetic_sha256": fingerprint, "fair_tree": fair_tree}
    return {**headline(record, data.roles), "synthetic_sha256": fingerprint,
            "fair_tree": fair_tree}


#: Metrics read off the MLP (the rest score the synthetic table itself).
CLASSIFIER_METRICS = ("accuracy", "DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB")
TRIVIAL_WHY = ("the method's synthetic table is identical to MST's (by its fingerprint; in "
               "cells run before the fingerprint, by every recorded metric being equal), or "
               "both MLPs predict the majority class (accuracy = the test split's majority "
               "rate)")


def same_output(ours: dict[str, Any], mst: dict[str, Any]) -> bool:
    """Whether two cells released the same table: their fingerprints, or, for cells run
    before the fingerprint, every recorded metric equal (tvd1, tvd2 and acd read the whole
    table, so equal floats in all of them are the same table in practice)."""
    if "synthetic_sha256" in ours and "synthetic_sha256" in mst:
        return bool(ours["synthetic_sha256"] == mst["synthetic_sha256"])
    keys = [k for k in ours if k != "synthetic_sha256" and isinstance(ours[k], float)]
    return bool(keys) and all(mst.get(k) == ours[k] for k in keys)


@functools.lru_cache(maxsize=4)
def majority_rate(dataset: str, test_rows: str = "held-out") -> float:
    """The real test rows' majority-class rate."""
    data = _data(dataset, test_rows)
    labels = np.asarray(data.test[data.roles.outcome[0]])
    return float(np.max(np.unique(labels, return_counts=True)[1]) / len(labels))


def predicts_majority(metrics: dict[str, Any], dataset: str,
                      test_rows: str = "held-out") -> bool:
    """Whether a cell's MLP predicts the majority class: its accuracy is the test rows'
    majority rate (to half a test row)."""
    accuracy = metrics.get("accuracy")
    if accuracy is None or not math.isfinite(accuracy):
        return False
    n_test = len(_data(dataset, test_rows).test)
    return abs(accuracy - majority_rate(dataset, test_rows)) < 0.5 / n_test


def linearized_ratio(ours: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per pair, the delta-method linearisation of ``100 · mean(ours) / mean(base)``.

    Value ``i`` is ``R + 100 (ours_i − R base_i / 100) / mean(base)`` with ``R`` the ratio of
    the means: the values' mean is ``R`` exactly and their standard error is the delta-method
    standard error of ``R`` (pairs share a seed, so their covariance is in it). Empty when
    ``base``'s mean is 0 (the ratio is undefined).
    """
    g = np.asarray(ours, dtype=float)
    m = np.asarray(base, dtype=float)
    if g.size == 0 or g.size != m.size or not np.mean(m):
        return []
    ratio = 100 * np.mean(g) / np.mean(m)
    return [float(v) for v in ratio + 100 * (g - ratio * m / 100) / np.mean(m)]


def ratio_runs(records, metric: str, **setting: Any) -> list[tuple[float, bool]]:
    """Per seed: its term of ``setting['method']``'s mean as a percentage of MST's mean (same
    setting; see :func:`linearized_ratio`), and whether that seed's pair is trivial (see
    :data:`TRIVIAL_WHY`).

    The paper's percentage is a ratio of means over its 10 instances, not a mean of per-seed
    ratios, which one seed with a near-zero MST disparity dominates (Adult TPRB: one seed's
    MST 0.002 made a mean of ratios 299 % where the ratio of means is 82 %). A setting key
    given as None matches cells without that key (the 80/20 default has no ``test_rows``).
    """
    method = setting.pop("method")

    def matches(r) -> bool:
        return r["status"] == "ok" and all(r["setting"].get(k) == v
                                           for k, v in setting.items())

    base = {r["seed"]: r["metrics"] for r in records
            if matches(r) and r["setting"]["method"] == "mst"}
    pairs = []
    for r in records:
        if matches(r) and r["setting"]["method"] == method and r["seed"] in base:
            mst = base[r["seed"]].get(metric)
            ours = r["metrics"].get(metric)
            if mst is None or ours is None or not (math.isfinite(mst) and math.isfinite(ours)):
                continue
            test_rows = r["setting"].get("test_rows") or "held-out"
            trivial = same_output(r["metrics"], base[r["seed"]]) or (
                metric in CLASSIFIER_METRICS
                and predicts_majority(r["metrics"], r["setting"]["dataset"], test_rows)
                and predicts_majority(base[r["seed"]], r["setting"]["dataset"], test_rows))
            pairs.append((ours, mst, trivial))
    values = linearized_ratio([g for g, _, _ in pairs], [m for _, m, _ in pairs])
    return list(zip(values, [t for _, _, t in pairs], strict=True)) if values else []


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["dataset"], r["metric"]): r for r in paper_table("prefair_table3")}
    rows = []
    def row(label: str, metric: str, runs: list[tuple[float, bool]], paper_row, **options):
        return compare_row(label, metric, [v for v, _ in runs], paper_row,
                           trivial=[t for _, t in runs], trivial_why=TRIVIAL_WHY, **options)

    for dataset in ("adult", "compas"):
        for metric in COLUMNS:
            rows.append(row(
                f"{dataset}, Greedy as % of MST, 1× rows, fit and tested on the whole table "
                "(the paper's protocol)", metric,
                ratio_runs(records, metric, method="prefair-greedy", dataset=dataset, rows=1,
                           epsilon=1.0, test_rows=PAPER_TEST_ROWS),
                paper.get((dataset, metric)), better=BETTER.get(metric, "lower"),
                why=measured_note(records, dataset, metric)))
            rows.append(row(
                f"{dataset}, Greedy as % of MST, 1× rows, 80/20 split (privfair's default)",
                metric,
                ratio_runs(records, metric, method="prefair-greedy", dataset=dataset, rows=1,
                           epsilon=1.0, test_rows=None),
                paper.get((dataset, metric)), better=BETTER.get(metric, "lower"),
                at_paper_setting=False))
    for n_rows in (3, 10):
        for metric in ("tvd2", "accuracy", "CDP", "CTPRB", "CTNRB"):
            # the paper samples as many rows as the training set: these face its 1× cell
            rows.append(row(
                f"adult, Greedy as % of MST, {n_rows}× rows, 80/20 split (sampling is free)",
                metric,
                ratio_runs(records, metric, method="prefair-greedy", dataset="adult",
                           rows=n_rows, epsilon=1.0, test_rows=None),
                paper.get(("adult", metric)), better=BETTER.get(metric, "lower"),
                why=rows_why(records, metric, n_rows), at_paper_setting=False))
    fig7 = {(float(r["epsilon"]), r["method"], r["metric"]): r
            for r in paper_table("prefair_table2_fig7")}
    for eps in (0.1, 1.0, 10.0):
        for method in ("prefair-greedy", "prefair-exact"):
            for metric in ("tvd1", "tvd2", "acd", "accuracy"):
                if (eps, method, metric) not in fig7:  # only what the paper's text states
                    continue
                rows.append(row(
                    f"adult ε={eps:g}, {method} as % of MST (Fig. 7), the paper's protocol",
                    metric,
                    ratio_runs(records, metric, method=method, dataset="adult", rows=1,
                               epsilon=eps, test_rows=PAPER_TEST_ROWS),
                    fig7.get((eps, method, metric)), better=BETTER.get(metric)))
    notes = [
        "Protocol check (paper §5.1, Tables 1–2): protected/admissible/outcome roles are the "
        "paper's (Adult: sex, race, native-country; COMPAS: sex, race). Compared rows run "
        "the paper's protocol (§5.1: each model 'was tested against the underlying true "
        "data'; no held-out split is mentioned): fit on the whole table, MLP tested on the "
        "whole table; privfair's 80/20 default is shown beside the Table 3 cells. A "
        "percentage is Greedy's mean over MST's mean (the paper averages over its 10 "
        "instances) with its delta-method standard error. The paper does not state its "
        "privileged groups or its MLP architecture; we use privileged Male/White/United-"
        "States (Adult) and Caucasian/Female (COMPAS), privfair's torch MLP, and the "
        "contracts' bins instead of one category per distinct value. Disparities are |·| "
        "averaged over the protected attributes.",
        "1×/3×/10× rows (80/20 split; same fitted models, more rows sampled: no privacy "
        "cost), mean |disparity| of the MLP on Adult: " + _rows_summary(records) + ".",
    ]
    if mode == "quick":
        notes.append(f"--quick trains the 3×/10× rows' MLP for {QUICK_MLP_EPOCHS // 3}/"
                     f"{QUICK_MLP_EPOCHS // 10} epochs (the gradient steps of {QUICK_MLP_EPOCHS}"
                     " epochs at 1×) to save time; --full trains every MLP for "
                     f"{QUICK_MLP_EPOCHS}.")
    return {"name": NAME, "title": TITLE,
            "source": "Pujol et al. 2023, Table 3 (p. 9), Table 2, Fig. 7 text (§5.2)",
            "rows": rows, "notes": notes, "plots": [_rows_plot(records)],
            "failed": failed_rows(records)}


def measured_note(records, dataset: str, metric: str) -> str | None:
    """What the records measure about a Table 3 fairness cell outside the paper's spread (a
    note, never an explanation): the two means the percentage divides, how often MST's own
    tree was already fair, and, for Adult's conditional measures, the percentage at 10× rows.
    """
    if metric not in CLASSIFIER_METRICS or metric == "accuracy":
        return None
    by = {method: [m for m in ok_metrics(records, dataset=dataset, method=method, rows=1,
                                         epsilon=1.0, test_rows=PAPER_TEST_ROWS) if metric in m]
          for method in ("mst", "prefair-greedy")}
    if not all(by.values()):
        return None
    mst, greedy = (float(np.mean([m[metric] for m in by[k]])) for k in ("mst", "prefair-greedy"))
    fair = [bool(m["fair_tree"]) for m in by["mst"] if "fair_tree" in m]
    text = f"mean |{metric}|: MST {mst:.4f}, Greedy {greedy:.4f}"
    if fair:
        text += f"; MST's own tree was fair in {sum(fair)} of {len(fair)} seeds"
    if dataset == "adult" and metric in ("CDP", "CTPRB", "CTNRB"):
        ten = [v for v, _ in ratio_runs(records, metric, method="prefair-greedy",
                                        dataset="adult", rows=10, epsilon=1.0,
                                        test_rows=None)]
        if ten:
            text += (f"; at 10× rows (80/20 split, not the paper's setting) Greedy's is "
                     f"{np.mean(ten):.0f} % of MST's")
    return text


def _rows_summary(records) -> str:
    parts = []
    for method in ("mst", "prefair-greedy"):
        for n_rows in (1, 3, 10):
            runs = ok_metrics(records, dataset="adult", method=method, rows=n_rows,
                              epsilon=1.0, test_rows=None)
            if runs:
                values = "/".join(f"{np.mean([m[k] for m in runs]):.4f}"
                                  for k in ("CDP", "CTPRB", "CTNRB"))
                parts.append(f"{method} {n_rows}× CDP/CTPRB/CTNRB {values}")
    return "; ".join(parts)


def rows_why(records, metric: str, n_rows: int) -> str | None:
    """Measured reading of a conditional disparity's Greedy/MST ratio at ``n_rows``× rows:
    the two means it divides and where they are at 10× (None at 10×, where Greedy's is
    clearly the lower)."""
    if metric not in ("CDP", "CTPRB", "CTNRB") or n_rows == 10:
        return None

    def means(rows: int) -> tuple[float, float, float] | None:
        by = [[m[metric] for m in ok_metrics(records, dataset="adult", method=method,
                                             rows=rows, epsilon=1.0, test_rows=None)
               if metric in m]
              for method in ("mst", "prefair-greedy")]
        if not all(by):
            return None
        return float(np.mean(by[0])), float(np.mean(by[1])), float(max(by[0] + by[1]))

    here = means(n_rows)
    if here is None:
        return None
    mst, greedy, top = here
    text = (f"at {n_rows}× rows both MLPs' {metric} are near zero (MST {mst:.4f}, Greedy "
            f"{greedy:.4f}, every seed ≤ {top:.4f}), so the per-seed ratio divides noise by "
            "noise")
    ten = means(10)
    if ten is not None and ten[0]:
        text += (f"; at 10× Greedy's falls to {ten[1]:.4f} against MST's {ten[0]:.4f} "
                 f"({100 * ten[1] / ten[0]:.0f} % of it)")
    return text


def _rows_plot(records) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for metric, marker in (("CDP", "o"), ("CTPRB", "s"), ("CTNRB", "^")):
        for method, style in (("mst", "--"), ("prefair-greedy", "-")):
            xs, ys = [], []
            for n_rows in (1, 3, 10):
                values = [m[metric] for m in ok_metrics(records, dataset="adult",
                                                        method=method, rows=n_rows,
                                                        epsilon=1.0, test_rows=None)
                          if metric in m]
                if values:
                    xs.append(n_rows)
                    ys.append(float(np.mean(values)))
            ax.plot(xs, ys, style, marker=marker, label=f"{metric} {method}")
    ax.set_xscale("log")
    ax.set_xticks([1, 3, 10], ["1×", "3×", "10×"])
    ax.set_xlabel("synthetic rows per real training row")
    ax.set_ylabel("|disparity| of the MLP (Adult, ε = 1, 80/20)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return {"title": "Conditional disparities vs synthetic rows (MLP, Adult, ε = 1)",
            "png": png_of(fig)}

