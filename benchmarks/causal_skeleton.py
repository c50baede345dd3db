"""Skeleton accuracy of PrivPC, LapMech and PrivPC* vs ε and n on random DAGs (Tables 4.3–4.9).

Random DAGs with sparseness s, categorical CPTs with 2–5 levels (PrivPC, LapMech) or a
linear-Gaussian SEM (PrivPC*), generated in code; 5 graphs per setting, mean ± sd of TPR, FPR,
TDR, FDR of the skeleton. Every method gets the same zCDP budget ρ = ε²/2 (what a pure ε-DP
mechanism such as LapMech's costs), so "ε" below is the paper's ε read through that
equivalence. Also times the non-private PC here against causal-learn's PC (same data, same
α, PC-stable, same maximal order) per CI test, when causal-learn is installed.

    .venv/bin/python benchmarks/causal_skeleton.py [--graphs 5] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _common import emit

from privfair.causal.citests import CodeTables
from privfair.causal.graph import skeleton_scores
from privfair.causal.pc import pc, pc_gaussian
from privfair.causal.privpc import lap_mech, priv_pc, priv_pc_star
from privfair.causal.simulate import random_dag, sample_categorical, sample_linear_gaussian
from privfair.core.accounting import PrivacyLedger

ALPHA = 0.01
MAX_ORDER = 3


def _summary(rows: list[dict[str, float]]) -> dict[str, str]:
    return {k: f"{np.mean([r[k] for r in rows]):.3f}±{np.std([r[k] for r in rows]):.3f}"
            for k in ("tpr", "fpr", "tdr", "fdr")}


def categorical_setting(*, epsilon: float, n: int, p: int, s: float, graphs: int) -> dict:
    rho = epsilon**2 / 2
    scores: dict[str, list] = {"pc": [], "lapmech": [], "privpc": []}
    seconds: dict[str, float] = dict.fromkeys(scores, 0.0)
    for seed in range(graphs):
        rng = np.random.default_rng(seed)
        dag = random_dag(p, s, rng=rng)
        codes, domain = sample_categorical(dag, n, rng=rng)
        t = time.perf_counter()
        found, _ = pc(CodeTables(codes, domain), alpha=ALPHA, max_order=MAX_ORDER)
        seconds["pc"] += time.perf_counter() - t
        scores["pc"].append(skeleton_scores(found, dag.graph))
        for name, method in (("lapmech", lap_mech), ("privpc", priv_pc)):
            t = time.perf_counter()
            result = method(codes, domain, rho=rho, ledger=PrivacyLedger(rho_budget=rho),
                            rng=np.random.default_rng(1000 + seed), alpha=ALPHA,
                            max_order=MAX_ORDER)
            seconds[name] += time.perf_counter() - t
            scores[name].append(skeleton_scores(result.graph, dag.graph))
    return {"epsilon": epsilon, "rho": rho, "n": n, "p": p, "s": s,
            **{k: _summary(v) for k, v in scores.items()},
            "seconds_per_graph": {k: round(v / graphs, 3) for k, v in seconds.items()}}


def gaussian_setting(*, epsilon: float, n: int, p: int, s: float, graphs: int) -> dict:
    rho = epsilon**2 / 2
    scores: dict[str, list] = {"pc": [], "privpc_star": []}
    for seed in range(graphs):
        rng = np.random.default_rng(seed)
        dag = random_dag(p, s, rng=rng)
        values, stds = sample_linear_gaussian(dag, n, rng=rng)
        found, _ = pc_gaussian(np.corrcoef(values.T), n, dag.nodes, alpha=ALPHA,
                               max_order=MAX_ORDER)
        scores["pc"].append(skeleton_scores(found, dag.graph))
        result = priv_pc_star(values, dag.nodes, center=np.zeros(p), scale=stds, clip=3.0,
                              rho=rho, ledger=PrivacyLedger(rho_budget=rho),
                              rng=np.random.default_rng(1000 + seed), alpha=ALPHA,
                              max_order=MAX_ORDER)
        scores["privpc_star"].append(skeleton_scores(result.graph, dag.graph))
    return {"epsilon": epsilon, "rho": rho, "n": n, "p": p, "s": s, "clip": 3.0,
            **{k: _summary(v) for k, v in scores.items()}}


def speed_against_causal_learn(*, n: int, p: int, s: float, graphs: int) -> dict:
    try:
        from causallearn.graph.GraphClass import CausalGraph as ClGraph
        from causallearn.search.ConstraintBased.PC import pc as cl_pc
    except ImportError:
        return {"skipped": "causal-learn is not installed"}
    ours_s = theirs_s = 0.0
    ours_tests = theirs_tests = 0
    agree = 0
    original = ClGraph.ci_test
    calls = [0]

    def counting(self, i, j, cond):
        calls[0] += 1
        return original(self, i, j, cond)

    ClGraph.ci_test = counting
    try:
        for seed in range(graphs):
            rng = np.random.default_rng(seed)
            dag = random_dag(p, s, rng=rng)
            codes, domain = sample_categorical(dag, n, rng=rng, max_levels=3)
            t = time.perf_counter()
            _, skeleton = pc(CodeTables(codes, domain), alpha=ALPHA, max_order=MAX_ORDER)
            ours_s += time.perf_counter() - t
            ours_tests += skeleton.tests
            calls[0] = 0
            t = time.perf_counter()
            found = cl_pc(codes.astype(float), alpha=ALPHA, indep_test="gsq", stable=True,
                          show_progress=False, max_k=MAX_ORDER)
            theirs_s += time.perf_counter() - t
            theirs_tests += calls[0]
            m = found.G.graph
            theirs = frozenset(frozenset((i, j)) for i in range(p) for j in range(i + 1, p)
                               if m[i, j] != 0)
            agree += theirs == skeleton.adjacency
    finally:
        ClGraph.ci_test = original
    ours_per = ours_s / ours_tests
    theirs_per = theirs_s / theirs_tests
    return {"n": n, "p": p, "s": s, "graphs": graphs, "same_skeleton": f"{agree}/{graphs}",
            "privfair_seconds": round(ours_s, 3), "privfair_tests": ours_tests,
            "causal_learn_seconds": round(theirs_s, 3), "causal_learn_tests": theirs_tests,
            "privfair_us_per_test": round(1e6 * ours_per, 1),
            "causal_learn_us_per_test": round(1e6 * theirs_per, 1),
            "speedup_per_test": round(theirs_per / ours_per, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a few settings only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    g = args.graphs
    eps_grid = [1.0, 5.0] if args.quick else [1.0, 3.0, 5.0, 10.0]
    n_grid = [1000, 10000] if args.quick else [1000, 3000, 5000, 10000]
    document = {
        "alpha": ALPHA, "max_order": MAX_ORDER, "budget": "rho = epsilon^2/2 for every method",
        "table_4_3_vs_epsilon": [categorical_setting(epsilon=e, n=10000, p=10, s=0.2, graphs=g)
                                 for e in eps_grid],
        "table_4_5_vs_n": [categorical_setting(epsilon=5.0, n=n, p=10, s=0.2, graphs=g)
                           for n in n_grid],
        "table_4_8_privpc_star_vs_epsilon": [
            gaussian_setting(epsilon=e, n=10000, p=10, s=0.4, graphs=g)
            for e in ([0.1, 1.0] if args.quick else [0.01, 0.1, 1.0, 10.0])],
        "table_4_9_privpc_star_vs_n": [
            gaussian_setting(epsilon=1.0, n=n, p=10, s=0.4, graphs=g)
            for n in ([1000, 10000] if args.quick else [100, 1000, 10000])],
        "speed_vs_causal_learn": speed_against_causal_learn(n=5000, p=10, s=0.2, graphs=g),
    }
    emit(document, args.out)


if __name__ == "__main__":
    main()
