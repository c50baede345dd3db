"""Engine benchmark on Adult: speed, memory, utility and fairness of MST and PreFair.

Runs every (method, ε, seed) in a fresh subprocess so that peak RSS is that run's own, and
prints one JSON document: per-run records and per-(method, ε, sample mode) summaries.

    python benchmarks/engine_adult.py                       # full grid (≈ 5 min on 2 cores)
    python benchmarks/engine_adult.py --seeds 1 --eps 1     # quick look
    python benchmarks/engine_adult.py --dataset compas --eps 1

The data is the embedded Adult table discretised by data_contracts/adult.yaml (13 attributes,
48,842 rows), or with ``--dataset compas`` the embedded COMPAS table. Utility is measured against that same table, as in the MST/PreFair papers; this
is an evaluation, not a release, so it reads the real data on purpose.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from _common import emit, load_codes, run_worker

METHODS = ("mst", "prefair-greedy", "prefair-exact")


def worker(method: str, epsilon: float, seed: int, dataset: str = "adult") -> dict:
    import numpy as np

    from privfair.evaluation.utility import ci_test, marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes(dataset)
    domain, roles = contract.domain(), contract.roles()
    rng = np.random.default_rng(seed)
    fit_rng, sample_rng = rng.spawn(2)
    start = time.perf_counter()
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=epsilon, delta=1e-9,
                            method=method, max_search_nodes=200_000)
    synth.fit(codes, rng=fit_rng)
    fit_s = time.perf_counter() - start
    record = {
        "method": method, "epsilon": epsilon, "seed": seed, "fit_s": fit_s,
        "edges": [list(e) for e in synth.structure_.edges],
        "fair": synth.structure_.fairness.passed,
        "search_nodes": synth.structure_.search_nodes,
        "estimation_iterations": synth.model_.report.iterations,
        "rho_spent": synth.ledger_.spent, "rho_budget": synth.ledger_.rho_budget,
    }
    outcome = roles.outcome[0]
    neighbours = sorted({b if a == outcome else a for a, b in synth.structure_.edges
                         if outcome in (a, b)})
    for mode in ("iid", "round"):
        start = time.perf_counter()
        synthetic = synth.sample(len(codes), rng=sample_rng, mode=mode)
        record[f"{mode}_sample_s"] = time.perf_counter() - start
        for k in (1, 2, 3):
            record[f"{mode}_tvd{k}"] = marginal_tvd(codes, synthetic, domain, k)
        if mode == "round":
            continue
        # Conditional independence of the outcome from each protected attribute given the
        # outcome's neighbours in the tree, in iid synthetic data (and, for contrast, in the
        # real data). Strata are sparse, so the p-value is a within-strata permutation test.
        test_rng = np.random.default_rng([seed, 99])
        for name, frame in (("synthetic", synthetic), ("real", codes)):
            record[f"ci_pvalues_{name}"] = {
                p: ci_test(frame, outcome, p, neighbours, domain, permutations=99,
                           rng=test_rng).p_value
                for p in roles.protected}
    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return record


def _summarise(records: list[dict]) -> list[dict]:
    out = []
    keys = sorted({(r["method"], r["epsilon"]) for r in records},
                  key=lambda k: (METHODS.index(k[0]), k[1]))
    for method, eps in keys:
        rows = [r for r in records if r["method"] == method and r["epsilon"] == eps]
        for mode in ("iid", "round"):
            entry = {"method": method, "epsilon": eps, "sample_mode": mode, "runs": len(rows)}
            for field in ("fit_s", f"{mode}_sample_s", "peak_rss_mb", f"{mode}_tvd1",
                          f"{mode}_tvd2", f"{mode}_tvd3"):
                values = [r[field] for r in rows]
                name = field.replace(f"{mode}_", "")
                entry[name] = statistics.fmean(values)
                if len(values) > 1:
                    entry[name + "_sd"] = statistics.stdev(values)
            entry["fit_plus_sample_s"] = entry["fit_s"] + entry["sample_s"]
            entry["fair_all_runs"] = all(r["fair"] for r in rows)
            if mode == "iid":
                synthetic = [p for r in rows for p in r["ci_pvalues_synthetic"].values()]
                entry["ci_pvalues_synthetic_min"] = min(synthetic)
                entry["ci_pvalues_synthetic_mean"] = statistics.fmean(synthetic)
                entry["ci_rejections_at_0.05"] = f"{sum(p < 0.05 for p in synthetic)}" \
                    f"/{len(synthetic)}"
                entry["ci_pvalues_real_max"] = max(
                    p for r in rows for p in r["ci_pvalues_real"].values())
            out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--eps", nargs="*", type=float, default=[0.1, 1.0, 10.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--dataset", choices=["adult", "compas"], default="adult")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--worker", nargs=4, metavar=("METHOD", "EPS", "SEED", "DATASET"))
    args = parser.parse_args()
    if args.worker:
        method, eps, seed, dataset = args.worker
        print(json.dumps(worker(method, float(eps), int(seed), dataset)))
        return
    records = []
    for method in args.methods:
        for eps in args.eps:
            for seed in range(args.seeds):
                record = run_worker(__file__, method, eps, seed, args.dataset)
                record.update(method=method, epsilon=eps, seed=seed)
                records.append(record)
                status = record.get("error") or f"fit {record['fit_s']:.2f}s " \
                    f"tvd2 {record['iid_tvd2']:.4f}"
                print(f"{method} eps={eps} seed={seed}: {status}", file=sys.stderr)
    ok = [r for r in records if "error" not in r]
    document = {
        "benchmark": "engine_adult",
        "dataset": {"adult": "adult (embedded, 48,842 rows, 13 attributes)",
                    "compas": "compas (embedded)"}[args.dataset],
        "delta": 1e-9,
        "summary": _summarise(ok),
        "failures": [r for r in records if "error" in r],
        "runs": ok,
    }
    emit(document, args.out)

if __name__ == "__main__":
    main()
