"""Streaming demonstration: load + measure a 10M-row table of the Adult schema in batches.

1. Generate ``--rows`` raw rows (default 10,000,000) with the Adult columns by resampling the
   embedded Adult table, written chunk by chunk to Parquet (never all in memory).
2. In a fresh subprocess (so its peak RSS is its own), run the private-side release stages on
   it exactly as a release does: ``load`` (DuckDB streams the file into the staged Parquet),
   ``discretize`` (batch by batch), ``measure_one_way``, ``select`` and ``measure_selected``
   (each counts its contingency tables over streamed batches of codes).
3. Print one JSON document: rows, file size, seconds per stage, peak RSS of the stage process.

    python benchmarks/stream_10m.py                       # 10M rows (a few minutes on 2 cores)
    python benchmarks/stream_10m.py --rows 1000000        # quick look
    python benchmarks/stream_10m.py --batch-size 500000 --keep

Memory stays bounded by the batch size and the contingency tables (all pairs of 13
attributes: ~30k cells), not by the number of rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def generate(path: Path, rows: int, *, chunk: int = 1_000_000, seed: int = 0) -> float:
    """Write ``rows`` rows resampled from the embedded Adult data; returns seconds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts.datasets import default_dataset_path

    start = time.perf_counter()
    source = pq.read_table(default_dataset_path())
    rng = np.random.default_rng(seed)
    with pq.ParquetWriter(path, source.schema, compression="zstd") as writer:
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            writer.write_table(source.take(pa.array(rng.integers(0, source.num_rows, n))))
            done += n
    return time.perf_counter() - start


def stages(data: Path, work: Path, batch_size: int) -> dict:
    """Run the private-side stages on ``data``; called in a fresh process."""
    from privfair.contracts.datasets import default_contract_path
    from privfair.release import ingest
    from privfair.release.tabular import private as private_stages
    from privfair.release.tabular.plan import ReleaseParams, check, initial_ledger
    from privfair.store import artefacts, files

    timings: dict[str, float] = {}

    def timed(name, fn, *args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        timings[name] = round(time.perf_counter() - start, 3)
        return out

    params = ReleaseParams(data=str(data), epsilon=1.0, delta=1e-9, method="prefair-greedy",
                           out=str(work / "releases"), work_dir=str(work / "w"),
                           batch_size=batch_size)
    plan = timed("check", check, params)
    ws = files.Workspace.open(plan.work_dir, plan.run_id)
    c = plan.contract
    try:
        staged = timed("load", ingest.load, plan.data_path, c, ws.staging,
                       batch_size=batch_size)
        codes = timed("discretize", ingest.discretize, staged, c, ws.staging,
                      batch_size=batch_size)
        ledger = initial_ledger(plan, ws.artefacts)
        one, ledger = timed("measure_one_way", private_stages.measure_one_way, codes, c, ledger,
                            ws.artefacts, rho=plan.split["one_way"], seed=None,
                            batch_size=batch_size)
        tree, ledger = timed("select", private_stages.select, codes, c, one, ledger, ws.artefacts,
                             method=plan.method, rho=plan.split["select"], seed=None,
                             batch_size=batch_size)
        _, ledger = timed("measure_selected", private_stages.measure_selected, codes, c, one, tree,
                          ledger, ws.artefacts, rho=plan.split["measure"], seed=None,
                          batch_size=batch_size)
        staged_mb = Path(staged.path).stat().st_size / 2**20
        codes_mb = Path(codes.path).stat().st_size / 2**20
    finally:
        ws.cleanup_private()
    spent = artefacts.load_ledger(ledger).spent
    return {
        "contract": str(default_contract_path().name),
        "seconds": timings,
        "seconds_total": round(sum(timings.values()), 3),
        "staged_parquet_mb": round(staged_mb, 1),
        "codes_parquet_mb": round(codes_mb, 1),
        "rho_spent": spent,
        "rho_planned": plan.rho,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--dir", help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--stages", help=argparse.SUPPRESS)  # internal: run stages on a file
    args = parser.parse_args(argv)

    if args.stages:
        work = Path(args.dir)
        print(json.dumps(stages(Path(args.stages), work, args.batch_size)))
        return 0

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="privfair-stream-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "adult_10m.parquet"
    try:
        gen_s = generate(data, args.rows)
        proc = subprocess.run(
            [sys.executable, __file__, "--stages", str(data), "--dir", str(work),
             "--batch-size", str(args.batch_size)],
            capture_output=True, text=True, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        report = {
            "benchmark": "stream_10m",
            "rows": args.rows,
            "batch_size": args.batch_size,
            "input_parquet_mb": round(data.stat().st_size / 2**20, 1),
            "generate_seconds": round(gen_s, 2),
            **result,
            "rows_per_second": round(args.rows / result["seconds_total"]),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
        }
        print(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            if args.dir:
                data.unlink(missing_ok=True)
                shutil.rmtree(work / "w", ignore_errors=True)
            else:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
