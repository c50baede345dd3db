"""Xu 2021 ch. 4, Tables 4.3–4.6: skeleton TPR / FPR / TDR of PC, LapMech and PrivPC.

Table 4.3 varies ε (n = 10,000, p = 10, s = 0.2); Tables 4.4–4.6 vary p, n and s at ε = 5
(defaults n = 5,000, p = 10, s = 0.2). Random DAGs with CPTs of 2–5 levels are generated in
code as in ``benchmarks/causal_skeleton.py`` (TETRAD is not used: our graphs are not the
paper's). Rows are scored as the tables print them, pcalg's compareGraphs with the estimate and
the truth swapped (``skeleton_scores_as_printed_xu2021``: printed TPR = hits / found edges,
printed TDR = hits / true edges); only that reading fits Table 4.6's s = 0.6 rows (printed TPR
1.000 and TDR 0.328 for PC would otherwise need 82 found edges out of 45 pairs). Every private method gets ρ = ε²/2, the zCDP of a pure ε-DP mechanism, so ε reads
as the paper's ε. ``paper accounting`` runs LapMech as its FPR implies: Laplace(1/ε) on each
tested marginal on its own, which the paper's ε does not cover (k tests cost k·ε), instead of
one Laplace(1/ε) release of the full table whose marginals sum thousands of noise draws.
PrivPC runs at the paper's setting, the experiment's n as the public row bound
(``priv_pc(max_rows=n)``, which sets the scores' per-record G² bound), with the library's
default bound (10⁶ rows) beside it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_causal"
TITLE = "Xu 2021 Tables 4.3–4.6 (ch. 4): DP causal skeletons (PrivPC, LapMech) vs ε, p, n, s"
BETTER = {"tpr": "higher", "tdr": "higher", "fpr": "lower"}
METHODS = ("pc", "lapmech", "privpc")
#: LapMech's full table is refused above this many cells (p = 15 has ~10⁸).
MAX_CELLS = 2**24
#: Tables 4.4–4.6: each varies one parameter around the defaults ε = 5, n = 5000, p = 10, s = 0.2.
VARIED = {"4.4": [{"p": p} for p in (5, 10, 15)],
          "4.5": [{"n": n} for n in (10_000, 5_000, 3_000, 1_000)],
          "4.6": [{"s": s} for s in (0.2, 0.4, 0.6)]}
DEFAULTS = {"epsilon": 5.0, "n": 5_000, "p": 10, "s": 0.2}


def distinct_settings(defaults: dict[str, Any],
                      varied: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every setting of one-parameter-at-a-time tables, each once (tables share defaults)."""
    out: list[dict[str, Any]] = []
    for changes in varied.values():
        for change in changes:
            setting = {**defaults, **change}
            if setting not in out:
                out.append(setting)
    return out


def grid_settings(mode: str) -> list[dict[str, Any]]:
    """Distinct settings of Tables 4.4–4.6; the cheap p = 5 and n = 1k ones in quick mode."""
    if mode == "quick":
        return [{**DEFAULTS, "p": 5}, {**DEFAULTS, "n": 1_000}]
    return distinct_settings(DEFAULTS, VARIED)


def cells(mode: str) -> list[dict[str, Any]]:
    epsilons = (1.0, 10.0) if mode == "quick" else (1.0, 3.0, 5.0, 10.0)
    graphs = 2 if mode == "quick" else 10
    table_4_3 = [cell(NAME, {"epsilon": e, "n": 10_000, "p": 10, "s": 0.2}, g)
                 for e in epsilons for g in range(graphs)]
    grid_graphs = 1 if mode == "quick" else 5
    return table_4_3 + [cell(NAME, s, g) for s in grid_settings(mode)
                        if s not in [c["setting"] for c in table_4_3]
                        for g in range(grid_graphs)]


