"""Structure selection: which 2-way marginals to measure, and the fairness check of the result.

Three selectors build a spanning tree over the attributes from edge weights
``w_ab = ‖x_ab − x̂_ab‖₁``, the L1 distance between the true 2-way table and its estimate
under independence (sensitivity 1 under add/remove neighbours):

* ``mst`` — MST's private Kruskal: each of the d−1 rounds picks an edge joining two
  components with the exponential mechanism.
* ``prefair-greedy`` — Greedy-PreFair (Pujol et al. 2023, Alg. 2): the same, but an outcome
  attribute may only neighbour admissible or outcome attributes. With
  ``greedy_check="privci"`` (Ghahramanpour & Milani 2026), every edge but protected–outcome
  is a candidate and each round keeps the joining edges that leave the forest fair
  (:class:`FairForest`); same rounds, same cost. Measured against the edge rule in
  ``benchmarks/privci_vs_greedy.py`` (issue 34.5): equal on full Adult and COMPAS, worse on
  1,000-row COMPAS at ε ≤ 2, so the edge rule stays the default.
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
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from privfair.core.accounting import PrivacyLedger, exponential_epsilon, gaussian_sigma
from privfair.core.domain import Clique, Domain, Roles
from privfair.core.errors import RoleError, StructureSearchLimitError
from privfair.core.graphs import DisjointSet, shortest_path
from privfair.core.mechanisms import exponential_mechanism, gaussian_mechanism

METHODS = ("mst", "prefair-greedy", "prefair-exact")
#: How Greedy-PreFair keeps its tree fair: ``"edge-rule"`` (Pujol et al. 2023, Alg. 2: an
#: outcome attribute may only neighbour admissible or outcome attributes, fixed before the
#: rounds) or ``"privci"`` (Ghahramanpour & Milani 2026: every edge but protected–outcome is
#: a candidate, and each round keeps only the joining edges that leave the forest fair).
GREEDY_CHECKS = ("edge-rule", "privci")
Edge = tuple[str, str]

#: A pair's 2-way marginal is measured only if the noise alone would put at most this expected
#: TVD on it (:func:`qualify_pairs`). Calibrated at ε = 1 on 300-8,000-row tables with weak
#: and strong pairwise dependence (``benchmarks/small_n.py --calibrate``, issue 23.3), when
#: the rule was all-or-nothing on the average pair: on a table with no pairwise structure a
#: tree's 2-way TVD against independence's is ≈ 1.0 up to 0.05, +1.5-4 % at 0.06-0.065,
#: +10-14 % at 0.08 and +50 % at 0.25. Issue 34 applies it per pair, so the small-domain
#: pairs of a table keep their structure while its wide pairs are left to independence.
NOISE_TVD_LIMIT = 0.07
#: The trees' limit (issue 34.1). A tree's selection scores each pair net of the noise its
#: measurement would add and may stop early (:func:`select_structure`), so the public rule
#: only has to drop the pairs too noisy to be worth a candidate: at 0.07 it dropped most of
#: Adult's strong pairs at ε = 4 on 1,000 rows (declared sizes, 15-42 categories, against
#: 5-13 kept by compression), leaving mst/greedy/exact at 0.91/0.95/0.95 of independence's
#: 2-way TVD; at 0.15 they reach 0.83/0.88/0.88, credit21 at ε = 2 and 4 goes from
#: 0.95/0.75 to 0.77-0.79/0.67, COMPAS stays within seed noise; at ε = 1 Adult and credit21
#: stay at 1.00-1.04, as before (``benchmarks/small_n.py``, results/small_n_issue34.json),
#: until issue 34.1's selection budget (:func:`selection_rho`) and unchosen edges' ρ on the
#: one-way marginals brought them to 0.96-0.99 (results/small_n_issue34_final.json).
#: Giving the dropped pairs' ρ to the kept pairs instead of the one-way marginals was worse
#: (Adult at ε = 1: 1.19-1.21).
TREE_NOISE_TVD_LIMIT = 0.15
#: A tree's selection at small n resolves scores to this multiple of the smallest candidate's
#: measurement-noise penalty (:func:`selection_rho`): 1, no finer than the noise the
#: measurement adds anyway. At 1,000 rows, 10-20 seeds: 0.5 left credit21's exact search at
#: 1.004 of independence's 2-way TVD at ε = 1 with COMPAS 0.01 closer to the thirds; 1 puts
#: every ε = 1 cell of Adult and credit21 at 0.96-0.99 and COMPAS 0.01-0.05 above the
#: thirds' 0.61-0.69, within its seed noise (results/small_n_issue34_final.json).
SELECTION_RESOLUTION = 1.0
#: ρ at which AIM's qualification limit is :data:`NOISE_TVD_LIMIT` (ε = 1, δ = 1e-6, where
#: that limit was calibrated; :func:`qualification_limit`).
AIM_LIMIT_RHO = 0.024356


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
                     "the ρ of the edges it lacks goes to the one-way marginals; a tree's "
                     "selection gets only the ρ that makes its noise as fine as the smallest "
                     "candidate's measurement noise (the rest goes to the one-way "
                     "marginals), scores each pair net of its measurement noise and may "
                     "stop early; each chosen edge is measured at the ρ it has in the full "
                     "forest, and the ρ of the edges not chosen and of the rounds not run "
                     "goes to the one-way marginals"),
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


def pair_noise_l1(cells: float, *, sigma: float) -> float:
    """Expected L1 error (in rows) that Gaussian noise σ puts on a ``cells``-cell marginal."""
    return sigma * math.sqrt(2 / math.pi) * cells


def pair_noise_tvd(cells: float, *, sigma: float, total: float) -> float:
    """Expected TVD that Gaussian noise σ puts on a ``cells``-cell marginal of ``total`` rows:
    expected L1 noise ``σ·√(2/π)·cells`` over ``2·total``."""
    return pair_noise_l1(cells, sigma=sigma) / (2 * max(total, 1.0))


def tree_pair_sigma(attributes: int, *, rho_tree: float) -> float:
    """σ of one 2-way marginal of a full tree: MST measures its d − 1 edges with half of
    ``rho_tree`` (the other half selects them)."""
    return math.sqrt(max(attributes - 1, 1) / (2 * (rho_tree / 2)))


def selection_rho(domain: Domain, candidates: Sequence[Edge], *, method: str,
                  rho_measure: float) -> float:
    """ρ a tree's selection needs at small n (issue 34.1): its noise as fine as the smallest
    candidate's measurement noise, no finer.

    A selected pair is scored net of :func:`pair_noise_l1` at the σ it gets in the full
    forest (``rounds = forest_size`` edges measured at ``rho_measure``); telling pairs apart
    more finely than the smallest such penalty buys nothing the measurement keeps, while the
    one-way marginals, whose error reaches every pair at small n, can use the ρ. The
    resolution is ``√(rounds / (2ρ))`` for private Kruskal (``2/ε`` of a round at
    ρ/rounds) and the Gaussian σ ``√(r / (2ρ))`` of the exact search's ``r`` weights, set to
    :data:`SELECTION_RESOLUTION` times the smallest penalty.
    MST's thirds (``rho_measure``) are the usual split; at 1,000 rows they spent 2.5-10×
    this on selection, and the ratios at ε = 1 stayed at 1.00-1.04 of independence's.

    Public: the (compressed) sizes, the candidates, the method and ρ only.
    """
    rounds = forest_size(domain.attributes, candidates)
    if not candidates or rounds == 0 or rho_measure <= 0:
        return 0.0
    cells = min(domain.size(a) * domain.size(b) for a, b in candidates)
    queries = len(candidates) / rounds if method == "prefair-exact" else 1.0
    # resolution √(rounds·queries / (2ρ)) = √(2/π)·cells·√(rounds / (2·rho_measure))
    scale = SELECTION_RESOLUTION * math.sqrt(2 / math.pi) * cells
    return rho_measure * queries / scale ** 2


def qualification_limit(method: str, *, rho: float | None = None) -> float:
    """The small-n rule's limit for ``method``: :data:`TREE_NOISE_TVD_LIMIT` for a tree; for
    AIM :data:`NOISE_TVD_LIMIT` up to :data:`AIM_LIMIT_RHO`, growing as ``ρ^(1/3)`` above
    it up to the trees' limit (0.107 at ε = 2, 0.15 from ε ≈ 4, δ = 1e-6).

    AIM's rounds always measure something (they have no stop outcome, unlike a tree's
    selection), so at small ρ each extra pair costs more than it brings: at 1,000 rows the
    limit 0.15 put credit21 at ε = 1 at 1.04-1.10 of independence's 2-way TVD and 0.07 at
    1.02, while at ε = 4 0.15 put Adult at 0.79/0.85 (aim/aim-fair; with
    :data:`~privfair.synth.synthesizer.AIM_ROUNDS_PER_EDGE`) against 0.90/0.95 for the
    former rule (0.07 at every ρ). Public: ρ only.
    """
    if method in METHODS:
        return TREE_NOISE_TVD_LIMIT
    if rho is None:
        raise ValueError("AIM's qualification limit depends on rho")
    grown = NOISE_TVD_LIMIT * max(rho / AIM_LIMIT_RHO, 1.0) ** (1 / 3)
    return min(TREE_NOISE_TVD_LIMIT, grown)


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


def check_greedy_check(greedy_check: str) -> str:
    """``greedy_check`` when it is one of :data:`GREEDY_CHECKS`; else a ValueError naming it."""
    if greedy_check not in GREEDY_CHECKS:
        raise ValueError(f"greedy_check must be one of {list(GREEDY_CHECKS)}, "
                         f"got {greedy_check!r}")
    return greedy_check


def allowed_edges(domain: Domain, roles: Roles, method: str, *,
                  greedy_check: str = "edge-rule") -> list[Edge]:
    """Candidate edges of a selector, in domain order.

    Greedy-PreFair lets an outcome attribute neighbour only admissible or outcome
    attributes. The exact search only drops protected–outcome edges, which are unfair in any
    tree; everything else is decided by the search. Greedy-PreFair with ``greedy_check=
    "privci"`` has the exact search's candidates and checks fairness inside its rounds.
    """
    check_greedy_check(greedy_check)
    if method == "prefair-greedy" and greedy_check == "privci":
        method = "prefair-exact"
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
    stop: bool = False,
    fair_roles: Roles | None = None,
) -> list[Edge]:
    """MST's private Kruskal: d−1 exponential-mechanism rounds, each costing ρ/(d−1).

    With ``forest``, the candidates need not connect every attribute: the rounds build a
    spanning forest over them, one round per edge it has (``d − components``, a function of
    the candidate set only), each costing ρ/rounds.

    With ``stop``, each round's mechanism also has a "stop" outcome of score 0: once every
    joining edge's score (a weight less its noise penalty, see :func:`select_structure`) is
    well below 0, the rounds end early and the ρ of the rounds not run is left unspent (the
    caller gives it to the measurement). The stop is an outcome of the mechanism, so the
    number of edges is itself a DP release.

    With ``fair_roles`` (PrivCI, Ghahramanpour & Milani 2026), a round's candidates are the
    joining edges that keep the forest fair (:class:`FairForest`): the feasibility check
    runs inside Kruskal's construction, on the edges already released, instead of a fixed
    edge rule beforehand (Greedy-PreFair's :func:`allowed_edges`).

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
    fair = FairForest(domain.attributes, fair_roles) if fair_roles is not None else None
    chosen: list[Edge] = []
    for r in range(n_rounds):
        joining = [i for i, (a, b) in enumerate(candidates)
                   if components.find(a) != components.find(b)
                   and (fair is None or fair.keeps_fair(a, b))]
        if not joining:  # only with fair_roles in a forest: no fair edge is left
            break
        scores = np.append(weights[joining], 0.0) if stop else weights[joining]
        pick = exponential_mechanism(scores, epsilon=epsilon, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name=f"select edge {r + 1}/{n_rounds}")
        if pick == len(joining):  # the stop outcome
            break
        a, b = candidates[joining[pick]]
        components.union(a, b)
        if fair is not None:
            fair.add(a, b)
        chosen.append((a, b))
    return chosen


class FairForest:
    """The regions a forest's edges join once admissible attributes are removed (PrivCI).

    A forest is fair when no region holds both a protected and an outcome attribute (every
    protected–outcome path passes through an admissible one). An edge between two
    non-admissible attributes merges their regions; one with an admissible end merges none,
    since any path through it passes through that end. So an edge keeps the forest fair
    unless it merges a region holding a protected attribute with one holding an outcome.
    Roles and the edges already released only: no private value.
    """

    def __init__(self, attributes: Sequence[str], roles: Roles) -> None:
        self._admissible = set(roles.admissible)
        self._regions = DisjointSet(attributes)
        # keyed by each region's representative (DisjointSet.find)
        self._protected: dict[Hashable, bool] = {a: a in set(roles.protected) for a in attributes}
        self._outcome: dict[Hashable, bool] = {a: a in set(roles.outcome) for a in attributes}

    def _flags(self, a: str) -> tuple[bool, bool]:
        root = self._regions.find(a)
        return self._protected[root], self._outcome[root]

    def keeps_fair(self, a: str, b: str) -> bool:
        if a in self._admissible or b in self._admissible:
            return True
        (pa, oa), (pb, ob) = self._flags(a), self._flags(b)
        return not ((pa or pb) and (oa or ob))

    def add(self, a: str, b: str) -> None:
        if a in self._admissible or b in self._admissible:
            return
        (pa, oa), (pb, ob) = self._flags(a), self._flags(b)
        self._regions.union(a, b)
        root = self._regions.find(a)
        self._protected[root], self._outcome[root] = pa or pb, oa or ob


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
    #: ρ of selection rounds a stopped private Kruskal did not run (the one-way marginals
    #: get it at small n).
    rho_unspent: float = 0.0
    #: Edges of the full forest over the candidates (the rounds a selection may run).
    forest_edges: int | None = None

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
    rho_measure: float | None = None,
    greedy_check: str = "edge-rule",
) -> SelectedStructure:
    """Select a spanning tree with ``method`` at privacy cost ``rho``.

    With ``qualified`` (:func:`qualify_pairs`'s kept pairs), only those of the method's
    allowed edges are candidates and the structure is a spanning forest over them.

    With ``rho_measure`` (the ρ that will measure the selected pairs), an edge's score is its
    weight less the expected L1 noise of its measurement (:func:`pair_noise_l1` of its cells
    at the σ each edge of a full forest would get), as AIM scores its candidates: a pair
    whose dependence is weaker than the noise its measurement adds scores below 0. The
    private Kruskal then may stop early (a "stop" outcome of score 0 in each round; the ρ of
    the rounds not run is ``rho_unspent``; ``forest_edges`` is the rounds it could run), and the exact search keeps only edges whose
    noisy weight exceeds the penalty (post-processing), still ranking them by noisy weight
    (ranking by the net score cost the exact search 0.02-0.04 of the ratio on COMPAS). The
    penalty depends on the compressed sizes (post-processing of the charged one-way
    measurement) and ρ only.

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
    candidates = allowed_edges(domain, roles, method, greedy_check=greedy_check)
    if forest_size(domain.attributes, candidates) < len(domain) - 1:  # public: the roles
        raise RoleError("the allowed edges cannot connect every attribute; check the roles")
    forest = qualified is not None and not set(candidates) <= set(qualified)
    if forest and qualified is not None:  # forest implies qualified
        keep = set(qualified)
        candidates = [e for e in candidates if e in keep]
    if not candidates:
        return SelectedStructure(method, (), check_fairness(domain.attributes, [], roles))
    weights = edge_weights(pair_tables, one_way, total, candidates)
    rounds = forest_size(domain.attributes, candidates)
    penalised = rho_measure is not None
    penalty = np.zeros(len(candidates))
    if rho_measure is not None:
        sigma = math.sqrt(rounds / (2 * rho_measure)) if rho_measure > 0 else math.inf
        penalty = np.array([pair_noise_l1(domain.size(a) * domain.size(b), sigma=sigma)
                            for a, b in candidates])
    search_nodes, unspent = None, 0.0
    if method in ("mst", "prefair-greedy"):
        privci = method == "prefair-greedy" and greedy_check == "privci"
        spent = ledger.spent
        edges = private_kruskal(domain, candidates, weights - penalty, rho=rho, rng=rng,
                                ledger=ledger,
                                forest=forest or penalised or privci, stop=penalised,
                                fair_roles=roles if privci else None)
        # the rounds not run (a stopped round is charged: the stop is its outcome)
        unspent = max(rho - (ledger.spent - spent), 0.0)
    else:
        # r sensitivity-1 queries measured at once: L2 sensitivity √r, so σ = √(r / (2ρ)).
        # (The public PreFair code uses √(ρ / (2r)), which is far too little noise.)
        r = len(candidates)
        sigma = gaussian_sigma(rho=rho, sensitivity=math.sqrt(r))
        noisy = gaussian_mechanism(weights, sigma=sigma, sensitivity=math.sqrt(r), rng=rng,
                                   ledger=ledger, name="edge weights (all usable pairs)")
        if penalised:  # post-processing: an edge whose noisy score is below 0 is not worth it
            positive = [i for i in range(r) if noisy[i] > penalty[i]]
            candidates, noisy = [candidates[i] for i in positive], noisy[positive]
        edges, search_nodes = (best_fair_tree(domain, roles, candidates, noisy,
                                              max_nodes=max_search_nodes,
                                              forest=forest or penalised)
                               if candidates else ([], 0))
    fairness = check_fairness(domain.attributes, edges, roles)
    return SelectedStructure(method, tuple(edges), fairness, search_nodes,
                             rho_unspent=unspent, forest_edges=rounds)
