"""Wide table (issue 15): a generated ~300k-row x 41-attribute table, `--no-prefect` releases.

Runs ``privfair release --no-prefect`` with prefair-greedy and with AIM (``--max-time``) under
``/usr/bin/time -v`` and prints JSON: wall seconds, peak RSS, exit status, load average, and
for AIM the rounds run and ρ spent from the manifest.

    python benchmarks/wide_table.py                       # 299k rows, AIM --max-time 240
    python benchmarks/wide_table.py --rows 30000 --max-time 30
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from _common import emit
from cold_path import PRIVFAIR, _env, timed
from gen_table import write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=299_000)
    parser.add_argument("--max-time", type=float, default=240.0)
    parser.add_argument("--methods", nargs="+", default=["prefair-greedy", "aim"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="pf-wide-") as tmp:
        work = Path(tmp)
        info = write(work / "table", args.rows, 41, seed=0, parquet=True)
        for method in args.methods:
            store = work / method
            command = [*PRIVFAIR, "release", "--contract", info["contract"], "--data",
                       info["data"], "--epsilon", "1", "--delta", "1e-6", "--no-prefect",
                       "--method", method, "--out", str(store / "store"), "--work-dir",
                       str(store / "work")]
            if method.startswith("aim"):
                command += ["--max-time", str(args.max_time)]
            record = timed(command, _env(work / "prefect-home"))
            manifests = sorted((store / "store").rglob("manifest.json"))
            if manifests:
                manifest = json.loads(manifests[-1].read_text())
                record["rho_spent"] = manifest["guarantee"]["spent"]["rho"]
                record["rho_budget"] = manifest["guarantee"]["rho"]
                record["ledger_steps"] = len(manifest["ledger"])
            results[method] = record
    emit({"benchmark": "wide_table", "rows": args.rows, "attributes": 41,
          "max_time_s": args.max_time, "load_avg": os.getloadavg(), "runs": results}, args.out)


if __name__ == "__main__":
    main()
