"""The evaluation grid on Prefect's thread pool vs a local Dask cluster, through the flow.

One small grid (default: COMPAS, mst + prefair-greedy, ε ∈ {0.5, 1, 2}, 2 seeds, logistic
regression: 12 cells) runs in one process: first in-process without Prefect
(:func:`privfair.evaluation.grid.run_grid`, the baseline), then through the
``privfair-evaluate`` flow on the ThreadPoolTaskRunner, then on the DaskTaskRunner (a local
cluster of 2 single-threaded worker processes, started and stopped inside the timed call).
The ephemeral Prefect API server is started before the timings, so none of them pays for it.
Prints one JSON document: wall seconds per runner, whether the results match (every column
but the timings ``fit_s`` and ``cell_s``), and the sum of the cells' own wall times per runner
(``sum_cell_s``: the work inside the cells, without scheduling overhead).

    pip install -e '.[dask]'
    python benchmarks/evaluate_dask.py [--classifiers mlp] [--out benchmarks/results/x.json]

Evaluation reads the real data: the outputs go to a temporary folder and are deleted.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from _common import emit

from privfair.evaluation.grid import EvaluateParams, cells, run_grid, write_outputs

#: Timing columns, which differ from run to run.
TIMINGS = ["fit_s", "cell_s"]


def _same(a, b) -> bool:
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(a.drop(columns=TIMINGS), b.drop(columns=TIMINGS))
    except AssertionError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["compas"])
    parser.add_argument("--methods", nargs="+", default=["mst", "prefair-greedy"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--classifiers", nargs="+", default=["logistic"])
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    import pandas as pd

    from flows.evaluate import DASK_CLUSTER, api_for_workers, run_evaluation

    with tempfile.TemporaryDirectory(prefix="privfair-eval-bench-") as tmp:
        params = EvaluateParams(datasets=args.datasets, methods=args.methods,
                                epsilons=args.epsilons, seeds=args.seeds,
                                classifiers=args.classifiers, out=str(Path(tmp) / "evals"))
        wall: dict[str, float] = {}
        frames = {}
        t = time.perf_counter()
        folder = write_outputs(run_grid(params), params)  # what `--no-prefect` does
        wall["no_prefect"] = time.perf_counter() - t
        frames["no_prefect"] = pd.read_parquet(folder / "results.parquet")
        with api_for_workers():  # start the ephemeral API server before the timings
            for name, dask in (("threads", False), ("dask", True)):
                t = time.perf_counter()
                folder = run_evaluation(params, dask=dask)
                wall[name] = time.perf_counter() - t
                frames[name] = pd.read_parquet(folder / "results.parquet")
        baseline = frames["no_prefect"]
        emit({
            "benchmark": "evaluate_dask",
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "grid": {"datasets": args.datasets, "methods": args.methods,
                     "epsilons": args.epsilons, "seeds": args.seeds,
                     "classifiers": args.classifiers, "cells": len(cells(params))},
            "threads_max_workers": os.cpu_count(),
            "dask_cluster": DASK_CLUSTER,
            "wall_s": {k: round(v, 2) for k, v in wall.items()},
            "sum_cell_s": {k: round(float(f["cell_s"].sum()), 2) for k, f in frames.items()},
            "failed_cells": int(baseline["error"].notna().sum()),
            "results_match": {"threads_vs_no_prefect": _same(frames["threads"], baseline),
                              "dask_vs_threads": _same(frames["dask"], frames["threads"])},
        }, args.out)


if __name__ == "__main__":  # required: Dask spawns worker processes that re-import __main__
    main()
