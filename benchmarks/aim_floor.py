"""AIM against the bootstrap floor, pair by pair (issue 23.5): where AIM's 2-way error comes from.

For each dataset and seed, the release's AIM (``FairSynthesizer(method="aim")`` at ε = 1,
δ = 1e-9 and the release's default time budget) is fitted, and its mean 2-way TVD is set
against the bootstrap floor: the TVD of an i.i.d. resample of the real table (n rows with
replacement, no privacy). Reported per seed and as mean ± sd over seeds, for the fitted model
itself (no sampling) and for ``iid`` and low-variance ``round`` samples; and the excess over
the floor split between pairs AIM measured (in the model) and pairs it did not, with the
pairs that contribute most.

Evaluation output: not privacy-protected (it reads the real data on purpose; nothing here
feeds a release).

    python benchmarks/aim_floor.py                         # COMPAS and Adult, 5 seeds
    python benchmarks/aim_floor.py --datasets compas --seeds 2 --out /tmp/aim_floor.json
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

from _common import emit, load_codes

#: the release's default AIM time budget (privfair release without --max-time)
DEFAULT_TIME_S = 240.0


def _tvd(real, other) -> float:
    return 0.5 * float(abs(real / real.sum() - other / other.sum()).sum())


def _summary(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 4),
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0}


def floor_of(dataset: str, seeds: int, time_s: float, top: int) -> dict:
    import numpy as np

    from privfair.synth.aim import model_marginals
    from privfair.synth.measure import count_marginals
    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes(dataset)
    domain = contract.domain()
    pairs = list(itertools.combinations(domain.attributes, 2))
    columns = {a: codes[a].to_numpy() for a in domain}
    real = count_marginals(domain, pairs, [columns])
    n = len(codes)
    bootstrap = dict.fromkeys(pairs, 0.0)
    for seed in range(seeds):
        index = np.random.default_rng(1000 + seed).integers(0, n, n)
        resample = count_marginals(domain, pairs, [{a: v[index] for a, v in columns.items()}])
        for p in pairs:
            bootstrap[p] += _tvd(real[p], resample[p]) / seeds
    floor = statistics.fmean(bootstrap.values())
    runs, excess = [], dict.fromkeys(pairs, 0.0)
    for seed in range(seeds):
        fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
        started = time.perf_counter()
        synth = FairSynthesizer(domain=domain, roles=contract.roles(), epsilon=1.0,
                                delta=1e-9, method="aim", max_time_s=time_s)
        synth.fit(codes, rng=fit_rng)
        fit_s = time.perf_counter() - started
        fitted = model_marginals(synth.model_, pairs)
        per_pair = {p: _tvd(real[p], fitted[p]) for p in pairs}
        measured = {tuple(sorted(c, key=domain.position)) for m in synth.selected_
                    for c in itertools.combinations(m.clique, 2)}
        model_tvd = statistics.fmean(per_pair.values())
        record = {"seed": seed, "fit_s": round(fit_s, 2), "rounds": len(synth.aim_rounds_),
                  "final_fit_iterations": synth.model_.report.iterations,
                  "final_fit_converged": synth.model_.report.converged,
                  "rho_spent_fraction": round(synth.ledger_.spent / synth.ledger_.rho_budget, 9),
                  "model_ratio": round(model_tvd / floor, 3),
                  "excess_in_model": round(sum(per_pair[p] - bootstrap[p] for p in measured)
                                           / len(pairs), 5),
                  "excess_out_of_model": round(sum(per_pair[p] - bootstrap[p] for p in pairs
                                                   if p not in measured) / len(pairs), 5)}
        for mode in ("iid", "round"):
            synthetic = synth.sample(n, rng=sample_rng, mode=mode)
            counted = count_marginals(domain, pairs, [{a: synthetic[a].to_numpy()
                                                       for a in domain}])
            record[f"{mode}_ratio"] = round(statistics.fmean(
                _tvd(real[p], counted[p]) for p in pairs) / floor, 3)
        for p in pairs:
            excess[p] += (per_pair[p] - bootstrap[p]) / seeds
        runs.append(record)
        print(dataset, record, file=sys.stderr, flush=True)
    worst = sorted(pairs, key=lambda p: -excess[p])[:top]
    return {"dataset": dataset, "rows": n, "pairs": len(pairs), "epsilon": 1.0,
            "delta": 1e-9, "time_budget_s": time_s, "seeds": seeds,
            "bootstrap_tvd2": round(floor, 5),
            **{f"{key}_over_bootstrap": _summary([r[f"{key}_ratio"] for r in runs])
               for key in ("model", "round", "iid")},
            "worst_pairs": [{"pair": list(p), "cells": domain.cells(p),
                             "excess_tvd": round(excess[p], 4),
                             "bootstrap_tvd": round(bootstrap[p], 4)} for p in worst],
            "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--time", type=float, default=DEFAULT_TIME_S)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = [floor_of(name, args.seeds, args.time, args.top) for name in args.datasets]
    emit({"benchmark": "aim_floor", "note": "evaluation output: not privacy-protected",
          "cpu_count": os.cpu_count(), "load_avg_1min": [load, os.getloadavg()[0]],
          "results": results}, args.out)


if __name__ == "__main__":
    main()
