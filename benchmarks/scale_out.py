"""Scale-out (issue 23.1): a whole table release of a partitioned Parquet input on Dask.

1. Writes ``--rows`` raw rows that look like Adult's (drawn from an MST model of Adult;
   numeric columns as numbers, categorical ones as text) as ``--parts`` Parquet files.
2. For each of ``--workers`` (1 and 2 by default), in a fresh process: a ``LocalCluster`` of
   that many single-threaded worker processes (its scratch 0700 in the work folder), then
   ``privfair release --engine dask --dask-address <cluster> --output partitioned`` of
   the folder, sampling as many rows as the input in ``--parts`` parts: load → encode →
   count (per file, on the workers) → measure (noise once, here) → estimate (here) →
   sample (per part, on the workers) → validate → write ``synthetic/part-*.parquet``.
3. Times the I/O floor (issue 23.5): a fresh process where pyarrow alone reads the same
   input, file by file, and writes as many rows as the release published (the input's
   columns, repeated or cut) as Parquet (zstd) parts, with no release work between.
4. Prints JSON: wall time of the whole release and of each stage, rows/s and rows/s per
   worker, the CPU seconds and peak RSS of each worker and of the driver, the 2-vs-1 scaling, each run's
   ratio to the I/O floor, and the load average before and after (the machine may be
   shared: say so beside the numbers).

    python benchmarks/scale_out.py --rows 2000000 --parts 16           # quick look
    python benchmarks/scale_out.py --rows 10000000 --parts 64 \\
        --out benchmarks/results/scale_out.json                        # what is recorded
    python benchmarks/scale_out.py --rows 100000000 --parts 64 --data /big/adult100m \\
        --out benchmarks/results/scale_out_100m.json                   # the issue's run

``--data DIR`` keeps the generated input there and reuses it when it holds ``--parts``
files; the input needs about 1.1 GB per 100M rows on disk, each worker about 1 GB of memory.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from _common import emit, run_worker

SCRIPT = str(Path(__file__).resolve())


def generate(folder: Path, rows: int, parts: int) -> float:
    """Write the raw input, ``parts`` files; returns seconds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sample_10m import adult_mst

    from privfair.synth.synthesizer import generate as draw

    synth, contract = adult_mst()
    domain = contract.domain()
    columns = {c.name: c for c in contract.columns}
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    per_part = -(-rows // parts)
    for k in range(parts):
        n = min(per_part, rows - k * per_part)
        codes = draw(synth.model_, synth.compression_, n, rng=rng, narrow=True)
        arrays = {}
        for a in domain:
            spec = columns[a]
            if spec.type == "numeric":  # a number inside the bin: its lower edge
                edges = np.asarray(spec.bins, dtype=float)
                arrays[a] = pa.array(edges[codes[a].to_numpy()].astype(np.int64))
            else:
                labels = pa.array(list(contract.labels(a)), pa.string())
                arrays[a] = pa.DictionaryArray.from_arrays(
                    pa.array(codes[a].to_numpy().astype(np.int32)), labels)
        pq.write_table(pa.table(arrays), folder / f"part-{k:05d}.parquet", compression="zstd")
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(data: str, work: str, rows: str, parts: str, workers: str, max_iters: str) -> dict:
    """One whole release on a fresh LocalCluster of ``workers`` worker processes."""
    import dask
    from distributed import Client, LocalCluster

    from privfair.release.run import release_table
    from privfair.release.tabular.dask_engine import scratch_dir, worker_environ

    n, p, w = int(rows), int(parts), int(workers)
    root = Path(work)
    os.environ["PRIVFAIR_REGISTRY"] = str(root / "registry")
    stages: list[tuple[str, float]] = []
    load_before = os.getloadavg()
    # the workers' malloc as privfair's own LocalCluster sets it (dask_engine.WORKER_MALLOC)
    with (dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}),
          LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                       dashboard_address=None, local_directory=str(scratch_dir(root)),
                       scheduler_kwargs={"dashboard_address": ":0"})
          as cluster, Client(cluster) as client):
        client.run(__import__, "privfair.release.tabular.partitioned")  # start-up is not work
        cpu_before, driver_before = client.run(cpu_seconds), cpu_seconds()
        start = time.perf_counter()
        folder = release_table({
            "contract": "adult", "data": data, "epsilon": 1.0, "delta": 1e-9,
            "method": "mst", "seed": 1, "insecure_seed": True, "out": str(root / "releases"),
            "work_dir": str(root), "engine": "dask", "dask_address": cluster.scheduler_address,
            "output": "partitioned", "part_rows": -(-n // p), "n_rows": n,
            "max_iters": int(max_iters)},
            progress=lambda stage, fraction: stages.append((stage, time.perf_counter())))
        seconds = time.perf_counter() - start
        driver_cpu = cpu_seconds() - driver_before
        cpu_after = client.run(cpu_seconds)
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    # CPU seconds do not depend on what else runs on the machine: with the wall time they
    # tell a starved worker (CPU << wall) from a serial driver (driver CPU ~ wall).
    worker_cpu = sorted(round(cpu_after[k] - cpu_before[k], 2) for k in cpu_after)
    manifest = json.loads((folder / "manifest.json").read_text())
    marks = [s for s in stages if s[0] not in ("check",)] + [("end", start + seconds)]
    per_stage: dict[str, float] = {}
    for (name, at), (_, nxt) in zip(marks, marks[1:], strict=False):
        per_stage[name] = round(per_stage.get(name, 0.0) + nxt - at, 2)
    files = [f for f in manifest["files"] if f.startswith("synthetic/")]
    return {"workers": w, "seconds": round(seconds, 2), "rows_per_s": round(n / seconds),
            "rows_per_s_per_worker": round(n / seconds / w), "stages_s": per_stage,
            "cpu_s_per_worker": worker_cpu, "cpu_s_driver": round(driver_cpu, 2),
            "peak_rss_mb_per_worker": sorted(round(v / 1024, 1) for v in peaks.values()),
            "peak_rss_mb_driver": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                        / 1024, 1),
            "synthetic_rows": manifest["sampling"]["n_rows"], "synthetic_parts": len(files),
            "load_avg_before": load_before, "load_avg_after": os.getloadavg()}


