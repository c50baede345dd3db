"""Exact noise (issue 41.2): the samplers' speed, and float vs exact noise at small n.

1. Microseconds per draw of the layer's exact samplers (discrete Gaussian at several σ,
   discrete Laplace at a rational scale) and per cell of ``gaussian_mechanism`` on integer
   counts and on real answers (the grid).
2. The small-n structures of ``tests/test_small_n.py``'s credit-like table (7 columns, only
   sex → outcome): edges chosen per seed by prefair-greedy and prefair-exact with the float
   Gaussian (``discrete_noise=False``, benchmarks only) and with exact noise, mean ± standard
   error over seeds: the check that the exact path selects like the float one.

    python benchmarks/exact_noise.py --seeds 12 --out benchmarks/results/exact_noise.json
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain, Roles
from privfair.core.mechanisms import (
    gaussian_mechanism,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)
from privfair.synth.synthesizer import FairSynthesizer


def credit_like(n: int = 1000, seed: int = 1) -> tuple[pd.DataFrame, Domain, Roles]:
    """Seven columns (4-5 levels and three binary ones), independent but for sex → outcome.

    The shape of the 1,000-row credit table where mst/prefair's 2-way TVD was 0.096 against
    independent's 0.089 (issue 23.3): its 5×5 pairs at n = 1,000 are mostly noise. Also the
    table of tests/test_small_n.py.
    """
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    good = (rng.random(n) < np.where(sex == 1, 0.8, 0.55)).astype(np.int64)
    frame = pd.DataFrame({
        "checking": rng.integers(0, 4, n), "duration": rng.integers(0, 5, n),
        "purpose": rng.integers(0, 5, n), "amount": rng.integers(0, 5, n), "sex": sex,
        "age": rng.integers(0, 5, n), "credit_risk": good})
    domain = Domain(tuple(frame.columns), (4, 5, 5, 5, 2, 5, 2))
    roles = Roles(protected=("sex",), admissible=("checking", "amount"),
                  outcome=("credit_risk",))
    return frame, domain, roles


def per_draw_us(call, size: int) -> float:
    start = time.perf_counter()
    call(size)
    return round((time.perf_counter() - start) / size * 1e6, 1)


def speed(size: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    out = {f"discrete_gaussian_sigma_{s:g}_us": per_draw_us(
        lambda k, s=s: sample_discrete_gaussian(k, sigma=s, rng=rng), size)
        for s in (0.8, 25.0, 1e4)}
    out["discrete_laplace_scale_7/3_us"] = per_draw_us(
        lambda k: sample_discrete_laplace(k, scale=Fraction(7, 3), rng=rng), size)
    ledger = PrivacyLedger(rho_budget=1e9)
    out["gaussian_mechanism_counts_us_per_cell"] = per_draw_us(
        lambda k: gaussian_mechanism(np.zeros(k, dtype=np.int64), sigma=25.0, sensitivity=1.0,
                                     rng=rng, ledger=ledger, name="c"), size)
    out["gaussian_mechanism_grid_us_per_cell"] = per_draw_us(
        lambda k: gaussian_mechanism(np.zeros(k), sigma=25.0, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name="g"), size)
    out["float_gaussian_us_per_cell"] = per_draw_us(
        lambda k: gaussian_mechanism(np.zeros(k), sigma=25.0, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name="f", discrete=False), size)
    return out


def edges(seeds: int) -> dict[str, dict]:
    frame, domain, roles = credit_like()
    out = {}
    for method in ("prefair-greedy", "prefair-exact"):
        for discrete in (False, True):
            chosen = []
            for seed in range(seeds):
                fit_rng, _ = np.random.default_rng(seed).spawn(2)
                synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                                        method=method, require_fair=False, max_iters=50,
                                        discrete_noise=discrete)
                synth.measure(frame, rng=fit_rng)
                chosen.append(len(synth.structure_.cliques))
            out[f"{method} {'exact' if discrete else 'float'}"] = {
                "edges": chosen, "mean": round(float(np.mean(chosen)), 3),
                "se": round(float(np.std(chosen, ddof=1) / np.sqrt(seeds)), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {"speed": speed(args.draws), "small_n_edges": edges(args.seeds)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
