"""SAFES Supplementary Tables 4–9 and Figs. 3–4 (Giddens & Liu 2024): AIM, then TOT.

One cell is one (dataset, ε, seed): AIM (all 2-way workload, δ = 1e-9) fitted on the 80 % train
split (split seed 2024), one synthetic table of the train size, then every η of the paper on
that same table: none (Tables 4, 7), and TOT at η ∈ {0.1, 0.025} (Adult, Tables 5–6) or
{0.15, 0.08} (COMPAS, Tables 8–9). TOT runs in two formulations:

* ``privfair``: :class:`privfair.fair.tot.TOTransform` with ``distortion_scope="per_group"``,
  SAFES eq. (10) as written (distortion bounded per (g, x, y));
* ``aif360``: the same transform with ``distortion_scope="pooled"``, the program SAFES's code
  actually solved (AIF360 OptTools: distortion bounded for the group-averaged map per (x, y),
  additive discrimination); the COMPAS contract's ``tot:`` block declares it.

An infeasible program, or one every installed LP solver fails on (TOT falls back from Clarabel
to HiGHS), is counted as a failed attempt, as the paper does, and left out of the means. A logistic regression trained on the released table is tested on the real 20 %.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table, png_of

NAME = "safes"
TITLE = "SAFES Supplementary Tables 4–9 and Figs. 3–4: AIM + TOT"
SETUP = {
    "adult": {"contract": "adult_safes", "etas": (0.1, 0.025), "tables": (4, 5, 6),
              "favorable": None},
    "compas": {"contract": "compas", "etas": (0.15, 0.08), "tables": (7, 8, 9),
               "favorable": 0},
}
PAPER_EPS = (0.01, 0.0316, 0.1, 0.316, 1.0, 3.16, 10.0)
METRICS = ("Cumulative 2-way TVD", "COD (race)", "COD (sex)", "COD (race + sex)", "Accuracy",
           "SPD (race)", "SPD (sex)")
BETTER = {"Cumulative 2-way TVD": "lower", "Accuracy": "higher"}
#: The two TOT variants run on every synthetic table: the library's distortion_scope values.
SCOPES = {"privfair": "per_group", "aif360": "pooled"}


def _eps_grid(mode: str, dataset: str) -> tuple[float, ...]:
    if mode == "quick":
        return (1.0,) if dataset == "adult" else (0.1, 1.0, 10.0)
    return PAPER_EPS


def cells(mode: str) -> list[dict[str, Any]]:
    out = []
    for dataset in ("adult", "compas"):
        seeds = (1 if dataset == "adult" else 3) if mode == "quick" else 10
        for eps in _eps_grid(mode, dataset):
            for seed in range(seeds):
                out.append(cell(NAME, {"dataset": dataset, "epsilon": eps}, seed))
        if mode == "full" or dataset == "compas":  # the "None" column: no DP
            for seed in range(1 if mode == "quick" else 3):
                out.append(cell(NAME, {"dataset": dataset, "epsilon": "none"}, seed))
    return out


@functools.lru_cache(maxsize=2)
def _data(dataset: str):
    from privfair.evaluation.evaluate import load_embedded

    return load_embedded(SETUP[dataset]["contract"], split_seed=2024)


def _scores(table, data, favorable, seed: int) -> dict[str, float]:
    from privfair.evaluation.classifiers import score_predictions, train_and_predict
    from privfair.evaluation.fairness_metrics import classifier_fairness, data_fairness
    from privfair.evaluation.utility import marginal_tvd

    domain = data.domain
    outcome = data.roles.outcome[0]
    n_attr = len(list(domain))
    out = {f"Cumulative {k}-way TVD": marginal_tvd(data.train, table, domain, k)
           * math.comb(n_attr, k) for k in (1, 2, 3)}
    args = {"protected": ["race", "sex"], "outcome": outcome, "privileged": data.privileged,
            "favorable": favorable}
    for group, values in data_fairness(table, domain, **args).items():
        out[f"COD ({group.replace('+', ' + ')})"] = values["COD"]
    y_pred, y_score = train_and_predict("logistic", table, data.test, domain, outcome=outcome,
                                        seed=seed)
    # SAFES encodes the favourable result as 1.
    y_pred_fav = 1 - np.asarray(y_pred) if favorable == 0 else np.asarray(y_pred)
    out["Accuracy"] = score_predictions(table, data.test, domain, outcome=outcome,
                                        y_pred=y_pred, y_score=y_score)["accuracy"]
    for group, values in classifier_fairness(data.test, y_pred_fav, domain, **args).items():
        label = group.replace("+", " + ")
        out[f"SPD ({label})"] = values["SPD"]
        out[f"AOD ({label})"] = values["AOD"]
    return out


def run(c: dict[str, Any]) -> dict[str, Any]:
    from privfair.evaluation.evaluate import TOT_SETUPS
    from privfair.fair.tot import InfeasibleFairnessError, TOTransform, TOTSolverError
    from privfair.synth.synthesizer import FairSynthesizer

    s = c["setting"]
    setup = SETUP[s["dataset"]]
    data = _data(s["dataset"])
    fit_rng, sample_rng, tot_rng = np.random.default_rng([c["seed"], 5]).spawn(3)
    if s["epsilon"] == "none":
        released = data.train.reset_index(drop=True)
    else:
        synth = FairSynthesizer(domain=data.domain, roles=data.roles, epsilon=s["epsilon"],
                                delta=1e-9, method="aim").fit(data.train, rng=fit_rng)
        # SAFES samples with mbi's synthetic_data, which deals counts deterministically
        # (no iid sampling noise): privfair's "round" mode is the same kind of sampler.
        released = synth.sample(len(data.train), rng=sample_rng, mode="round")
    out: dict[str, Any] = {"none": _scores(released, data, setup["favorable"], c["seed"])}
    tot = TOT_SETUPS[setup["contract"]]
    for eta in setup["etas"]:
        for variant, scope in SCOPES.items():
            key = f"{variant} eta={eta:g}"
            try:
                transform = TOTransform(domain=data.domain, eta=eta, distortion_scope=scope,
                                        **tot).fit(released)
                table = transform.transform(released, rng=tot_rng)
                out[key] = _scores(table, data, setup["favorable"], c["seed"])
            except InfeasibleFairnessError as exc:
                out[key] = {"infeasible": True, "error": str(exc)[:160]}
            except TOTSolverError as exc:
                # every installed LP solver failed: a failed attempt, as an infeasible one
                out[key] = {"solver_failed": True, "error": str(exc)[:160]}
    return out


def row_bound_gap(frame, *, d_cols: list[str], y_col: str, favorable: int,
                  y_flip_bound: float) -> dict[str, Any]:
    """Why the per-``(g, x, y)`` program is infeasible: the smallest reachable gap.

    Under SAFES's COMPAS distortion a change of the outcome costs 2 (≥ c₂ = 1.99, bound
    d₂ = 0.05) and any further change reaches 3 (forbidden), so per ``(g, x, y)`` at most
    ``y_flip_bound`` of the rows change outcome, and each group's favourable rate moves by at
    most that much. The gap between the best and worst group can then shrink by at most
    ``2 · y_flip_bound``.
    """
    rates = frame.groupby(list(d_cols))[y_col].apply(lambda s: float(np.mean(s == favorable)))
    gap = float(rates.max() - rates.min())
    return {"input_gap": gap, "smallest_reachable_gap": max(0.0, gap - 2 * y_flip_bound),
            "group_rates": {str(k): float(v) for k, v in rates.items()}}


def _eps_label(eps: Any) -> str:
    if eps == "none":
        return "none"
    return {0.0316: "0.0316", 0.316: "0.316", 3.16: "3.16"}.get(eps, f"{eps:g}")


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    rows, notes = [], []
    for dataset, setup in SETUP.items():
        tables = {}
        for number in setup["tables"]:
            for r in paper_table(f"safes_supp_table{number}"):
                tables[(r["eta"], r["epsilon"], r["metric"])] = r | {"table": number}
        eps_values = sorted({r["setting"]["epsilon"] for r in records
                             if r["setting"]["dataset"] == dataset},
                            key=lambda e: math.inf if e == "none" else e)
        for eta in ("none", *setup["etas"]):
            variants = ["none"] if eta == "none" else [f"privfair eta={eta:g}",
                                                       f"aif360 eta={eta:g}"]
            for variant in variants:
                for eps in eps_values:
                    runs = [m.get(variant, {}) for m in ok_metrics(records, dataset=dataset,
                                                                   epsilon=eps)]
                    if not runs:
                        continue
                    good = [m for m in runs if _solved(m)]
                    eta_key = "none" if eta == "none" else f"{eta:g}"
                    label = (f"{dataset}, η={eta_key}, ε={_eps_label(eps)}"
                             + ("" if variant == "none" else f" [{variant.split()[0]} TOT]"))
                    if variant != "none":
                        rows.append(_infeasible_row(
                            label, sum(bool(m.get("infeasible")) for m in runs),
                            sum(bool(m.get("solver_failed")) for m in runs), len(runs),
                            dataset, eta, eps))
                    for metric in METRICS:
                        paper = tables.get((eta_key, _eps_label(eps), metric))
                        why = None
                        if not good:
                            why = "TOT failed in every attempt (see the notes)"
                        rows.append(compare_row(label, metric, [m.get(metric) for m in good],
                                                paper, better=BETTER.get(metric), why=why,
                                                abs_tol=0.005))
    gap = row_bound_gap(_data("compas").train, d_cols=["race", "sex"], y_col="two_year_recid",
                        favorable=0, y_flip_bound=0.05)
    notes.append(
        "Why privfair's TOT is infeasible on COMPAS at the paper's η (measured on the real "
        "train split; the DP tables are close to it at ε ≥ 1): SAFES's COMPAS distortion "
        "charges 2 for any change of recidivism (≥ c₂ = 1.99, bound d₂ = 0.05) and ≥ 3 "
        "(forbidden) for a recidivism change plus any other change. Imposed per (g, x, y), as "
        "SAFES eq. (10) is written and privfair does, each group's favourable rate can move by "
        f"at most 0.05, so the largest group gap {gap['input_gap']:.3f} (rates by (race, sex): "
        f"{', '.join(f'{k} {v:.3f}' for k, v in gap['group_rates'].items())}) can shrink to "
        f"no less than {gap['smallest_reachable_gap']:.3f} > 0.08: infeasible at η = 0.08 "
        "with any DP noise, and only barely feasible at η = 0.15. SAFES ran AIF360's "
        "OptimPreproc, whose OptTools bounds the distortion of the group-averaged map "
        "Σ_g p(g|x,y) q(·|g,x,y) per (x, y) only (and uses the additive discrimination "
        "form): flips can be concentrated on the disadvantaged group. The 'aif360 TOT' rows "
        "run that program (TOTransform with distortion_scope='pooled', which the COMPAS "
        "contract's tot: block declares); it is feasible and lands on the paper's COD. The "
        "contract's tot: block and tot_settings.py match SAFES (race × sex, privileged "
        "Caucasian & Female, age/charge degree/priors, the summed COMPAS distortion): the "
        "difference is the constraint's scope, not the settings.")
    notes.append("Cumulative k-way TVD = sum of the per-marginal TVDs over all k-way marginals "
                 "(SAFES Supp. Fig. 5/12); SAFES's sds are over 30–35 repeats, ours over the "
                 "seeds shown in n. 'none' ε = the real train split without DP (the paper's "
                 "'None' column). AIM samples with privfair's low-variance 'round' sampler, as mbi's "
                 "synthetic_data (used by snsynth's AIM in SAFES) deals counts "
                 "deterministically; iid sampling alone adds a 2-way TVD floor of ≈ 0.01 per "
                 "marginal on COMPAS, far above the paper's ε = 10 values.")
    return {"name": NAME, "title": TITLE,
            "source": "Giddens & Liu 2024, Supplementary Tables 4–9, Figs. 3–4, §5.2",
            "rows": rows, "notes": notes, "plots": [_plot(records, d) for d in SETUP],
            "failed": failed_rows(records)}


def _solved(metrics: dict[str, Any]) -> bool:
    """Whether a TOT attempt produced a table (not infeasible, no solver failure)."""
    return not (metrics.get("infeasible") or metrics.get("solver_failed"))


def _infeasible_row(label: str, infeasible: int, solver_failed: int, total: int, dataset: str,
                    eta: float, eps: Any) -> dict[str, Any]:
    """Share of failed TOT attempts; the paper's from its captions (≥ 30 of 35 ran).

    A failed attempt is an infeasible program or one every installed LP solver failed on
    (the paper's captions count both as runs that did not succeed).
    """
    failed = infeasible + solver_failed
    paper = {("compas", 0.15, 0.01): 12 / 35, ("compas", 0.08, 0.01): 10 / 35,
             ("compas", 0.08, 0.0316): 9 / 35}.get((dataset, eta, eps))
    share = failed / total if total else math.nan
    bound = 5 / 35 if paper is None else paper + 0.15
    word = "within" if share <= bound else "worse"
    source = ("SAFES Supp. Tables 8–9 captions (successful runs out of 35) and §5.2"
              if dataset == "compas" else "SAFES Supp. Tables 5–6 captions (≥ 30 runs)")
    return {"setting": label, "metric": "TOT failed-attempt share", "paper": paper,
            "paper_sd": None, "source": source, "ours": share, "ours_sd": 0.0, "n": total,
            "verdict": word,
            "why": f"{failed}/{total} attempts failed ({infeasible} infeasible, "
                   f"{solver_failed} solver failures); the paper's bound here is "
                   f"{bound:.2f} (≥ 30 of 35 attempts succeeded unless its caption says less)"}


def _plot(records, dataset: str) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setup = SETUP[dataset]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    paper = {}
    for number in setup["tables"]:
        for r in paper_table(f"safes_supp_table{number}"):
            paper[(r["eta"], r["epsilon"], r["metric"])] = r["value"]
    for ax, metric in zip(axes, ("COD (race + sex)", "SPD (sex)"), strict=True):
        for i, eta in enumerate(("none", *setup["etas"])):
            color = f"C{i}"
            variant = "none" if eta == "none" else f"aif360 eta={eta:g}"
            eta_key = "none" if eta == "none" else f"{eta:g}"
            xs, ys = [], []
            for eps in PAPER_EPS:
                runs = [m.get(variant, {}) for m in ok_metrics(records, dataset=dataset,
                                                               epsilon=eps)]
                good = [m for m in runs if _solved(m) and metric in m]
                if good:
                    xs.append(np.mean([m["Cumulative 2-way TVD"] for m in good]))
                    ys.append(np.mean([m[metric] for m in good]))
            ax.plot(xs, ys, "-o", color=color, label=f"ours η={eta_key}")
            px = [paper.get((eta_key, _eps_label(e), "Cumulative 2-way TVD")) for e in PAPER_EPS]
            py = [paper.get((eta_key, _eps_label(e), metric)) for e in PAPER_EPS]
            ax.plot(px, py, ":x", color=color, alpha=0.6, label=f"paper η={eta_key}")
        ax.set_xscale("log")
        ax.set_xlabel("cumulative 2-way TVD (utility; left is better)")
        ax.set_ylabel(metric)
        ax.axhline(0, color="grey", lw=0.5)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"SAFES {dataset}: privacy (points: ε) – fairness – utility "
                 "(TOT: the paper's AIF360 formulation)", fontsize=9)
    fig.tight_layout()
    return {"title": f"SAFES trade-off, {dataset} (as Figs. 3–4)", "png": png_of(fig)}
