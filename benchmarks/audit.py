"""The full privacy audit of every mechanism a release kind uses; prints JSON and writes it to
benchmarks/results/audit.json (``--quick``: benchmarks/results/audit_quick.json).

    python benchmarks/audit.py [--quick] [--scale F] [--mechanism NAME ...] [--out FILE]

Per mechanism: claimed ε (at δ, from the ledger), the 95 % lower bound from runs on
worst-case neighbours (Clopper–Pearson on an event, or a Gaussian-DP / subsampled-Gaussian
fit: the result's ``fit``), the trial count, each negative control's bound (the same library
mechanism with less noise, which must exceed the claim) and the wall time; see
privfair.evaluation.audit. Budget: under 10 minutes on 2 cores for the full audit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privfair.evaluation.audit import MECHANISMS, run_all  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CI trial counts")
    parser.add_argument("--scale", type=float, default=1.0, help="trial count multiplier")
    parser.add_argument("--mechanism", nargs="*", choices=sorted(MECHANISMS))
    parser.add_argument("--out", help="where to write the JSON (default: benchmarks/results/"
                                      "audit.json, or audit_quick.json with --quick)")
    args = parser.parse_args()
    start, cpu = time.perf_counter(), time.process_time()
    results = run_all(names=args.mechanism, scale=args.scale, quick=args.quick,
                      progress=lambda r: print(f"{r.mechanism}: {r.verdict} "
                                               f"({r.seconds:.1f} s)", file=sys.stderr))
    report = {
        "seconds": round(time.perf_counter() - start, 1),
        # The machine is shared: CPU seconds say what the audit itself cost.
        "cpu_seconds": round(time.process_time() - cpu, 1),
        "load_average": list(os.getloadavg()),
        "quick": args.quick,
        "scale": args.scale,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "all_ok": all(r.verdict == "ok" for r in results),
        "results": [r.to_dict() for r in results],
    }
    text = json.dumps(report, indent=2)
    print(text)
    out = Path(args.out) if args.out else RESULTS / ("audit_quick.json" if args.quick
                                                     else "audit.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return 0 if report["all_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
