"""Evaluation tasks: one grid cell, and the output folder.

Evaluation reads the real data, so these tasks never persist a result and never cache
(``persist_result=False``, ``NO_CACHE``), like :mod:`tasks.stages`. A cell task takes only
the dataset *name* and loads the split itself (once per process), so it runs the same on the
thread pool and on Dask workers without shipping data frames around.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE, CachePolicy

from privfair.evaluation import grid as lib


class RealDataSettings(TypedDict):
    """The task settings of a task that reads real data (typed for ``@task(**REAL_DATA)``)."""

    persist_result: bool
    cache_policy: CachePolicy


REAL_DATA = RealDataSettings(persist_result=False, cache_policy=NO_CACHE)


@task(name="evaluate-cell", task_run_name="{dataset} {method} eps={epsilon} eta={eta} "
                                          "seed={seed}", **REAL_DATA)
def evaluate_cell(dataset: str, method: str, epsilon: float, seed: int, eta: float | None,
                  classifiers: list[str], split_seed: int, delta: float,
                  sample_mode: str, contract: str | None = None, data: str | None = None,
                  privileged: dict[str, str] | None = None, test_fraction: float = 0.2
                  ) -> dict[str, Any]:
    """Synthesise, (optionally) apply TOT, evaluate: one flat record; failures go in ``error``."""
    record = lib.run_cell(dataset=dataset, method=method, epsilon=epsilon, seed=seed, eta=eta,
                          classifiers=classifiers, split_seed=split_seed, delta=delta,
                          sample_mode=sample_mode, contract=contract, data=data,
                          privileged=privileged, test_fraction=test_fraction)
    if record["error"]:
        get_run_logger().warning("cell failed (recorded, grid goes on): %s", record["error"])
    return record


@task(name="write-evaluation", **REAL_DATA)
def write_outputs(results: pd.DataFrame, params: lib.EvaluateParams, stamp: str) -> str:
    """``<out>/<stamp>/`` with results.parquet, report.html and the not-private marker."""
    return str(lib.write_outputs(results, params, stamp=stamp))
