"""Counting engines (issue 15 item 4): rows/s of the measurement counts, local vs Dask.

1. Writes ``--rows`` generated rows of codes (sampled from an MST model of Adult, so the
   values look like Adult's) to a partitioned Parquet on disk, ``--chunk`` rows per part.
2. Counts every 1-way and 2-way marginal (13 + 78 tables) with
   :func:`privfair.synth.measure.count_marginals_parquet`: ``local``, then ``dask`` on a
   ``LocalCluster`` of 1 and of 2 single-threaded worker processes.
3. Prints JSON: seconds and rows/s per engine, rows/s per worker, 2-vs-1 worker scaling, and
   the load average (the machine is shared; scaling past its 2 cores means nothing).

    python benchmarks/dask_count.py                  # 10,000,000 rows
    python benchmarks/dask_count.py --rows 2000000   # quick look
    python benchmarks/dask_count.py --rows 100000000 --data /tmp/codes100m  # keep the data

``--data DIR`` writes the generated rows there and keeps them; when DIR already holds the
parts (same ``--rows``), generation is skipped, so the counting can be timed apart from it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from _common import emit
from sample_10m import adult_mst, rows_arguments


def generate(folder: Path, rows: int, chunk: int) -> tuple[float, object]:
    """Write the codes; returns (seconds, contract)."""
    import numpy as np

    from privfair.synth.synthesizer import stream_sample

    synth, contract = adult_mst()
    start = time.perf_counter()
    stream_sample(synth.model_, synth.compression_, rows, folder,
                  rng=np.random.default_rng(1), chunk_rows=chunk)
    return time.perf_counter() - start, contract


def main() -> None:
    from distributed import Client, LocalCluster

    from privfair.synth.measure import all_pairs, count_marginals_parquet

    args = rows_arguments(__doc__, lambda p: p.add_argument("--data", type=Path))
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="pf-dask-") as tmp:
        folder = args.data or Path(tmp) / "codes"
        if args.data and any(folder.glob("*.parquet")):
            from sample_10m import adult_contract

            generate_s, contract = None, adult_contract()
        else:
            generate_s, contract = generate(folder, args.rows, args.chunk)
        domain = contract.domain()
        cliques = [(a,) for a in domain] + all_pairs(domain)
        size = sum(p.stat().st_size for p in folder.glob("*.parquet"))

        def timed(name: str, workers: int, **kw) -> None:
            load = os.getloadavg()[0]
            start = time.perf_counter()
            tables = count_marginals_parquet(domain, cliques, folder, **kw)
            seconds = time.perf_counter() - start
            assert int(tables[cliques[0]].sum()) == args.rows
            results[name] = {"seconds": round(seconds, 2), "rows_per_s": round(args.rows / seconds),
                             "rows_per_s_per_worker": round(args.rows / seconds / workers),
                             "load1_before": load}

        timed("local", 1)
        for workers in (1, 2):
            with (LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None) as cluster, Client(cluster) as client):
                # import the counting code in the workers first: start-up is not counting
                client.run(__import__, "privfair.synth.measure")
                timed(f"dask-{workers}-workers", workers, engine="dask", client=client)
    one, two = results["dask-1-workers"], results["dask-2-workers"]
    emit({"benchmark": "dask_count", "rows": args.rows, "parts": -(-args.rows // args.chunk),
          "bytes_on_disk": size,
          "generate_s": None if generate_s is None else round(generate_s, 2), "cliques": len(cliques),
          "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "engines": results,
          "scaling_2_over_1": round(one["seconds"] / two["seconds"], 2)}, args.out)


if __name__ == "__main__":
    main()
