"""sha256 of seeded table releases, to compare with main before the release protocol.

    python benchmarks/parity_main.py [--policy-share 1e-300]

Prints JSON: for each (contract, method), the sha256 of ``synthetic.parquet`` released with
``--seed 11 --insecure-seed``, ε 1, δ 1e-9, in-process. With the policy-count share (issue
21.2, 2 % of ρ) patched to ~0, the protocol publishes main's bytes (a6e9f2f: COMPAS mst
9d3f0726…, independent 880e02c0…, aim a814a4db…, Adult prefair-greedy 1ff67115…); with the
default share the tables change on purpose. Each release gets its own temporary registry.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from pathlib import Path

CASES = [("compas", "mst"), ("compas", "independent"), ("compas", "aim"),
         ("adult", "prefair-greedy")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy-share", type=float, default=None,
                        help="patch the policy-count share of ρ (e.g. 1e-300); default: as is")
    args = parser.parse_args()
    if args.policy_share is not None:
        import privfair.release.policy_counts as policy_counts
        import privfair.release.tabular.plan as plan

        for module in (policy_counts, plan):
            if hasattr(module, "POLICY_SHARE"):
                module.POLICY_SHARE = args.policy_share
    from privfair.contracts.datasets import contract_path
    from privfair.release.run import release_table

    out = {}
    for contract, method in CASES:
        root = Path(tempfile.mkdtemp(prefix="privfair-parity-"))
        os.environ["PRIVFAIR_REGISTRY"] = str(root / "registry")
        folder = release_table({"contract": str(contract_path(contract)), "epsilon": 1.0,
                                "delta": 1e-9, "method": method, "seed": 11,
                                "insecure_seed": True, "out": str(root / "releases"),
                                "work_dir": str(root / "work")})
        digest = hashlib.sha256((folder / "synthetic.parquet").read_bytes()).hexdigest()
        out[f"{contract} {method}"] = digest
    print(json.dumps({"policy_share": args.policy_share, "sha256": out}, indent=2))


if __name__ == "__main__":
    main()
