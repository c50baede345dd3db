"""Wall and CPU time of the GAN reproduction cells (Xu ch. 6 ``xu_gan``, ch. 7 ``xu_cfgan``).

    python benchmarks/gan_cell_speed.py [--grid [--sections S ...]] [--seeds 0 ...]
                                        [--tree PATH] [--log FILE] [--out FILE]

Each cell runs ``benchmarks.reproduce.<section>.run`` in a fresh process with one torch / BLAS
thread, as a ``--full`` pool worker does (``OMP_NUM_THREADS=1``). The process imports torch,
builds an optimiser (Adam's first construction imports ``torch._dynamo``, ~1.5 s) and loads the
section's data before the clock starts: a pool worker pays those once, not per cell. Reported
per cell: ``wall_s`` and ``cpu_s`` (the process's user + system time over the cell; the
machine is shared, so CPU time is the steadier figure), the 1-minute load average before and
after, and the cell's metrics (to compare runs of two code versions seed by seed).

By default one ``xu_gan`` cell (FairGAN+, ``xu2021``, ε = 1: DP-SGD with η and D3 clipped
jointly with D1) and one ``xu_cfgan`` cell (CFGAN(SE)). ``--grid`` times one seed of every
distinct configuration of both sections' ``--full`` grids and estimates each grid's wall time
on 2 workers (longest first, as the CLI schedules) from those per-configuration times.
``--tree`` runs another checkout's code (e.g. a ``git worktree`` of the commit before a
change), so two versions are timed on the same machine in one sitting: run both at once and
compare CPU seconds (and the metrics: a change meant to be exact must give the same ones).
``--log`` appends each cell's record as it finishes, so a long ``--grid`` run that is stopped
still leaves its cells.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, emit

#: (section, setting) of the default cells
DEFAULT_CELLS = (
    ("xu_gan", {"method": "fairgan-plus", "setting": "xu2021", "epsilon": "1", "epochs": 0}),
    ("xu_cfgan", {"variant": "cfgan-se", "epsilon": "inf", "epochs": 0}),
)
SECTIONS = ("xu_gan", "xu_cfgan")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(section: str, setting: dict[str, Any], seed: int) -> None:
    import importlib

    import torch

    module = importlib.import_module(f"benchmarks.reproduce.{section}")
    from benchmarks.reproduce.core import cell

    torch.optim.Adam(torch.nn.Linear(1, 1).parameters())  # the one-off torch._dynamo import
    module._data()
    c = cell(module.NAME, setting, seed)
    load_before = os.getloadavg()[0]
    cpu, wall = _cpu_seconds(), time.perf_counter()
    metrics = module.run(c)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    print(json.dumps({"id": c["id"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                      "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                           / 1024),
                      "metrics": metrics}, default=float))


def run_cell(tree: Path, section: str, setting: dict[str, Any], seed: int) -> dict[str, Any]:
    """One cell in a fresh process on ``tree``'s code."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", section,
         json.dumps(setting), str(seed)],
        capture_output=True, text=True, cwd=tree, env=env)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        return {"section": section, "setting": setting, "seed": seed, "error": lines[-1]}
    return {"section": section, "setting": setting, "seed": seed,
            **json.loads(result.stdout.strip().splitlines()[-1])}


def full_grid(tree: Path, section: str) -> list[dict[str, Any]]:
    """The cells of ``section``'s ``--full`` grid in ``tree``'s code."""
    script = ("import json, sys; from benchmarks.reproduce import " + section
              + " as m; print(json.dumps(m.cells('full')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tree, env=env, check=True).stdout
    return json.loads(out)


def grid_estimate(records: list[dict[str, Any]], grid: dict[str, list[dict[str, Any]]],
                  workers: int) -> dict[str, Any]:
    """Each --full grid's serial seconds (every cell at its configuration's measured time)
    and its wall time on ``workers`` idle cores, longest first; both grids in one pool."""
    def key(setting: dict[str, Any]) -> str:
        return json.dumps(setting, sort_keys=True)

    out: dict[str, Any] = {}
    pooled: list[float] = []
    for section, cells in grid.items():
        timed: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            if r["section"] == section and "cpu_s" in r:
                timed.setdefault(key(r["setting"]), []).append(r)
        wall, cpu = [], []
        for c in cells:
            runs = timed.get(key(c["setting"]))
            if runs:
                wall.append(sum(r["wall_s"] for r in runs) / len(runs))
                cpu.append(sum(r["cpu_s"] for r in runs) / len(runs))
        pooled.extend(cpu)
        out[section] = {"cells": len(cells), "cells_timed": len(cpu),
                        "serial_wall_s": round(sum(wall), 1),
                        "serial_cpu_s": round(sum(cpu), 1),
                        f"wall_s_on_{workers}_idle_cores": round(makespan(cpu, workers), 1)}
    out[f"both_sections_wall_s_on_{workers}_idle_cores"] = round(makespan(pooled, workers), 1)
    out["note"] = ("cells at their configuration's measured CPU seconds (one seed timed), "
                   "scheduled longest first; on a shared machine the wall time grows with "
                   "its load")
    return out


def makespan(durations: list[float], workers: int) -> float:
    """Wall time of ``durations`` on ``workers`` processes, longest first (greedy)."""
    loads = [0.0] * workers
    for d in sorted(durations, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + d)
    return max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", action="store_true",
                        help="every distinct configuration of both --full grids, one seed")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="with --grid: whose grids (one process per section can run "
                             "at once, as 2 workers would)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="the checkout whose code runs (default: this one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--log", type=Path,
                        help="append each cell's record here as it finishes (JSON lines)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        section, setting, seed = args.worker
        worker(section, json.loads(setting), int(seed))
        return
    tree = args.tree.resolve()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=tree).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "privfair",
                                 "benchmarks"], capture_output=True, text=True,
                                cwd=tree).stdout.strip())
    plan: list[tuple[str, dict[str, Any]]] = []
    grid: dict[str, list[dict[str, Any]]] = {}
    if args.grid:
        for section in args.sections:
            grid[section] = full_grid(tree, section)
            for c in grid[section]:
                if (section, c["setting"]) not in plan:
                    plan.append((section, c["setting"]))
    else:
        plan.extend(DEFAULT_CELLS)
    started = time.perf_counter()
    records = []
    for section, setting in plan:
        for seed in args.seeds:
            records.append(run_cell(tree, section, setting, seed))
            if args.log:
                with args.log.open("a") as handle:
                    handle.write(json.dumps({"code": rev, **records[-1]}, default=float)
                                 + "\n")
    document: dict[str, Any] = {
        "benchmark": "GAN reproduction cells (xu_gan, xu_cfgan): wall and CPU seconds per cell",
        "tree": str(tree), "code": rev + ("+dirty" if dirty else ""),
        "threads_per_cell": 1, "python": sys.version.split()[0], "cells": records,
        "total_wall_s": round(time.perf_counter() - started, 1)}
    if args.grid:
        document["grid_estimate"] = grid_estimate(records, grid, args.workers)
    emit(document, args.out)


if __name__ == "__main__":
    main()
