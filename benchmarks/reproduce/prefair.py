"""PreFair Tables 2–3 and Fig. 7 (Pujol et al. 2023): MST vs Greedy/Exponential-PreFair.

Table 3 is Greedy-PreFair as a percentage of MST at ε = 1 with an MLP; its fairness columns
are Table 2's measures. Each cell fits one synthesizer on the 80 % train split (split seed
2023), samples ``rows ×`` the train size, and scores it with
:func:`privfair.evaluation.evaluate.evaluate_synthetic` (reusing
``benchmarks/prefair_table3.headline``). The 1×/3×/10× rows measure docs/results.md's claim that
the conditional disparities left at 1× are sampling noise: sampling is post-processing, so
more rows cost no privacy, and a fair tree's Bayes classifier has CDP = 0 exactly.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd

from .core import cell, compare_row, failed_rows, ok_metrics, paper_json, paper_table, png_of

NAME = "prefair"
TITLE = "PreFair Tables 2–3 and Fig. 7: MST vs Greedy/Exponential-PreFair"
COLUMNS = ("tvd1", "tvd2", "acd", "accuracy", "DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB")
BETTER = {"tvd1": "lower", "tvd2": "lower", "acd": "lower", "accuracy": "higher"}
#: The MLP's epochs (privfair's default); --quick trains the 3×/10× rows' MLP for
#: ``QUICK_MLP_EPOCHS // rows`` epochs, the 1× number of gradient steps.
QUICK_MLP_EPOCHS = 20


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 2 if mode == "quick" else 10
    out = []
    for dataset in ("adult", "compas"):
        for method in ("mst", "prefair-greedy", "prefair-exact"):
            for seed in range(seeds):
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
            for seed in range(1 if mode == "quick" else 5):
                out.append(cell(NAME, {**setting, "method": method}, seed))
    for eps in (0.1, 10.0):
        for method in ("mst", "prefair-greedy", "prefair-exact"):
            for seed in range(1 if mode == "quick" else 5):
                out.append(cell(NAME, {"dataset": "adult", "method": method, "epsilon": eps,
                                       "rows": 1, "mlp": mode != "quick"}, seed))
    return out


@functools.lru_cache(maxsize=4)
def _data(name: str):
    from privfair.evaluation.evaluate import load_embedded

    return load_embedded(name, split_seed=2023)


def run(c: dict[str, Any]) -> dict[str, Any]:
    from prefair_table3 import headline

    from privfair.evaluation.evaluate import evaluate_synthetic
    from privfair.synth.synthesizer import FairSynthesizer

    s = c["setting"]
    data = _data(s["dataset"])
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
                                classifier_options=options)
    if not with_mlp:
        return {**{k: record[k] for k in ("tvd1", "tvd2", "acd")},
                "synthetic_sha256": fingerprint}
    return {**headline(record, data.roles), "synthetic_sha256": fingerprint}


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


@functools.lru_cache(maxsize=2)
def majority_rate(dataset: str) -> float:
    """The real test split's majority-class rate."""
    data = _data(dataset)
    labels = np.asarray(data.test[data.roles.outcome[0]])
    return float(np.max(np.unique(labels, return_counts=True)[1]) / len(labels))


def predicts_majority(metrics: dict[str, Any], dataset: str) -> bool:
    """Whether a cell's MLP predicts the majority class: its accuracy is the test split's
    majority rate (to half a test row)."""
    accuracy = metrics.get("accuracy")
    if accuracy is None or not math.isfinite(accuracy):
        return False
    n_test = len(_data(dataset).test)
    return abs(accuracy - majority_rate(dataset)) < 0.5 / n_test


def ratio_runs(records, metric: str, **setting: Any) -> list[tuple[float, bool]]:
    """Per seed: the percentage of ``setting['method']`` over MST's (same seed, same
    setting), and whether that seed's pair is trivial (see :data:`TRIVIAL_WHY`)."""
    method = setting.pop("method")
    base = {r["seed"]: r["metrics"] for r in records if r["status"] == "ok"
            and r["setting"]["method"] == "mst"
            and all(r["setting"].get(k) == v for k, v in setting.items())}
    out = []
    for r in records:
        if (r["status"] == "ok" and r["setting"]["method"] == method and r["seed"] in base
                and all(r["setting"].get(k) == v for k, v in setting.items())):
            mst = base[r["seed"]].get(metric)
            ours = r["metrics"].get(metric)
            if mst and ours is not None:
                trivial = same_output(r["metrics"], base[r["seed"]]) or (
                    metric in CLASSIFIER_METRICS
                    and predicts_majority(r["metrics"], r["setting"]["dataset"])
                    and predicts_majority(base[r["seed"]], r["setting"]["dataset"]))
                out.append((100 * ours / mst, trivial))
    return out


