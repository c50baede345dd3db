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

And the wide case (issue 23.2): ``privfair release --method aim --epsilon 1 --delta 1e-9
--no-prefect`` at its defaults (no ``--max-time``) on the generated 299k x 41 table of
``benchmarks/gen_table.py``, in a fresh process with a throw-away registry: wall time (target
under 5 minutes on the 2-core machine), the manifest's time budget, rounds and ρ spent, and
the release's 2-way TVD against the bootstrap floor of that table.

    python benchmarks/aim_floor.py                         # COMPAS, Adult (5 seeds), wide
    python benchmarks/aim_floor.py --datasets compas --seeds 2 --wide-rows 0
    python benchmarks/aim_floor.py --datasets --wide-rows 299000     # the wide case only
    python benchmarks/aim_floor.py --datasets adult --wide-rows 0 \
        --aim-options '{"initial_scale": 4, "rounds": 104}'          # a variant of run_aim
    python benchmarks/aim_floor.py --wide-rows 0 --robust-descent \
        --aim-options '{"max_iters": 50}'        # estimate(robust_descent=True), 50 per round
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, load_codes

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


def wide_release(rows: int, attributes: int = 41) -> dict:
    """The AIM release at its defaults on a generated wide table, timed from the shell."""
    import numpy as np
    import pandas as pd
    from gen_table import write

    from privfair.contracts.encoding import discretize
    from privfair.contracts.schema import load_contract
    from privfair.evaluation.utility import marginal_tvd

    with tempfile.TemporaryDirectory(prefix="pf-aim-wide-") as tmp:
        work = Path(tmp)
        table = write(work / "table", rows, attributes, seed=0, parquet=True)
        env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "PREFECT_HOME": str(work / "prefect-home"),
               "PRIVFAIR_REGISTRY": str(work / "registry")}  # never a real lifetime ledger
        command = [sys.executable, "-m", "privfair.cli", "release", "--contract",
                   table["contract"], "--data", table["data"], "--method", "aim",
                   "--epsilon", "1", "--delta", "1e-9", "--no-prefect",
                   "--out", str(work / "store"), "--work-dir", str(work / "work")]
        load = os.getloadavg()[0]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - started
        record = {"rows": rows, "attributes": attributes, "exit": done.returncode,
                  "wall_s": round(wall, 1), "load_avg_1min": [load, os.getloadavg()[0]],
                  "command": " ".join(command[1:])}
        if done.returncode != 0:
            return {**record, "error": done.stderr[-2000:]}
        folder = sorted((work / "store").rglob("manifest.json"))[-1].parent
        manifest = json.loads((folder / "manifest.json").read_text())
        record.update(time_budget_s=manifest["method"].get("time_budget_s"),
                      rounds=sum(e["name"].startswith("AIM measure round")
                                 for e in manifest["ledger"]),
                      rho_spent_over_budget=manifest["guarantee"]["spent"]["rho"]
                      / manifest["guarantee"]["rho"])
        contract = load_contract(table["contract"])
        domain = contract.domain()
        real = pd.DataFrame(discretize(pd.read_parquet(table["data"]), contract))
        released = pd.read_parquet(folder / "synthetic.parquet")
        synthetic = pd.DataFrame({
            a: released[a].astype(str).map(
                {label: code for code, label in enumerate(contract.labels(a))}).to_numpy()
            for a in domain})
        index = np.random.default_rng(1000).integers(0, len(real), len(real))
        floor = marginal_tvd(real, real.iloc[index].reset_index(drop=True), domain, 2)
        record.update(tvd2=round(marginal_tvd(real, synthetic, domain, 2), 5),
                      bootstrap_tvd2=round(floor, 5))
        record["tvd2_over_bootstrap"] = round(record["tvd2"] / floor, 3)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["compas", "adult"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--time", type=float, default=DEFAULT_TIME_S)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--wide-rows", type=int, default=299_000,
                        help="rows of the generated 41-attribute table (0: skip it)")
    parser.add_argument("--aim-options", type=json.loads, default={},
                        help="JSON keyword arguments for run_aim (experiments; same ρ)")
    parser.add_argument("--robust-descent", action="store_true",
                        help="estimate(robust_descent=True) in AIM's rounds and final fit")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.robust_descent:
        # the same measurements, fitted by the descent that does not stall (issue 23.5)
        from functools import partial

        from privfair.synth import aim, estimation, synthesizer

        aim.estimate = synthesizer.estimate = partial(estimation.estimate,
                                                      robust_descent=True)
    if args.aim_options:
        # the library's AIM with other settings (same ρ, same mechanisms): experiments only
        from functools import partial

        from privfair.synth import aim, synthesizer

        synthesizer.run_aim = partial(aim.run_aim, **args.aim_options)
    load = os.getloadavg()[0]
    results = [floor_of(name, args.seeds, args.time, args.top) for name in args.datasets]
    document = {"benchmark": "aim_floor", "note": "evaluation output: not privacy-protected",
                "aim_options": args.aim_options, "robust_descent": args.robust_descent,
                "cpu_count": os.cpu_count(), "load_avg_1min": [load, os.getloadavg()[0]],
                "results": results}
    if args.wide_rows:
        document["wide_release_at_defaults"] = wide_release(args.wide_rows)
    emit(document, args.out)


if __name__ == "__main__":
    main()
