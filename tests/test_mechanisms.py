import math
import random

import numpy as np
import pytest
from scipy import stats

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import BudgetExceededError
from privfair.core.mechanisms import (
    exponential_mechanism,
    gaussian_mechanism,
    sample_discrete_gaussian,
)


def test_gaussian_noise_has_the_charged_scale():
    ledger = PrivacyLedger(rho_budget=1.0)
    rng = np.random.default_rng(1)
    values = np.zeros(40_000)
    noisy = gaussian_mechanism(values, sigma=2.5, sensitivity=2.0, rng=rng, ledger=ledger,
                               name="t")
    (entry,) = ledger.entries
    assert entry.rho == pytest.approx(2.0**2 / (2 * 2.5**2))
    # Variance chi-square test: (n-1) s^2 / sigma^2 ~ chi2(n-1).
    n = values.size
    statistic = (n - 1) * noisy.var(ddof=1) / entry.sigma**2
    assert stats.chi2.cdf(statistic, n - 1) == pytest.approx(0.5, abs=0.49)
    assert abs(noisy.mean()) < 4 * 2.5 / math.sqrt(n)
    assert stats.kstest(noisy / 2.5, "norm").pvalue > 0.001


def test_overspend_raises_before_any_noise_is_drawn():
    ledger = PrivacyLedger(rho_budget=0.01)
    rng = np.random.default_rng(7)
    with pytest.raises(BudgetExceededError):
        gaussian_mechanism(np.zeros(3), sigma=1.0, sensitivity=1.0, rng=rng, ledger=ledger,
                           name="too much")
    # The generator was not touched: its next draw equals a fresh generator's.
    assert rng.random() == np.random.default_rng(7).random()
    assert ledger.entries == ()


def test_discrete_gaussian_matches_its_pmf():
    sigma = 2.0
    draws = sample_discrete_gaussian(6000, sigma=sigma, source=random.Random(3))
    assert draws.dtype == np.int64
    support = np.arange(-8, 9)
    pmf = np.exp(-support**2 / (2 * sigma**2))
    pmf /= pmf.sum()
    observed = np.array([(draws == k).sum() for k in support])
    assert observed.sum() >= 5990  # mass beyond 4 sigma is negligible
    expected = pmf * observed.sum()
    keep = expected > 5
    chi = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi, keep.sum() - 1) > 0.001
    assert draws.var() == pytest.approx(sigma**2, rel=0.08)


def test_discrete_gaussian_mechanism_charges_like_gaussian():
    ledger = PrivacyLedger(rho_budget=1.0)
    noisy = gaussian_mechanism(np.arange(5), sigma=3.0, sensitivity=1.0,
                               rng=np.random.default_rng(0), ledger=ledger, name="d",
                               discrete=True)
    assert np.all(noisy == np.round(noisy))
    assert ledger.entries[0].mechanism == "discrete-gaussian"
    assert ledger.entries[0].rho == pytest.approx(1 / 18)


def test_exponential_mechanism_selection_frequencies():
    scores = np.array([0.0, 1.0, 2.0, 4.0])
    eps, reps = 1.0, 4000
    ledger = PrivacyLedger(rho_budget=reps * eps**2 / 8 + 1e-9)
    rng = np.random.default_rng(11)
    picks = [exponential_mechanism(scores, epsilon=eps, sensitivity=1.0, rng=rng,
                                   ledger=ledger, name="em") for _ in range(reps)]
    assert ledger.spent == pytest.approx(reps * eps**2 / 8)
    expected = np.exp(eps / 2 * scores)
    expected = expected / expected.sum() * reps
    observed = np.bincount(picks, minlength=4)
    chi = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(chi, 3) > 0.001
