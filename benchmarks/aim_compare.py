"""AIM and fair AIM against the public AIM (smartnoise-synth 1.0.8 / mbi 1.1).

Each (dataset, method, seed) runs in a fresh process; the JSON reports fit time, peak RSS,
rounds, and the average 2-way TVD of iid and low-variance ("round") samples against the input,
next to the peer figures measured on the same kind of 2-core machine (from the issue):
COMPAS ε=1: ≈68 s, 1.35 GB, 2-way TVD 0.012 (iid); Adult: tens of minutes.

    python benchmarks/aim_compare.py [--datasets compas adult] [--seeds 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

from _common import emit, load_codes, run_worker

PEER = {"compas": {"fit_s": 68.0, "peak_rss_mb": 1.35 * 1024, "tvd2_iid": 0.012},
        "adult": {"fit_s": "tens of minutes"}}


def worker(dataset: str, method: str, epsilon: float, seed: int) -> dict:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes(dataset)
    domain = contract.domain()
    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    start = time.perf_counter()
    synth = FairSynthesizer(domain=domain, roles=contract.roles(), epsilon=epsilon, delta=1e-9,
                            method=method).fit(codes, rng=fit_rng)
    record = {"fit_s": time.perf_counter() - start, "rounds": len(synth.aim_rounds_),
              "annealings": sum(r.annealed for r in synth.aim_rounds_),
              "cliques": [list(c) for c in synth.structure_.edges],
              "fair": synth.structure_.fairness.passed,
              "rho_spent_fraction": synth.ledger_.spent / synth.ledger_.rho_budget}
    for mode in ("iid", "round"):
        synthetic = synth.sample(len(codes), rng=sample_rng, mode=mode)
        record[f"tvd2_{mode}"] = marginal_tvd(codes, synthetic, domain, 2)
    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["compas", "adult"])
    parser.add_argument("--methods", nargs="*", default=["aim", "aim-fair"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", nargs=4, metavar=("DATASET", "METHOD", "EPS", "SEED"))
    args = parser.parse_args()
    if args.worker:
        import json

        dataset, method, eps, seed = args.worker
        print(json.dumps(worker(dataset, method, float(eps), int(seed))))
        return
    summary, runs = [], []
    for dataset in args.datasets:
        for method in args.methods:
            rows = []
            for seed in range(args.seeds):
                record = run_worker(__file__, dataset, method, args.epsilon, seed)
                record.update(dataset=dataset, method=method, seed=seed)
                print(f"{dataset} {method} seed={seed}: "
                      f"{record.get('error') or round(record['fit_s'], 1)}", file=sys.stderr)
                (rows if "error" not in record else runs).append(record)
            runs.extend(rows)
            if not rows:
                continue
            entry = {"dataset": dataset, "method": method, "epsilon": args.epsilon,
                     "runs": len(rows), "peer": PEER.get(dataset)}
            for key in ("fit_s", "peak_rss_mb", "tvd2_iid", "tvd2_round", "rounds"):
                entry[key] = statistics.fmean(r[key] for r in rows)
            entry["fair_all_runs"] = all(r["fair"] for r in rows)
            peer_fit = PEER.get(dataset, {}).get("fit_s")
            if isinstance(peer_fit, float):
                entry["speedup_vs_peer"] = peer_fit / entry["fit_s"]
            summary.append(entry)
    emit({"benchmark": "aim_compare", "delta": 1e-9, "summary": summary, "runs": runs},
         args.out)


if __name__ == "__main__":
    main()
