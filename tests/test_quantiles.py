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


def test_dp_quantile_edges_fall_on_the_public_grid():
    """Issue 41.2: an edge is a point of the public grid (no float that noise produced), for
    real and for integer columns."""
    from privfair.domains.quantiles import GRID_CELLS, edge_grid

    rng = np.random.default_rng(3)
    values = rng.normal(50, 10, 5_000)
    for _ in range(20):
        edges = dp_quantile_edges(values, bins=5, lower=0.0, upper=100.0, integer=False,
                                  rho=0.05, rng=rng, ledger=PrivacyLedger(rho_budget=1.0),
                                  name="x")
        k = [(e - 0.0) / (100.0 / GRID_CELLS) for e in edges]
        assert all(abs(v - round(v)) < 1e-6 for v in k), edges
    assert edge_grid(lower=0, upper=40, integer=True) == (1.0, 40)
    assert edge_grid(lower=0, upper=1e9, integer=True) == (1e9 / GRID_CELLS, GRID_CELLS)


def test_dp_quantile_edges_sample_the_exponential_mechanism_over_grid_points():
    """The gap-then-point draw is the exponential mechanism over the grid points: on a
    10-point integer grid, the empirical law of the median edge matches
    exp(ε·u(g)/(2Δ))/Z, u(g) = −|#{x ≤ g} − n/2|, Δ = 1/2 (the median's sensitivity),
    within sampling error."""
    values = np.array([2.0, 2.0, 3.0, 7.0])
    epsilon = 1.0
    rho = epsilon**2 / 8
    grid = np.arange(0, 11)
    utility = -np.abs(np.searchsorted(np.sort(values), grid, side="right") - values.size / 2)
    expected = np.exp(epsilon * utility / (2 * 0.5))
    expected = expected[1:-1] / expected[1:-1].sum()  # the two range ends are not inner edges
    rng = np.random.default_rng(4)
    draws = 5_000
    counts = np.zeros(grid.size)
    for _ in range(draws):
        edges = dp_quantile_edges(values, bins=2, lower=0, upper=10, integer=True, rho=rho,
                                  rng=rng, ledger=PrivacyLedger(rho_budget=1e9), name="x")
        if len(edges) == 3:
            counts[int(edges[1])] += 1
    observed = counts[1:-1] / counts[1:-1].sum()
    se = np.sqrt(expected * (1 - expected) / counts[1:-1].sum())
    assert np.all(np.abs(observed - expected) < 5 * se + 1e-3), (observed, expected)


def test_grid_points_below_counts_exactly_even_on_grid_points():
    """The gap sizes come from a float quotient corrected against the grid itself: they
    equal a direct count, values sitting exactly on grid points (ties) included."""
    from privfair.domains import quantiles

    rng = np.random.default_rng(5)
    lower, upper, cells = -3.7, 11.3, 1000
    step = (upper - lower) / cells
    grid = lower + step * np.arange(cells + 1)
    values = np.concatenate([rng.uniform(lower, upper, 500), grid[rng.integers(0, cells, 500)],
                             [lower, upper]])
    below = quantiles._grid_points_below(values, lower=lower, step=step, cells=cells)
    np.testing.assert_array_equal(below, np.searchsorted(grid, values, side="left"))


def test_quantile_sensitivity_is_max_q_one_minus_q_and_reached():
    """Issue 41: the utility −|rank(g) − q n| of an output point g (rank: values at or below
    it) moves by at most max(q, 1 − q) when a value is added (removing is the same read
    backwards), some pair reaches it, and the ledger records exactly that sensitivity."""
    rng = np.random.default_rng(3)
    points = np.arange(0, 11) + 0.5  # output points between the integer data values
    for q in (0.25, 0.5, 0.75):
        worst = 0.0
        for _ in range(400):
            data = np.sort(rng.integers(0, 11, size=rng.integers(0, 7)))
            extended = np.sort(np.append(data, rng.integers(0, 11)))
            rank = np.searchsorted(data, points, side="right")
            rank_n = np.searchsorted(extended, points, side="right")
            move = np.abs(np.abs(rank_n - q * extended.size) - np.abs(rank - q * data.size))
            worst = max(worst, float(move.max()))
        assert worst == pytest.approx(max(q, 1 - q))
    ledger = PrivacyLedger(rho_budget=1.0)
    dp_quantile_edges(np.arange(20.0), bins=4, lower=0, upper=100, integer=False, rho=0.3,
                      rng=rng, ledger=ledger, name="x")
    assert [e.sensitivity for e in ledger.entries] == [0.75, 0.5, 0.75]
