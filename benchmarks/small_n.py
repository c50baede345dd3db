"""Small-n quality (issues 15, 23.3): 2-way TVD at n = 1,000 against the DP independence baseline.

Tables: 1,000-row samples of Adult and COMPAS (embedded, discretised by their contracts) and
generated tables with strong pairwise dependence (``benchmarks/gen_table.py``: 21 and 8
attributes, Dirichlet concentration 0.3). Each (table, method, seed) fits with the library's
:class:`~privfair.synth.synthesizer.FairSynthesizer` at the same (ε, δ) and samples n rows; the
JSON gives per table the mean and sd of the 2-way TVD per method, its ratio to
``independent``'s, how many seeds fell back to independence, and the non-private product of
the true 1-way marginals (the best an independence model can do). This is an evaluation
against the real table, so it reads the data on purpose.

    python benchmarks/small_n.py --out benchmarks/results/small_n.json     # ε = 1, 5 seeds
    python benchmarks/small_n.py --tables adult --methods independent mst --seeds 3
    python benchmarks/small_n.py --calibrate     # the fallback rule against tree/indep ratios
    # issue 34: per-pair rule, 1,000 rows, ε ∈ {1, 2, 4}, every table method, 5 seeds
    python benchmarks/small_n.py --tables adult compas credit21 --eps 1 2 4 \
        --methods independent mst prefair-greedy prefair-exact aim aim-fair \
        --out benchmarks/results/small_n_stop15.json
    # issue 34.1: the trees' limit 0.15 and noise-net selection that may stop (tree methods)
    python benchmarks/small_n.py --tables adult compas credit21 --eps 1 2 4 \
        --methods independent mst prefair-greedy prefair-exact \
        --out benchmarks/results/small_n_issue34.json
    # issue 34.1 final: the selection's ρ sized by selection_rho, unchosen edges' ρ on the
    # one-way marginals; 10 seeds, ``ratio_se`` the ratio's standard error over seeds
    python benchmarks/small_n.py --tables adult compas credit21 --eps 1 2 4 \
        --methods independent mst prefair-greedy prefair-exact --seeds 10 \
        --out benchmarks/results/small_n_issue34_final.json

``credit21`` is a generated 21-attribute credit-like table (2-10 levels) with three protected
attributes (sex, age group, foreign worker), a binary outcome and real pairwise structure: a
random tree of parent → child dependences (Dirichlet 0.5 conditionals).

``--calibrate`` runs mst and independent (no fallback) on weakly and strongly dependent tables
of 300-8,000 rows and prints, per table, the fallback rule's public value
(:func:`~privfair.synth.synthesizer.tree_signal`) beside the tree's 2-way TVD ratio: the data
behind ``NOISE_TVD_LIMIT``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import emit, load_codes

METHODS = ("independent", "mst", "prefair-greedy", "aim")
TABLES = ("adult", "compas", "gen21-strong", "gen8-strong")


class Codes:
    """A table given as codes, its domain and roles (what :func:`run` needs of a contract)."""

    def __init__(self, domain, roles) -> None:
        self._domain, self._roles = domain, roles

    def domain(self):
        return self._domain

    def roles(self):
        return self._roles


def credit21(rows: int, seed: int = 0):
    """21 credit-like attributes, three protected, with a random tree of dependences."""
    import numpy as np
    import pandas as pd

    from privfair.core.domain import Domain, Roles

    rng = np.random.default_rng(seed)
    names = ["sex", "age_group", "foreign", "checking", "duration", "history", "purpose",
             "amount", "savings", "employment", "installment", "personal", "debtors",
             "residence", "property", "other_plans", "housing", "credits", "job",
             "telephone", "credit_risk"]
    sizes = [2, 4, 2, 4, 5, 5, 10, 5, 5, 5, 4, 3, 3, 4, 4, 3, 3, 4, 4, 2, 2]
    codes: dict[str, np.ndarray] = {}
    for i, (name, size) in enumerate(zip(names, sizes, strict=True)):
        if i == 0:
            codes[name] = rng.choice(size, rows, p=rng.dirichlet(np.ones(size)))
            continue
        parent = names[int(rng.integers(0, i))] if name != "credit_risk" else "checking"
        table = rng.dirichlet(np.full(size, 0.5), size=sizes[names.index(parent)])
        u = rng.random(rows)[:, None]
        codes[name] = (u > np.cumsum(table[codes[parent]], axis=1)).sum(1).clip(0, size - 1)
    domain = Domain(tuple(names), tuple(sizes))
    roles = Roles(protected=("sex", "age_group", "foreign"),
                  admissible=("checking", "savings", "history"), outcome=("credit_risk",))
    return pd.DataFrame(codes), Codes(domain, roles)


def generated(rows: int, attributes: int, concentration: float):
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


def sample(name: str, rows: int, seed: int = 0):
    """A ``rows``-row sample (without replacement when the table is large enough)."""
    import numpy as np

    codes, contract = load_codes(name)
    rng = np.random.default_rng(seed)
    index = rng.choice(len(codes), rows, replace=len(codes) < rows)
    return codes.iloc[index].reset_index(drop=True), contract


def table(name: str, rows: int):
    if name in ("adult", "compas"):
        return sample(name, rows)
    if name == "credit21":
        return credit21(rows)
    attributes, _, strength = name.removeprefix("gen").partition("-")
    return generated(rows, int(attributes), 0.3 if strength == "strong" else 20.0)


def independence_tvd(codes, domain) -> float:
    """2-way TVD of the product of the true 1-way marginals (non-private reference)."""
    import numpy as np
    import pandas as pd

    from privfair.evaluation.utility import marginal_tvd

    rng = np.random.default_rng(0)
    product = pd.DataFrame({a: rng.permutation(codes[a].to_numpy()) for a in codes.columns})
    return marginal_tvd(codes, product, domain, 2)


def run(codes, contract, method: str, seed: int, eps: float, **options) -> dict:
    import numpy as np

    from privfair.evaluation.utility import marginal_tvd
    from privfair.synth.synthesizer import FairSynthesizer

    domain, roles = contract.domain(), contract.roles()
    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    start = time.perf_counter()
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=eps, delta=1e-6,
                            method=method, require_fair=False, **options)
    synth.fit(codes, rng=fit_rng)
    synthetic = synth.sample(len(codes), rng=sample_rng)
    signal = getattr(synth, "qualification_", None)
    return {"method": method, "seed": seed, "epsilon": eps,
            "fit_s": round(time.perf_counter() - start, 3),
            "tvd1": marginal_tvd(codes, synthetic, domain, 1),
            "tvd2": marginal_tvd(codes, synthetic, domain, 2),
            "edges": len(synth.structure_.edges), "structure": synth.structure_.method,
            "qualifying_pairs": None if signal is None else len(signal.kept),
            "forest_edges": None if signal is None else signal.forest_edges}


def ratio_se(tvd2: list[float], base: list[float]) -> float | None:
    """Standard error of mean(tvd2) / mean(base) over seeds (delta method, independent
    seeds): ``√(se² + ratio²·se_base²) / mean(base)``."""
    if len(tvd2) < 2 or len(base) < 2:
        return None
    mean, mean_base = statistics.mean(tvd2), statistics.mean(base)
    se = statistics.stdev(tvd2) / len(tvd2) ** 0.5
    se_base = statistics.stdev(base) / len(base) ** 0.5
    return ((se ** 2 + (mean / mean_base * se_base) ** 2) ** 0.5) / mean_base


def summarise(records: list[dict], methods: list[str]) -> dict:
    out = {}
    base_runs = [r["tvd2"] for r in records if r["method"] == "independent"]
    base = statistics.mean(base_runs) if base_runs else None
    for method in methods:
        rows = [r for r in records if r["method"] == method]
        tvd2 = [r["tvd2"] for r in rows]
        se = ratio_se(tvd2, base_runs) if base else None
        out[method] = {
            "tvd2": round(statistics.mean(tvd2), 4),
            "tvd2_sd": round(statistics.stdev(tvd2), 4) if len(rows) > 1 else None,
            "tvd2_per_seed": [round(t, 4) for t in tvd2],
            "ratio_to_independent": round(statistics.mean(tvd2) / base, 3) if base else None,
            "ratio_se": None if se is None else round(se, 3),
            "tvd1": round(statistics.mean(r["tvd1"] for r in rows), 4),
            "fit_s": round(statistics.mean(r["fit_s"] for r in rows), 3),
            "fell_back": sum(r["structure"].endswith("(small-n fallback)") for r in rows),
        }
    return out


def calibrate(seeds: int, eps: float) -> dict:
    """The rule's public value beside mst/independent (fallback off), per table and n."""
    import statistics as st

    from privfair.core.accounting import zcdp_rho
    from privfair.synth.synthesizer import tree_signal

    grid = [("adult", n) for n in (1000, 2000, 3000, 4000)]
    grid += [("compas", n) for n in (300, 500, 700, 1000)]
    grid += [("gen8-weak", n) for n in (1000, 2000, 3000, 5000)]
    grid += [("gen21-weak", n) for n in (2000, 4000, 8000)]
    grid += [("gen8-strong", n) for n in (1000, 2000)]
    rho = zcdp_rho(epsilon=eps, delta=1e-6)
    rows = []
    for name, n in grid:
        codes, contract = table(name, n)
        domain = contract.domain()
        d = len(domain.sizes)
        signal = tree_signal(float(n), domain.sizes, rho_tree=2 * rho / 3,
                             one_way_sigma=(d / (2 * rho / 3)) ** 0.5)
        tvd = {m: st.mean(run(codes, contract, m, s, eps, small_n_fallback=False)["tvd2"]
                          for s in range(seeds)) for m in ("independent", "mst")}
        rows.append({"table": name, "rows": n, "rule": round(signal.noise_tvd, 4),
                     "independent": round(tvd["independent"], 4), "mst": round(tvd["mst"], 4),
                     "ratio": round(tvd["mst"] / tvd["independent"], 3)})
        print(rows[-1], file=sys.stderr, flush=True)
    return {"benchmark": "small_n_calibration", "epsilon": eps, "seeds": seeds,
            "limit": signal.limit, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--tables", nargs="+", default=list(TABLES),
                        help="adult, compas, credit21, gen<d>-strong or gen<d>-weak")
    parser.add_argument("--aim-time", type=float, default=60.0,
                        help="AIM's time budget per fit in seconds (the release default is 240)")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    if args.calibrate:
        emit(calibrate(args.seeds, args.eps[0]), args.out)
        return
    tables, records = {}, []
    for name in args.tables:
        codes, contract = table(name, args.rows)
        for eps in args.eps:
            runs = []
            for method in args.methods:
                options = {"max_time_s": args.aim_time} if method.startswith("aim") else {}
                for seed in range(args.seeds):
                    runs.append(run(codes, contract, method, seed, eps, **options))
                    print(name, runs[-1], file=sys.stderr, flush=True)
            tables[f"{name} eps={eps:g}"] = {
                "table": name, "epsilon": eps, "rows": len(codes),
                "attributes": len(codes.columns),
                "nonprivate_independence_tvd2":
                    round(independence_tvd(codes, contract.domain()), 4),
                "methods": summarise(runs, args.methods)}
            records += [{"table": name, **r} for r in runs]
    emit({"benchmark": "small_n", "epsilon": args.eps, "delta": 1e-6, "seeds": args.seeds,
          "methods": args.methods, "load_avg": os.getloadavg(), "tables": tables,
          "runs": records}, args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
