"""Orientation from sepsets and public constraints, the roles audit, the graph value type."""

from __future__ import annotations

from itertools import combinations

import networkx as nx
import numpy as np
import pytest

from privfair.causal.graph import (
    CausalGraph,
    orient,
    skeleton_scores,
    skeleton_scores_as_printed_xu2021,
    unblocked_paths,
)
from privfair.causal.pc import orient_skeleton, pc_skeleton
from privfair.causal.simulate import random_dag
from privfair.core.domain import Roles
from privfair.core.errors import DomainError


def _d_separation_pc(dag):
    g = nx.DiGraph()
    g.add_nodes_from(dag.nodes)
    g.add_edges_from(dag.graph.edges)
    nodes = dag.nodes

    def independent(i, j, cond):
        return nx.is_d_separator(g, {nodes[i]}, {nodes[j]}, {nodes[k] for k in cond})

    return pc_skeleton(len(nodes), independent, max_order=len(nodes))


def _v_structures(graph: CausalGraph):
    adjacent = graph.skeleton()
    parents: dict[str, set[str]] = {v: set() for v in graph.nodes}
    for u, v in graph.edges:
        parents[v].add(u)
    return {(frozenset((a, b)), c) for c, ps in parents.items()
            for a, b in combinations(sorted(ps), 2) if frozenset((a, b)) not in adjacent}


@pytest.mark.parametrize("seed", range(12))
def test_oracle_pc_recovers_the_skeleton_and_orients_only_true_directions(seed):
    dag = random_dag(7, 0.35, rng=np.random.default_rng(seed))
    skeleton = _d_separation_pc(dag)
    graph = orient_skeleton(skeleton, dag.nodes, None)
    assert graph.skeleton() == dag.graph.skeleton()
    assert set(graph.edges) <= set(dag.graph.edges)
    assert _v_structures(dag.graph) <= _v_structures(graph)


@pytest.mark.parametrize("seed", range(12))
def test_orientation_never_points_into_protected_or_out_of_outcomes(seed):
    rng = np.random.default_rng(100 + seed)
    nodes = tuple(f"v{k}" for k in range(6))
    pairs = [frozenset(p) for p in combinations(nodes, 2)]
    keep = rng.random(len(pairs)) < 0.5
    adjacency = [p for p, k in zip(pairs, keep, strict=True) if k]
    # Arbitrary (even wrong) sepsets: the constraints must hold whatever the noisy search says.
    sepsets = {p: frozenset(n for n in nodes if n not in p and rng.random() < 0.3)
               for p, k in zip(pairs, keep, strict=True) if not k}
    roles = Roles(protected=("v0", "v1"), admissible=("v2",), outcome=("v5",))
    graph = orient(nodes, adjacency, sepsets, roles=roles)
    assert graph.skeleton() == frozenset(adjacency)
    for u, v in graph.edges:
        assert v not in roles.protected
        assert u not in roles.outcome
    for u, v in graph.undirected:
        assert {u, v} <= {"v0", "v1"} or not ({u, v} & {"v0", "v1", "v5"})


def test_unblocked_paths_flag_a_route_around_the_admissible_attributes():
    roles = Roles(protected=("sex",), admissible=("education",), outcome=("income",))
    fair = CausalGraph(("sex", "education", "age", "income"),
                       edges=(("sex", "education"), ("education", "income"), ("age", "income")))
    assert unblocked_paths(fair, roles) == []
    unfair = CausalGraph(("sex", "education", "marital", "income"),
                         edges=(("sex", "education"), ("education", "income")),
                         undirected=(("sex", "marital"), ("marital", "income")))
    assert unblocked_paths(unfair, roles) == [["sex", "marital", "income"]]
    # An arrow pointing back at the protected attribute is not a causal route from it.
    backwards = CausalGraph(("sex", "marital", "income"),
                            edges=(("marital", "sex"), ("income", "marital")))
    assert unblocked_paths(backwards, roles) == []


def test_graph_json_shape_round_trips_and_refuses_bad_edges():
    graph = CausalGraph(("a", "b", "c"), edges=(("a", "b"),), undirected=(("c", "b"),))
    data = graph.to_dict()
    assert data == {"nodes": ["a", "b", "c"], "edges": [["a", "b"]],
                    "undirected": [["b", "c"]]}
    assert CausalGraph.from_dict(data) == graph
    nxg = graph.to_networkx()
    assert nxg.edges["a", "b"]["kind"] == "directed" and nxg.has_edge("c", "b")
    with pytest.raises(DomainError, match="unknown node"):
        CausalGraph(("a",), edges=(("a", "z"),))
    with pytest.raises(DomainError, match="self-loop"):
        CausalGraph(("a",), edges=(("a", "a"),))
    with pytest.raises(DomainError, match="more than one edge"):
        CausalGraph(("a", "b"), edges=(("a", "b"),), undirected=(("b", "a"),))


def test_skeleton_scores_on_a_known_pair_of_graphs():
    truth = CausalGraph(("a", "b", "c", "d"), edges=(("a", "b"), ("b", "c")))
    found = CausalGraph(("a", "b", "c", "d"), edges=(("b", "a"),), undirected=(("c", "d"),))
    scores = skeleton_scores(found, truth)
    assert scores == {"tpr": 0.5, "fpr": 0.25, "tdr": 0.5, "fdr": 0.5}


def test_scores_as_xu2021_prints_them_swap_estimate_and_truth():
    # Truth a–b, b–c, c–d; the estimate a–b (hit) and a–d (false), missing b–c and c–d.
    nodes = ("a", "b", "c", "d")
    truth = CausalGraph(nodes, (("a", "b"), ("b", "c"), ("c", "d")))
    found = CausalGraph(nodes, (("a", "b"), ("a", "d")))
    true = skeleton_scores(found, truth)
    assert (true["tpr"], true["fpr"], true["tdr"]) == (1 / 3, 1 / 3, 1 / 2)
    printed = skeleton_scores_as_printed_xu2021(found, truth)
    # "TPR" = hits / found, "TDR" = hits / true, "FPR" = missed (2) / pairs left out (6 − 2).
    assert printed == {"tpr": 1 / 2, "fpr": 2 / 4, "tdr": 1 / 3}
    # compareGraphs' empty-graph conventions: an empty estimate prints TPR 0 (not 1).
    empty = skeleton_scores_as_printed_xu2021(CausalGraph(nodes, ()), truth)
    assert empty == {"tpr": 0.0, "fpr": 3 / 6, "tdr": 0.0}
