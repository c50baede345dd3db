"""The few graph searches that the table path needs, without networkx.

networkx costs a fresh process ~0.1 s to import, a twentieth of a large table release, for
a spanning tree over a handful of cliques and some short paths. Each function here returns
what the networkx call it replaces returns, in the same order (ties included), so released
tables do not change: ``tests/test_graphs.py`` compares them on random graphs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


class DisjointSet:
    """Union-find over hashable items (path halving, no ranks: the sets here are small)."""

    def __init__(self, items: Iterable[Hashable]) -> None:
        self.parent = {i: i for i in items}

    def find(self, x: Hashable) -> Hashable:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Hashable, b: Hashable) -> bool:
        """Join the sets of ``a`` and ``b``; ``False`` when they were already one."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[ra] = rb
        return True

    def count(self) -> int:
        """The number of disjoint sets."""
        return len({self.find(x) for x in self.parent})


def maximum_spanning_forest(
    n: int, edges: Iterable[tuple[int, int, float]]
) -> list[tuple[int, int]]:
    """Kruskal's maximum spanning forest of nodes ``0..n-1``, edges in the order taken.

    ``edges`` are ``(u, v, weight)``. Ties keep their input order (a stable sort), as
    ``networkx.maximum_spanning_tree`` does over ``Graph.edges`` of the same graph.
    """
    ordered = sorted(edges, key=lambda e: e[2], reverse=True)
    components = DisjointSet(range(n))
    return [(u, v) for u, v, _ in ordered if components.union(u, v)]


def bfs_edges(
    n: int, edges: Sequence[tuple[int, int]], *, source: int = 0
) -> list[tuple[int, int]]:
    """``(parent, child)`` pairs of a breadth-first search from ``source``.

    The graph has nodes ``0..n-1`` and ``edges``; a node's neighbours are visited in the
    order its edges appear in ``edges``, as ``networkx.bfs_edges`` visits them in a graph
    built by ``add_edges_from(edges)``. Only ``source``'s component is searched.
    """
    neighbours: list[dict[int, None]] = [{} for _ in range(n)]
    for u, v in edges:
        neighbours[u][v] = None
        neighbours[v][u] = None
    seen, found, frontier = {source}, [], [source]
    for parent in frontier:  # the list grows as the search goes: a FIFO queue
        for child in neighbours[parent]:
            if child not in seen:
                seen.add(child)
                found.append((parent, child))
                frontier.append(child)
    return found


def shortest_path(
    adjacency: Mapping[Node, Iterable[Node]], source: Node, target: Node
) -> list[Node] | None:
    """A shortest path from ``source`` to ``target``, or ``None`` when there is none.

    A bidirectional breadth-first search that grows the smaller frontier one level at a
    time: the same path, among equally short ones, as ``networkx.shortest_path`` on a graph
    whose adjacency lists ``adjacency`` gives in the same order. ``adjacency`` must be
    symmetric (an undirected graph).
    """
    if source == target:
        return [source]
    pred: dict[Node, Node | None] = {source: None}
    succ: dict[Node, Node | None] = {target: None}
    forward, reverse = [source], [target]
    meet = None
    while forward and reverse and meet is None:
        # The search stops at the first node found from both sides, mid-level: which node
        # that is decides the path among equally short ones.
        if len(forward) <= len(reverse):
            level, forward = forward, []
            meet = _grow(adjacency, level, forward, pred, succ)
        else:
            level, reverse = reverse, []
            meet = _grow(adjacency, level, reverse, succ, pred)
    if meet is None:
        return None
    path: list[Node] = []
    w: Node | None = meet
    while w is not None:
        path.append(w)
        w = pred[w]
    path.reverse()
    w = succ[meet]
    while w is not None:
        path.append(w)
        w = succ[w]
    return path


def _grow(adjacency: Mapping[Node, Iterable[Node]], level: list[Node], fringe: list[Node],
          mine: dict[Node, Node | None], theirs: dict[Node, Node | None]) -> Node | None:
    """Extend one side's search by a level; the node where it meets the other side, if any."""
    for v in level:
        for w in adjacency[v]:
            if w not in mine:
                fringe.append(w)
                mine[w] = v
            if w in theirs:
                return w
    return None