def per_test_lapmech(codes: np.ndarray, domain, *, epsilon: float, rng: np.random.Generator,
                     alpha: float, max_order: int):
    """LapMech with Laplace(1/ε) on each tested marginal alone (the paper's analysis).

    Evaluation only: each test spends ε, so the whole search is not ε-DP.
    """
    from privfair.causal.citests import (
        CodeTables,
        g2_degrees_of_freedom,
        g2_statistic,
        g2_threshold,
    )
    from privfair.causal.pc import orient_skeleton, pc_skeleton

    tables = CodeTables(codes, domain)

    def independent(i: int, j: int, cond: tuple[int, ...]) -> bool:
        counts = tables.table((i, j, *cond)).astype(np.float64)
        noisy = np.maximum(counts + rng.laplace(0.0, 1.0 / epsilon, size=counts.shape), 0.0)
        return g2_statistic(noisy) <= g2_threshold(g2_degrees_of_freedom(domain, i, j, cond),
                                                   alpha)

    skeleton = pc_skeleton(len(domain), independent, max_order=max_order)
    return orient_skeleton(skeleton, domain.attributes, None)


def run(c: dict[str, Any]) -> dict[str, Any]:
    from causal_skeleton import ALPHA, MAX_ORDER

    from privfair.causal.citests import CodeTables
    from privfair.causal.graph import skeleton_scores, skeleton_scores_as_printed_xu2021
    from privfair.causal.pc import pc
    from privfair.causal.privpc import lap_mech, priv_pc
    from privfair.causal.simulate import random_dag, sample_categorical
    from privfair.core.accounting import PrivacyLedger

    s = c["setting"]
    rng = np.random.default_rng(c["seed"])
    dag = random_dag(s["p"], s["s"], rng=rng)
    codes, domain = sample_categorical(dag, s["n"], rng=rng)
    found, _ = pc(CodeTables(codes, domain), alpha=ALPHA, max_order=MAX_ORDER)
    cells_count = math.prod(domain.sizes)
    out: dict[str, Any] = {"full_cells": cells_count}

    def score(name: str, graph) -> None:
        out[name] = skeleton_scores_as_printed_xu2021(graph, dag.graph)
        out[f"{name}_true"] = skeleton_scores(graph, dag.graph)

    score("pc", found)
    rho = s["epsilon"] ** 2 / 2
    if cells_count > MAX_CELLS:
        out["lapmech"] = {}  # the baseline's known limit (the paper's p ≥ 20; ours p = 15)
    else:
        score("lapmech", lap_mech(codes, domain, rho=rho, ledger=PrivacyLedger(rho_budget=rho),
                                  rng=np.random.default_rng(1000 + c["seed"]), alpha=ALPHA,
                                  max_order=MAX_ORDER).graph)
    # The paper's setting: n is public (its distance counts records of a dataset of n rows),
    # so the scores' per-record bound is taken at max_rows = n; the library's default bound
    # (10⁶ rows) is run beside it.
    for name, max_rows in (("privpc", s["n"]), ("privpc_default", 10**6)):
        result = priv_pc(codes, domain, rho=rho, ledger=PrivacyLedger(rho_budget=rho),
                         rng=np.random.default_rng(1000 + c["seed"]), alpha=ALPHA,
                         max_order=MAX_ORDER, max_rows=max_rows)
        score(name, result.graph)
    per_test = per_test_lapmech(codes, domain, epsilon=s["epsilon"],
                                rng=np.random.default_rng(2000 + c["seed"]), alpha=ALPHA,
                                max_order=MAX_ORDER)
    score("lapmech_per_test", per_test)
    # Noise draws summed into one cell of a 2-way marginal: the mean over pairs (i, j).
    sizes = np.asarray(domain.sizes, dtype=np.float64)
    pair_cells = np.outer(sizes, sizes)[np.triu_indices(len(sizes), 1)]
    out["draws_per_pair_cell"] = float(np.mean(cells_count / pair_cells))
    return out


def mean_and_se(values: list[float]) -> str:
    """Mean ± standard error of ``values``, as text."""
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return f"{np.mean(values):.3f} ± {se:.3f}"


def lapmech_why(runs: list[dict[str, Any]], epsilon: float) -> str:
    """The measured reason for LapMech's gap: noise accumulated over the full table."""
    draws = [m["draws_per_pair_cell"] for m in runs if "draws_per_pair_cell" in m]
    if not draws:  # cells recorded before this measurement existed
        return "our random DAGs and CPTs are not the paper's TETRAD graphs"
    k = float(np.mean(draws))
    fpr = np.mean([m["lapmech_per_test"]["fpr"] for m in runs if "lapmech_per_test" in m])
    return (f"a 2-way marginal cell of our full noisy table sums ≈{k:,.0f} Laplace(1/ε) draws "
            f"(sd ≈ {math.sqrt(2 * k) / epsilon:,.0f} against n = {runs[0].get('n', 'n')}); "
            f"Laplace(1/ε) on each tested marginal alone (paper-accounting column) gives FPR "
            f"{fpr:.3f}: the paper's FPR matches per-test noise, which ε does not cover")


