"""``python -m benchmarks.reproduce --quick | --full [--only SECTION ...] [--out DIR]``."""

from __future__ import annotations

import argparse
import datetime
import importlib
import sys
import time
from pathlib import Path

from .core import load_results, run_cells
from .report import summary, write

SECTIONS = ("prefair", "safes", "cathist", "xu_causal", "xu_gan", "xu_cfgan", "xu_pflr",
            "xu_dpsgd", "xu_dpne")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true", help="≤ 15 min on 2 cores, fewer seeds")
    mode.add_argument("--full", action="store_true", help="the papers' grids (hours)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, metavar="SECTION",
                        help=f"sections to run, of {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default benchmarks/reproduce/results/<mode>)")
    args = parser.parse_args(argv)
    mode_name = "quick" if args.quick else "full"
    out = args.out or Path(__file__).resolve().parent / "results" / mode_name
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "results.jsonl"
    begin = time.perf_counter()
    sections = []
    for name in args.only or SECTIONS:
        module = importlib.import_module(f"{__package__}.{name}")
        cells = module.cells(mode_name)
        start = time.perf_counter()
        print(f"== {module.TITLE}: {len(cells)} cells", file=sys.stderr, flush=True)
        records = run_cells(cells, module.run, log_path,
                            log=lambda text: print(text, file=sys.stderr, flush=True))
        done = load_results(log_path)
        section = module.summarize(records, mode_name)
        section["cells"] = len(cells)
        section["wall_s"] = sum(done[c["id"]]["wall_s"] for c in cells if c["id"] in done)
        section["run_wall_s"] = time.perf_counter() - start
        sections.append(section)
    document = {"mode": mode_name, "generated": datetime.datetime.now().isoformat(
                    timespec="seconds"), "wall_s": time.perf_counter() - begin,
                "warning": "evaluation output: reads real data, not privacy-protected",
                "cells_wall_s": sum(s["wall_s"] for s in sections),
                "sections": sections, "summary": summary(sections)}
    write(out, document)
    print(f"report: {out / 'report.html'}", file=sys.stderr)
    return 1 if any(s["failed"] for s in sections) else 0
