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

#: A pair's 2-way marginal is measured only if the noise alone would put at most this expected
#: TVD on it (:func:`qualify_pairs`). Calibrated at ε = 1 on 300-8,000-row tables with weak
#: and strong pairwise dependence (``benchmarks/small_n.py --calibrate``, issue 23.3), when
#: the rule was all-or-nothing on the average pair: on a table with no pairwise structure a
#: tree's 2-way TVD against independence's is ≈ 1.0 up to 0.05, +1.5-4 % at 0.06-0.065,
#: +10-14 % at 0.08 and +50 % at 0.25. Issue 34 applies it per pair, so the small-domain
#: pairs of a table keep their structure while its wide pairs are left to independence.
NOISE_TVD_LIMIT = 0.07


@dataclass(frozen=True)
class PairQualification:
    """Which candidate pairs can carry signal at this noisy total and ρ (issue 34).

    Post-processing only: a function of the declared domain sizes, the roles, ρ and the
    noisy total (itself a charged measurement), never of true counts. ``kept`` are the
    qualifying candidate pairs; ``forest_edges`` how many edges a spanning forest over them
    has (``d − components``), the share ``forest_edges / (d − 1)`` of the structure's ρ that
    the kept pairs use (each at the ρ it would get in a full tree).
    """

    kept: tuple[Edge, ...]
    candidates: int
    forest_edges: int
    attributes: int
    pair_sigma: float
    total: float
    size_cap: int | None
    limit: float = NOISE_TVD_LIMIT
    enabled: bool = True

    @property
    def fallback(self) -> bool:
        """Whether no pair qualifies (the release is the independence model)."""
        return self.enabled and self.forest_edges == 0 and self.attributes > 1

    @property
    def share(self) -> float:
        """Share of the structure's ρ the kept pairs use (the rest goes to one-way)."""
        if not self.enabled or self.attributes < 2:
            return 1.0
        return self.forest_edges / (self.attributes - 1)

    def to_dict(self) -> dict:
        return {
            "rule": ("a candidate pair is measured only when the expected TVD that noise "
                     "alone puts on its 2-way marginal, sigma*sqrt(2/pi)*cells/(2*total), is "
                     "at most the limit; cells from the declared sizes capped by the "
                     "categories the noisy total can keep, sigma at the ρ a pair gets in a "
                     "full tree; the structure is a forest over the qualifying pairs and "
                     "the ρ of the edges it lacks goes to the one-way marginals"),
            "enabled": self.enabled,
            "limit": self.limit,
            "noisy_total": self.total,
            "pair_sigma": self.pair_sigma,
            "size_cap": self.size_cap,
            "candidate_pairs": self.candidates,
            "qualifying_pairs": len(self.kept),
            "forest_edges": self.forest_edges,
            "structure_share": self.share,
            "fallback": self.fallback,
        }


def pair_noise_tvd(cells: float, *, sigma: float, total: float) -> float:
    """Expected TVD that Gaussian noise σ puts on a ``cells``-cell marginal of ``total`` rows:
    expected L1 noise ``σ·√(2/π)·cells`` over ``2·total``."""
    return sigma * math.sqrt(2 / math.pi) * cells / (2 * max(total, 1.0))


def tree_pair_sigma(attributes: int, *, rho_tree: float) -> float:
    """σ of one 2-way marginal of a full tree: MST measures its d − 1 edges with half of
    ``rho_tree`` (the other half selects them)."""
    return math.sqrt(max(attributes - 1, 1) / (2 * (rho_tree / 2)))


def qualify_pairs(
    domain: Domain, candidates: Sequence[Edge], *, total: float, rho_tree: float,
    one_way_sigma: float | None = None, threshold: float = 3.0,
    limit: float = NOISE_TVD_LIMIT,
) -> PairQualification:
    """Keep the candidate pairs whose 2-way marginal would carry signal (issue 34).

    A pair of declared sizes ``|A|, |B|`` qualifies when :func:`pair_noise_tvd` of its
    ``|A|·|B|`` cells at :func:`tree_pair_sigma` is at most ``limit``. With
    ``one_way_sigma`` (the per-cell noise of the one-way measurement that compression
    thresholds at ``threshold·σ``) each size is first capped by the categories a table of
    ``total`` rows can keep, ``total / (threshold·σ)`` plus the merged bucket: public
    quantities and the noisy total only, so the decision does not move with which categories
    the noise happened to keep.
    """
    d = len(domain)
    sigma = tree_pair_sigma(d, rho_tree=rho_tree) if rho_tree > 0 else math.inf
    cap = (int(max(total, 1.0) // (threshold * one_way_sigma)) + 1) if one_way_sigma else None

    def size(a: str) -> int:
        return domain.size(a) if cap is None else min(domain.size(a), cap)

    kept = tuple(
        (a, b) for a, b in candidates
        if rho_tree > 0
        and pair_noise_tvd(size(a) * size(b), sigma=sigma, total=total) <= limit)
    return PairQualification(kept, len(candidates), forest_size(domain.attributes, kept), d,
                             sigma, float(total), cap, limit)


def all_qualify(domain: Domain, candidates: Sequence[Edge], *,
                total: float) -> PairQualification:
    """No per-pair rule (``small_n_fallback=False``): every candidate pair is kept."""
    return PairQualification(tuple(candidates), len(candidates),
                             forest_size(domain.attributes, candidates), len(domain),
                             math.nan, float(total), None, enabled=False)


def forest_size(attributes: Sequence[str], edges: Iterable[Edge]) -> int:
    """Edges of a spanning forest over ``edges``: attributes less connected components."""
    components = DisjointSet(attributes)
    for a, b in edges:
        components.union(a, b)
    return len(attributes) - components.count()


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
    pairs: list[Edge] = list(itertools.combinations(domain.attributes, 2))
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
    forest: bool = False,
) -> list[Edge]:
    """MST's private Kruskal: d−1 exponential-mechanism rounds, each costing ρ/(d−1).

    With ``forest``, the candidates need not connect every attribute: the rounds build a
    spanning forest over them, one round per edge it has (``d − components``, a function of
    the candidate set only), each costing ρ/rounds.

    Raises
    ------
    RoleError
        If the candidate edges cannot connect every attribute (and not ``forest``).
    """
    n_rounds = forest_size(domain.attributes, candidates)
    if not forest and n_rounds < len(domain) - 1:
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    if n_rounds == 0:
        return []
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
    include: frozenset[int], exclude: frozenset[int], spanning: bool = True,
) -> list[int] | None:
    """Kruskal with forced and forbidden edges; ``order`` is edges by decreasing weight.

    Without ``spanning`` the result is a maximal spanning forest of the allowed edges,
    whatever its size (None only when the forced edges make a cycle)."""
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
    return tree if not spanning or len(tree) == len(nodes) - 1 else None


