"""Causal DAGs over a contract's attributes, for CFGAN (no torch, no data).

A graph is given as a :class:`networkx.DiGraph` or as a mapping ``{"nodes": [...], "edges":
[[parent, child], ...], "undirected": [[a, b], ...]}``. Undirected edges (a CPDAG from causal
discovery) are oriented with public constraints only: a protected attribute is exogenous (edges
point away from it) and the outcome is a sink (edges point into it). Every refusal is one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from privfair.core.domain import Domain
from privfair.core.errors import PrivfairError

__all__ = ["CausalDAG", "CausalGraphError", "parse_dag"]


class CausalGraphError(PrivfairError, ValueError):
    """A causal graph is not a DAG over the declared attributes."""


@dataclass(frozen=True)
class CausalDAG:
    """A directed acyclic graph over every attribute of a domain.

    Attributes
    ----------
    nodes : tuple of str
        All attributes, in a topological order (parents before children).
    edges : tuple of (str, str)
        Directed edges ``(parent, child)``, sorted.
    oriented : tuple of (str, str)
        The edges that were given undirected and oriented by the public constraints.
    """

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    oriented: tuple[tuple[str, str], ...] = ()

    def parents(self, node: str) -> tuple[str, ...]:
        """Parents of ``node`` in topological order."""
        parents = {p for p, c in self.edges if c == node}
        return tuple(n for n in self.nodes if n in parents)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "edges": [list(e) for e in self.edges],
                "oriented_from_undirected": [list(e) for e in self.oriented]}

    def path_edges(self, source: str, target: str, *,
                   through: Iterable[str] | None = None) -> frozenset[tuple[str, str]]:
        """Edges on directed paths ``source → … → target``.

        With ``through`` (a redlining set R), only paths that visit at least one node of R
        count (indirect discrimination, Def. 15); without it, the direct edge alone when it
        exists (direct discrimination, Def. 14, π_d = {S → Y}).
        """
        if through is None:
            return frozenset({(source, target)} & set(self.edges))
        redlining = set(through)
        unknown = redlining - set(self.nodes)
        if unknown:
            raise CausalGraphError(
                f"causal graph: redlining attributes {sorted(unknown)} are not in the graph")
        graph = nx.DiGraph(list(self.edges))
        graph.add_nodes_from(self.nodes)
        out: set[tuple[str, str]] = set()
        for path in nx.all_simple_paths(graph, source, target):
            if redlining & set(path[1:-1]):
                out.update(zip(path[:-1], path[1:], strict=True))
        return frozenset(out)


def _pairs(raw: Any, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in raw or ():
        if isinstance(item, str) or not isinstance(item, Sequence) or len(item) != 2:
            raise CausalGraphError(
                f"causal graph: every {what} must be a pair [a, b], got {item!r}")
        pairs.append((str(item[0]), str(item[1])))
    return pairs


def _orient(a: str, b: str, *, protected: set[str], outcome: set[str]) -> tuple[str, str]:
    if a in protected and b not in protected:
        return a, b
    if b in protected and a not in protected:
        return b, a
    if b in outcome and a not in outcome:
        return a, b
    if a in outcome and b not in outcome:
        return b, a
    raise CausalGraphError(
        f"causal graph: undirected edge {a} - {b} cannot be oriented by the public "
        "constraints (protected exogenous, outcome a sink); orient it in the declaration")


def parse_dag(graph: nx.DiGraph | Mapping[str, Any], domain: Domain, *,
              protected: Sequence[str] = (), outcome: Sequence[str] = ()) -> CausalDAG:
    """Check a declared causal graph against ``domain`` and return it as a :class:`CausalDAG`.

    Attributes of the domain that the graph does not mention become isolated roots. Unknown
    attributes, self-loops and cycles are refused with one line naming them.
    """
    oriented: list[tuple[str, str]] = []
    if isinstance(graph, nx.DiGraph):
        nodes = [str(n) for n in graph.nodes]
        edges = [(str(a), str(b)) for a, b in graph.edges]
    elif isinstance(graph, Mapping):
        extra = set(graph) - {"nodes", "edges", "undirected"}
        if extra:
            raise CausalGraphError(
                f"causal graph: unknown keys {sorted(extra)}; expected nodes, edges, undirected")
        nodes = [str(n) for n in graph.get("nodes") or ()]
        edges = _pairs(graph.get("edges"), "edge")
        for a, b in _pairs(graph.get("undirected"), "undirected edge"):
            oriented.append(_orient(a, b, protected=set(protected), outcome=set(outcome)))
        edges += oriented
    else:
        raise CausalGraphError(
            "causal graph: expected a networkx DiGraph or a mapping with nodes and edges, "
            f"got {type(graph).__name__}")
    mentioned = list(dict.fromkeys(nodes + [n for e in edges for n in e]))
    unknown = [n for n in mentioned if n not in domain]
    if unknown:
        raise CausalGraphError(
            f"causal graph: attributes {unknown} are not in the contract's domain")
    loops = [a for a, b in edges if a == b]
    if loops:
        raise CausalGraphError(f"causal graph: self-loop on {loops[0]!r}")
    full: nx.DiGraph[str] = nx.DiGraph()
    full.add_nodes_from(domain.attributes)
    full.add_edges_from(edges)
    try:
        cycle = nx.find_cycle(full)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        text = " -> ".join([str(e[0]) for e in cycle] + [str(cycle[0][0])])
        raise CausalGraphError(f"causal graph: not acyclic, cycle {text}")
    order = tuple(nx.lexicographical_topological_sort(full, key=domain.position))
    return CausalDAG(nodes=order, edges=tuple(sorted(set(edges))),
                     oriented=tuple(sorted(set(oriented))))
