"""Close to the limits (issue 23.5): releases against their I/O floor, AIM against the bootstrap.

Two measurements, one run, one JSON document:

* **I/O floor.** Each table release (``privfair release --no-prefect``, a fresh process, test
  seed) is timed from the shell's point of view and set beside the floor of the same I/O: a
  fresh process that imports pyarrow, reads the same input file and writes as many rows as
  the release published (the input's columns, repeated or cut to that count) to Parquet
  (zstd). The CPU seconds (user + system) of both processes are recorded beside the wall
  times: on a shared machine they move far less with the load. Tables: the embedded Adult
  (48,842 × 13, Parquet) and a generated 300,000 × 41 table (``benchmarks/gen_table.py
  --parquet``). Target: release ≤ 3 × floor. privfair's bytecode is compiled before anything
  is timed, as an installed package has it (a checkout run with PYTHONDONTWRITEBYTECODE
  would recompile every module in every release).
* **Bootstrap floor.** AIM's mean 2-way TVD at ε = 1 (δ = 1e-9, the release's default time
  budget) against the 2-way TVD of an i.i.d. resample of the real table with no privacy at
  all (n rows drawn with replacement): COMPAS and Adult, per sampling mode. Target ≤ 1.5 ×.
  This reads the real data on purpose (an evaluation, not a release).

    python benchmarks/floors.py --out benchmarks/results/floors.json
    python benchmarks/floors.py --skip-aim --methods mst              # I/O part only
    python benchmarks/floors.py --skip-io --aim-datasets compas --seeds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, load_codes

METHODS = ("independent", "mst", "prefair-greedy", "aim")
AIM_TIME_S = 240.0  # the release's default AIM time budget (privfair release --max-time)

#: The same release in a fresh process, timed after its imports (release_table, in-process).
IN_PROCESS = """
import json, sys, time
from privfair.release.registry import family
from privfair.release.run import release_table
family("release").kinds  # the table kind's modules load on first use: imports, not timed
params = json.loads(sys.argv[1])
start = time.perf_counter()
release_table(params)
print(time.perf_counter() - start)
"""

FLOOR = """
import sys, pyarrow as pa, pyarrow.parquet as pq, pyarrow.csv as pc
src, dst, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
table = pq.read_table(src) if src.endswith(".parquet") else pc.read_csv(src)
reps = -(-rows // max(table.num_rows, 1))
out = pa.concat_tables([table] * reps).slice(0, rows) if reps > 1 else table.slice(0, rows)
pq.write_table(out, dst, compression="zstd")
"""


def _env(registry: Path) -> dict[str, str]:
    # Bytecode as an installed package has it (pip compiles on install; see compile_sources):
    # with PYTHONDONTWRITEBYTECODE set, a source checkout recompiles every privfair module in
    # every release (about 0.1 s of CPU), which the floor's pyarrow never pays.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PRIVFAIR_REGISTRY": str(registry), "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_HOME": str(registry.parent / "prefect-home")}


def compile_sources() -> None:
    """privfair's bytecode, cached before anything is timed (``__pycache__`` is ignored by
    git), as ``pip install`` leaves an installed package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "privfair")],
                   check=True, cwd=ROOT, env=env, capture_output=True)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: CPU seconds (user + system) of the last command :func:`timed` ran: on a shared machine
