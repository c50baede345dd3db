"""Small-n quality (issue 15): 2-way TVD at n = 1,000 against the DP independence baseline.

The table is the generated 1,000-row x 21-attribute one (``benchmarks/gen_table.py``),
discretised by its contract. Each (method, seed) fits with the library's
:class:`~privfair.synth.synthesizer.FairSynthesizer` at the same (ε, δ) and samples n rows;
the JSON gives mean 1-way and 2-way TVD per method, the non-private product of the true
1-way marginals (the best an independence model can do) and the load average. This is an
evaluation against the real table, so it reads the data on purpose.

    python benchmarks/small_n.py                         # ε = 1, 5 seeds
    python benchmarks/small_n.py --eps 1 4 --seeds 3 --methods independent mst
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import emit

METHODS = ("independent", "mst", "prefair-greedy", "aim")


def load(rows: int, attributes: int, concentration: float):
    import pandas as pd
    from gen_table import write

    from privfair.contracts.encoding import discretize
    from privfair.contracts.schema import load_contract

    with tempfile.TemporaryDirectory() as tmp:
        info = write(Path(tmp), rows, attributes, seed=0, concentration=concentration)
        contract = load_contract(info["contract"])
        raw = pd.read_csv(info["data"])
    numeric = [c.name for c in contract.columns if c.type == "numeric"]
    raw = raw.astype(dict.fromkeys(numeric, float))
    codes = pd.DataFrame(discretize(raw, contract))
    return codes, contract


def independence_tvd(codes, domain) -> float:
    """2-way TVD of the product of the true 1-way marginals (non-private reference)."""
    import numpy as np
    import pandas as pd

    from privfair.evaluation.utility import marginal_tvd

    rng = np.random.default_rng(0)
    product = pd.DataFrame({a: rng.permutation(codes[a].to_numpy()) for a in codes.columns})
    return marginal_tvd(codes, product, domain, 2)


def main() -> None:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--attributes", type=int, default=21)
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--concentration", type=float, default=0.3,
                        help="gen_table dependence: 0.3 strong, 20 nearly independent")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    codes, contract = load(args.rows, args.attributes, args.concentration)
    domain, roles = contract.domain(), contract.roles()
    records = []
    for eps in args.eps:
        for method in args.methods:
            for seed in range(args.seeds):
                fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
                start = time.perf_counter()
                synth = FairSynthesizer(domain=domain, roles=roles, epsilon=eps, delta=1e-6,
                                        method=method, require_fair=False)
                synth.fit(codes, rng=fit_rng)
                synthetic = synth.sample(len(codes), rng=sample_rng)
                records.append({
                    "epsilon": eps, "method": method, "seed": seed,
                    "fit_s": round(time.perf_counter() - start, 3),
                    "tvd1": marginal_tvd(codes, synthetic, domain, 1),
                    "tvd2": marginal_tvd(codes, synthetic, domain, 2),
                    "edges": len(synth.structure_.edges),
                })
    summary = {}
    for eps in args.eps:
        for method in args.methods:
            rows = [r for r in records if r["epsilon"] == eps and r["method"] == method]
            summary[f"{method}@eps={eps:g}"] = {
                k: round(statistics.mean(r[k] for r in rows), 4)
                for k in ("tvd1", "tvd2", "fit_s")} | {
                "tvd2_sd": round(statistics.stdev(r["tvd2"] for r in rows), 4)
                if len(rows) > 1 else None}
    emit({"benchmark": "small_n", "rows": args.rows, "attributes": args.attributes,
          "concentration": args.concentration,
          "load_avg": os.getloadavg(),
          "nonprivate_independence_tvd2": round(independence_tvd(codes, domain), 4),
          "summary": summary, "runs": records}, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