def floor(data: str, out: str, rows: str) -> dict:
    """The I/O floor: read every input file and write ``rows`` rows of its columns."""
    import pyarrow.parquet as pq

    load_before = os.getloadavg()
    start = time.perf_counter()
    files = sorted(Path(data).rglob("*.parquet"))
    target, written, k = int(rows), 0, 0
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    while written < target:  # the input once, then again from its start if it is short
        for path in files:
            table = pq.read_table(path)
            table = table.slice(0, min(table.num_rows, target - written))
            pq.write_table(table, folder / f"part-{k:05d}.parquet", compression="zstd")
            written, k = written + table.num_rows, k + 1
            if written >= target or not table.num_rows:
                break
        if not files or written == 0:
            break
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 2), "cpu_s": round(cpu_seconds(), 2),
            "rows_written": written, "parts_written": k,
            "load_avg_before": load_before, "load_avg_after": os.getloadavg()}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--parts", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-iters", type=int, default=10_000,
                        help="estimation iteration cap (the release's default)")
    parser.add_argument("--data", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pf-scale-") as tmp:
        data = args.data or Path(tmp) / "input"
        if args.data and len(list(data.glob("*.parquet"))) == args.parts:
            generate_s = None
        else:
            generate_s = round(generate(data, args.rows, args.parts), 2)
        size = sum(p.stat().st_size for p in data.glob("*.parquet"))
        runs = {}
        for w in args.workers:
            runs[f"{w}-workers"] = run_worker(SCRIPT, data, Path(tmp) / f"work-{w}", args.rows,
                                              args.parts, w, args.max_iters)
        published = max((r.get("synthetic_rows", 0) for r in runs.values()), default=0)
        io_floor = run_worker(SCRIPT, "floor", data, Path(tmp) / "floor",
                              published or args.rows)
    doc = {"benchmark": "scale_out", "rows": args.rows, "parts": args.parts,
           "input_bytes": size, "generate_s": generate_s, "method": "mst",
           "max_iters": args.max_iters, "cpus": os.cpu_count(), "runs": runs,
           "io_floor": io_floor}
    if "seconds" in io_floor:  # target (issue 23.5): the release within 3x its I/O floor
        for run in runs.values():
            if "seconds" in run:
                run["ratio_to_io_floor"] = round(run["seconds"] / io_floor["seconds"], 2)
    one, two = runs.get("1-workers", {}), runs.get("2-workers", {})
    if "seconds" in one and "seconds" in two:
        doc["scaling_2_over_1"] = round(one["seconds"] / two["seconds"], 2)
        doc["scaling_2_over_1_by_stage"] = {
            k: round(v / two["stages_s"][k], 2) for k, v in one["stages_s"].items()
            if two["stages_s"].get(k)}
    emit(doc, args.out)


if __name__ == "__main__":
    if sys.argv[1:3] == ["--worker", "floor"]:
        print(json.dumps(floor(*sys.argv[3:])))
    elif sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(*sys.argv[2:])))
    else:
        main()
