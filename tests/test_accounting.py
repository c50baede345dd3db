import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from privfair.core.accounting import (
    LedgerEntry,
    PrivacyLedger,
    gaussian_rho,
    gaussian_sigma,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)
from privfair.core.errors import BudgetExceededError


def test_published_rho_for_epsilon_one():
    # The value MST/AIM report for (1, 1e-9) under the CKS conversion.
    assert zcdp_rho(epsilon=1.0, delta=1e-9) == pytest.approx(0.014973, abs=2e-6)


def test_delta_matches_direct_minimisation_of_cks_bound():
    rho, eps = 0.1, 2.0

    def log_delta(alpha):
        return ((alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)
                - math.log(alpha - 1))

    best = minimize_scalar(log_delta, bounds=(1.0001, 200), method="bounded",
                           options={"xatol": 1e-10})
    assert zcdp_delta(rho=rho, epsilon=eps) == pytest.approx(math.exp(best.fun), rel=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 20), st.sampled_from([1e-5, 1e-7, 1e-9, 1e-12]))
def test_conversion_round_trips_and_beats_the_classic_bound(eps, delta):
    rho = zcdp_rho(epsilon=eps, delta=delta)
    assert zcdp_epsilon(rho=rho, delta=delta) == pytest.approx(eps, rel=1e-6)
    # Tight conversion is never worse than eps = rho + 2 sqrt(rho log(1/delta)).
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-9


def test_gaussian_calibration_identity():
    sigma = gaussian_sigma(rho=0.02, sensitivity=3.0)
    assert gaussian_rho(sigma=sigma, sensitivity=3.0) == pytest.approx(0.02)


@pytest.mark.parametrize("eps, delta", [(0, 1e-9), (-1, 1e-9), (1, 0), (1, 1), (1, 1.5),
                                        (float("inf"), 1e-9)])
def test_bad_epsilon_delta_refused(eps, delta):
    with pytest.raises(ValueError, match="epsilon|delta"):
        zcdp_rho(epsilon=eps, delta=delta)


def test_ledger_refuses_overspend_and_keeps_state():
    ledger = PrivacyLedger(rho_budget=1.0, delta=1e-9)
    ledger.spend(LedgerEntry("a", "gaussian", 1.0, rho=0.6, sigma=0.9))
    with pytest.raises(BudgetExceededError, match="budget exceeded"):
        ledger.spend(LedgerEntry("b", "gaussian", 1.0, rho=0.5, sigma=1.0))
    assert len(ledger.entries) == 1
    assert ledger.remaining == pytest.approx(0.4)
    # Thirds that add up to the budget up to float rounding are accepted.
    full = PrivacyLedger(rho_budget=0.1)
    for _ in range(3):
        full.spend(LedgerEntry("x", "gaussian", 1.0, rho=0.1 / 3))


def test_ledger_save_and_load(tmp_path):
    ledger = PrivacyLedger.from_epsilon_delta(epsilon=1.0, delta=1e-9)
    ledger.spend(LedgerEntry("one-way", "gaussian", 2.0, rho=0.004, sigma=22.4, queries=10))
    ledger.spend(LedgerEntry("select", "exponential", 1.0, rho=0.001, epsilon=0.09))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    json.loads(path.read_text())
    loaded = PrivacyLedger.load(path)
    assert loaded.entries == ledger.entries
    assert loaded.spent == pytest.approx(0.005)
    assert loaded.guarantee()["epsilon"] == pytest.approx(ledger.epsilon_spent())
    assert np.isclose(loaded.rho_budget, ledger.rho_budget)
