"""Cold-path benchmark (issue 15): a whole `privfair release` as a new user runs it.

Each case runs in a fresh process under ``/usr/bin/time -v`` (wall seconds, peak RSS), repeated
``--repeats`` times, interleaved; the 1-minute load average is recorded before each run
because the machine is shared. Cases:

* ``gen1k-no-prefect`` / ``gen1k-prefect``: the generated 1,000-row x 21-attribute table
  (``benchmarks/gen_table.py``), ``--no-prefect`` and through Prefect (default);
* ``adult-no-prefect`` / ``adult-prefect``: the embedded Adult table;
* ``empty-flow``: a Prefect flow with one empty task, same environment, so that the Prefect
  path's overhead can be given as a ratio to what Prefect itself costs;
* ``*-server``: the Prefect cases and the empty flow against an already running
  ``prefect server start`` (``PREFECT_API_URL`` set), as for a publisher who watches the UI.
  The benchmark starts that server once (its own ``PREFECT_HOME``, a free port) and stops it.

For each Prefect mode (``ephemeral``, ``server``) the summary gives the Prefect path's
overhead over ``--no-prefect`` and its ratio to the empty flow of the same mode and run.

``--profile`` adds, for ``gen1k-no-prefect``, ``gen1k-prefect`` and ``gen1k-prefect-server``
in fresh processes: a wall-clock timeline without profiler (``benchmarks/_timeline.py``: flow
imports, the wait for the temporary API server, each stage's start, the exit handlers) and a
cProfile (cumulative seconds of each pipeline stage or Prefect task, the heavy imports, the
wait for the temporary API server, the engines' own overhead, and the top functions).

    python benchmarks/cold_path.py --repeats 3 --profile --out benchmarks/results/x.json
    python benchmarks/cold_path.py --cases gen1k-prefect empty-flow --repeats 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pstats
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _common import ROOT, emit

from flows.temporary_server import stop_process

PRIVFAIR = [sys.executable, "-m", "privfair.cli"]
EMPTY_FLOW = ("from prefect import flow, task\n"
              "@task\ndef nothing():\n    return 1\n"
              "@flow\ndef empty():\n    return nothing()\n"
              "empty()\n")
STAGES = ("load", "validate_input", "resolve_domains", "discretize", "measure_one_way", "select",
          "measure_selected", "fit_aim", "estimate", "sample", "fairness_transform",
          "validate_output", "validation_records", "publish", "build_report")
CASES = ("gen1k-no-prefect", "gen1k-prefect", "adult-no-prefect", "adult-prefect", "empty-flow",
         "gen1k-prefect-server", "adult-prefect-server", "empty-flow-server")
MODES = {"ephemeral": "", "server": "-server"}


def _release_args(case: str, table: Path, out: Path) -> list[str]:
    args = ["release", "--epsilon", "1", "--delta", "1e-6", "--out", str(out / "store"),
            "--work-dir", str(out / "work")]
    if case.startswith("gen1k"):
        args += ["--contract", str(table / "contract.yaml"), "--data", str(table / "data.csv")]
    if case.endswith("no-prefect"):
        args.append("--no-prefect")
    return args


def _command(case: str, table: Path, out: Path) -> list[str]:
    if case.startswith("empty-flow"):
        return [sys.executable, "-c", EMPTY_FLOW]
    return PRIVFAIR + _release_args(case.removesuffix("-server"), table, out)


def _env(home: Path, api_url: str | None = None) -> dict[str, str]:
    env = dict(os.environ, DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("PREFECT_API_URL", None)
    if api_url:
        env["PREFECT_API_URL"] = api_url
    # a throw-away lifetime ledger: repeated benchmark releases must not spend a real budget
    env.setdefault("PRIVFAIR_REGISTRY", str(home.parent / "privfair-registry"))
    # a loaded shared machine starts the ephemeral server slowly (default timeout: 20 s)
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    return env


@contextlib.contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """``prefect server start`` on a free port (own PREFECT_HOME); its API URL; stopped."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)], cwd=home, env=_env(home, url), stdout=log,
            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            tail = (home / "server.log").read_text()[-500:]
            raise RuntimeError(f"prefect server did not start: {tail}")
        yield url
    finally:
        stop_process(proc, timeout=20)


def timed(command: list[str], env: dict[str, str]) -> dict:
    """Run under /usr/bin/time -v: wall seconds, peak RSS (MB), CPU seconds (user + system, with
    reaped children such as a temporary API server), exit status, load before."""
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


#: What the Prefect-path profile reports: (label, file suffix, function).
_PHASES = (
    ("privfair command (cli main)", "/privfair/cli.py", "main"),
    ("import flows.kinds (prefect, tasks)", "/flows/kinds.py", "<module>"),
    ("import prefect", "/prefect/__init__.py", "<module>"),
    ("import prefect.server.api.server (ephemeral only)", "/prefect/server/api/server.py",
     "<module>"),
    ("import great_expectations", "/great_expectations/__init__.py", "<module>"),
    ("wait for Prefect's temporary server", "/prefect/server/api/server.py", "start"),
    ("wait for privfair's temporary server", "/flows/temporary_server.py", "wait"),
    ("flow run (engine + body)", "/prefect/flow_engine.py", "run_flow"),
    ("flow body", "/flows/kinds.py", "body"),
    ("task runs (engine + functions)", "/prefect/task_engine.py", "run_task_sync"),
    ("task functions", "/prefect/task_engine.py", "call_task_fn"),
)


def _cum(rows: dict, suffix: str, func: str) -> float:
    return max((v[3] for (file, _line, name), v in rows.items()
                if file.endswith(suffix) and name == func), default=0.0)


