"""privfair.core.graphs replaces networkx on the table path: same answers, ties included.

Each helper, and the junction tree and fairness check built on them, is compared with the
networkx calls it replaced on random graphs, so a released table cannot change with the swap.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain, Roles
from privfair.core.errors import RoleError
from privfair.core.graphs import (
    DisjointSet,
    bfs_edges,
    maximum_spanning_forest,
    shortest_path,
)
from privfair.synth.estimation import build_junction_tree
from privfair.synth.structure import check_fairness, private_kruskal


def _random_weighted_graph(rng: np.random.Generator) -> tuple[int, list[tuple[int, int, int]]]:
    """Edges (u < v, in networkx's ``Graph.edges`` order) with few distinct weights (ties),
    some graphs complete, some sparse enough to fall apart into components."""
    n = int(rng.integers(1, 12))
    density = rng.choice([1.0, 0.5, 0.15])
    edges = [(i, j, int(rng.integers(1, 4))) for i in range(n) for j in range(i + 1, n)
             if rng.random() < density]
    return n, edges


def _networkx_tree(n: int, edges: list[tuple[int, int, int]]) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    for u, v, w in edges:
        graph.add_edge(u, v, weight=w)
    return nx.maximum_spanning_tree(graph)


@pytest.mark.parametrize("seed", range(400))
def test_spanning_forest_and_bfs_match_networkx(seed):
    rng = np.random.default_rng(seed)
    n, edges = _random_weighted_graph(rng)
    mine = maximum_spanning_forest(n, edges)
    theirs = _networkx_tree(n, edges)
    assert {frozenset(e) for e in mine} == {frozenset(e) for e in theirs.edges}
    for source in range(n):
        assert bfs_edges(n, mine, source=source) == list(nx.bfs_edges(theirs, source))


def test_spanning_forest_keeps_the_first_of_tied_edges():
    # A triangle of equal weights: Kruskal keeps the first two in input order.
    assert maximum_spanning_forest(3, [(0, 1, 1), (0, 2, 1), (1, 2, 1)]) == [(0, 1), (0, 2)]
    assert maximum_spanning_forest(3, [(1, 2, 1), (0, 2, 1), (0, 1, 1)]) == [(1, 2), (0, 2)]


def _networkx_parent_order(cliques) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What build_junction_tree computed with networkx for these (ordered) maximal cliques."""
    graph = nx.Graph()
    graph.add_nodes_from(range(len(cliques)))
    for i in range(len(cliques)):
        for j in range(i + 1, len(cliques)):
            graph.add_edge(i, j, weight=len(set(cliques[i]) & set(cliques[j])) + 1)
    tree = nx.maximum_spanning_tree(graph)
    parent, order = [-1] * len(cliques), [0]
    for u, v in nx.bfs_edges(tree, 0):
        parent[v] = u
        order.append(v)
    return tuple(parent), tuple(order)


@pytest.mark.parametrize("seed", range(300))
def test_junction_tree_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 14))
    domain = Domain(tuple(f"a{i}" for i in range(d)),
                    tuple(int(s) for s in rng.integers(2, 5, size=d)))
    # Few cliques over many attributes leave components and singletons; equal sizes tie.
    cliques = [tuple(str(a) for a in rng.choice(domain.attributes, replace=False,
                                                size=int(rng.integers(1, min(d, 4) + 1))))
               for _ in range(int(rng.integers(0, d + 2)))]
    tree = build_junction_tree(domain, cliques)
    assert (tree.parent, tree.order) == _networkx_parent_order(tree.cliques)


def _random_graph(rng: np.random.Generator) -> tuple[list[str], list[tuple[str, ...]]]:
    n = int(rng.integers(2, 14))
    nodes = [f"v{i}" for i in rng.permutation(n)]
    cliques = [tuple(str(v) for v in rng.choice(nodes, size=int(rng.integers(2, min(n, 3) + 1)),
                                                replace=False))
               for _ in range(int(rng.integers(0, 2 * n)))]
    return nodes, cliques


