"""AIM on a wide table (issue 34.2): does it converge within its time budget?

Generates the 300k-row x 41-attribute table of ``benchmarks/gen_table.py`` (seed 0), fits
``aim`` at the given time budgets and ``mst`` with the library's
:class:`~privfair.synth.synthesizer.FairSynthesizer` at ε = 1, and prints JSON per fit: wall
seconds (for AIM also split into counting, rounds and the final fit), AIM rounds (and
whether the clock ended them), the final fit's iterations,
``converged`` and what stopped it, and the 2-way TVD against the real table (an evaluation,
so it reads the data on purpose).

    python benchmarks/aim_wide.py --max-time 240 60 --out benchmarks/results/aim_wide.json

The load average is recorded with the results: on a shared machine wall times scale with it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _common import emit


def main() -> None:
    import numpy as np
    from small_n import generated

    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--attributes", type=int, default=41)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--max-time", type=float, nargs="+", default=[240.0])
    parser.add_argument("--methods", nargs="+", default=["mst", "aim"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-model-size-mb", type=float, default=80.0,
                        help="AIM's cap on the junction tree (the library default is 80)")
    parser.add_argument("--uncapped", action="store_true",
                        help="also refit AIM's measurements with no time cap: how long the "
                             "final fit needs to converge")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    codes, contract = generated(args.rows, args.attributes, 0.3)
    domain, roles = contract.domain(), contract.roles()
    runs = []
    for method in args.methods:
        for budget in args.max_time if method.startswith("aim") else [None]:
            fit_rng, sample_rng = np.random.default_rng(args.seed).spawn(2)
            stages: dict[str, float] = {}  # when each stage first reported progress

            def seen(stage: str, fraction: float, stages: dict[str, float] = stages) -> None:
                stages.setdefault(stage, time.perf_counter())

            start = time.perf_counter()
            synth = FairSynthesizer(domain=domain, roles=roles, epsilon=args.eps, delta=1e-9,
                                    method=method, require_fair=False, max_time_s=budget,
                                    max_model_size_mb=args.max_model_size_mb)
            synth.fit(codes, rng=fit_rng, progress=seen)
            wall = time.perf_counter() - start
            split = {}
            if "AIM rounds" in stages:  # counting, AIM's rounds, the final fit
                split = {"counting_s": round(stages["AIM rounds"] - start, 1),
                         "rounds_s": round(stages["estimate"] - stages["AIM rounds"], 1),
                         "final_fit_s": round(stages["done"] - stages["estimate"], 1)}
            estimation = synth.manifest()["method"]["estimation"]
            synthetic = synth.sample(len(codes), rng=sample_rng)
            runs.append({
                "method": method, "max_time_s": budget, "wall_s": round(wall, 1), **split,
                "aim_rounds": len(getattr(synth, "aim_rounds_", [])),
                "model_size_mb": round(synth.aim_rounds_[-1].model_size_mb, 2)
                if getattr(synth, "aim_rounds_", None) else None,
                "max_model_size_mb": args.max_model_size_mb,
                "iterations": estimation["iterations"], "converged": estimation["converged"],
                "stopped_by": estimation["stopped_by"],
                "tvd2": round(marginal_tvd(codes, synthetic, domain, 2), 4)})
            if args.uncapped and method.startswith("aim"):
                from privfair.synth.synthesizer import fit_model

                start = time.perf_counter()
                full = fit_model(synth.one_way_, synth.selected_, tol=synth.tol,
                                 max_iters=synth.max_iters,
                                 fallback=synth.warm_start_.potentials)
                runs[-1]["uncapped_final_fit"] = {
                    "seconds": round(time.perf_counter() - start, 1),
                    "iterations": full.report.iterations,
                    "converged": full.report.converged,
                    "stopped_by": full.report.stopped_by}
            print(runs[-1], file=sys.stderr, flush=True)
    emit({"benchmark": "aim_wide", "rows": args.rows, "attributes": args.attributes,
          "epsilon": args.eps, "load_avg": os.getloadavg(), "cpus": os.cpu_count(),
          "runs": runs}, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
