"""CSV reading speed (issue 32.4): rows per second of the loader on a wide generated CSV.

Writes a CSV of ``--rows`` records x 41 columns (20 categorical, 21 integer; a fixed seed)
and a contract declaring it, then times, best of ``--repeats``:

* ``load``: :func:`privfair.release.ingest.load`, the first private stage of the table, gan,
  graph and embedding kinds (the CSV read in the contract's dialect, staged as Parquet);
* ``discretize``: :func:`privfair.contracts.encoding.iter_discretized_batches`, the CSV read
  and encoded into codes (``privfair discretize``).

    python benchmarks/csv_read.py --rows 300000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CATEGORIES = [f"c{i}" for i in range(8)]


def write_inputs(folder: Path, rows: int) -> tuple[Path, Path]:
    """The generated CSV and its contract."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    columns = {}
    for i in range(20):
        columns[f"cat{i}"] = rng.choice(CATEGORIES, rows)
    for i in range(21):
        columns[f"num{i}"] = rng.integers(0, 100, rows)
    data = folder / "wide.csv"
    pd.DataFrame(columns).to_csv(data, index=False)
    lines = ["name: wide", 'version: "1"', "columns:"]
    for i in range(20):
        lines += [f"  - name: cat{i}", "    type: categorical",
                  f"    categories: [{', '.join(CATEGORIES)}]"]
    for i in range(21):
        lines += [f"  - name: num{i}", "    type: numeric", "    integer: true",
                  "    bins: [0, 25, 50, 75, 100]"]
    lines += ["budget: {epsilon: 1.0, delta: 1.0e-6}"]
    contract = folder / "wide.yaml"
    contract.write_text("\n".join(lines) + "\n")
    return data, contract


def best_of(repeats: int, step) -> tuple[float, float]:
    """The least wall-clock and the least CPU seconds (all threads) of ``repeats`` runs: on
    a shared machine the CPU time is the steadier figure."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from privfair.contracts.encoding import iter_discretized_batches
    from privfair.contracts.schema import load_contract
    from privfair.release.ingest import load

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data, contract_path = write_inputs(folder, args.rows)
        contract = load_contract(contract_path)

        def staged() -> None:
            stage = folder / "staging"
            stage.mkdir(exist_ok=True)
            load(data, contract, stage)

        def coded() -> None:
            rows = sum(len(b["cat0"]) for b in iter_discretized_batches(data, contract))
            assert rows == args.rows, rows

        seconds = {"load": best_of(args.repeats, staged),
                   "discretize": best_of(args.repeats, coded)}
        result: dict = {"rows": args.rows, "columns": 41, "bytes": data.stat().st_size}
        for step, (wall, cpu) in seconds.items():
            result[step] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                            "rows_per_wall_s": round(args.rows / wall),
                            "rows_per_cpu_s": round(args.rows / cpu)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
