"""The one mechanism layer (issue 32.1): every mechanism of ``core.mechanisms.MECHANISMS``
charges the ledger with its sensitivity and scale before it draws, shows the audit the exact
answer and the declared scale, and draws at ``noise_factor()`` × that scale."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import BudgetExceededError
from privfair.core.mechanisms import (
    MECHANISMS,
    exponential_first_admissible,
    exponential_mechanism,
    gaussian_mechanism,
    grid_laplace_mechanism,
    laplace_grid,
    laplace_mechanism,
    recorded_queries,
    row_laplace_mechanism,
    scaled_noise,
    sparse_laplace_histogram,
    subsampled_gaussian,
)

# --- (b) each mechanism: charge first, record, draw at the factor ---------------------------


@dataclass(frozen=True)
class Case:
    """One layer mechanism run on a fixed exact answer.

    ``run(ledger, rng)`` calls it once; ``spread(output)`` measures the noise of that output
    (a standard deviation or a mean norm: anything proportional to the drawn scale);
    ``entry_scale(entry)`` reads the declared scale back from the ledger entry.
    """

    mechanism: str
    exact: np.ndarray
    sensitivity: float
    scale: float
    run: Callable[[PrivacyLedger, Any], Any]
    spread: Callable[[Any], float]
    entry_scale: Callable[[Any], float]
    torch: bool = False


ZEROS = np.zeros(20_000)
SPARSE = np.full(5_000, 1_000.0)
ROWS = np.zeros((4_000, 3))


def _gaussian(discrete: bool) -> Case:
    exact = np.zeros(3_000 if discrete else 20_000, dtype=np.int64 if discrete else float)
    return Case(
        "gaussian", exact, 2.0, 3.0,
        lambda ledger, rng: gaussian_mechanism(
            exact, sigma=3.0, sensitivity=2.0, rng=rng, ledger=ledger, name="g",
            discrete=discrete,
            # seeded from the Generator's state, not a draw (nothing may be drawn first)
            discrete_source=random.Random(rng.bit_generator.state["state"]["state"])),
        lambda out: float(np.std(out)), lambda e: e.sigma)


def _exponential(first_admissible: bool) -> Case:
    # Two candidates whose scores differ by 2Δ/ε: P(pick 1) = 1/(1 + e^(−1/f)), whose
    # log-odds measure the drawn Gumbel scale f·2Δ/ε (1 at f = 1, 2 at f = 1/2).
    scores = np.array([0.0, 4.0])

    def one(ledger: PrivacyLedger, rng: np.random.Generator) -> int:
        if first_admissible:
            return exponential_first_admissible(scores, lambda i: True, epsilon=0.5,
                                                sensitivity=1.0, rng=rng, ledger=ledger,
                                                name="e")[0]
        return exponential_mechanism(scores, epsilon=0.5, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name="e")

    def run(ledger: PrivacyLedger, rng: np.random.Generator) -> np.ndarray:
        # One charge on ``ledger``, the rest on their own (a long ledger slows every spend).
        return np.array([one(ledger if i == 0 else PrivacyLedger(rho_budget=1.0), rng)
                         for i in range(8_000)])

    def spread(picks: np.ndarray) -> float:
        p = float(np.mean(picks))
        return 1.0 / math.log(p / (1 - p))  # the Gumbel scale in units of 2Δ/ε·(s1 − s0)

    return Case("exponential", scores, 1.0, 4.0, run, spread,
                lambda e: 2 * e.sensitivity / e.epsilon)


def _subsampled(counts: bool) -> Case:
    exact = np.zeros(20_000)

    def run(ledger: PrivacyLedger, generator: Any) -> Any:
        import torch

        noise = subsampled_gaussian(ledger=ledger, name="sgd", noise_multiplier=1.5,
                                    sample_rate=0.01, steps=10, sensitivity=2.0,
                                    count_noise_multiplier=3.0 if counts else None)
        summed = torch.zeros(20_000, dtype=torch.float64)
        if counts:
            return noise.add_count_noise(summed, generator=generator).numpy()
        return noise.add_gradient_noise(summed, generator=generator).numpy()

    return Case("subsampled-gaussian", exact, 1.0 if counts else 2.0, 3.0, run,
                lambda out: float(np.std(out)),
                (lambda e: 3.0) if counts else (lambda e: e.sigma), torch=True)


GRID = laplace_grid(sensitivity=1.0, epsilon=1.0, coordinates=4_000)
CASES: dict[str, Case] = {
    "gaussian": _gaussian(False),
    "discrete gaussian": _gaussian(True),
    "exponential": _exponential(False),
    "exponential first admissible": _exponential(True),
    "laplace": Case(
        "laplace", ZEROS, 2.0, 4.0,
        lambda ledger, rng: laplace_mechanism(ZEROS, epsilon=0.5, sensitivity=2.0, rng=rng,
                                              ledger=ledger, name="l"),
        lambda out: float(np.std(out)), lambda e: e.sensitivity / e.epsilon),
    "grid laplace": Case(
        "grid-laplace", np.zeros(4_000), float(GRID.sensitivity), GRID.scale,
        lambda ledger, rng: grid_laplace_mechanism(np.zeros(4_000), epsilon=1.0,
                                                   sensitivity=1.0, rng=rng, ledger=ledger,
                                                   name="gl"),
        lambda out: float(np.std(out)), lambda e: GRID.scale),
    "sparse laplace": Case(
        "sparse-laplace", SPARSE, 1.0, 2.0,
        lambda ledger, rng: sparse_laplace_histogram(
            SPARSE, universe_size=10_000, outside_probability=0.25, epsilon=0.5, rng=rng,
            ledger=ledger, name="s", sample_outside=lambda k: list(range(k))),
        lambda out: float(np.std(out.counts)), lambda e: 1 / e.epsilon),
    "row laplace": Case(
        "row-laplace", ROWS, 8.0, 4.0,
        lambda ledger, rng: row_laplace_mechanism(ROWS, epsilon=2.0, sensitivity=8.0,
                                                  rng=rng, ledger=ledger, name="r"),
        lambda out: float(np.linalg.norm(out, axis=1).mean()),
        lambda e: e.sensitivity / e.epsilon),
    "subsampled gaussian gradients": _subsampled(False),
    "subsampled gaussian counts": _subsampled(True),
}


def _source(case: Case, seed: int) -> Any:
    if case.torch:
        import torch

        return torch.Generator().manual_seed(seed)
    return np.random.default_rng(seed)


def _state(source: Any) -> Any:
    return source.get_state() if hasattr(source, "get_state") else source.bit_generator.state


def test_every_mechanism_of_the_inventory_has_a_case():
    assert {case.mechanism for case in CASES.values()} == set(MECHANISMS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_budget_too_small_raises_with_nothing_drawn_or_recorded(name):
    case = CASES[name]
    ledger = PrivacyLedger(rho_budget=1e-12, delta=1e-9)
    source = _source(case, 5)
    before = _state(source)
    with recorded_queries() as queries, pytest.raises(BudgetExceededError):
        case.run(ledger, source)
    state = _state(source)
    assert (bool((state == before).all()) if hasattr(state, "all") else state == before)
    assert ledger.entries == () and queries == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_ledger_and_the_recorder_see_the_declared_sensitivity_and_scale(name):
    case = CASES[name]
    ledger = PrivacyLedger(rho_budget=1e6, delta=1e-9)
    with recorded_queries() as queries:
        case.run(ledger, _source(case, 1))
    entries = ledger.entries
    entry = entries[0]
    assert case.entry_scale(entry) == pytest.approx(case.scale, rel=1e-6)
    if case.mechanism not in ("subsampled-gaussian", "exponential"):
        assert entry.sensitivity == pytest.approx(case.sensitivity, rel=1e-12)
    query = queries[0]
    assert query.mechanism == case.mechanism
    assert query.sensitivity == pytest.approx(case.sensitivity, rel=1e-12)
    assert query.scale == pytest.approx(case.scale, rel=1e-12)
    np.testing.assert_array_equal(query.exact, case.exact)


@pytest.mark.parametrize("name", sorted(CASES))
def test_scaled_noise_halves_the_noise_actually_drawn(name):
    case = CASES[name]
    full = case.spread(case.run(PrivacyLedger(rho_budget=1e6, delta=1e-9), _source(case, 2)))
    with scaled_noise(0.5):
        half = case.spread(case.run(PrivacyLedger(rho_budget=1e6, delta=1e-9),
                                    _source(case, 3)))
    assert full == pytest.approx(case.scale * _unit(case), rel=0.06)
    assert half / full == pytest.approx(0.5, abs=0.05)


def _unit(case: Case) -> float:
    """``spread`` of noise of scale 1: std of N(0, 1), of Laplace(1) and of the grid noise,
    the mean norm Gamma(3, 1) of row noise, and for the exponential mechanism the Gumbel
    scale in units of 2Δ/ε over the score gap of 4 (1/4)."""
    return {"gaussian": 1.0, "subsampled-gaussian": 1.0, "laplace": math.sqrt(2),
            "grid-laplace": math.sqrt(2), "sparse-laplace": math.sqrt(2), "row-laplace": 3.0,
            "exponential": 0.25}[case.mechanism]


def test_sparse_histogram_outside_draws_follow_the_scaled_noise():
    """CatHist's values from outside the active domain stand for empty bins whose noise
    passed τ: under scaled_noise their number and counts follow the scaled noise too."""
    draws = {}
    for factor, seed in ((1.0, 4), (0.5, 6)):
        with scaled_noise(factor):
            out = sparse_laplace_histogram(
                np.zeros(0), universe_size=40_000, outside_probability=0.25, epsilon=0.5,
                rng=np.random.default_rng(seed), ledger=PrivacyLedger(rho_budget=10.0),
                name="s", sample_outside=lambda k: list(range(k)))
        draws[factor] = out
    tau = draws[1.0].threshold
    assert tau == pytest.approx(-math.log(0.5) / 0.5)
    # p = 1/4 at the declared scale; with half the noise ½e^(−τ/(b/2)) = 2p² = 1/8.
    assert len(draws[1.0].outside) == pytest.approx(10_000, rel=0.05)
    assert len(draws[0.5].outside) == pytest.approx(5_000, rel=0.05)
    assert np.mean(draws[1.0].outside_counts - tau) == pytest.approx(2.0, rel=0.05)
    assert np.mean(draws[0.5].outside_counts - tau) == pytest.approx(1.0, rel=0.05)


def test_subsampled_gaussian_refuses_a_step_bound_above_the_charged_one():
    import torch

    noise = subsampled_gaussian(ledger=PrivacyLedger(rho_budget=1e6, delta=1e-9), name="sgd",
                                noise_multiplier=1.0, sample_rate=0.1, steps=3,
                                sensitivity=1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        noise.add_gradient_noise(torch.zeros(3), generator=torch.Generator(), sensitivity=1.5)
    with pytest.raises(ValueError, match="no count noise"):
        noise.add_count_noise(torch.zeros(3), generator=torch.Generator())
    # A smaller step bound draws noise σ·C of that bound, and records it.
    with recorded_queries() as queries:
        out = noise.add_gradient_noise(torch.zeros(20_000, dtype=torch.float64),
                                       generator=torch.Generator().manual_seed(0),
                                       sensitivity=0.25)
    assert float(out.std()) == pytest.approx(0.25, rel=0.03)
    assert queries[0].scale == 0.25 and queries[0].sensitivity == 0.25
