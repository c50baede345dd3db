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


def run_cells(cells: Sequence[Mapping[str, Any]], runner: Callable[[Mapping[str, Any]], dict],
              path: Path, *, retry_failed: bool = True, log=print) -> list[dict[str, Any]]:
    """Run each cell not yet in ``path`` and append its record; return all records.

    A cell that raises is recorded with ``status: failed`` and the error, and is run again
    by the next invocation when ``retry_failed``.
    """
    done = load_results(path)
    records = []
    for c in cells:
        previous = done.get(c["id"])
        if previous and (previous["status"] == "ok" or not retry_failed):
            records.append(previous)
            continue
        start = time.perf_counter()
        try:
            metrics, status, error = runner(c), "ok", None
        except Exception as exc:  # noqa: BLE001  (a failed cell is reported, not fatal)
            metrics, status = {}, "failed"
            error = f"{type(exc).__name__}: {exc}"
            log(traceback.format_exc())
        record = {**c, "status": status, "error": error, "metrics": metrics,
                  "wall_s": round(time.perf_counter() - start, 2)}
        with path.open("a") as handle:
            handle.write(json.dumps(record, default=_json_default) + "\n")
        log(f"[{record['wall_s']:7.1f} s] {status:6s} {c['id']}"
            + (f"  ({error})" if error else ""))
        records.append(record)
    return records


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
    and sensitivity (the paper's analysis, not our guarantee); ``why`` replaces the verdict's
    reason when the gap has a known explanation.
    """
    mean, sd, n = mean_sd(values)
    value = paper["value"] if paper else None
    paper_sd = paper["sd"] if paper else None
    word, reason = verdict(mean, sd, value, paper_sd, better=better, rel_tol=rel_tol,
                           abs_tol=abs_tol)
    row = {"setting": setting, "metric": metric, "paper": value, "paper_sd": paper_sd,
           "source": paper.get("source") if paper else None, "ours": mean, "ours_sd": sd,
           "n": n, "verdict": word, "why": reason if why is None or word == "within"
           else f"{reason}; {why}"}
    if paper_accounting is not None:
        pa_mean, pa_sd, pa_n = mean_sd(paper_accounting)
        pa_word, _ = verdict(pa_mean, pa_sd, value, paper_sd, better=better, rel_tol=rel_tol,
                             abs_tol=abs_tol)
        row.update(paper_accounting=pa_mean, paper_accounting_sd=pa_sd,
                   paper_accounting_verdict=pa_word)
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