#: they move far less with the load than the wall time does.
LAST_CPU_S = [0.0]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    LAST_CPU_S[0] = _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:4]}...: exit {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def published_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    files = sorted(folder.rglob("*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def io_floor(tables: dict[str, tuple[str, str]], methods: list[str], seed: int,
             work: Path) -> list[dict]:
    rows_out = []
    for name, (contract, data) in tables.items():
        for method in methods:
            run = work / f"{name}-{method}"
            registry = run / "registry"
            registry.mkdir(parents=True)
            cmd = [sys.executable, "-m", "privfair.cli", "release", "--contract", contract,
                   "--data", data, "--epsilon", "1", "--delta", "1e-9", "--method", method,
                   "--out", str(run / "releases"), "--work-dir", str(run / "work"),
                   "--seed", str(seed), "--insecure-seed", "--no-prefect"]
            if method.startswith("aim"):
                cmd += ["--max-time", str(AIM_TIME_S)]
            release_s, _ = timed(cmd, _env(registry))
            release_cpu_s = LAST_CPU_S[0]
            # the same release again (own registry, store and seed) timed after its imports
            again = run / "again"
            (again / "registry").mkdir(parents=True)
            params = {"contract": contract, "data": data, "epsilon": 1.0, "delta": 1e-9,
                      "method": method, "out": str(again / "releases"),
                      "work_dir": str(again / "work"), "seed": seed, "insecure_seed": True}
            if method.startswith("aim"):
                params["max_time_s"] = AIM_TIME_S
            _, printed = timed([sys.executable, "-c", IN_PROCESS, json.dumps(params)],
                               _env(again / "registry"))
            in_process_s = float(printed.strip().splitlines()[-1])
            synthetic = [p for p in (run / "releases").rglob("synthetic*") if p.is_file()
                         or p.is_dir()]
            n = published_rows(synthetic[0] if synthetic[0].is_dir()
                               else synthetic[0].parent) if synthetic else 0
            floor_s, _ = timed([sys.executable, "-c", FLOOR, data,
                                str(run / "floor.parquet"), str(n)])
            floor_cpu_s = LAST_CPU_S[0]
            rows_out.append({"table": name, "method": method, "release_s": round(release_s, 2),
                             "release_after_imports_s": round(in_process_s, 2),
                             "io_floor_s": round(floor_s, 2), "rows_out": n,
                             "ratio": round(release_s / floor_s, 2),
                             "ratio_after_imports": round(in_process_s / floor_s, 2),
                             "release_cpu_s": round(release_cpu_s, 2),
                             "io_floor_cpu_s": round(floor_cpu_s, 2),
                             "ratio_cpu": round(release_cpu_s / floor_cpu_s, 2),
                             "note": f"AIM time budget {AIM_TIME_S:g} s"
                                     if method.startswith("aim") else None})
            print(rows_out[-1], file=sys.stderr, flush=True)
    return rows_out


def bootstrap_tvd(codes, domain, seeds: int) -> float:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd

    values = []
    for seed in range(seeds):
        index = np.random.default_rng(1000 + seed).integers(0, len(codes), len(codes))
        values.append(marginal_tvd(codes, codes.iloc[index].reset_index(drop=True), domain, 2))
    return statistics.mean(values)


def aim_vs_bootstrap(datasets: list[str], seeds: int, time_s: float,
                     method: str = "aim") -> list[dict]:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    out = []
    for name in datasets:
        codes, contract = load_codes(name)
        domain, roles = contract.domain(), contract.roles()
        floor = bootstrap_tvd(codes, domain, seeds)
        runs = []
        for seed in range(seeds):
            fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
            start = time.perf_counter()
            synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-9,
                                    method=method, max_time_s=time_s)
            synth.fit(codes, rng=fit_rng)
            record = {"seed": seed, "fit_s": round(time.perf_counter() - start, 2),
                      "rounds": len(synth.aim_rounds_)}
            # the fitted model's own 2-way marginals: the error before any sampling
            model = synth.model_
            record["model_tvd2"] = _model_tvd2(codes, model, domain)
            for mode in ("iid", "round"):
                synthetic = synth.sample(len(codes), rng=sample_rng, mode=mode)
                record[f"tvd2_{mode}"] = marginal_tvd(codes, synthetic, domain, 2)
            runs.append(record)
            print(name, record, file=sys.stderr, flush=True)
        entry = {"dataset": name, "method": method, "rows": len(codes), "epsilon": 1.0,
                 "delta": 1e-9, "time_budget_s": time_s, "seeds": seeds,
                 "bootstrap_tvd2": round(floor, 5)}
        for key in ("model_tvd2", "tvd2_iid", "tvd2_round", "fit_s", "rounds"):
            entry[key] = round(statistics.mean(r[key] for r in runs), 5)
        for key in ("model_tvd2", "tvd2_iid", "tvd2_round"):
            entry[f"{key}_over_bootstrap"] = round(entry[key] / floor, 3)
        entry["runs"] = runs
        out.append(entry)
    return out


def _model_tvd2(codes, model, domain) -> float:
    """Mean TVD between the real 2-way marginals and the model's expected ones."""
    from itertools import combinations

    import numpy as np

    from privfair.synth.aim import model_marginals
    from privfair.synth.measure import count_marginals

    pairs = list(combinations(domain.attributes, 2))
    real = count_marginals(domain, pairs, [{a: codes[a].to_numpy() for a in domain}])
    fitted = model_marginals(model, pairs)
    return float(np.mean([0.5 * np.abs(real[p] / real[p].sum()
                                       - fitted[p] / fitted[p].sum()).sum() for p in pairs]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--wide-rows", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--aim-datasets", nargs="+", default=["compas", "adult"])
    parser.add_argument("--aim-time", type=float, default=AIM_TIME_S)
    parser.add_argument("--skip-io", action="store_true")
    parser.add_argument("--skip-aim", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    document: dict = {"benchmark": "floors", "cpu_count": os.cpu_count()}
    if not args.skip_io:
        from gen_table import write

        from privfair.contracts.datasets import dataset_path

        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            wide = write(work / "wide", args.wide_rows, 41, seed=0, parquet=True)
            tables = {"adult": ("adult", str(dataset_path("adult"))),
                      f"gen{args.wide_rows}x41": (wide["contract"], wide["data"])}
            compile_sources()
            document["bytecode"] = "cached before timing (compileall), as installed"
            load = os.getloadavg()
            document["io"] = io_floor(tables, args.methods, seed=7, work=work)
            document["io_load_avg"] = [load, os.getloadavg()]
    if not args.skip_aim:
        load = os.getloadavg()
        document["aim"] = aim_vs_bootstrap(args.aim_datasets, args.seeds, args.aim_time)
        document["aim_load_avg"] = [load, os.getloadavg()]
    emit(document, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
