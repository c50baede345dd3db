"""The ``privfair-reproduce`` Prefect flow: every paper table re-run, its cells as tasks.

The same cells, ``results.jsonl`` and report as ``python -m benchmarks.reproduce``
(``benchmarks/reproduce/``): finished cells are skipped, so a run resumes where the last one
stopped; each cell is one task (never retried: a failure is a recorded cell, run again by the
next flow run), on a thread pool by default or on a Dask cluster given its address
(prefect-dask's ``DaskTaskRunner``; the workers need the repository root first on their
``PYTHONPATH``). The flow itself appends the records, so ``results.jsonl`` has one
writer. It lives beside the reproduction, not in ``flows/``: the deployed release flows never
import ``benchmarks/``; deploy it from a checkout with
``prefect deploy benchmarks/reproduce/flow.py:reproduce_papers`` (deployments/README.md). The report reads the real embedded data
(evaluation output, never a release), so its numbers stay in its files: the Prefect logs and
artifact carry cell ids, states, error types and cell counts only.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Literal

# Prefect loads this entrypoint by file path (benchmarks are not installed): the repository
# root goes first, so ``benchmarks`` is its folder and not the top-level ``benchmarks``
# package that opacus installs.
_ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [_ROOT]:
    sys.path.insert(0, _ROOT)

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.artifacts import create_markdown_artifact  # noqa: E402
from prefect.futures import as_completed  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from benchmarks.reproduce import cli as reproduction  # noqa: E402
from benchmarks.reproduce.core import (  # noqa: E402
    append_record,
    code_version,
    describe,
    load_results,
    longest_first,
    pending,
    run_cell,
    section_code,
)
from benchmarks.reproduce.report import status_markdown  # noqa: E402

#: Cells at once on the default thread pool (the 2-core machine).
THREADS = 2


@task(name="reproduce-cell", retries=0, persist_result=False, log_prints=False)
def reproduce_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One cell's record (its section's ``run``; a failure is recorded, never raised)."""
    return run_cell(cell, reproduction.run_any)


@flow(name="privfair-reproduce", persist_result=False,
      task_runner=ThreadPoolTaskRunner(max_workers=THREADS))
def reproduce_papers(mode: Literal["quick", "full"] = "full",
                     sections: list[str] | None = None, out: str | None = None,
                     dask_address: str | None = None) -> str:
    """Run the reproduction's pending cells as tasks, then write its report.

    Parameters
    ----------
    mode : {"quick", "full"}
        ``full``: the papers' grids (hours); ``quick``: fewer seeds.
    sections : list of str, optional
        Sections to run (``benchmarks/reproduce/cli.py: SECTIONS``); all when empty.
    out : str, optional
        Output folder (default ``benchmarks/reproduce/results/<mode>``, the CLI's).
    dask_address : str, optional
        A Dask scheduler's address: cells run there instead of on the thread pool.

    Returns
    -------
    str
        The path of ``report.html``.
    """
    log = get_run_logger()
    begin = time.perf_counter()
    folder = Path(out) if out else reproduction.RESULTS / mode
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.jsonl"
    cells_by_section = reproduction.plan(mode, sections or None)
    expected = reproduction.expected_seconds(mode)
    code = code_version()
    codes = {name: section_code(name) for name, _ in cells_by_section}
    todo = longest_first(pending([c for _, cells in cells_by_section for c in cells],
                                 load_results(results), code=codes), expected)
    log.info("reproduction (%s): %d cells pending", mode, len(todo))
    if dask_address:
        from prefect_dask import DaskTaskRunner

        from privfair.release.tabular.dask_engine import check_dask_address, security

        check_dask_address(dask_address)
        with DaskTaskRunner(address=dask_address,
                            client_kwargs={"security": security(dask_address)}) as runner:
            futures = [runner.submit(reproduce_cell, parameters={"cell": c}) for c in todo]
            _collect(futures, results, log, codes)
    else:
        _collect([reproduce_cell.submit(c) for c in todo], results, log, codes)
    document = reproduction.write_report(mode, cells_by_section, folder,
                                         wall_s=time.perf_counter() - begin, code=code,
                                         section_codes=codes)
    report = folder / "report.html"
    # Only the run's status: the verdicts read the real rows, so they stay in the report
    create_markdown_artifact(
        key="privfair-reproduce", description="the papers reproduced: cells per section",
        markdown=f"Report (verdicts and numbers): `{report}`\n\n" + status_markdown(document))
    return str(report)


def _collect(futures: list, results: Path, log: Any, codes: dict[str, str]) -> None:
    # Only the flow appends, as each task finishes: one writer, and a killed run keeps
    # every finished cell. A failure's message and traceback go to results.jsonl, not to
    # Prefect's logs: they may quote values computed from the real rows.
    for future in as_completed(futures):
        record = future.result()
        record["code"] = codes[record["section"]]
        append_record(results, record)
        log.info(describe(record, detail=False))
