"""The functional mechanism's floating-point leak (Mironov 2012) and its fix: releases on a grid.

The audit's finding: with floating-point Laplace noise, exact float values of the audit's
statistic occurred on D and (almost) never on D′, and an event built on them bounded ε above
the claim. The fixed mechanism rounds to a grid of multiples of g and adds g × exact discrete
Laplace noise, so the same event stays within the claim; the old float path, kept below only as
the reference of the bug, still exceeds it.
"""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privfair.core.accounting import LedgerEntry, PrivacyLedger, laplace_rho
from privfair.core.mechanisms import sample_discrete_laplace
from privfair.evaluation.audit import audit_functional
from privfair.learn.functional import (
    GRID_BITS,
    NoisyObjective,
    laplace_grid,
    noise_scales,
    noisy_objective,
)


def float_laplace_objective(x, y, s, *, epsilon, variant, row_l1_bound, ledger, rng,
                            alpha=1.0, fairness_share=0.5, centre, **_):
    """The release before the fix (public centre only): float Laplace noise added to float
    coefficients, the Laplace entries charged as the library charges them."""
    scales = noise_scales(epsilon=epsilon, variant=variant, row_l1_bound=row_l1_bound,
                          centre=centre, alpha=alpha, fairness_share=fairness_share)
    d = x.shape[1]
    eps_shift = fairness_share * epsilon if variant == "pflr-star" else 0.0
    linear, quadratic, shift = (0.5 - y) @ x, (x.T @ x) / 8, (s - centre) @ x
    for eps, scale, queries in ((eps_shift, scales.shift, d),
                                (epsilon - eps_shift, scales.coefficients, d + d * d)):
        if eps > 0:
            ledger.spend(LedgerEntry(name="float laplace", mechanism="laplace",
                                     sensitivity=scale * eps, rho=laplace_rho(epsilon=eps),
                                     epsilon=eps, queries=queries))
    if variant == "pflr":
        linear = linear + alpha * shift
    elif variant == "pflr-star":
        linear = linear + alpha * (shift + rng.laplace(0.0, scales.shift, size=d))
    linear = linear + rng.laplace(0.0, scales.coefficients, size=d)
    noise = rng.laplace(0.0, scales.coefficients, size=(d, d))
    return NoisyObjective(linear, quadratic + (noise + noise.T) / 2), scales, centre


def test_exact_float_event_within_the_claim_and_float_laplace_beyond_it():
    fixed = audit_functional(trials=10_000, variant="pflr", event="exact-float")
    assert fixed.claimed_epsilon == pytest.approx(1.0)
    assert fixed.epsilon_lower_bound <= fixed.claimed_epsilon
    assert fixed.controls_caught  # the event still has power: ε doubled exceeds the claim
    leaky = audit_functional(trials=10_000, variant="pflr", event="exact-float",
                             objective=float_laplace_objective)
    assert leaky.claimed_epsilon == pytest.approx(1.0)
    assert leaky.epsilon_lower_bound > leaky.claimed_epsilon + 0.3


@pytest.mark.parametrize("variant", ["privlr", "pflr-star"])
def test_exact_float_event_other_variants(variant):
    # The fixed release at the quick count (each of its runs draws exact integers: slower).
    fixed = audit_functional(trials=2_000, variant=variant, event="exact-float")
    assert fixed.epsilon_lower_bound <= fixed.claimed_epsilon
    leaky = audit_functional(trials=10_000, variant=variant, event="exact-float",
                             objective=float_laplace_objective)
    assert leaky.epsilon_lower_bound > leaky.claimed_epsilon + 0.3


def _rows(rng, n):
    x = np.zeros((n, 6))
    x[np.arange(n), rng.integers(0, 2, n)] = 1
    x[np.arange(n), 2 + rng.integers(0, 3, n)] = 1
    x[:, 5] = 1
    return x, rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)


@pytest.mark.parametrize("variant", ["privlr", "pflr", "pflr-star"])
def test_released_coefficients_are_multiples_of_the_grid(variant):
    x, y, s = _rows(np.random.default_rng(7), 300)
    for seed in range(3):
        objective, scales, _ = noisy_objective(
            x, y, s, epsilon=0.7, variant=variant, row_l1_bound=3,
            ledger=PrivacyLedger(epsilon_budget=10.0, delta=1e-6, accounting="rdp"),
            rng=np.random.default_rng(seed), alpha=0.4)
        g = objective.granularity
        assert g > 0 and np.frexp(g)[0] == 0.5  # a power of two
        assert g <= scales.coefficients * 2.0**-GRID_BITS
        released = [objective.linear, objective.quadratic]
        if variant == "pflr-star":
            assert objective.shift is not None and objective.shift_granularity > 0
            shift_steps = objective.shift / objective.shift_granularity
            assert np.array_equal(shift_steps, np.round(shift_steps))
        for values in released:
            steps = values / g
            assert np.array_equal(steps, np.round(steps))
            assert np.unique(values).size > 1  # noisy, not a constant


@pytest.mark.parametrize("sensitivity, epsilon, coordinates",
                         [(2.625, 2.0, 42), (0.775, 1.0, 6), (1.0, 0.01, 2), (27.3, 300.0, 10)])
def test_grid_privacy_loss_within_epsilon_and_scale_close_to_laplace(sensitivity, epsilon,
                                                                     coordinates):
    grid = laplace_grid(sensitivity=sensitivity, epsilon=epsilon, coordinates=coordinates)
    g = Fraction(grid.granularity)
    assert g.numerator == 1 and g.denominator & (g.denominator - 1) == 0
    # Rounded neighbours differ by ≤ Δ + m·g in L1: loss (Δ + m g)/(g t) ≤ ε exactly.
    assert grid.sensitivity == Fraction(sensitivity) + coordinates * g
    assert grid.sensitivity / (g * grid.steps) <= Fraction(epsilon)
    laplace_scale = sensitivity / epsilon
    assert laplace_scale <= grid.scale <= laplace_scale * (1 + 2.0**-(GRID_BITS - 1))


def test_discrete_laplace_sampler_matches_its_pmf():
    draws = sample_discrete_laplace(60_000, scale=3, rng=np.random.default_rng(11))
    p = np.exp(-1 / 3)
    ks = np.arange(-12, 13)
    expected = (1 - p) / (1 + p) * p ** np.abs(ks)
    observed = np.array([(draws == k).sum() for k in ks])
    assert stats.chisquare(observed, expected / expected.sum() * observed.sum()).pvalue > 0.01
    again = sample_discrete_laplace(50, scale=3, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(again, draws[:50])  # the Generator alone sets the draws
    with pytest.raises(TypeError):
        sample_discrete_laplace(1, scale=3, rng=np.random.RandomState(0))
