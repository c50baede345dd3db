"""Structure selection: which 2-way marginals to measure, and the fairness check of the result.

Three selectors build a spanning tree over the attributes from edge weights
``w_ab = ‖x_ab − x̂_ab‖₁``, the L1 distance between the true 2-way table and its estimate
under independence (sensitivity 1 under add/remove neighbours):

* ``mst`` — MST's private Kruskal: each of the d−1 rounds picks an edge joining two
  components with the exponential mechanism.
* ``prefair-greedy`` — Greedy-PreFair (Pujol et al. 2023, Alg. 2): the same, but an outcome
  attribute may only neighbour admissible or outcome attributes.
* ``prefair-exact`` — Exponential-PreFair (Alg. 1): every usable edge weight is measured once
  with the Gaussian mechanism, then a branch-and-bound search returns the fair spanning tree of
  maximum noisy weight, provably.

A tree is *fair* when every path between a protected and an outcome attribute passes through an
admissible one, i.e. when removing the admissible attributes disconnects P from O. That check
runs on every built structure.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from privfair.core.accounting import PrivacyLedger, exponential_epsilon, gaussian_sigma
from privfair.core.domain import Clique, Domain, Roles
from privfair.core.errors import RoleError, StructureSearchLimitError
from privfair.core.graphs import DisjointSet, shortest_path
from privfair.core.mechanisms import exponential_mechanism, gaussian_mechanism

METHODS = ("mst", "prefair-greedy", "prefair-exact")
Edge = tuple[str, str]


@dataclass(frozen=True)
class FairnessCheck:
    """Result of checking justifiable fairness on a model graph.

    ``violations`` lists (protected, outcome, path) triples whose path avoids every
    admissible attribute.
    """

    passed: bool
    violations: tuple[tuple[str, str, tuple[str, ...]], ...]
    criterion: str = (
        "every path between a protected and an outcome attribute passes through an "
        "admissible attribute"
    )

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "criterion": self.criterion,
            "violations": [
                {"protected": p, "outcome": o, "path": list(path)}
                for p, o, path in self.violations
            ],
        }


def check_fairness(
    attributes: Iterable[str], edges: Iterable[Iterable[str]], roles: Roles
) -> FairnessCheck:
    """Check that admissible attributes separate protected from outcome attributes.

    ``edges`` may be cliques of any size (all their attributes are joined), so the same
    check serves trees and general Markov networks.
    """
    # Neighbours in first-seen order: which of several equally short violation paths is
    # reported (and so which edge prefair-exact branches on first) follows that order.
    neighbours: dict[str, dict[str, None]] = {a: {} for a in attributes}
    for clique in edges:
        for a, b in itertools.combinations(tuple(clique), 2):
            neighbours.setdefault(a, {})[b] = None
            neighbours.setdefault(b, {})[a] = None
    admissible = set(roles.admissible)
    reduced = {v: [w for w in nbrs if w not in admissible]
               for v, nbrs in neighbours.items() if v not in admissible}
    violations = []
    for p in roles.protected:
        if p not in reduced:
            continue
        for o in roles.outcome:
            path = shortest_path(reduced, p, o) if o in reduced else None
            if path is not None:
                violations.append((p, o, tuple(path)))
    return FairnessCheck(passed=not violations, violations=tuple(violations))


def allowed_edges(domain: Domain, roles: Roles, method: str) -> list[Edge]:
    """Candidate edges of a selector, in domain order.

    Greedy-PreFair lets an outcome attribute neighbour only admissible or outcome
    attributes. The exact search only drops protected–outcome edges, which are unfair in any
    tree; everything else is decided by the search.
    """
    pairs = [tuple(p) for p in itertools.combinations(domain.attributes, 2)]
    outcome, protected = set(roles.outcome), set(roles.protected)
    if method == "mst":
        return pairs
    if method == "prefair-greedy":
        ok = set(roles.outcome) | set(roles.admissible)
        return [(a, b) for a, b in pairs
                if not ((a in outcome and b not in ok) or (b in outcome and a not in ok))]
    if method == "prefair-exact":
        return [(a, b) for a, b in pairs
                if not ((a in outcome and b in protected) or (b in outcome and a in protected))]
    raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")


def private_kruskal(
    domain: Domain,
    candidates: Sequence[Edge],
    weights: np.ndarray,
    *,
    rho: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
) -> list[Edge]:
    """MST's private Kruskal: d−1 exponential-mechanism rounds, each costing ρ/(d−1).

    Raises
    ------
    RoleError
        If the candidate edges cannot connect every attribute.
    """
    n_rounds = len(domain) - 1
    if n_rounds == 0:
        return []
    reachable = DisjointSet(domain.attributes)
    for a, b in candidates:
        reachable.union(a, b)
    if reachable.count() > 1:
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    epsilon = exponential_epsilon(rho=rho / n_rounds)
    components = DisjointSet(domain.attributes)
    chosen: list[Edge] = []
    for r in range(n_rounds):
        joining = [i for i, (a, b) in enumerate(candidates)
                   if components.find(a) != components.find(b)]
        pick = exponential_mechanism(weights[joining], epsilon=epsilon, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name=f"select edge {r + 1}/{n_rounds}")
        a, b = candidates[joining[pick]]
        components.union(a, b)
        chosen.append((a, b))
    return chosen


def _max_spanning_tree(
    nodes: Sequence[str], order: Sequence[int], edges: Sequence[Edge],
    include: frozenset[int], exclude: frozenset[int],
) -> list[int] | None:
    """Kruskal with forced and forbidden edges; ``order`` is edges by decreasing weight."""
    ds = DisjointSet(nodes)
    tree = []
    for i in sorted(include):
        a, b = edges[i]
        if not ds.union(a, b):
            return None
        tree.append(i)
    for i in order:
        if i in include or i in exclude:
            continue
        a, b = edges[i]
        if ds.union(a, b):
            tree.append(i)
    return tree if len(tree) == len(nodes) - 1 else None


def best_fair_tree(
    domain: Domain,
    roles: Roles,
    edges: Sequence[Edge],
    weights: np.ndarray,
    *,
    max_nodes: int = 200_000,
) -> tuple[list[Edge], int]:
    """Maximum-weight spanning tree that passes :func:`check_fairness`, by branch and bound.

    Each search node fixes edges that must be in the tree (``include``) and edges that must
    not (``exclude``). Its bound is the maximum spanning tree under those constraints,
    ignoring fairness — an upper bound on any fair completion. Nodes are expanded best bound
    first; when the bound's own tree is fair it is optimal, because no other node can do
    better. Otherwise the tree has an unfair protected–outcome path, at least one of whose
    free edges must go; the children partition the node's trees by the first such edge to
    be dropped (Lawler-style branching), so no tree is enumerated twice.

    Returns
    -------
    edges, nodes_expanded

    Raises
    ------
    StructureSearchLimitError
        After ``max_nodes`` expansions without a proof of optimality.
    """
    nodes = domain.attributes
    order = sorted(range(len(edges)), key=lambda i: (-weights[i], i))

    def bound(include: frozenset[int], exclude: frozenset[int]):
        tree = _max_spanning_tree(nodes, order, edges, include, exclude)
        if tree is None:
            return None
        return float(sum(weights[i] for i in tree)), tree

    root = bound(frozenset(), frozenset())
    if root is None:
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    counter = itertools.count()
    heap = [(-root[0], next(counter), frozenset(), frozenset(), root[1])]
    expanded = 0
    while heap:
        _, _, include, exclude, tree = heapq.heappop(heap)
        expanded += 1
        tree_edges = [edges[i] for i in tree]
        check = check_fairness(nodes, tree_edges, roles)
        if check.passed:
            return tree_edges, expanded
        if expanded >= max_nodes:
            raise StructureSearchLimitError(
                f"prefair-exact: no proof of the best fair tree after max_search_nodes="
                f"{max_nodes} search nodes; raise max_search_nodes or use prefair-greedy"
            )
        _, _, path = check.violations[0]
        index = {frozenset(edges[i]): i for i in tree}
        path_edges = [index[frozenset(pair)] for pair in zip(path, path[1:], strict=False)]
        free = [i for i in path_edges if i not in include]
        forced = set(include)
        for i in free:
            child_include, child_exclude = frozenset(forced), exclude | {i}
            if check_fairness(nodes, [edges[j] for j in child_include], roles).passed:
                child = bound(child_include, child_exclude)
                if child is not None:
                    heapq.heappush(heap, (-child[0], next(counter), child_include,
                                          child_exclude, child[1]))
            forced.add(i)
    raise RoleError("no fair spanning tree exists for these roles")


@dataclass(frozen=True)
class SelectedStructure:
    """The output of structure selection."""

    method: str
    edges: tuple[Edge, ...]
    fairness: FairnessCheck
    search_nodes: int | None = None

    @property
    def cliques(self) -> list[Clique]:
        return [tuple(e) for e in self.edges]

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "edges": [list(e) for e in self.edges],
            "fairness": self.fairness.to_dict(),
            "search_nodes": self.search_nodes,
        }


def edge_weights(
    pair_tables: dict[Clique, np.ndarray], one_way: dict[str, np.ndarray], total: float,
    edges: Sequence[Edge],
) -> np.ndarray:
    """‖x_ab − x̂_ab‖₁ with x̂_ab = N·p̂_a ⊗ p̂_b, the independence estimate.

    The independent model fitted to one-way marginals is a product distribution, so its 2-way
    marginals are outer products: no inference call is needed (the reference MST spends
    about half its run time projecting that model one pair at a time).
    """
    out = np.empty(len(edges))
    for k, (a, b) in enumerate(edges):
        estimate = total * np.outer(one_way[a], one_way[b])
        out[k] = np.abs(pair_tables[(a, b)] - estimate).sum()
    return out


def select_structure(
    domain: Domain,
    roles: Roles,
    *,
    method: str,
    pair_tables: dict[Clique, np.ndarray],
    one_way: dict[str, np.ndarray],
    total: float,
    rho: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    max_search_nodes: int = 200_000,
) -> SelectedStructure:
    """Select a spanning tree with ``method`` at privacy cost ``rho``.

    Parameters
    ----------
    pair_tables : dict
        Exact 2-way tables (private) on the domain used for modelling.
    one_way : dict
        Normalised one-way distributions of the independent model (post-processing of
        noisy one-way marginals).
    total : float
        Estimated number of rows (from noisy measurements).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    roles.check(domain, fair=method != "mst")
    candidates = allowed_edges(domain, roles, method)
    weights = edge_weights(pair_tables, one_way, total, candidates)
    search_nodes = None
    if method in ("mst", "prefair-greedy"):
        edges = private_kruskal(domain, candidates, weights, rho=rho, rng=rng, ledger=ledger)
    else:
        # r sensitivity-1 queries measured at once: L2 sensitivity √r, so σ = √(r / (2ρ)).
        # (The public PreFair code uses √(ρ / (2r)), which is far too little noise.)
        r = len(candidates)
        sigma = gaussian_sigma(rho=rho, sensitivity=math.sqrt(r))
        noisy = gaussian_mechanism(weights, sigma=sigma, sensitivity=math.sqrt(r), rng=rng,
                                   ledger=ledger, name="edge weights (all usable pairs)")
        edges, search_nodes = best_fair_tree(domain, roles, candidates, noisy,
                                             max_nodes=max_search_nodes)
    fairness = check_fairness(domain.attributes, edges, roles)
    return SelectedStructure(method, tuple(edges), fairness, search_nodes)
