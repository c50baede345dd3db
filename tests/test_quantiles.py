import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.domains.quantiles import dp_quantile_edges


def test_dp_quantiles_land_near_the_true_quantiles_and_charge_the_ledger():
    rng = np.random.default_rng(0)
    values = rng.normal(50, 10, 20_000)
    ledger = PrivacyLedger(rho_budget=1.0)
    edges = dp_quantile_edges(values, bins=4, lower=0, upper=100, integer=False, rho=0.3,
                              rng=rng, ledger=ledger, name="x")
    assert edges[0] == 0 and edges[-1] == 100 and len(edges) == 5
    np.testing.assert_allclose(edges[1:-1], np.quantile(values, [0.25, 0.5, 0.75]), atol=0.5)
    assert [e.mechanism for e in ledger.entries] == ["exponential"] * 3
    assert ledger.spent == pytest.approx(0.3)


def test_dp_quantiles_are_random_at_tiny_budget_and_integer_edges_are_whole():
    rng = np.random.default_rng(1)
    values = rng.integers(0, 10, 500).astype(float)
    ledger = PrivacyLedger(rho_budget=1.0)
    edges = dp_quantile_edges(values, bins=3, lower=0, upper=40, integer=True, rho=1e-6,
                              rng=rng, ledger=ledger, name="x")
    assert all(e == round(e) for e in edges)
    assert edges == sorted(set(edges)) and edges[0] == 0 and edges[-1] == 40
    # With almost no budget the edges follow the base measure (uniform on [0, 40]), so they
    # are not tied to the data's range [0, 9].
    draws = [dp_quantile_edges(values, bins=2, lower=0, upper=40, integer=False, rho=1e-9,
                               rng=rng, ledger=PrivacyLedger(rho_budget=1.0), name="x")[1]
             for _ in range(200)]
    assert np.mean(np.array(draws) > 10) > 0.6