def _ratio_of_means(records, metric: str, method: str, **setting: Any) -> float:
    ours = [m[metric] for m in ok_metrics(records, method=method, **setting) if metric in m]
    mst = [m[metric] for m in ok_metrics(records, method="mst", **setting) if metric in m]
    if not ours or not mst or not np.mean(mst):
        return float("nan")
    return float(100 * np.mean(ours) / np.mean(mst))


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["dataset"], r["metric"]): r for r in paper_table("prefair_table3")}
    rows = []
    def row(label: str, metric: str, runs: list[tuple[float, bool]], paper_row, **options):
        return compare_row(label, metric, [v for v, _ in runs], paper_row,
                           trivial=[t for _, t in runs], trivial_why=TRIVIAL_WHY, **options)

    for dataset in ("adult", "compas"):
        for metric in COLUMNS:
            rows.append(row(
                f"{dataset}, Greedy as % of MST, 1× rows", metric,
                ratio_runs(records, metric, method="prefair-greedy", dataset=dataset, rows=1,
                           epsilon=1.0),
                paper.get((dataset, metric)), better=BETTER.get(metric, "lower"),
                why=_why(dataset, metric)))
    for n_rows in (3, 10):
        for metric in ("tvd2", "accuracy", "CDP", "CTPRB", "CTNRB"):
            # the paper samples as many rows as the training set: these face its 1× cell
            rows.append(row(
                f"adult, Greedy as % of MST, {n_rows}× rows (sampling is free)", metric,
                ratio_runs(records, metric, method="prefair-greedy", dataset="adult",
                           rows=n_rows, epsilon=1.0),
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
                    f"adult ε={eps:g}, {method} as % of MST (Fig. 7)", metric,
                    ratio_runs(records, metric, method=method, dataset="adult", rows=1,
                               epsilon=eps),
                    fig7.get((eps, method, metric)), better=BETTER.get(metric)))
    protocol = paper_json("prefair_protocol")
    notes = [
        "Protocol check (paper §5.1, Tables 1–2): protected/admissible/outcome roles are the "
        "paper's (Adult: sex, race, native-country; COMPAS: sex, race). The paper does not "
        "state its privileged groups, its MLP architecture or a held-out split (it tests on "
        f"'the underlying true data': {protocol['split']}); we use an 80/20 split, privileged "
        "Male/White/United-States (Adult) and Caucasian/Female (COMPAS), privfair's torch MLP, "
        "and the contracts' bins instead of one category per distinct value. Disparities are "
        "|·| averaged over the protected attributes.",
        "1×/3×/10× rows (same fitted models, more rows sampled: no privacy cost), mean "
        "|disparity| of the MLP on Adult: " + _rows_summary(records) + ". Greedy-PreFair's "
        "conditional disparities go to 0 (its fair tree's Bayes classifier has CDP = CTPRB "
        "= CTNRB = 0 exactly) while MST's settle at a positive level, so the 1× gap to the "
        "paper is sampling noise of the synthetic table, which the MLP fits, not structure.",
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


def _rows_summary(records) -> str:
    parts = []
    for method in ("mst", "prefair-greedy"):
        for n_rows in (1, 3, 10):
            runs = ok_metrics(records, dataset="adult", method=method, rows=n_rows,
                              epsilon=1.0)
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
                                             rows=rows, epsilon=1.0) if metric in m]
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


def _why(dataset: str, metric: str) -> str | None:
    if dataset == "adult" and metric in ("TNRB", "CDP", "CTPRB", "CTNRB"):
        return ("1× synthetic rows: spurious dependences from sampling noise, which the MLP "
                "fits (see the 3×/10× rows and the plot)")
    if dataset == "compas":
        return ("at ε = 1 MST usually builds a fair tree on COMPAS already (priors is the hub), "
                "so both methods coincide and the ratio is noise")
    return None


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
                                                        epsilon=1.0) if metric in m]
                if values:
                    xs.append(n_rows)
                    ys.append(float(np.mean(values)))
            ax.plot(xs, ys, style, marker=marker, label=f"{metric} {method}")
    ax.set_xscale("log")
    ax.set_xticks([1, 3, 10], ["1×", "3×", "10×"])
    ax.set_xlabel("synthetic rows per real training row")
    ax.set_ylabel("|disparity| of the MLP (Adult, ε = 1)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return {"title": "Conditional disparities vs synthetic rows (MLP, Adult, ε = 1)",
            "png": png_of(fig)}

