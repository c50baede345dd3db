"""Empirical privacy audit of every mechanism a release uses; prints JSON.

    python benchmarks/privacy_audit.py [--scale 1.0] [--mechanism cathist ...]
                                       [--legacy-cathist FILE]

For each mechanism: claimed ε, the 95 % Clopper–Pearson lower bound on ε from runs on
worst-case neighbouring datasets, and the trial count (see privfair.evaluation.audit). The
lower bound must stay at or below the claimed ε. ``--legacy-cathist`` audits a CatHist module
with the pre-issue-10 API, e.g. ``git show 613a631:privfair/pipeline/cathist.py > old.py``.
Budget: under 10 minutes on 2 cores at --scale 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privfair.evaluation.audit import MECHANISMS, legacy_cathist_release, run_all  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="trial count multiplier")
    parser.add_argument("--mechanism", nargs="*", choices=sorted(MECHANISMS))
    parser.add_argument("--legacy-cathist", help="audit this pre-issue-10 cathist.py instead")
    args = parser.parse_args()
    legacy = legacy_cathist_release(args.legacy_cathist) if args.legacy_cathist else None
    start = time.perf_counter()
    results = run_all(names=args.mechanism, scale=args.scale, cathist_release=legacy)
    print(json.dumps({
        "seconds": round(time.perf_counter() - start, 1),
        "cathist_implementation": args.legacy_cathist or "privfair.domains.cathist",
        "all_passed": all(r.passed for r in results),
        "results": [r.to_dict() for r in results],
    }, indent=2))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
