"""The ``privfair-evaluate`` Prefect flow: a privacy–fairness–utility grid on real data.

methods × ε × seeds (× TOT η) on a fixed train/test split of embedded datasets, one task per
cell (``tasks/evaluate.py``), in parallel on a task runner: a thread pool by default, or a
local Dask cluster (``run_evaluation(..., dask=True)``, ``privfair evaluate --dask``; needs
``pip install -e .[dask]``). A progress artifact counts finished cells; a markdown artifact
summarises the grid (for own data only that it ran and where its output is: no metric).
Outputs go to ``<out>/<timestamp>/`` (results.parquet, report.html,
NOT_PRIVACY_PROTECTED.txt): they are computed from real data, are **not privacy-protected**,
and are never written inside a release store. The in-process equivalent, without Prefect, is
:func:`privfair.evaluation.grid.run_grid`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.context import FlowRunContext
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from privfair.evaluation import grid as lib
from privfair.evaluation.grid import EvaluateParams
from tasks import evaluate as ev
from tasks._common import PROGRESS_LISTENERS, ProgressArtifact, report
from tasks.registry_blocks import team_registry

#: Local Dask cluster of ``--dask``: two single-threaded worker processes.
DASK_CLUSTER = {"n_workers": 2, "threads_per_worker": 1}


def _threads() -> int:
    return os.cpu_count() or 2


# Prefect types task_runner as TaskRunner[PrefectFuture[Any]], invariant in the future type,
# which no concrete runner (here TaskRunner[PrefectConcurrentFuture[R]]) matches.
@flow(name="privfair-evaluate", persist_result=False,
      task_runner=ThreadPoolTaskRunner(max_workers=_threads()))  # type: ignore[arg-type]
def evaluate(params: EvaluateParams = EvaluateParams()) -> str:  # noqa: B008 - pydantic default
    """Run the grid; returns the output folder (not privacy-protected)."""
    with team_registry():  # the team's registry block, when saved (own data is charged)
        return _evaluate(params)


def _evaluate(params: EvaluateParams) -> str:
    log = get_run_logger()
    start = time.perf_counter()
    lib.check_out(params.out, inputs=lib.grid_inputs(params))  # refuse a bad --out before any real data is read
    stamp = lib.timestamp()
    grid = lib.cells(params)
    kwargs = lib.cell_kwargs(params)
    log.info("evaluation grid: %d cells; results are NOT privacy-protected", len(grid))
    report(f"cells 0/{len(grid)}", 0.0)
    futures = [ev.evaluate_cell.submit(**cell, **kwargs) for cell in grid]
    bar = ProgressArtifact("cells", total=len(grid), span=(0.0, 0.95),
                           description=f"evaluation cells finished (of {len(grid)})")
    for done, _ in enumerate(as_completed(futures), start=1):
        bar.update(done)
        report(f"cells {done}/{len(grid)}", 0.95 * done / len(grid))
    bar.finish()
    records = []
    for cell, future in zip(grid, futures, strict=True):
        outcome: Any = future.result(raise_on_failure=False)
        # A crashed task (worker lost, bug outside run_cell) is recorded like a failed cell.
        records.append(outcome if isinstance(outcome, dict) else lib.error_record(
            cell, outcome if isinstance(outcome, BaseException)
            else RuntimeError(f"task ended in state {future.state.name}")))
    results = lib.results_frame(records)
    report("write", 0.96)
    folder = ev.write_outputs(results, params, stamp)
    ctx = FlowRunContext.get()
    runner = type(ctx.task_runner).__name__ if ctx else None
    create_markdown_artifact(
        key="privfair-evaluation",
        markdown=lib.summary_markdown(results, folder, seconds=time.perf_counter() - start,
                                      runner=runner, own_data=params.contract is not None),
        description=f"{len(grid)} cells; NOT privacy-protected")
    failed = int(results["error"].notna().sum())
    if failed and params.contract is None:  # own data: no count from real rows in Prefect
        log.warning("%d of %d cells failed (see the error column)", failed, len(grid))
    log.info("wrote %s", folder)
    report("done", 1.0)
    return folder


def dask_runner() -> Any:
    """A DaskTaskRunner on a local cluster (:data:`DASK_CLUSTER`); needs ``privfair[dask]``."""
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ImportError("the Dask task runner needs prefect-dask: pip install -e '.[dask]'"
                          ) from None
    return DaskTaskRunner(cluster_kwargs=dict(DASK_CLUSTER))


@contextlib.contextmanager
def api_for_workers() -> Iterator[None]:
    """Point Dask worker processes at this process's Prefect API.

    Without ``PREFECT_API_URL`` every worker process would start an ephemeral API server of its
    own (seconds each, and concurrent writers on one SQLite file). Start the ephemeral server
    here and export its URL, which the spawned workers inherit, for the duration of the run.
    """
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_ENABLED,
        temporary_settings,
    )

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the default instance, which the flow's client reuses
    server.start()
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


def run_evaluation(params: EvaluateParams | dict[str, Any], *, dask: bool = False,
                   progress: Callable[[str, float], None] | None = None) -> Path:
    """Run the flow (threads, or a local Dask cluster); returns the output folder."""
    params = EvaluateParams.model_validate(params)
    if progress is not None:
        PROGRESS_LISTENERS.append(progress)
    try:
        if not dask:
            return Path(evaluate(params))
        with api_for_workers():
            return Path(evaluate.with_options(task_runner=dask_runner())(params))
    finally:
        if progress is not None:
            PROGRESS_LISTENERS.remove(progress)


if __name__ == "__main__":
    print(run_evaluation(EvaluateParams(), dask="--dask" in sys.argv[1:]))
