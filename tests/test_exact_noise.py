"""Issue 41.2: every noise draw the layer publishes is exact (no floating-point noise).

The samplers are checked against their exact pmf (a chi-square and a variance or tail test);
each check is also run on a deliberately broken sampler, which must fail it, so the checks
have the power to see a wrong sampler and not only pass a right one.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privfair.core import mechanisms
from privfair.core.accounting import PrivacyLedger, gaussian_rho
from privfair.core.mechanisms import (
    gaussian_grid,
    gaussian_mechanism,
    laplace_mechanism,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)


def _fits_pmf(draws: np.ndarray, pmf: dict[int, float]) -> bool:
    """Chi-square of the draws against ``pmf`` (cells with ≥ 5 expected, the rest pooled)."""
    support = np.array(sorted(pmf))
    p = np.array([pmf[k] for k in support])
    observed = np.array([(draws == k).sum() for k in support], dtype=float)
    expected = p * draws.size
    keep = expected >= 5
    obs = np.append(observed[keep], draws.size - observed[keep].sum())
    exp = np.append(expected[keep], draws.size - expected[keep].sum())
    mask = exp > 0
    chi = float(((obs[mask] - exp[mask]) ** 2 / exp[mask]).sum())
    return bool(stats.chi2.sf(chi, mask.sum() - 1) > 1e-3)


def _gaussian_pmf(sigma2: float) -> dict[int, float]:
    k = np.arange(-60, 61)
    w = np.exp(-k.astype(float) ** 2 / (2 * sigma2))
    return dict(zip(k.tolist(), (w / w.sum()).tolist(), strict=True))


def _laplace_pmf(scale: float) -> dict[int, float]:
    k = np.arange(-200, 201)
    w = np.exp(-np.abs(k) / scale)
    return dict(zip(k.tolist(), (w / w.sum()).tolist(), strict=True))


def _discrete_gaussian_ok(draws: np.ndarray, sigma: float) -> bool:
    """pmf, variance (N_Z's is σ² to within e^{−2π²σ²}) and the 3σ tail."""
    n = draws.size
    variance_se = sigma**2 * math.sqrt(2 / n)
    tail = float(np.mean(np.abs(draws) > 3 * sigma))
    tail_p = sum(p for k, p in _gaussian_pmf(sigma**2).items() if abs(k) > 3 * sigma)
    return (_fits_pmf(draws, _gaussian_pmf(sigma**2))
            and abs(float(np.var(draws)) - sigma**2) < 4 * variance_se
            and abs(tail - tail_p) < 4 * math.sqrt(tail_p * (1 - tail_p) / n) + 1e-4)


def _broken_gaussian_one(num: int, den: int, source: random.Random) -> int:
    # γ with σ² where 2σ² belongs: the acceptance of CKS Algorithm 3 off by a factor of 2
    t = math.isqrt(num // den) + 1
    while True:
        y = mechanisms._discrete_laplace(t, source)
        if mechanisms._bernoulli_exp_neg((abs(y) * den * t - num) ** 2, num * den * t * t,
                                         source):
            return y


@pytest.mark.parametrize("sigma", [0.8, 2.5, 6.3])
def test_discrete_gaussian_matches_its_pmf_variance_and_tail(sigma):
    draws = sample_discrete_gaussian(20_000, sigma=sigma, rng=np.random.default_rng(4))
    assert draws.dtype == np.int64
    assert _discrete_gaussian_ok(draws, sigma)


def test_a_broken_discrete_gaussian_fails_the_same_checks(monkeypatch):
    monkeypatch.setattr(mechanisms, "_discrete_gaussian_one", _broken_gaussian_one)
    draws = sample_discrete_gaussian(20_000, sigma=2.5, rng=np.random.default_rng(4))
    assert not _discrete_gaussian_ok(draws, 2.5)


@pytest.mark.parametrize("scale", [Fraction(7, 3), Fraction(1, 2), 5])
def test_discrete_laplace_with_a_rational_scale_matches_its_pmf(scale):
    draws = sample_discrete_laplace(20_000, scale=scale, rng=np.random.default_rng(9))
    assert _fits_pmf(draws, _laplace_pmf(float(scale)))


def test_a_discrete_laplace_that_drops_the_denominator_fails(monkeypatch):
    real = mechanisms._discrete_laplace
    monkeypatch.setattr(mechanisms, "_discrete_laplace",
                        lambda t, source, s=1: real(t, source))  # scale t, not t/s
    draws = sample_discrete_laplace(20_000, scale=Fraction(7, 3), rng=np.random.default_rng(9))
    assert not _fits_pmf(draws, _laplace_pmf(7 / 3))


def test_integer_counts_get_exact_discrete_laplace_at_the_declared_scale():
    ledger = PrivacyLedger(rho_budget=10.0)
    counts = np.arange(8_000, dtype=np.int64) % 50
    noisy = laplace_mechanism(counts, epsilon=0.7, sensitivity=1.0,
                              rng=np.random.default_rng(2), ledger=ledger, name="c")
    assert np.array_equal(noisy, np.round(noisy))  # integers: no float noise
    assert _fits_pmf((noisy - counts).astype(np.int64), _laplace_pmf(1 / 0.7))
    assert ledger.entries[0].epsilon == 0.7 and ledger.entries[0].mechanism == "laplace"


def test_real_answers_go_to_the_grid_and_keep_the_declared_rho():
    ledger = PrivacyLedger(rho_budget=10.0)
    values = np.random.default_rng(0).normal(size=3_000) * 40
    noisy = gaussian_mechanism(values, sigma=2.0, sensitivity=1.5,
                               rng=np.random.default_rng(1), ledger=ledger, name="w")
    grid = gaussian_grid(sensitivity=1.5, sigma=2.0, coordinates=3_000)
    steps = noisy / grid.granularity
    assert np.array_equal(steps, np.round(steps))  # multiples of g: no float noise
    entry = ledger.entries[0]
    assert entry.mechanism == "discrete-gaussian"
    assert entry.rho == gaussian_rho(sigma=2.0, sensitivity=1.5)
    # the rounded release's ρ, in exact rationals, is the declared one
    g = Fraction(grid.granularity)
    assert (grid.sensitivity / g) ** 2 / (2 * grid.sigma_steps**2) == \
        Fraction(1.5) ** 2 / (2 * Fraction(2.0) ** 2)
    assert 1 < grid.sigma / 2.0 < 1 + 2**-20
    z = (noisy - values) / grid.sigma
    assert abs(float(np.var(z)) - 1) < 4 * math.sqrt(2 / z.size)


def test_rounded_neighbours_stay_within_the_grids_sensitivity():
    """Δ' = Δ + g⌈√m⌉ bounds the rounded vectors' L2 distance (the proof's one step)."""
    rng = np.random.default_rng(3)
    for m in (1, 7, 100):
        grid = gaussian_grid(sensitivity=1.0, sigma=0.5, coordinates=m)
        for _ in range(200):
            x = rng.normal(size=m) * 3
            step = rng.normal(size=m)
            y = x + step / np.linalg.norm(step)  # ‖x − y‖₂ = 1 = Δ
            rx, ry = np.rint(x / grid.granularity), np.rint(y / grid.granularity)
            assert np.linalg.norm(rx - ry) * grid.granularity <= float(grid.sensitivity)
        # and without the g⌈√m⌉ term the bound is broken by rounding
        worst = np.full(m, 0.5 * grid.granularity * (1 - 2**-10))
        moved = worst + 1 / math.sqrt(m)
        gap = np.linalg.norm(np.rint(worst / grid.granularity)
                             - np.rint(moved / grid.granularity)) * grid.granularity
        assert gap > 1.0 or m == 1 and gap >= 1.0


def test_a_float_gaussian_is_what_the_exact_path_replaced():
    """The float path (``discrete=False``, benchmarks only) publishes full-precision noise:
    the steps check above fails on it."""
    noisy = gaussian_mechanism(np.zeros(200), sigma=2.0, sensitivity=1.0,
                               rng=np.random.default_rng(1),
                               ledger=PrivacyLedger(rho_budget=10.0), name="f", discrete=False)
    grid = gaussian_grid(sensitivity=1.0, sigma=2.0, coordinates=200)
    steps = noisy / grid.granularity
    assert not np.array_equal(steps, np.round(steps))
