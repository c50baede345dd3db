"""The ordinary (non-private) PC algorithm, PC-stable variant.

This is the reference PrivPC is checked against, and the search LapMech and PrivPC* run on
their released statistics (post-processing). PC-stable (Colombo and Maathuis 2014) freezes each
node's adjacency at the start of a level, so the skeleton does not depend on the node order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from privfair.causal.citests import TableSource, fisher_z_first_independent, g2_test
from privfair.causal.graph import CausalGraph, orient
from privfair.core.domain import Roles

Independence = Callable[[int, int, tuple[int, ...]], bool]
#: Batched form: the position of the first separating set among ``conds``, or None.
FirstIndependent = Callable[[int, int, list[tuple[int, ...]]], int | None]


@dataclass(frozen=True)
class Skeleton:
    """Adjacency and separating sets found by a skeleton search, over node positions."""

    p: int
    adjacency: frozenset[frozenset[int]]
    sepsets: dict[frozenset[int], frozenset[int]] = field(default_factory=dict)
    tests: int = 0

    @classmethod
    def from_adjacency(cls, adj: dict[int, set[int]],
                       sepsets: dict[frozenset[int], frozenset[int]], tests: int) -> Skeleton:
        edges = frozenset(frozenset((i, j)) for i, a in adj.items() for j in a if i < j)
        return cls(len(adj), edges, sepsets, tests)

    def named(self, nodes: Sequence[str]) -> tuple[list[frozenset[str]],
                                                   dict[frozenset[str], frozenset[str]]]:
        adjacency = [frozenset(nodes[k] for k in e) for e in self.adjacency]
        sepsets = {frozenset(nodes[k] for k in pair): frozenset(nodes[k] for k in cond)
                   for pair, cond in self.sepsets.items()}
        return adjacency, sepsets


def pc_skeleton(p: int, independent: Independence | None = None, *, max_order: int,
                first_independent: FirstIndependent | None = None) -> Skeleton:
    """PC-stable phase 1: delete i – j at the first conditioning set that separates them.

    Give either ``independent`` (one test per call) or ``first_independent`` (all the
    conditioning sets of one pair and level at once, in the same order; same skeleton and
    test count).
    """
    if (independent is None) == (first_independent is None):
        raise ValueError("pc_skeleton: give exactly one of independent and first_independent")
    adj = {i: set(range(p)) - {i} for i in range(p)}
    sepsets: dict[frozenset[int], frozenset[int]] = {}
    tests = 0
    for order, frozen in stable_levels(adj, max_order):
        for i in range(p):
            for j in frozen[i]:
                if j not in adj[i]:
                    continue
                conds = combinations([k for k in frozen[i] if k != j], order)
                if first_independent is not None:
                    candidates = list(conds)
                    found = first_independent(i, j, candidates)
                    tests += len(candidates) if found is None else found + 1
                    separating = None if found is None else candidates[found]
                else:
                    separating = None
                    for cond in conds:
                        tests += 1
                        if independent is not None and independent(i, j, cond):
                            separating = cond
                            break
                if separating is not None:
                    adj[i].discard(j)
                    adj[j].discard(i)
                    sepsets[frozenset((i, j))] = frozenset(separating)
    return Skeleton.from_adjacency(adj, sepsets, tests)


def stable_levels(adj: dict[int, set[int]],
                  max_order: int) -> Iterator[tuple[int, dict[int, list[int]]]]:
    """Levels 0..max_order of PC-stable, each with the adjacency frozen at its start.

    Stops early once no node has enough neighbours left to condition on; that depends only
    on the current adjacency (released output in the private variants).
    """
    for order in range(max_order + 1):
        frozen = {i: sorted(a) for i, a in adj.items()}
        if all(len(a) - 1 < order for a in frozen.values()):
            return
        yield order, frozen


def pc(source: TableSource, *, alpha: float = 0.01, max_order: int = 3,
       roles: Roles | None = None) -> tuple[CausalGraph, Skeleton]:
    """Ordinary PC with the G² test on categorical tables (not private)."""
    check_search_parameters(alpha=alpha, max_order=max_order)

    def independent(i: int, j: int, cond: tuple[int, ...]) -> bool:
        stat, threshold = g2_test(source, i, j, cond, alpha=alpha)
        return stat <= threshold

    skeleton = pc_skeleton(len(source.domain), independent, max_order=max_order)
    return orient_skeleton(skeleton, source.domain.attributes, roles), skeleton


def pc_gaussian(corr: np.ndarray, n: float, nodes: Sequence[str], *, alpha: float = 0.01,
                max_order: int = 3, roles: Roles | None = None) -> tuple[CausalGraph, Skeleton]:
    """Ordinary PC with the Fisher z test on a correlation matrix and a sample size."""
    check_search_parameters(alpha=alpha, max_order=max_order)

    def first_independent(i: int, j: int, conds: list[tuple[int, ...]]) -> int | None:
        return fisher_z_first_independent(corr, i, j, conds, n=n, alpha=alpha)

    skeleton = pc_skeleton(len(nodes), max_order=max_order, first_independent=first_independent)
    return orient_skeleton(skeleton, tuple(nodes), roles), skeleton


def orient_skeleton(skeleton: Skeleton, nodes: Sequence[str],
                    roles: Roles | None) -> CausalGraph:
    adjacency, sepsets = skeleton.named(nodes)
    return orient(nodes, adjacency, sepsets, roles=roles)


def check_search_parameters(*, alpha: float, max_order: int) -> None:
    if not (isinstance(alpha, float | int) and 0 < alpha < 1):
        raise ValueError(f"alpha (significance level) must be in (0, 1), got {alpha!r}")
    if not (isinstance(max_order, int) and not isinstance(max_order, bool) and max_order >= 0):
        raise ValueError(f"max_order must be an integer >= 0, got {max_order!r}")
