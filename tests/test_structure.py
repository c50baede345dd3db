import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain, Roles
from privfair.core.errors import RoleError, StructureSearchLimitError
from privfair.synth.structure import (
    GREEDY_CHECKS,
    FairForest,
    allowed_edges,
    best_fair_tree,
    check_fairness,
    private_kruskal,
    select_structure,
)


def test_check_fairness_on_known_trees():
    roles = Roles(protected=("sex",), admissible=("edu",), outcome=("income",))
    attrs = ["sex", "edu", "income", "age"]
    blocked = [("sex", "edu"), ("edu", "income"), ("income", "age")]
    assert check_fairness(attrs, blocked, roles).passed
    leaky = [("sex", "age"), ("age", "income"), ("edu", "income")]
    result = check_fairness(attrs, leaky, roles)
    assert not result.passed
    assert result.violations[0][:2] == ("sex", "income")
    assert result.violations[0][2] == ("sex", "age", "income")
    # A 3-clique containing P, A and O leaks: P-O are adjacent in the Markov network.
    assert not check_fairness(attrs, [("sex", "edu", "income")], roles).passed


def _random_instance(data, max_attrs=8):
    d = data.draw(st.integers(4, max_attrs))
    names = [f"x{i}" for i in range(d)]
    order = data.draw(st.permutations(names))
    labels = data.draw(st.lists(st.sampled_from("PAOF"), min_size=d, max_size=d))
    # Guarantee one of each needed role.
    labels[:3] = ["P", "A", "O"]
    labels = data.draw(st.permutations(labels))
    roles = Roles(
        protected=tuple(n for n, r in zip(order, labels, strict=True) if r == "P"),
        admissible=tuple(n for n, r in zip(order, labels, strict=True) if r == "A"),
        outcome=tuple(n for n, r in zip(order, labels, strict=True) if r == "O"),
    )
    domain = Domain(tuple(order), tuple(data.draw(st.lists(st.integers(2, 4), min_size=d,
                                                           max_size=d))))
    return domain, roles


def _fake_inputs(domain, rng):
    pairs = {(a, b): rng.integers(0, 50, size=(domain.size(a), domain.size(b)))
             for a, b in itertools.combinations(domain.attributes, 2)}
    one_way = {a: np.full(domain.size(a), 1 / domain.size(a)) for a in domain}
    return pairs, one_way


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([("prefair-greedy", "edge-rule"), ("prefair-greedy", "privci"),
                                    ("prefair-exact", "edge-rule")]))
def test_fair_methods_always_build_fair_spanning_trees(data, selector):
    method, greedy_check = selector
    domain, roles = _random_instance(data)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    pairs, one_way = _fake_inputs(domain, rng)
    ledger = PrivacyLedger(rho_budget=1.0)
    out = select_structure(domain, roles, method=method, pair_tables=pairs, one_way=one_way,
                           total=1000.0, rho=0.5, rng=rng, ledger=ledger,
                           greedy_check=greedy_check)
    tree = nx.Graph(list(out.edges))
    tree.add_nodes_from(domain.attributes)
    assert nx.is_tree(tree)
    # Re-check independently: the path between every P and O contains an A.
    for p in roles.protected:
        for o in roles.outcome:
            path = nx.shortest_path(tree, p, o)
            assert any(n in roles.admissible for n in path[1:-1])
    assert out.fairness.passed
    assert ledger.spent == pytest.approx(0.5)


def test_greedy_never_keeps_a_forbidden_edge_when_outcome_comes_first():
    # The public Greedy-PreFair mutates its candidate list while iterating and lets
    # ('income', 'sex') survive in exactly this column order.
    domain = Domain(("income", "age", "sex", "race", "educ", "occ"), (2, 3, 2, 3, 4, 4))
    roles = Roles(protected=("sex", "race"), admissible=("educ", "occ"), outcome=("income",))
    edges = allowed_edges(domain, roles, "prefair-greedy")
    for a, b in edges:
        if "income" in (a, b):
            other = b if a == "income" else a
            assert other in roles.admissible


