"""AIM at ε = 1 on embedded tables over a few seeds (issue 34.4): wall time and quality.

For each dataset and seed, ``FairSynthesizer(method="aim")`` at ε = 1, δ = 1e-9 and the
release's default time budget is fitted and sampled (n rows, i.i.d.); prints JSON per fit:
wall seconds, rounds, the final fit's iterations, ``converged``, what stopped it, its loss,
and the mean 2-way TVD against the real table (an evaluation: it reads the data on purpose).
A check that a change to AIM's estimation leaves its results on COMPAS and Adult no worse.

    python benchmarks/aim_seeds.py --datasets compas adult --seeds 3 \\
        --out benchmarks/results/aim_wide_stop16_seeds.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _common import emit, load_codes


def main() -> None:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd
    from privfair.release.tabular.plan import DEFAULT_AIM_TIME_S
    from privfair.synth.synthesizer import FairSynthesizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs = []
    for name in args.datasets:
        codes, contract = load_codes(name)
        domain, roles = contract.domain(), contract.roles()
        for seed in range(args.seeds):
            fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
            start = time.perf_counter()
            synth = FairSynthesizer(domain=domain, roles=roles, epsilon=args.eps, delta=1e-9,
                                    method="aim", require_fair=False,
                                    max_time_s=DEFAULT_AIM_TIME_S)
            synth.fit(codes, rng=fit_rng)
            wall = time.perf_counter() - start
            report = synth.model_.report
            synthetic = synth.sample(len(codes), rng=sample_rng)
            runs.append({"dataset": name, "seed": seed, "wall_s": round(wall, 1),
                         "aim_rounds": len(synth.aim_rounds_),
                         "iterations": report.iterations, "converged": report.converged,
                         "stopped_by": report.stopped_by, "loss": round(report.loss, 3),
                         "tvd2": round(marginal_tvd(codes, synthetic, domain, 2), 4),
                         "load_avg_1min": round(os.getloadavg()[0], 2)})
            print(runs[-1], file=sys.stderr, flush=True)
    emit({"benchmark": "aim_seeds", "epsilon": args.eps, "cpus": os.cpu_count(),
          "runs": runs}, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
