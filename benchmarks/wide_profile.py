"""Stage profile of a wide-table release (issue 15): wall seconds and peak RSS per stage.

Runs one ``--no-prefect`` release in this process (the runner's stages, in order) on the
generated 41-attribute table (``benchmarks/gen_table.py``) and records, for each stage the
runner reports, its wall seconds, its own peak RSS (the kernel's high-water mark is reset at
each stage start through ``/proc/self/clear_refs``), the RSS at its end and the CPU seconds
of the process (all threads; steadier than wall time on a loaded machine). ``--cprofile``
adds the top functions by cumulative time (cProfile inflates Python-heavy code ~2x: compare
shares). The 1-minute load average is recorded before and after, as the machine is shared.

    python benchmarks/wide_profile.py --method prefair-greedy --cprofile \
        --out benchmarks/results/issue15_wide_profile_greedy.json
    python benchmarks/wide_profile.py --method aim --max-time 240
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

from _common import emit
from gen_table import write


def _status(field: str) -> float:
    """A ``/proc/self/status`` memory field, in MB (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
    except OSError:  # not Linux, or not allowed: peaks then accumulate
        pass


class StageClock:
    """A runner ``progress`` hook recording wall time and peak RSS per stage."""

    def __init__(self) -> None:
        self.stages: list[dict] = []
        self._name: str | None = None
        self._start = time.perf_counter()
        self._cpu = time.process_time()
        self.fractions: list[tuple[float, str, float]] = []

    def __call__(self, stage: str, fraction: float) -> None:
        now = time.perf_counter()
        self.fractions.append((round(now, 3), stage, round(fraction, 4)))
        if stage == self._name:
            return
        self._close(now)
        self._name, self._start, self._cpu = stage, now, time.process_time()
        _reset_peak()

    def _close(self, now: float) -> None:
        if self._name is not None:
            self.stages.append({"stage": self._name, "wall_s": round(now - self._start, 3),
                                "cpu_s": round(time.process_time() - self._cpu, 3),
                                "peak_rss_mb": round(_status("VmHWM"), 1),
                                "rss_end_mb": round(_status("VmRSS"), 1)})

    def finish(self) -> None:
        self._close(time.perf_counter())
        self._name = None


def _progress_honesty(fractions: list[tuple[float, str, float]]) -> dict:
    """How far the reported fraction strays from the elapsed share of the run's time."""
    if len(fractions) < 2:
        return {}
    t0, t1 = fractions[0][0], fractions[-1][0]
    worst = max(abs(f - (t - t0) / max(t1 - t0, 1e-9)) for t, _, f in fractions)
    monotone = all(b[2] >= a[2] for a, b in zip(fractions, fractions[1:], strict=False))
    return {"updates": len(fractions), "monotone": monotone,
            "max_gap_fraction_vs_elapsed": round(worst, 3)}


def _top(profile: cProfile.Profile, limit: int = 25) -> list[dict]:
    stats = pstats.Stats(profile)
    rows = stats.stats  # type: ignore[attr-defined]
    ranked = sorted(((v[3], v[2], k) for k, v in rows.items()
                     if "/privfair/" in k[0] or "numpy" in k[0]), reverse=True)
    return [{"function": f"{Path(k[0]).parent.name}/{Path(k[0]).name}:{k[2]}",
             "cum_s": round(cum, 3), "own_s": round(own, 3)} for cum, own, k in ranked[:limit]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=299_000)
    parser.add_argument("--attributes", type=int, default=41)
    parser.add_argument("--method", default="prefair-greedy")
    parser.add_argument("--max-time", type=float, default=None)
    parser.add_argument("--table", type=Path, help="reuse a generated table folder")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--label", default="", help="free text stored with the figures")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pf-wprof-") as tmp:
        work = Path(tmp)
        # a throw-away lifetime ledger: benchmark releases must not spend a real budget
        os.environ["PRIVFAIR_REGISTRY"] = str(work / "registry")
        table = args.table or work / "table"
        if not (table / "contract.yaml").exists():
            write(table, args.rows, args.attributes, seed=0, parquet=True)
        data = next(p for p in (table / "data.parquet", table / "data.csv") if p.exists())
        from privfair.release.run import release_table as run_release

        params = {"contract": str(table / "contract.yaml"), "data": str(data),
                  "epsilon": 1.0, "delta": 1e-6, "method": args.method,
                  "out": str(work / "store"), "work_dir": str(work / "work"),
                  "max_time_s": args.max_time}
        clock = StageClock()
        profiler = cProfile.Profile() if args.cprofile else None
        _reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        run_release(params, progress=clock)
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        clock.finish()
    document = {"benchmark": "wide_profile", "label": args.label, "method": args.method,
                "rows": args.rows, "attributes": args.attributes, "max_time_s": args.max_time,
                "cprofile": bool(profiler), "run_wall_s": round(wall, 2),
                "run_cpu_s": round(cpu, 2),
                "peak_rss_mb": round(max(s["peak_rss_mb"] for s in clock.stages), 1),
                "stages": clock.stages, "progress": _progress_honesty(clock.fractions),
                "load_avg_before": load_before, "load_avg_after": os.getloadavg(),
                "python": sys.version.split()[0]}
    if profiler:
        document["note"] = "cProfile inflates times ~2x; compare shares, not absolute seconds"
        document["top"] = _top(profiler)
    emit(document, args.out)


if __name__ == "__main__":
    main()