def test_privci_checks_fairness_inside_kruskal_where_the_edge_rule_forbids_upfront():
    # x is neither protected, admissible nor outcome. The edge rule removes x–o before the
    # rounds; PrivCI (Ghahramanpour & Milani 2026) keeps it as a candidate, takes it while
    # the forest stays fair, and then refuses p–x, which would open the path p–x–o.
    domain = Domain(("p", "a", "x", "o"), (2, 2, 2, 2))
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    assert ("x", "o") not in allowed_edges(domain, roles, "prefair-greedy")
    candidates = allowed_edges(domain, roles, "prefair-greedy", greedy_check="privci")
    assert ("x", "o") in candidates and ("p", "o") not in candidates
    strength = {("x", "o"): 900.0, ("p", "x"): 800.0, ("p", "a"): 500.0, ("a", "o"): 400.0}
    weights = np.array([strength.get(e, 0.0) for e in candidates])
    ledgers = {check: PrivacyLedger(rho_budget=10.0) for check in GREEDY_CHECKS}
    privci = private_kruskal(domain, candidates, weights, rho=4.0,
                             rng=np.random.default_rng(0), ledger=ledgers["privci"],
                             fair_roles=roles)
    assert privci == [("x", "o"), ("p", "a"), ("a", "o")]  # p–x (800) refused in round 2
    assert check_fairness(domain.attributes, privci, roles).passed
    rule = allowed_edges(domain, roles, "prefair-greedy")
    greedy = private_kruskal(domain, rule, np.array([strength.get(e, 0.0) for e in rule]),
                             rho=4.0, rng=np.random.default_rng(0),
                             ledger=ledgers["edge-rule"])
    assert greedy == [("p", "x"), ("p", "a"), ("a", "o")]
    # the same privacy cost: d − 1 exponential-mechanism rounds at ρ/(d − 1) each
    for ledger in ledgers.values():
        assert [e.mechanism for e in ledger.entries] == ["exponential"] * 3
        assert ledger.spent == pytest.approx(4.0)


def test_the_fair_forest_merges_regions_only_around_non_admissible_attributes():
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    forest = FairForest(("p", "a", "x", "y", "o"), roles)
    assert forest.keeps_fair("x", "o") and forest.keeps_fair("p", "x")
    forest.add("p", "x")
    assert not forest.keeps_fair("x", "o") and forest.keeps_fair("y", "o")
    forest.add("y", "o")
    assert not forest.keeps_fair("x", "y")  # would join p's region to o's
    assert forest.keeps_fair("x", "a") and forest.keeps_fair("a", "o")
    forest.add("x", "a")
    forest.add("a", "o")  # through an admissible attribute: no region merges
    assert not forest.keeps_fair("p", "o") and forest.keeps_fair("a", "y")


def _brute_force_best(domain, roles, edges, weights):
    best_w = -np.inf
    d = len(domain)
    for combo in itertools.combinations(range(len(edges)), d - 1):
        g = nx.Graph([edges[i] for i in combo])
        g.add_nodes_from(domain.attributes)
        if not nx.is_tree(g):
            continue
        if not check_fairness(domain.attributes, [edges[i] for i in combo], roles).passed:
            continue
        w = sum(weights[i] for i in combo)
        if w > best_w:
            best_w = w
    return best_w


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_exact_search_is_optimal_against_brute_force(data):
    domain, roles = _random_instance(data, max_attrs=6)
    edges = allowed_edges(domain, roles, "prefair-exact")
    weights = np.array(data.draw(st.lists(st.floats(0, 100), min_size=len(edges),
                                          max_size=len(edges))))
    tree, _ = best_fair_tree(domain, roles, edges, weights)
    index = {e: i for i, e in enumerate(edges)}
    got = sum(weights[index[e]] for e in tree)
    assert got == pytest.approx(_brute_force_best(domain, roles, edges, weights))


def test_exact_search_bound_fails_with_a_message():
    domain = Domain(("p", "a", "o", "f1", "f2"), (2,) * 5)
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    edges = allowed_edges(domain, roles, "prefair-exact")
    # Make the unconstrained best tree unfair so the search has to branch.
    weights = np.array([100.0 if set(e) in ({"p", "f1"}, {"f1", "o"}) else 1.0 for e in edges])
    with pytest.raises(StructureSearchLimitError, match="max_search_nodes=1"):
        best_fair_tree(domain, roles, edges, weights, max_nodes=1)
    tree, nodes = best_fair_tree(domain, roles, edges, weights)
    assert nodes > 1
    assert check_fairness(domain.attributes, tree, roles).passed


def test_exact_method_charges_sigma_for_r_queries():
    domain = Domain(("p", "a", "o", "f"), (2, 2, 2, 2))
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    rng = np.random.default_rng(0)
    pairs, one_way = _fake_inputs(domain, rng)
    ledger = PrivacyLedger(rho_budget=1.0)
    select_structure(domain, roles, method="prefair-exact", pair_tables=pairs, one_way=one_way,
                     total=100.0, rho=0.2, rng=rng, ledger=ledger)
    (entry,) = ledger.entries
    r = 5  # 6 pairs minus the protected-outcome pair
    assert entry.queries == r
    assert entry.sigma == pytest.approx(np.sqrt(r / (2 * 0.2)))


def test_greedy_needs_an_admissible_attribute():
    domain = Domain(("p", "o", "f"), (2, 2, 2))
    with pytest.raises(RoleError, match="admissible"):
        select_structure(domain, Roles(protected=("p",), outcome=("o",)),
                         method="prefair-greedy", pair_tables={}, one_way={}, total=1.0,
                         rho=0.1, rng=np.random.default_rng(0),
                         ledger=PrivacyLedger(rho_budget=1.0))
