"""Cells, the resumable results log, verdicts and paper tables (shared by every section).

A *cell* is one (paper table, setting, seed) run. Each finished cell is appended to
``results.jsonl`` as one JSON line; a later run skips the cells already there, so an
interrupted run resumes where it stopped. Evaluation reads real data: nothing here is a
privacy-protected release.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1]
ROOT = BENCHMARKS.parent
PAPER_TABLES = Path(__file__).resolve().parent / "paper_tables"
for _path in (str(ROOT), str(BENCHMARKS)):  # the benchmark scripts import ``_common``
    if _path not in sys.path:
        sys.path.insert(0, _path)

VERDICTS = ("within", "better", "worse", "not comparable")


def cell(section: str, setting: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A cell: its section, setting and seed, and a stable id built from them."""
    key = ",".join(f"{k}={setting[k]}" for k in sorted(setting))
    return {"section": section, "id": f"{section}|{key}|seed={seed}", "setting": dict(setting),
            "seed": seed}


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    """Finished cells of ``results.jsonl`` by id (a torn last line is ignored)."""
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[record["id"]] = record
    return done


def run_cell(c: Mapping[str, Any], runner: Callable[[Mapping[str, Any]], dict]
             ) -> dict[str, Any]:
    """Run one cell and return its record (never raises: a failure is recorded).

    Parameters
    ----------
    c : mapping
        The cell (see :func:`cell`).
    runner : callable
        Its section's ``run``: the cell's metrics.

    Returns
    -------
    dict
        The cell with ``status`` (``ok`` or ``failed``), ``error``, ``metrics``, ``wall_s``
        and, for a failure, ``traceback``.
    """
    start = time.perf_counter()
    trace = None
    try:
        metrics, status, error = runner(c), "ok", None
    except Exception as exc:  # noqa: BLE001  (a failed cell is reported, not fatal)
        metrics, status = {}, "failed"
        error = f"{type(exc).__name__}: {exc}"
        trace = traceback.format_exc()
    record = {**c, "status": status, "error": error, "metrics": metrics,
              "wall_s": round(time.perf_counter() - start, 2)}
    if trace:
        record["traceback"] = trace
    return record


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append one finished cell to ``results.jsonl`` (one JSON line, flushed on close)."""
    with path.open("a") as handle:
        handle.write(json.dumps(record, default=_json_default) + "\n")


def pending(cells: Sequence[Mapping[str, Any]], done: Mapping[str, Mapping[str, Any]], *,
            retry_failed: bool = True) -> list[Mapping[str, Any]]:
    """The cells still to run: not in ``done``, or failed there when ``retry_failed``."""
    return [c for c in cells if c["id"] not in done
            or (done[c["id"]]["status"] != "ok" and retry_failed)]


def describe(record: Mapping[str, Any], *, detail: bool = True) -> str:
    """One log line for a finished cell; without ``detail``, an error only by its type (its
    message may quote values computed from the real rows)."""
    error = record["error"]
    if error and not detail:
        error = error.split(":", 1)[0]
    return (f"[{record['wall_s']:7.1f} s] {record['status']:6s} {record['id']}"
            + (f"  ({error})" if error else ""))


def longest_first(cells: Sequence[Mapping[str, Any]], expected_s: Mapping[str, float]
                  ) -> list[Mapping[str, Any]]:
    """The cells in the order a pool should start them.

    Longest first by ``expected_s`` (seconds by id; unknown cells count as longest), so no
    long cell is left alone at the end; ties by seed, so a run without timings (a first
    ``--full``) gives every row its seed 0 before any row its seed 1.
    """
    return sorted(cells, key=lambda c: (-expected_s.get(c["id"], math.inf), c["seed"]))


def _one_thread_per_worker() -> None:
    # Two worker processes share two cores: a BLAS or torch pool per worker would
    # oversubscribe them. torch reads OMP_NUM_THREADS when a cell first imports it.
    import os

    os.environ["OMP_NUM_THREADS"] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def run_cells(cells: Sequence[Mapping[str, Any]], runner: Callable[[Mapping[str, Any]], dict],
              path: Path, *, retry_failed: bool = True, log=print, workers: int = 1,
              expected_s: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Run each cell not yet in ``path`` and append its record; return all records.

    A cell that raises is recorded with ``status: failed`` and the error, and is run again
    by the next invocation when ``retry_failed``.

    Parameters
    ----------
    cells : sequence of mapping
        The cells, in the order of the returned records.
    runner : callable
        A cell's metrics; with ``workers > 1`` a module-level function (it is pickled).
    path : Path
        ``results.jsonl``: read first (finished cells are skipped), appended to by this
        process only, one line per cell as it finishes.
    retry_failed : bool
        Run again the cells recorded as failed.
    log : callable
        Receives one line per finished cell, and a failed cell's traceback.
    workers : int
        Processes running cells at once (one BLAS/torch thread each). 1 runs them here, in
        order.
    expected_s : mapping of str to float, optional
        Seconds a cell took before, by id: with ``workers > 1`` cells start in the order of
        :func:`longest_first`.

    Returns
    -------
    list of dict
        One record per cell, in the order of ``cells``.
    """
    done = load_results(path)
    todo = pending(cells, done, retry_failed=retry_failed)

    def finish(record: dict[str, Any]) -> None:
        if record.get("traceback"):
            log(record["traceback"])
        record = {k: v for k, v in record.items() if k != "traceback"}
        append_record(path, record)
        log(describe(record))
        done[record["id"]] = record

    if workers <= 1 or len(todo) <= 1:
        for c in todo:
            finish(run_cell(c, runner))
    else:
        import concurrent.futures as cf
        import multiprocessing

        todo = longest_first(todo, expected_s or {})
        # forkserver: workers fork from a fresh single-threaded server, never from a caller
        # that runs threads (a Prefect test harness, torch), which could fork a held lock.
        with cf.ProcessPoolExecutor(max_workers=workers,
                                    mp_context=multiprocessing.get_context("forkserver"),
                                    initializer=_one_thread_per_worker) as pool:
            futures = {pool.submit(run_cell, c, runner): c for c in todo}
            for future in cf.as_completed(futures):
                try:
                    record = future.result()
                except Exception as exc:  # noqa: BLE001  (a worker died: the cell failed)
                    record = {**futures[future], "status": "failed", "metrics": {},
                              "error": f"{type(exc).__name__}: {exc}", "wall_s": 0.0}
                finish(record)
    return [done[c["id"]] for c in cells]


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def mean_sd(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean, sample sd (0 for one value) and count of the finite values (nan, nan, 0 if none)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return math.nan, math.nan, 0
    sd = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return statistics.fmean(finite), sd, len(finite)


def verdict(ours: float, ours_sd: float, paper: float | None, paper_sd: float | None = None,
            *, better: str | None = None, rel_tol: float = 0.1, abs_tol: float = 0.0
            ) -> tuple[str, str]:
    """Compare our mean with the paper's number; returns ``(verdict, why)``.

    The paper's spread is its sd when it reports one, else ``rel_tol`` of its value (at
    least ``abs_tol``); it is combined with our sd (``sqrt(a² + b²)``). Within that spread
    the verdict is ``within``; outside it ``better`` or ``worse`` by ``better`` (``"higher"``,
    ``"lower"``, ``"abs_lower"`` for a disparity, or None when only agreement counts, which
    makes any gap ``worse``). A missing number on either side is ``not comparable``.

    Parameters
    ----------
    ours, ours_sd : float
        Our mean and sd over seeds (sd 0 for one seed).
    paper, paper_sd : float or None
        The paper's number and its reported sd.
    better : {"higher", "lower", "abs_lower"} or None
        Which direction is an improvement.
    rel_tol, abs_tol : float
        Spread assumed when the paper gives no sd.

    Returns
    -------
    tuple of str
        The verdict (one of :data:`VERDICTS`) and a one-line reason.
    """
    if paper is None or not _finite(paper):
        return "not comparable", "the paper reports no number for this cell"
    if not _finite(ours):
        return "not comparable", "no finite result of ours"
    have_sd = paper_sd is not None and _finite(paper_sd)
    spread = paper_sd if have_sd else max(rel_tol * abs(paper), abs_tol)
    spread = max(math.hypot(spread, ours_sd if _finite(ours_sd) else 0.0), abs_tol)
    gap = ours - paper
    basis = "paper sd" if have_sd else f"{rel_tol:.0%} of the paper's value"
    if abs(gap) <= spread:
        return "within", f"|ours − paper| = {abs(gap):.3g} ≤ {spread:.3g} ({basis} ⊕ our sd)"
    if better == "higher":
        improved = gap > 0
    elif better == "lower":
        improved = gap < 0
    elif better == "abs_lower":
        improved = abs(ours) < abs(paper)
    else:
        improved = False
    word = "better" if improved else "worse"
    return word, f"ours − paper = {gap:+.3g}, outside ±{spread:.3g} ({basis} ⊕ our sd)"


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def paper_table(name: str) -> list[dict[str, Any]]:
    """Rows of ``paper_tables/<name>.csv`` with ``value``/``sd`` as floats (None if blank)."""
    with (PAPER_TABLES / f"{name}.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in ("value", "sd"):
            text = (row.get(key) or "").strip()
            row[key] = float(text) if text else None
    return rows


def paper_json(name: str) -> dict[str, Any]:
    """``paper_tables/<name>.json``."""
    return json.loads((PAPER_TABLES / f"{name}.json").read_text())


def compare_row(setting: str, metric: str, values: Sequence[float | None],
                paper: Mapping[str, Any] | None, *, better: str | None = None,
                rel_tol: float = 0.1, abs_tol: float = 0.0, why: str | None = None,
                paper_accounting: Sequence[float | None] | None = None) -> dict[str, Any]:
    """One row of a section's verdict table: ours (mean ± sd over seeds) beside the paper's.

    ``paper_accounting`` holds the same metric run at the paper's own neighbouring relation
    and sensitivity (the paper's analysis, not our guarantee), or, where a section says so in
    its ``accounting_label``, under the paper's own protocol; ``why`` is a measured
    explanation of the gap: it is appended to the verdict's reason, and a row outside the
    paper's spread that has one is marked ``explained``.
    """
    mean, sd, n = mean_sd(values)
    value = paper["value"] if paper else None
    paper_sd = paper["sd"] if paper else None
    word, reason = verdict(mean, sd, value, paper_sd, better=better, rel_tol=rel_tol,
                           abs_tol=abs_tol)
    row = {"setting": setting, "metric": metric, "paper": value, "paper_sd": paper_sd,
           "source": paper.get("source") if paper else None, "ours": mean, "ours_sd": sd,
           "n": n, "verdict": word, "why": reason, "explained": False}
    if why is not None:
        explain(row, why)
    if paper_accounting is not None:
        pa_mean, pa_sd, pa_n = mean_sd(paper_accounting)
        pa_word, _ = verdict(pa_mean, pa_sd, value, paper_sd, better=better, rel_tol=rel_tol,
                             abs_tol=abs_tol)
        row.update(paper_accounting=pa_mean, paper_accounting_sd=pa_sd,
                   paper_accounting_verdict=pa_word)
    return row


def explain(row: dict[str, Any], why: str) -> dict[str, Any]:
    """Append a measured explanation to a row outside the paper's spread, marking it.

    A row within the spread needs none and is left as it is.
    """
    if row["verdict"] in ("better", "worse"):
        row["why"] = f"{row['why']}; {why}"
        row["explained"] = True
    return row


def failed_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The failed cells of a section, for its report."""
    return [{"id": r["id"], "error": r["error"]} for r in records if r["status"] != "ok"]


def ok_metrics(records: Sequence[Mapping[str, Any]], **setting: Any) -> list[dict[str, Any]]:
    """Metrics of the successful cells whose setting matches ``setting``."""
    return [r["metrics"] for r in records if r["status"] == "ok"
            and all(r["setting"].get(k) == v for k, v in setting.items())]


def png_of(fig) -> str:
    """A matplotlib figure as base64 PNG (closed afterwards), for inline ``<img>``."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()
