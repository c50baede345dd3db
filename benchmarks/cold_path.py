"""Cold-path benchmark (issue 15): a whole `privfair release` as a new user runs it.

Each case runs in a fresh process under ``/usr/bin/time -v`` (wall seconds, peak RSS), repeated
``--repeats`` times; the 1-minute load average is recorded before each run because the machine
is shared. Cases:

* ``gen1k-no-prefect`` / ``gen1k-prefect``: the generated 1,000-row x 21-attribute table
  (``benchmarks/gen_table.py``), ``--no-prefect`` and through Prefect (default);
* ``adult-no-prefect`` / ``adult-prefect``: the embedded Adult table;
* ``empty-flow``: a Prefect flow with one empty task, same environment, so that the Prefect
  path's overhead can be given as a ratio to what Prefect itself costs.

``--profile`` adds a cProfile of the ``gen1k-no-prefect`` case in a fresh process: cumulative
seconds of each pipeline stage and of the heavy imports, and the top functions.

    python benchmarks/cold_path.py --repeats 3 --profile
    python benchmarks/cold_path.py --cases gen1k-no-prefect --repeats 1
"""

from __future__ import annotations

import argparse
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit

PRIVFAIR = [sys.executable, "-m", "privfair.cli"]
EMPTY_FLOW = ("from prefect import flow, task\n"
              "@task\ndef nothing():\n    return 1\n"
              "@flow\ndef empty():\n    return nothing()\n"
              "empty()\n")
STAGES = ("load", "validate_input", "resolve_domains", "discretize", "measure_one_way", "select",
          "measure_selected", "fit_aim", "estimate", "sample", "fairness_transform",
          "validate_output", "publish", "build_report")


def _release_args(case: str, table: Path, out: Path) -> list[str]:
    args = ["release", "--epsilon", "1", "--delta", "1e-6", "--out", str(out / "store"),
            "--work-dir", str(out / "work")]
    if case.startswith("gen1k"):
        args += ["--contract", str(table / "contract.yaml"), "--data", str(table / "data.csv")]
    if case.endswith("no-prefect"):
        args.append("--no-prefect")
    return args


def _command(case: str, table: Path, out: Path) -> list[str]:
    if case == "empty-flow":
        return [sys.executable, "-c", EMPTY_FLOW]
    return PRIVFAIR + _release_args(case, table, out)


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ, DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("PREFECT_API_URL", None)
    # a throw-away lifetime ledger: repeated benchmark releases must not spend a real budget
    env.setdefault("PRIVFAIR_REGISTRY", str(home.parent / "privfair-registry"))
    # a loaded shared machine starts the ephemeral server slowly (default timeout: 20 s)
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    return env


def timed(command: list[str], env: dict[str, str]) -> dict:
    """Run under /usr/bin/time -v; wall and CPU seconds, peak RSS (MB), exit status, load."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True,
                            cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    cpu = [float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)",
                                         result.stderr)]
    record = {"wall_s": round(wall, 2), "peak_rss_mb": round(int(rss.group(1)) / 1024, 1)
              if rss else None, "rc": result.returncode, "load1_before": load,
              # user + system CPU seconds: steadier than wall time on a shared machine
              "cpu_s": round(sum(cpu), 2) if cpu else None}
    if result.returncode != 0:
        tail = [ln for ln in result.stderr.splitlines() if ln.strip()
                and not ln.startswith(("\t", "Command exited"))]
        record["error"] = tail[-1] if tail else "no output"
    return record


def profile(table: Path, work: Path, env: dict[str, str]) -> dict:
    """cProfile of one ``--no-prefect`` release of the generated table, summarised."""
    out = work / "profile.out"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "privfair.cli",
                    *_release_args("gen1k-no-prefect", table, work / "profiled")],
                   capture_output=True, cwd=ROOT, env=env, check=True)
    stats = pstats.Stats(str(out))
    rows = stats.stats  # type: ignore[attr-defined]
    total = max(v[3] for v in rows.values())
    by_name: dict[str, float] = {}
    imports: dict[str, float] = {}
    for (file, _line, func), (_cc, _nc, _tt, cum, _callers) in rows.items():
        if "/privfair/" in file and func in STAGES:
            by_name[func] = max(by_name.get(func, 0.0), cum)
        for package in ("great_expectations", "matplotlib", "networkx", "prefect"):
            if file.endswith(f"/{package}/__init__.py") and func == "<module>":
                imports[package] = max(imports.get(package, 0.0), cum)
    ranked = sorted(((v[3], k) for k, v in rows.items() if "/privfair/" in k[0]), reverse=True)
    top = [{"function": f"{Path(k[0]).name}:{k[2]}", "cum_s": round(c, 3)}
           for c, k in ranked[:15]]
    return {"note": "cProfile inflates times ~2x; compare shares, not absolute seconds",
            "total_s": round(total, 2),
            "stages_cum_s": {k: round(by_name[k], 3) for k in STAGES if k in by_name},
            "imports_cum_s": {k: round(v, 3) for k, v in imports.items()},
            "top_privfair": top}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=["gen1k-no-prefect", "gen1k-prefect",
                                                       "adult-no-prefect", "adult-prefect",
                                                       "empty-flow"])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).parent))
    from gen_table import write

    with tempfile.TemporaryDirectory(prefix="pf-cold-") as tmp:
        work = Path(tmp)
        table = work / "gen1k"
        write(table, 1000, 21, seed=0)
        env = _env(work / "prefect-home")
        runs: dict[str, list[dict]] = {case: [] for case in args.cases}
        for _ in range(args.repeats):  # interleaved, so load drifts hit every case alike
            for case in args.cases:
                runs[case].append(timed(_command(case, table, work / case), env))
        summary = {}
        for case, records in runs.items():
            ok = [r for r in records if r["rc"] == 0]
            summary[case] = {"min_wall_s": min((r["wall_s"] for r in ok), default=None),
                             "median_wall_s": sorted(r["wall_s"] for r in ok)[len(ok) // 2]
                             if ok else None,
                             "max_rss_mb": max((r["peak_rss_mb"] for r in ok), default=None)}
        flow = summary.get("empty-flow", {}).get("min_wall_s")
        for case in ("gen1k", "adult"):
            with_prefect = summary.get(f"{case}-prefect", {}).get("min_wall_s")
            without = summary.get(f"{case}-no-prefect", {}).get("min_wall_s")
            if flow and with_prefect and without:
                summary[f"{case}-prefect"]["prefect_overhead_s"] = round(
                    with_prefect - without, 2)
                summary[f"{case}-prefect"]["overhead_over_empty_flow"] = round(
                    (with_prefect - without) / flow, 2)
        document = {"benchmark": "cold_path", "cpus": os.cpu_count(),
                    "load_avg": os.getloadavg(), "summary": summary, "runs": runs}
        if args.profile:
            document["profile_gen1k_no_prefect"] = profile(table, work, env)
    emit(document, args.out)


if __name__ == "__main__":
    main()