def best_fair_tree(
    domain: Domain,
    roles: Roles,
    edges: Sequence[Edge],
    weights: np.ndarray,
    *,
    max_nodes: int = 200_000,
    forest: bool = False,
) -> tuple[list[Edge], int]:
    """Maximum-weight spanning tree that passes :func:`check_fairness`, by branch and bound.

    With ``forest`` (the edges are the pairs that qualified, issue 34), the search runs over
    maximal spanning forests of the edges less the excluded ones, so a fair one always
    exists (dropping every edge of every unfair path ends in one).

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

    def bound(include: frozenset[int],
              exclude: frozenset[int]) -> tuple[float, list[int]] | None:
        tree = _max_spanning_tree(nodes, order, edges, include, exclude,
                                  spanning=not forest)
        if tree is None:
            return None
        return float(sum(weights[i] for i in tree)), tree

    root = bound(frozenset(), frozenset())
    if root is None:
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    counter = itertools.count()
    heap: list[tuple[float, int, frozenset[int], frozenset[int], list[int]]] = [
        (-root[0], next(counter), frozenset(), frozenset(), root[1])]
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
    #: A tree's edges; AIM's measured cliques (pairs, or larger with a wider workload).
    edges: tuple[Clique, ...]
    fairness: FairnessCheck
    search_nodes: int | None = None
    #: The per-pair small-n decision (:meth:`PairQualification.to_dict`), when one was made.
    small_n: dict | None = None

    @property
    def cliques(self) -> list[Clique]:
        return [tuple(e) for e in self.edges]

    def to_dict(self) -> dict:
        out = {
            "method": self.method,
            "edges": [list(e) for e in self.edges],
            "fairness": self.fairness.to_dict(),
            "search_nodes": self.search_nodes,
        }
        if self.small_n is not None:
            out["small_n"] = self.small_n
        return out


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
    qualified: Sequence[Edge] | None = None,
) -> SelectedStructure:
    """Select a spanning tree with ``method`` at privacy cost ``rho``.

    With ``qualified`` (:func:`qualify_pairs`'s kept pairs), only those of the method's
    allowed edges are candidates and the structure is a spanning forest over them.

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
    if forest_size(domain.attributes, candidates) < len(domain) - 1:  # public: the roles
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    forest = qualified is not None and not set(candidates) <= set(qualified)
    if forest and qualified is not None:  # forest implies qualified
        keep = set(qualified)
        candidates = [e for e in candidates if e in keep]
    if not candidates:
        return SelectedStructure(method, (), check_fairness(domain.attributes, [], roles))
    weights = edge_weights(pair_tables, one_way, total, candidates)
    search_nodes = None
    if method in ("mst", "prefair-greedy"):
        edges = private_kruskal(domain, candidates, weights, rho=rho, rng=rng, ledger=ledger,
                                forest=forest)
    else:
        # r sensitivity-1 queries measured at once: L2 sensitivity √r, so σ = √(r / (2ρ)).
        # (The public PreFair code uses √(ρ / (2r)), which is far too little noise.)
        r = len(candidates)
        sigma = gaussian_sigma(rho=rho, sensitivity=math.sqrt(r))
        noisy = gaussian_mechanism(weights, sigma=sigma, sensitivity=math.sqrt(r), rng=rng,
                                   ledger=ledger, name="edge weights (all usable pairs)")
        edges, search_nodes = best_fair_tree(domain, roles, candidates, noisy,
                                             max_nodes=max_search_nodes, forest=forest)
    fairness = check_fairness(domain.attributes, edges, roles)
    return SelectedStructure(method, tuple(edges), fairness, search_nodes)
