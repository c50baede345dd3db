"""``python -m benchmarks.reproduce --quick | --full [--only SECTION ...] [--out DIR]``.

The pieces a driver needs are public: :func:`plan` (the cells of each section),
:func:`run_any` (one cell, whatever its section), :func:`expected_seconds` (earlier cell
times, to start the longest first) and :func:`write_report` (the report from
``results.jsonl``). This CLI runs the cells in a process pool; ``benchmarks/reproduce/flow.py`` runs
them as Prefect tasks.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from .core import (
    NOT_RUN,
    cells_code,
    code_version,
    git,
    load_results,
    one_row_per_paper_cell,
    run_cells,
    section_code,
)
from .report import summary, write

SECTIONS = ("prefair", "safes", "cathist", "xu_causal", "xu_gan", "xu_cfgan", "xu_pflr",
            "xu_dpsgd", "xu_dpne", "xu_causal_numeric")
#: Where each mode writes by default (its results.jsonl also times the cells of a run
#: elsewhere, so the longest start first).
RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("quick", "full")


def section_module(name: str) -> ModuleType:
    """The section's module (``cells``, ``run``, ``summarize``, ``TITLE``)."""
    if name not in SECTIONS:
        raise ValueError(f"section: expected one of {list(SECTIONS)}, got {name!r}")
    return importlib.import_module(f"{__package__}.{name}")


def plan(mode: str, sections: list[str] | tuple[str, ...] | None = None
         ) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each section's cells in ``mode``, in the order of ``SECTIONS``.

    Parameters
    ----------
    mode : {"quick", "full"}
        ``quick``: fewer seeds and lighter settings; ``full``: the papers' grids.
    sections : sequence of str, optional
        A subset of :data:`SECTIONS` (all when None).

    Returns
    -------
    list of (str, list of dict)
        Section name and its cells.
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {list(MODES)}, got {mode!r}")
    unknown = sorted(set(sections or ()) - set(SECTIONS))
    if unknown:
        raise ValueError(f"sections: {unknown} not among {list(SECTIONS)}")
    names = [n for n in SECTIONS if sections is None or n in sections]
    return [(name, section_module(name).cells(mode)) for name in names]


def run_any(c: dict[str, Any]) -> dict[str, Any]:
    """Run one cell with its own section's ``run`` (picklable, for a process pool)."""
    return section_module(c["section"]).run(c)


def expected_seconds(mode: str) -> dict[str, float]:
    """Seconds each cell took in the default ``results/<mode>/results.jsonl`` (by id)."""
    return {key: record["wall_s"] for key, record in
            load_results(RESULTS / mode / "results.jsonl").items()}


def write_report(mode: str, cells_by_section: list[tuple[str, list[dict[str, Any]]]],
                 out: Path, *, wall_s: float, report_only: bool = False,
                 code: str | None = None, section_codes: dict[str, str] | None = None
                 ) -> dict[str, Any]:
    """Summarise every section from ``out/results.jsonl``; write report.html and .json.

    A cell missing from the log is listed as not run (its own column, beside the failed
    cells), so an incomplete run never reads as a complete report. Rows that compare one paper cell are merged into one
    (:func:`~benchmarks.reproduce.core.one_row_per_paper_cell`). ``provenance`` records
    the code that wrote the report and, for ``report_only``, that the cells come from an
    earlier run (the last commit of ``results.jsonl``, when it is in git). ``code`` is the
    commit the run began at (a commit made while it runs does not change it), and
    ``section_codes`` each section's :func:`~benchmarks.reproduce.core.section_code` then;
    by default this checkout's, now. A section's ``code`` is its version, and
    ``cells_code`` counts its finished cells by the version they ran under.

    Returns
    -------
    dict
        The report's document (``report.json``).
    """
    done = load_results(out / "results.jsonl")
    sections = []
    for name, cells in cells_by_section:
        module = section_module(name)
        records = [done.get(c["id"]) or {**c, "status": "failed", "error": NOT_RUN,
                                          "metrics": {}, "wall_s": 0.0} for c in cells]
        section = module.summarize(records, mode)
        section["rows"] = one_row_per_paper_cell(section["rows"])
        section["cells"] = len(cells)
        section["wall_s"] = sum(r["wall_s"] for r in records)
        section["code"] = (section_codes or {}).get(name) or section_code(name)
        section["cells_code"] = cells_code(r for r in records if r.get("status") == "ok")
        sections.append(section)
    origin = provenance(out / "results.jsonl", report_only=report_only, code=code)
    document = {"mode": mode, "generated": datetime.datetime.now().isoformat(
                    timespec="seconds"), "wall_s": wall_s,
                "warning": "evaluation output: reads real data, not privacy-protected",
                "cells_wall_s": sum(s["wall_s"] for s in sections),
                "provenance": origin, "sections": sections,
                "summary": summary(sections, report_code=origin["report_code"])}
    write(out, document)
    return document