def profile(case: str, table: Path, work: Path, env: dict[str, str]) -> dict:
    """cProfile of one release (``case``) in a fresh process, summarised."""
    out = work / f"{case}.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "privfair.cli",
                    *_release_args(case.removesuffix("-server"), table, work / f"p-{case}")],
                   capture_output=True, cwd=ROOT, env=env, check=True)
    rows = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    total = max(v[3] for v in rows.values())
    stages: dict[str, float] = {}
    for (file, _line, func), (_cc, _nc, _tt, cum, _callers) in rows.items():
        if ("/privfair/" in file or "/tasks/" in file) and func in STAGES:
            stages[func] = max(stages.get(func, 0.0), cum)
    phases = {label: round(_cum(rows, suffix, func), 3) for label, suffix, func in _PHASES}
    if phases["task runs (engine + functions)"]:
        phases["task engine overhead (one task per stage)"] = round(
            phases["task runs (engine + functions)"] - phases["task functions"], 3)
        phases["flow engine overhead"] = round(
            phases["flow run (engine + body)"] - phases["flow body"], 3)
    ranked = sorted(((v[3], k) for k, v in rows.items()
                     if "/privfair/" in k[0] or "/tasks/" in k[0] or "/flows/" in k[0]),
                    reverse=True)
    top = [{"function": f"{Path(k[0]).parent.name}/{Path(k[0]).name}:{k[2]}",
            "cum_s": round(c, 3)} for c, k in ranked[:15]]
    return {"note": "cProfile inflates times ~2x; compare shares, not absolute seconds",
            "total_s": round(total, 2),
            "phases_cum_s": {k: v for k, v in phases.items() if v},
            "stages_cum_s": {k: round(stages[k], 3) for k in STAGES if k in stages},
            "top_privfair": top}


def timeline(case: str, table: Path, work: Path, env: dict[str, str]) -> dict:
    """Wall-clock marks of one release (``case``) in a fresh process, no profiler."""
    out = work / f"{case}.timeline.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, str(Path(__file__).with_name("_timeline.py")),
                    *_release_args(case.removesuffix("-server"), table, work / f"t-{case}")],
                   capture_output=True, cwd=ROOT, env={**env, "PRIVFAIR_TIMELINE": str(out)},
                   check=True)
    return {"wall_s": round(time.perf_counter() - start, 2),
            "load1_before": os.getloadavg()[0],
            "marks_s": json.loads(out.read_text())}  # [label, seconds], in order


def _summary(runs: dict[str, list[dict]]) -> dict:
    summary: dict[str, dict] = {}
    for case, records in runs.items():
        ok = [r for r in records if r["rc"] == 0]
        summary[case] = {"min_wall_s": min((r["wall_s"] for r in ok), default=None),
                         "median_wall_s": sorted(r["wall_s"] for r in ok)[len(ok) // 2]
                         if ok else None,
                         "max_rss_mb": max((r["peak_rss_mb"] for r in ok), default=None),
                         "min_cpu_s": min((r["cpu_s"] for r in ok if r["cpu_s"] is not None),
                                          default=None),
                         "failed": len(records) - len(ok)}
    for mode, suffix in MODES.items():
        flow = summary.get(f"empty-flow{suffix}", {}).get("min_wall_s")
        for case in ("gen1k", "adult"):
            entry = summary.get(f"{case}-prefect{suffix}", {})
            with_prefect = entry.get("min_wall_s")
            without = summary.get(f"{case}-no-prefect", {}).get("min_wall_s")
            if flow and with_prefect and without:
                entry["mode"] = mode
                entry["empty_flow_s"] = flow
                entry["prefect_overhead_s"] = round(with_prefect - without, 2)
                entry["overhead_over_empty_flow"] = round((with_prefect - without) / flow, 2)
                entry["total_over_empty_flow"] = round(with_prefect / flow, 2)
            # the same in CPU seconds (command + reaped children): steadier on a shared machine
            cpu = [summary.get(c, {}).get("min_cpu_s") for c in
                   (f"empty-flow{suffix}", f"{case}-prefect{suffix}", f"{case}-no-prefect")]
            if all(cpu):
                entry["prefect_overhead_cpu_s"] = round(cpu[1] - cpu[2], 2)
                entry["overhead_cpu_over_empty_flow_cpu"] = round((cpu[1] - cpu[2]) / cpu[0], 2)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).parent))
    from gen_table import write

    with tempfile.TemporaryDirectory(prefix="pf-cold-") as tmp, \
            contextlib.ExitStack() as stack:
        work = Path(tmp)
        table = work / "gen1k"
        write(table, 1000, 21, seed=0)
        env = {"ephemeral": _env(work / "prefect-home")}
        if any(c.endswith("-server") for c in args.cases):
            url = stack.enter_context(prefect_server(work / "server-home"))
            env["server"] = _env(work / "server-home", url)
        runs: dict[str, list[dict]] = {case: [] for case in args.cases}
        for _ in range(args.repeats):  # interleaved, so load drifts hit every case alike
            for case in args.cases:
                mode = "server" if case.endswith("-server") else "ephemeral"
                runs[case].append(timed(_command(case, table, work / case), env[mode]))
        document = {"benchmark": "cold_path", "cpus": os.cpu_count(),
                    "load_avg_end": os.getloadavg(), "summary": _summary(runs), "runs": runs}
        if args.profile:
            profiled = [case for case in ("gen1k-no-prefect", "gen1k-prefect",
                                          "gen1k-prefect-server")
                        if "server" not in case or "server" in env]
            mode = {case: env["server" if "server" in case else "ephemeral"]
                    for case in profiled}
            document["timelines"] = {case: timeline(case, table, work, mode[case])
                                     for case in profiled}
            document["profiles"] = {case: profile(case, table, work, mode[case])
                                    for case in profiled}
    emit(document, args.out)


if __name__ == "__main__":
    main()