def setting_label(setting: dict[str, Any]) -> str:
    return (f"ε={setting['epsilon']:g}, n={setting['n']:,}, p={setting['p']}, "
            f"s={setting['s']:g}")


def paper_cell(setting: dict[str, Any], method: str, metric: str) -> str:
    """The paper cell of a row: the paper's experiment (its ε, n, p, s), whichever of
    Tables 4.3–4.6 prints it (the defaults are printed in three, ε = 5 at n = 10,000 in
    two)."""
    return json.dumps(["xu ch. 4 categorical", setting_label(setting), method, metric])


def rows_for(records, setting: dict[str, Any], paper: dict[tuple, dict]) -> list[dict]:
    runs = [dict(m, n=setting["n"]) for m in ok_metrics(records, **setting)]
    rows = []
    for method in METHODS:
        for metric in ("tpr", "fpr", "tdr"):
            values = [m[method].get(metric) for m in runs]
            key = (method, metric)
            if method == "lapmech" and runs and all(not m["lapmech"] for m in runs):
                row = compare_row(f"{setting_label(setting)}, {method}", metric, values,
                                  paper.get(key))
                row["why"] = (f"not comparable: the full table has ≈{runs[0]['full_cells']:.2g} "
                              f"cells, over LapMech's limit of {MAX_CELLS:,} (the paper calls "
                              "LapMech infeasible from p = 20)")
                rows.append(row)
                continue
            accounting = ([m.get("lapmech_per_test", {}).get(metric) for m in runs]
                          if method == "lapmech" else None)
            # PC's and PrivPC's rows carry no fixed explanation: a gap stays a gap.
            why = lapmech_why(runs, setting["epsilon"]) if method == "lapmech" else None
            row = compare_row(f"{setting_label(setting)}, {method}", metric, values,
                              paper.get(key), better=BETTER[metric], abs_tol=0.02,
                              why=why, paper_accounting=accounting,
                              paper_cell=paper_cell(setting, method, metric))
            default = [m["privpc_default"][metric] for m in runs if "privpc_default" in m]
            if method == "privpc" and default:
                row["detail"] = ("the paper's public n as PrivPC's row bound (max_rows = n); "
                                 f"the library's default bound 10⁶ beside: "
                                 f"{mean_and_se(default)}")
            rows.append(row)
    return rows


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    table_4_3 = {(float(r["epsilon"]), r["method"], r["metric"]): r
                 for r in paper_table("xu_table4_3")}
    grid = paper_table("xu_table4_4_4_6")
    rows = []
    for eps in sorted({r["setting"]["epsilon"] for r in records
                       if r["setting"]["n"] == 10_000 and r["setting"]["p"] == 10
                       and r["setting"]["s"] == 0.2}):
        setting = {"epsilon": eps, "n": 10_000, "p": 10, "s": 0.2}
        paper = {(m, k): table_4_3.get((eps, m, k)) for m in METHODS
                 for k in ("tpr", "fpr", "tdr")}
        rows += [dict(r, table="4.3") for r in rows_for(records, setting, paper)]
    for table, changes in VARIED.items():
        for change in changes:
            setting = {**DEFAULTS, **change}
            if not ok_metrics(records, **setting):
                continue
            paper = {(r["method"], r["metric"]): r for r in grid if r["table"] == table
                     and int(r["n"]) == setting["n"] and int(r["p"]) == setting["p"]
                     and float(r["s"]) == setting["s"]}
            rows += [dict(r, table=table) for r in rows_for(records, setting, paper)]
    return {"name": NAME, "title": TITLE,
            "source": "Xu 2021, Tables 4.3 (p. 50), 4.4–4.5 (p. 51), 4.6 (p. 52)",
            "rows": rows, "notes": [__doc__.split("\n\n")[1].replace("\n", " ")],
            "plots": [], "failed": failed_rows(records)}