def provenance(results: Path, *, report_only: bool, code: str | None = None
               ) -> dict[str, Any]:
    """Which code wrote the report and where its cells come from.

    Parameters
    ----------
    results : Path
        The ``results.jsonl`` the report reads.
    report_only : bool
        Whether this invocation ran no cell (the cells are an earlier run's).
    code : str, optional
        The code version the invocation ran its cells under (default: this checkout's now).

    Returns
    -------
    dict
        ``report_code``: this checkout's :func:`~benchmarks.reproduce.core.code_version`;
        ``cells``: ``"run by this invocation"`` or, for a report-only pass, the last commit
        that changed ``results.jsonl`` (hash, date, subject) when git knows the file.
    """
    here = Path(__file__).resolve().parent
    out: dict[str, Any] = {"report_code": code or code_version(), "report_only": report_only}
    if not report_only:
        out["cells"] = ("run by this invocation (cells already in results.jsonl under the same "
                        "code are reused; see each section's cells_code)")
        return out
    last = git("log", "-1", "--format=%H%x09%aI%x09%s", "--", str(results.resolve()),
                cwd=results.resolve().parent)
    changed = git("status", "--porcelain", "--", str(results.resolve()),
                  cwd=results.resolve().parent)
    if changed:  # not the committed cells: say so rather than name that commit
        out["cells"] = {"from": "earlier runs, not as committed (results.jsonl changed since); "
                                "each section's cells_code names the code its cells ran under"}
    elif last:
        commit, date, subject = last.split("\t", 2)
        out["cells"] = {"from": "an earlier run, reused as committed", "commit": commit,
                        "date": date, "subject": subject}
        behind = git("rev-list", "--count", f"{commit}..HEAD", cwd=here)
        if behind is not None:
            out["cells"]["commits_between_cells_and_report_code"] = int(behind)
    else:
        out["cells"] = {"from": "an earlier run (results.jsonl not in git)"}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="≈ 7 min on 2 cores, fewer seeds")
    mode.add_argument("--full", action="store_true", help="the papers' grids (hours)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, metavar="SECTION",
                        help=f"sections to run, of {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default benchmarks/reproduce/results/<mode>)")
    parser.add_argument("--workers", type=int, default=2,
                        help="processes running cells at once (default 2; 1 runs in order)")
    parser.add_argument("--reuse-stale", action="store_true",
                        help="reuse cells recorded under other code (default: run them "
                             "again); the report lists each section's cell code versions")
    parser.add_argument("--report-only", action="store_true",
                        help="run no cell: write the report from results.jsonl as it stands "
                             "(a run in progress; cells not run yet are listed as not run)")
    args = parser.parse_args(argv)
    mode_name = "quick" if args.quick else "full"
    out = args.out or RESULTS / mode_name
    out.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    cells_by_section = plan(mode_name, args.only)
    for name, cells in cells_by_section:
        print(f"== {section_module(name).TITLE}: {len(cells)} cells", file=sys.stderr,
              flush=True)
    # At the start: a commit made while the cells run changes nothing.
    code = code_version()
    codes = {name: section_code(name) for name, _ in cells_by_section}
    if not args.report_only:
        run_cells([c for _, cells in cells_by_section for c in cells], run_any,
                  out / "results.jsonl", workers=args.workers,
                  expected_s=expected_seconds(mode_name),
                  code=codes, reuse_stale=args.reuse_stale,
                  log=lambda text: print(text, file=sys.stderr, flush=True))
    document = write_report(mode_name, cells_by_section, out,
                            wall_s=time.perf_counter() - begin, report_only=args.report_only,
                            code=code, section_codes=codes)
    print(f"report: {out / 'report.html'} ({document['wall_s']:.0f} s)", file=sys.stderr)
    return 1 if any(s["failed"] for s in document["sections"]) else 0
