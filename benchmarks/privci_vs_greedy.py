"""Greedy-PreFair's edge rule against PrivCI's feasibility check inside Kruskal (issue 34.5).

Both are ``prefair-greedy``: a private Kruskal whose every round draws an edge with the
exponential mechanism, at the same privacy cost (the same rounds at the same ρ each). They
differ in how the tree is kept fair:

* ``edge-rule`` (Pujol et al. 2023, Alg. 2): before the rounds, every edge between an outcome
  attribute and one that is neither admissible nor outcome is removed; any tree over the rest
  is fair.
* ``privci`` (Ghahramanpour & Milani 2026, "Structure Selection for Fairness-Constrained
  Differentially Private Data Synthesis"): every edge but protected–outcome is a candidate,
  and each round keeps only the joining edges after which the forest is still fair
  (:class:`~privfair.synth.structure.FairForest`), so an outcome may neighbour e.g.
  ``relationship`` when that does not open a protected–outcome path avoiding the admissible
  attributes.

Per table (Adult and COMPAS, full and a 1,000-row sample), ε and seed: 2-way TVD of n sampled
rows against the real table, its ratio to ``independent``'s, the fairness check of the built
structure, edges, and whether the ledger adds up to the declared ρ. Evaluation against the
real table, so it reads the data on purpose.

    python benchmarks/privci_vs_greedy.py --out benchmarks/results/privci_vs_greedy.json
    python benchmarks/privci_vs_greedy.py --tables compas --sizes 1000 --eps 1 --seeds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from _common import emit, load_codes

CHECKS = ("edge-rule", "privci")


def run(codes, contract, *, check: str | None, seed: int, eps: float) -> dict:
    """One fit and sample; ``check`` None is the independence baseline."""
    import numpy as np

    from privfair.core.accounting import zcdp_rho
    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    domain, roles = contract.domain(), contract.roles()
    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    options = {"method": "independent"} if check is None else {
        "method": "prefair-greedy", "greedy_check": check}
    start = time.perf_counter()
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=eps, delta=1e-6,
                            require_fair=False, **options)
    synth.fit(codes, rng=fit_rng)
    synthetic = synth.sample(len(codes), rng=sample_rng)
    return {"check": check or "independent", "seed": seed, "epsilon": eps,
            "fit_s": round(time.perf_counter() - start, 3),
            "tvd2": marginal_tvd(codes, synthetic, domain, 2),
            "fair": synth.structure_.fairness.passed,
            "edges": [list(e) for e in synth.structure_.edges],
            "ledger_matches": abs(synth.ledger_.spent
                                  - zcdp_rho(epsilon=eps, delta=1e-6)) < 1e-9}


def summarise(runs: list[dict]) -> dict:
    base = statistics.mean(r["tvd2"] for r in runs if r["check"] == "independent")
    out = {}
    for check in ("independent", *CHECKS):
        rows = [r for r in runs if r["check"] == check]
        tvd2 = [r["tvd2"] for r in rows]
        out[check] = {
            "tvd2": round(statistics.mean(tvd2), 4),
            "tvd2_sd": round(statistics.stdev(tvd2), 4) if len(rows) > 1 else None,
            "ratio_to_independent": round(statistics.mean(tvd2) / base, 3),
            "edges": round(statistics.mean(len(r["edges"]) for r in rows), 1),
            "fair_runs": sum(r["fair"] for r in rows), "runs": len(rows),
            "ledger_matches": all(r["ledger_matches"] for r in rows),
            "fit_s": round(statistics.mean(r["fit_s"] for r in rows), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=["adult", "compas"])
    parser.add_argument("--sizes", nargs="+", default=["full", "1000"],
                        help="'full' or a row count (a sample without replacement)")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from small_n import sample

    tables, records = {}, []
    for name in args.tables:
        for size in args.sizes:
            codes, contract = (load_codes(name) if size == "full"
                               else sample(name, int(size)))
            for eps in args.eps:
                runs = [run(codes, contract, check=check, seed=seed, eps=eps)
                        for check in (None, *CHECKS) for seed in range(args.seeds)]
                for r in runs:
                    print(name, size, r["check"], eps, r["seed"], round(r["tvd2"], 4),
                          file=sys.stderr, flush=True)
                key = f"{name} n={len(codes)} eps={eps:g}"
                tables[key] = {"table": name, "rows": len(codes), "epsilon": eps,
                               "methods": summarise(runs)}
                records += [{"table": name, "rows": len(codes), **r} for r in runs]
    emit({"benchmark": "privci_vs_greedy", "method": "prefair-greedy", "checks": CHECKS,
          "epsilon": args.eps, "delta": 1e-6, "seeds": args.seeds,
          "load_avg": os.getloadavg(), "tables": tables, "runs": records}, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
