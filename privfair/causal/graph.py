"""Causal graphs (CPDAGs): the released value type, orientation and the roles audit.

Orientation touches no data. It uses the separating sets that the skeleton search released
(erratum 2: the dissertation's Alg. 2 line 18 re-tests independence while orienting, which
would read the data again), then the public constraints of the declared roles, then Meek's
rules R1–R3.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from privfair.core.domain import Roles
from privfair.core.errors import DomainError

Edge = tuple[str, str]


@dataclass(frozen=True)
class CausalGraph:
    """A partially directed graph over named attributes (a CPDAG, or a DAG if all directed).

    Attributes
    ----------
    nodes : tuple of str
        Attribute names, in domain order.
    edges : tuple of (str, str)
        Directed edges u → v, sorted.
    undirected : tuple of (str, str)
        Undirected edges u – v with u before v in ``nodes``, sorted.
    """

    nodes: tuple[str, ...]
    edges: tuple[Edge, ...] = ()
    undirected: tuple[Edge, ...] = ()

    def __post_init__(self) -> None:
        position = {v: k for k, v in enumerate(self.nodes)}
        seen: set[frozenset[str]] = set()
        for u, v in (*self.edges, *self.undirected):
            if u not in position or v not in position:
                raise DomainError(f"causal graph: edge {u!r}-{v!r} names an unknown node")
            if u == v:
                raise DomainError(f"causal graph: self-loop on {u!r}")
            pair = frozenset((u, v))
            if pair in seen:
                raise DomainError(f"causal graph: more than one edge between {u!r} and {v!r}")
            seen.add(pair)
        object.__setattr__(self, "edges", tuple(sorted((str(u), str(v)) for u, v in self.edges)))
        object.__setattr__(self, "undirected", tuple(sorted(
            (u, v) if position[u] < position[v] else (v, u) for u, v in self.undirected)))

    def skeleton(self) -> frozenset[frozenset[str]]:
        """Adjacencies, ignoring direction."""
        return frozenset(frozenset(e) for e in (*self.edges, *self.undirected))

    def is_dag(self) -> bool:
        import networkx as nx

        return not self.undirected and nx.is_directed_acyclic_graph(self.to_networkx())

    def to_dict(self) -> dict[str, Any]:
        """The ``causal_graph`` JSON shape: nodes, directed ``edges``, ``undirected``."""
        return {"nodes": list(self.nodes), "edges": [list(e) for e in self.edges],
                "undirected": [list(e) for e in self.undirected]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CausalGraph:
        return cls(tuple(data["nodes"]), tuple(tuple(e) for e in data.get("edges", ())),
                   tuple(tuple(e) for e in data.get("undirected", ())))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_networkx(self) -> Any:
        """A ``networkx.DiGraph``; an undirected edge appears as two arcs marked undirected."""
        import networkx as nx

        g: nx.DiGraph[str] = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from(self.edges, kind="directed")
        for u, v in self.undirected:
            g.add_edge(u, v, kind="undirected")
            g.add_edge(v, u, kind="undirected")
        return g


def orient(nodes: Iterable[str], adjacency: Iterable[frozenset[str]],
           sepsets: Mapping[frozenset[str], frozenset[str]], *,
           roles: Roles | None = None) -> CausalGraph:
    """Orient a skeleton: public constraints, then v-structures from sepsets, then Meek R1–R3.

    Parameters
    ----------
    nodes : iterable of str
        Node names in domain order.
    adjacency : iterable of frozenset
        Undirected skeleton edges.
    sepsets : mapping
        For each removed pair, the conditioning set that separated it (as released).
    roles : Roles, optional
        Public constraints: protected attributes are exogenous (no edge points into one) and
        outcomes are sinks (no edge leaves one). They are applied first and no later rule may
        contradict them, so they override a v-structure that the (noisy) skeleton suggests.
    """
    nodes = tuple(nodes)
    adj: dict[str, set[str]] = {v: set() for v in nodes}
    for pair in adjacency:
        u, v = tuple(pair)
        adj[u].add(v)
        adj[v].add(u)
    directed: set[Edge] = set()
    protected = set(roles.protected) if roles else set()
    outcome = set(roles.outcome) if roles else set()

    def allowed(u: str, v: str) -> bool:
        return v not in protected and u not in outcome

    def undirected(u: str, v: str) -> bool:
        return v in adj[u] and (u, v) not in directed and (v, u) not in directed

    def direct(u: str, v: str) -> bool:
        if undirected(u, v) and allowed(u, v):
            directed.add((u, v))
            return True
        return False

    for u in nodes:
        for v in sorted(adj[u]):
            if (u in protected and v not in protected) or (v in outcome and u not in outcome):
                direct(u, v)
    for k in nodes:
        for i, j in combinations(sorted(adj[k], key=nodes.index), 2):
            if j in adj[i]:
                continue
            if k not in sepsets.get(frozenset((i, j)), frozenset()):
                # Conflicting colliders: the first orientation stands (pcalg's default).
                direct(i, k)
                direct(j, k)
    changed = True
    while changed:
        changed = False
        for a, b in sorted(directed):
            for c in sorted(adj[b]):
                # R1: a → b – c with a, c non-adjacent gives b → c.
                if c != a and c not in adj[a] and direct(b, c):
                    changed = True
        for a in nodes:
            for c in sorted(adj[a]):
                if not undirected(a, c):
                    continue
                # R2: a → b → c with a – c gives a → c.
                if any((a, b) in directed and (b, c) in directed for b in adj[a]) \
                        and direct(a, c):
                    changed = True
                    continue
                # R3: a – k, a – l, k → c, l → c, k and l non-adjacent gives a → c.
                parents = [x for x in adj[a] if undirected(a, x) and (x, c) in directed]
                if any(y not in adj[x] for x, y in combinations(parents, 2)) and direct(a, c):
                    changed = True
    return CausalGraph(nodes, tuple(directed), tuple(
        (u, v) for u in nodes for v in adj[u] if nodes.index(u) < nodes.index(v)
        and undirected(u, v)))


def unblocked_paths(graph: CausalGraph, roles: Roles) -> list[list[str]]:
    """Protected → outcome paths that avoid every admissible attribute (the roles audit).

    A path may follow a directed edge forwards or an undirected edge either way (a possibly
    causal path of the CPDAG). Returns one shortest such path per (protected, outcome) pair
    that has one; an empty list means the graph agrees with the declared roles.
    """
    out: dict[str, list[str]] = {v: [] for v in graph.nodes}
    for u, v in graph.edges:
        out[u].append(v)
    for u, v in graph.undirected:
        out[u].append(v)
        out[v].append(u)
    admissible = set(roles.admissible)
    found: list[list[str]] = []
    for source in roles.protected:
        parent: dict[str, str | None] = {source: None}
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for v in sorted(out.get(u, ())):
                if v in parent or v in admissible:
                    continue
                parent[v] = u
                queue.append(v)
        for target in roles.outcome:
            if target in parent:
                path = [target]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])  # type: ignore[arg-type]
                found.append(path[::-1])
    return found


def skeleton_scores(found: CausalGraph, truth: CausalGraph) -> dict[str, float]:
    """TPR, FPR, TDR and FDR of the skeleton (the dissertation's §4.6 metrics)."""
    p = len(truth.nodes)
    est, true = found.skeleton(), truth.skeleton()
    gaps = p * (p - 1) // 2 - len(true)
    hits = len(est & true)
    tdr = hits / len(est) if est else 1.0
    return {"tpr": hits / len(true) if true else 1.0,
            "fpr": len(est - true) / gaps if gaps else 0.0,
            "tdr": tdr, "fdr": 1.0 - tdr}


def skeleton_scores_as_printed_xu2021(found: CausalGraph,
                                      truth: CausalGraph) -> dict[str, float]:
    """The three numbers Xu 2021's Tables 4.3–4.11 print as TPR, FPR and TDR.

    They are pcalg's ``compareGraphs(gl, gt)`` called with the truth as ``gl`` and the
    estimate as ``gt``: the printed "TPR" is hits / found edges (our TDR), the printed "TDR"
    is hits / true edges (our TPR), and the printed "FPR" is missed true edges / pairs the
    estimate leaves out. Only this reading fits every row: at p = 20, s = 0.7 (Table 4.11)
    the printed TPR 0.803 and TDR 0.19 would need 0.803 · 133 / 0.19 ≈ 560 found edges out
    of 190 pairs, whereas read swapped, all three printed numbers give |E| = s · C(p, 2) for
    every p and s of Tables 4.8–4.11. The dissertation's Adult case study has the same swap
    (spec erratum 4). compareGraphs' conventions for empty graphs are kept: an empty
    estimate prints TPR 0, an estimate with every edge prints FPR 1.
    """
    p = len(truth.nodes)
    est, true = found.skeleton(), truth.skeleton()
    hits = len(est & true)
    left_out = p * (p - 1) // 2 - len(est)
    return {"tpr": hits / len(est) if est else 0.0,
            "fpr": len(true - est) / left_out if left_out else 1.0,
            "tdr": hits / len(true) if true else 1.0}