@pytest.mark.parametrize("seed", range(300))
def test_shortest_path_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    nodes, cliques = _random_graph(rng)
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    adjacency: dict[str, dict[str, None]] = {v: {} for v in nodes}
    for clique in cliques:
        for a, b in itertools.combinations(clique, 2):
            graph.add_edge(a, b)
            adjacency[a][b] = adjacency[b][a] = None
    for source, target in itertools.product(nodes, repeat=2):
        mine = shortest_path(adjacency, source, target)
        if nx.has_path(graph, source, target):
            assert mine == nx.shortest_path(graph, source, target)
        else:
            assert mine is None


def _networkx_check_fairness(attributes, edges, roles, *, view: bool):
    """check_fairness as it was on networkx: (protected, outcome, path) violations.

    The old code searched a subgraph *view*, whose neighbour order is networkx's own set
    order when few nodes are kept (hash-seeded: not reproducible across processes). With
    ``view=False`` the reduced graph is built outright, in first-seen neighbour order.
    """
    graph = nx.Graph()
    graph.add_nodes_from(attributes)
    for clique in edges:
        graph.add_edges_from(itertools.combinations(tuple(clique), 2))
    admissible = set(roles.admissible)
    if view:
        reduced = graph.subgraph(n for n in graph if n not in admissible)
    else:
        reduced = nx.Graph()
        reduced.add_nodes_from(n for n in graph if n not in admissible)
        for clique in edges:
            reduced.add_edges_from((a, b) for a, b in itertools.combinations(tuple(clique), 2)
                                   if a not in admissible and b not in admissible)
    violations = []
    for p in roles.protected:
        if p not in reduced:
            continue
        for o in roles.outcome:
            if o in reduced and nx.has_path(reduced, p, o):
                violations.append((p, o, tuple(nx.shortest_path(reduced, p, o))))
    return violations


@pytest.mark.parametrize("seed", range(400))
def test_check_fairness_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    nodes, cliques = _random_graph(rng)
    labels = [str(r) for r in rng.choice(list("PAOF"), size=len(nodes))]
    roles = Roles(protected=tuple(n for n, r in zip(nodes, labels, strict=True) if r == "P"),
                  admissible=tuple(n for n, r in zip(nodes, labels, strict=True) if r == "A"),
                  outcome=tuple(n for n, r in zip(nodes, labels, strict=True) if r == "O"))
    check = check_fairness(nodes, cliques, roles)
    old = _networkx_check_fairness(nodes, cliques, roles, view=True)
    assert check.passed == (not old)
    assert [(p, o, len(path)) for p, o, path in check.violations] == \
        [(p, o, len(path)) for p, o, path in old]
    assert list(check.violations) == _networkx_check_fairness(nodes, cliques, roles,
                                                              view=False)
    for _, _, path in check.violations:  # a path of the graph that avoids admissibles
        assert not set(path) & set(roles.admissible)
        assert all(any({a, b} <= set(c) for c in cliques) for a, b in itertools.pairwise(path))


def test_disjoint_set_counts_components():
    sets = DisjointSet("abcde")
    assert sets.count() == 5
    assert sets.union("a", "b") and sets.union("c", "b") and not sets.union("a", "c")
    assert sets.count() == 3


@pytest.mark.parametrize(("candidates", "connected"), [
    ([("a", "b"), ("c", "d")], False),
    ([("a", "b"), ("b", "c")], False),
    ([("a", "b"), ("c", "d"), ("b", "c")], True),
])
def test_private_kruskal_refuses_candidates_that_cannot_connect(candidates, connected):
    domain = Domain(("a", "b", "c", "d"), (2, 2, 2, 2))

    def run():
        return private_kruskal(domain, candidates, np.ones(len(candidates)), rho=1.0,
                               rng=np.random.default_rng(0),
                               ledger=PrivacyLedger(rho_budget=1.0))

    if connected:
        assert len(run()) == 3
    else:
        with pytest.raises(RoleError, match="cannot connect"):
            run()
