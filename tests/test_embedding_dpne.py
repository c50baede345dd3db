"""DPNE: the sensitivity bound, the noise law against its charge, the exact minimiser, refusals."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy import stats

from privfair.core.accounting import PrivacyLedger, laplace_rho
from privfair.core.errors import DomainError
from privfair.core.mechanisms import sample_row_laplace
from privfair.embedding.dpne import (
    SENSITIVITY,
    EdgeList,
    deepwalk_matrix,
    deepwalk_sensitivity,
    dpne,
    public_factor,
)


def _graph(g: nx.Graph) -> EdgeList:
    return EdgeList(g.number_of_nodes(), np.array(list(g.edges()), dtype=np.int64))


def test_one_edge_moves_the_deepwalk_matrix_by_less_than_the_bound():
    rng = np.random.default_rng(0)
    graphs = [nx.star_graph(30), nx.karate_club_graph(), nx.path_graph(12),
              nx.empty_graph(6)] + [nx.gnp_random_graph(25, 0.15, seed=s) for s in range(6)]
    worst = 0.0
    for g in graphs:
        base = deepwalk_matrix(_graph(g))
        n = g.number_of_nodes()
        for _ in range(20):
            u, v = (int(x) for x in rng.choice(n, size=2, replace=False))
            moved = g.copy()
            if moved.has_edge(u, v):
                moved.remove_edge(u, v)
            else:
                moved.add_edge(u, v)
            change = np.abs(deepwalk_matrix(_graph(moved)) - base).sum()
            assert change < deepwalk_sensitivity()
            worst = max(worst, change)
    assert worst > 1.0
    # A new leaf on the hub of a star moves M by exactly 2 (half the proven bound).
    star = nx.star_graph(30)
    star.add_node(31)
    joined = star.copy()
    joined.add_edge(0, 31)
    change = np.abs(deepwalk_matrix(_graph(joined)) - deepwalk_matrix(_graph(star))).sum()
    assert change == pytest.approx(2.0)


def test_perturbation_norms_follow_the_charged_gamma_law():
    rng = np.random.default_rng(1)
    eta = sample_row_laplace(4000, 5, scale=SENSITIVITY / 2.0, rng=rng)
    norms = np.linalg.norm(eta, axis=1)
    result = stats.kstest(norms, stats.gamma(a=5, scale=SENSITIVITY / 2.0).cdf)
    assert result.pvalue > 0.01
    assert norms.mean() == pytest.approx(5 * SENSITIVITY / 2.0, rel=0.05)
    # Directions are uniform: the mean direction is near 0.
    assert np.abs((eta / norms[:, None]).mean(axis=0)).max() < 0.05


def test_dpne_charges_its_epsilon_and_returns_the_exact_minimiser():
    graph = _graph(nx.karate_club_graph())
    ledger = PrivacyLedger(rho_budget=10.0)
    h = public_factor(graph.n_nodes, 4, rng=np.random.default_rng(2))
    w = dpne(graph, dim=4, epsilon=1.5, ledger=ledger, rng=np.random.default_rng(3), factor=h)
    (entry,) = ledger.entries
    assert entry.rho == pytest.approx(laplace_rho(epsilon=1.5))
    assert entry.sensitivity == SENSITIVITY
    # First-order condition of the perturbed objective recovers exactly the drawn noise.
    eta = sample_row_laplace(graph.n_nodes, 4, scale=SENSITIVITY / 1.5,
                             rng=np.random.default_rng(3))
    m = deepwalk_matrix(graph)
    recovered = 2 * (m @ h - w @ (h.T @ h + 1e-3 * np.eye(4)))
    np.testing.assert_allclose(recovered, eta, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("edges", "message"), [
    ([[0, 7]], "outside the declared domain 0..4"),
    ([[1, 1]], "self-loops"),
    ([[0, 1], [1, 0]], "listed twice"),
    ([[0.0, 1.0]], "integer node ids"),
])
def test_bad_edge_lists_are_refused_with_one_line(edges, message):
    with pytest.raises(DomainError, match=message) as info:
        EdgeList(5, np.array(edges))
    assert "\n" not in str(info.value)
