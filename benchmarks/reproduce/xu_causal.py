"""Xu 2021 ch. 4, Table 4.3: skeleton TPR / FPR / TDR of PC, LapMech and PrivPC vs ε.

Random DAGs (p = 10, s = 0.2, CPTs with 2–5 levels, n = 10,000) generated in code as in
``benchmarks/causal_skeleton.py`` (TETRAD is not used: our graphs are not the paper's). Every
private method gets ρ = ε²/2, the zCDP of a pure ε-DP mechanism, so ε reads as the paper's
ε: the accounting is the same, and there is no separate paper-accounting column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_causal"
TITLE = "Xu 2021 Table 4.3 (ch. 4): DP causal skeletons (PrivPC, LapMech) vs ε"
BETTER = {"tpr": "higher", "tdr": "higher", "fpr": "lower"}


def cells(mode: str) -> list[dict[str, Any]]:
    epsilons = (1.0, 10.0) if mode == "quick" else (1.0, 3.0, 5.0, 10.0)
    graphs = 2 if mode == "quick" else 10
    return [cell(NAME, {"epsilon": e, "n": 10_000, "p": 10, "s": 0.2}, g)
            for e in epsilons for g in range(graphs)]


def run(c: dict[str, Any]) -> dict[str, Any]:
    from causal_skeleton import ALPHA, MAX_ORDER

    from privfair.causal.citests import CodeTables
    from privfair.causal.graph import skeleton_scores
    from privfair.causal.pc import pc
    from privfair.causal.privpc import lap_mech, priv_pc
    from privfair.causal.simulate import random_dag, sample_categorical
    from privfair.core.accounting import PrivacyLedger

    s = c["setting"]
    rng = np.random.default_rng(c["seed"])
    dag = random_dag(s["p"], s["s"], rng=rng)
    codes, domain = sample_categorical(dag, s["n"], rng=rng)
    found, _ = pc(CodeTables(codes, domain), alpha=ALPHA, max_order=MAX_ORDER)
    out = {"pc": skeleton_scores(found, dag.graph)}
    rho = s["epsilon"] ** 2 / 2
    for name, method in (("lapmech", lap_mech), ("privpc", priv_pc)):
        result = method(codes, domain, rho=rho, ledger=PrivacyLedger(rho_budget=rho),
                        rng=np.random.default_rng(1000 + c["seed"]), alpha=ALPHA,
                        max_order=MAX_ORDER)
        out[name] = skeleton_scores(result.graph, dag.graph)
    return out


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(float(r["epsilon"]), r["method"], r["metric"]): r
             for r in paper_table("xu_table4_3")}
    rows = []
    for eps in sorted({r["setting"]["epsilon"] for r in records}):
        runs = ok_metrics(records, epsilon=eps)
        for method in ("pc", "lapmech", "privpc"):
            for metric in ("tpr", "fpr", "tdr"):
                rows.append(compare_row(
                    f"ε={eps:g}, {method}", metric, [m[method].get(metric) for m in runs],
                    paper.get((eps, method, metric)), better=BETTER[metric], abs_tol=0.02,
                    why="our random DAGs and CPTs are not the paper's TETRAD graphs"))
    return {"name": NAME, "title": TITLE, "source": "Xu 2021, Table 4.3, p. 50",
            "rows": rows, "notes": [__doc__.split("\n\n")[1].replace("\n", " ")],
            "plots": [], "failed": failed_rows(records)}
