"""Issue 42.1's reproducer: a GAN release on a small credit-like table against independence.

A 1,000 × 21 credit-like table with skewed one-way marginals (a category holding most rows
beside rare ones) and a random tree of dependences, three protected attributes (sex, age
group, foreign worker) and a binary outcome, written as a CSV with its contract. Each method
is released through the library (``privfair release``, ``--insecure-seed``) at the same ε;
the published table is then scored against the real table (mean 1-way and 2-way TVD over
every attribute and pair: an evaluation, so it reads the data on purpose) beside what the
manifest states (which candidate was published, the fairness verdict).

Before issue 42.1, ``--method dpgan`` at ε = 1 published 1-way TVD 0.223 and 2-way 0.342
against independence's 0.037/0.086 on the publisher's table, reported "Fairness PASS".

    python benchmarks/gan_vs_independence.py --methods independent dpgan --seeds 3 \
        --out benchmarks/results/gan_vs_independence_after.json
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from _common import emit

NAMES = ["sex", "age_group", "foreign", "checking", "duration", "history", "purpose",
         "amount", "savings", "employment", "installment", "personal", "debtors",
         "residence", "property", "other_plans", "housing", "credits", "job", "telephone",
         "credit_risk"]
SIZES = [2, 4, 2, 4, 5, 5, 10, 5, 5, 5, 4, 3, 3, 4, 4, 3, 3, 4, 4, 2, 2]


def credit_like(rows: int, seed: int = 0) -> pd.DataFrame:
    """Skewed roots (Dirichlet 0.3: one category with most rows, others at a few %), each
    other attribute drawn given a random earlier parent (Dirichlet 0.5 conditionals)."""
    rng = np.random.default_rng(seed)
    codes: dict[str, np.ndarray] = {}
    for i, (name, size) in enumerate(zip(NAMES, SIZES, strict=True)):
        if i == 0:
            codes[name] = rng.choice(size, rows, p=rng.dirichlet(np.full(size, 0.3)))
            continue
        parent = NAMES[int(rng.integers(0, i))] if name != "credit_risk" else "checking"
        table = rng.dirichlet(np.full(size, 0.5), size=SIZES[NAMES.index(parent)])
        u = rng.random(rows)[:, None]
        codes[name] = (u > np.cumsum(table[codes[parent]], axis=1)).sum(1).clip(0, size - 1)
    return pd.DataFrame({a: [f"{a[:3]}{v}" for v in codes[a]] for a in NAMES})


def contract(name: str) -> dict:
    return {"name": name, "version": "1", "reviewed": True,
            "columns": [{"name": a, "type": "categorical",
                         "categories": [f"{a[:3]}{v}" for v in range(s)]}
                        for a, s in zip(NAMES, SIZES, strict=True)],
            "roles": {"protected": ["sex", "age_group", "foreign"],
                      "admissible": ["checking", "savings", "history"],
                      "outcome": ["credit_risk"]},
            "budget": {"epsilon": 100.0, "delta": 1e-5}}


def tvd(real: pd.DataFrame, synthetic: pd.DataFrame) -> tuple[float, float]:
    """Mean 1-way and 2-way TVD over every attribute and pair."""
    def dist(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
        return frame.groupby(cols, observed=True).size() / len(frame)

    def one(cols: list[str]) -> float:
        p, q = dist(real, cols), dist(synthetic.astype(str), cols)
        return 0.5 * float(p.sub(q, fill_value=0).abs().sum())

    ones = [one([a]) for a in NAMES]
    twos = [one(list(p)) for p in itertools.combinations(NAMES, 2)]
    return float(np.mean(ones)), float(np.mean(twos))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--methods", nargs="+", default=["independent", "dpgan"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--extra", nargs="*", default=[],
                        help="KEY=VALUE release parameters (e.g. allow_unfair=true)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pf-gan-vs-indep-"))
    os.environ.setdefault("PRIVFAIR_REGISTRY", str(work / "registry"))
    os.environ.setdefault("PRIVFAIR_STATE_HOME", str(work / "state"))
    from privfair.release.run import release_table

    real = credit_like(args.rows)
    data = work / "credit.csv"
    real.to_csv(data, index=False)
    extra = {k: yaml.safe_load(v) for k, v in (e.split("=", 1) for e in args.extra)}
    results: dict[str, dict] = {}
    for method in args.methods:
        runs = []
        for seed in range(args.seeds):
            # one dataset (and lifetime ledger) per run: a fixed seed is refused once used
            path = work / f"{method}-{seed}.yaml"
            path.write_text(yaml.safe_dump(contract(f"credit-{method}-{seed}")))
            start = time.perf_counter()
            try:
                folder = release_table({
                    "contract": str(path), "data": str(data), "epsilon": args.epsilon,
                    "delta": 1e-6, "method": method, "seed": 1000 + seed,
                    "insecure_seed": True, "out": str(work / "store"),
                    "work_dir": str(work / "work"), **extra})
            except Exception as exc:  # a refusal is a result here
                runs.append({"seed": seed, "error": f"{type(exc).__name__}: {exc}"[:300],
                             "seconds": time.perf_counter() - start})
                continue
            import json

            manifest = json.loads((folder / "manifest.json").read_text())
            one, two = tvd(real, pd.read_parquet(folder / "synthetic.parquet"))
            versus = manifest.get("versus_independence") or {}
            runs.append({"seed": seed, "tvd_1way": one, "tvd_2way": two,
                         "seconds": time.perf_counter() - start,
                         "published": versus.get("published"),
                         "dp_scores": versus.get("scores"),
                         "fairness_passed": manifest["fairness_check"].get("passed")})
        ok = [r for r in runs if "error" not in r]
        summary = {k: statistics.mean(r[k] for r in ok) for k in ("tvd_1way", "tvd_2way")} \
            if ok else {}
        results[method] = {"runs": runs, **summary}
    emit({"table": f"credit-like {args.rows} x {len(NAMES)}", "epsilon": args.epsilon,
          "extra": extra, "results": results}, args.out)


if __name__ == "__main__":
    main()
