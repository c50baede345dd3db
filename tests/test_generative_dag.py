"""CFGAN's causal graphs and the torch-free side of privfair.generative."""

from __future__ import annotations

import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.generative.calibration import (
    noise_multiplier_for,
    noise_multiplier_on_ledger,
    subsampled_gaussian_epsilon,
)
from privfair.generative.dag import CausalGraphError, parse_dag

DOMAIN = Domain(("a", "s", "m", "y"), (3, 2, 2, 2))


def test_import_without_torch():
    # A None entry in sys.modules makes `import torch` fail, as on a machine without torch.
    code = ("import sys; sys.modules['torch'] = None\n"
            "import privfair, privfair.generative, privfair.generative.dag, "
            "privfair.generative.calibration\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_mapping_and_digraph_give_the_same_dag():
    edges = [("s", "m"), ("m", "y"), ("s", "y"), ("a", "y")]
    from_mapping = parse_dag({"nodes": ["a", "s", "m", "y"], "edges": edges}, DOMAIN)
    from_graph = parse_dag(nx.DiGraph(edges), DOMAIN)
    assert from_mapping == from_graph
    assert from_mapping.parents("y") == ("a", "s", "m")
    order = from_mapping.nodes
    assert order.index("s") < order.index("m") < order.index("y")


def test_unmentioned_attributes_become_roots():
    dag = parse_dag({"edges": [["s", "y"]]}, DOMAIN)
    assert set(dag.nodes) == set(DOMAIN.attributes)
    assert dag.parents("a") == ()


@pytest.mark.parametrize(("graph", "message"), [
    ({"edges": [["s", "m"], ["m", "y"], ["y", "s"]]}, "not acyclic, cycle"),
    ({"edges": [["s", "zip"]]}, "attributes ['zip'] are not in the contract's domain"),
    ({"nodes": ["income"], "edges": []}, "attributes ['income'] are not in"),
    ({"edges": [["m", "m"]]}, "self-loop on 'm'"),
    ({"edges": [["s"]]}, "must be a pair"),
    ({"arrows": []}, "unknown keys ['arrows']"),
    ({"undirected": [["a", "m"]]}, "undirected edge a - m cannot be oriented"),
])
def test_bad_graphs_are_refused_in_one_line(graph, message):
    with pytest.raises(CausalGraphError) as info:
        parse_dag(graph, DOMAIN, protected=("s",), outcome=("y",))
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_digraph_with_a_cycle_is_refused():
    with pytest.raises(CausalGraphError, match="cycle"):
        parse_dag(nx.DiGraph([("a", "m"), ("m", "a")]), DOMAIN)


def test_undirected_edges_are_oriented_by_public_roles():
    dag = parse_dag({"edges": [["s", "m"]], "undirected": [["y", "m"], ["a", "s"]]}, DOMAIN,
                    protected=("s",), outcome=("y",))
    assert ("m", "y") in dag.edges  # outcome is a sink
    assert ("s", "a") in dag.edges  # protected is exogenous
    assert set(dag.oriented) == {("m", "y"), ("s", "a")}


def test_path_edges_direct_and_through_redlining():
    dag = parse_dag({"edges": [["s", "m"], ["m", "y"], ["s", "y"], ["a", "m"]]}, DOMAIN)
    assert dag.path_edges("s", "y") == {("s", "y")}
    assert dag.path_edges("s", "y", through=["m"]) == {("s", "m"), ("m", "y")}
    with pytest.raises(CausalGraphError, match="redlining"):
        dag.path_edges("s", "y", through=["q"])


def test_ledger_epsilon_matches_the_accountant_library():
    sigma, q, steps = 1.1, 0.02, 300
    ledger = PrivacyLedger(epsilon_budget=10.0, delta=1e-6)
    entry = ledger.spend_subsampled_gaussian(name="d1", noise_multiplier=sigma,
                                             sample_rate=q, steps=steps, sensitivity=1.0)
    assert (entry.sample_rate, entry.steps) == (q, steps)
    expected = subsampled_gaussian_epsilon(noise_multiplier=sigma, sample_rate=q,
                                           steps=steps, delta=1e-6)
    # Same RDP series on the integer orders; the ledger's grid also has 1.25..1.75, so its ε
    # may only be slightly smaller.
    assert ledger.epsilon_spent() == pytest.approx(expected, rel=0.02)
    assert ledger.epsilon_spent() <= expected + 1e-9


def test_calibrated_sigma_is_the_smallest_that_fits():
    q, steps = 0.02, 200
    sigma = noise_multiplier_for(epsilon=2.0, delta=1e-6, sample_rate=q, steps=steps)
    eps = subsampled_gaussian_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps,
                                      delta=1e-6)
    assert eps <= 2.0
    assert subsampled_gaussian_epsilon(noise_multiplier=sigma * 0.99, sample_rate=q,
                                       steps=steps, delta=1e-6) > 2.0


def test_calibration_on_a_ledger_leaves_it_untouched_and_fits_exactly():
    ledger = PrivacyLedger(epsilon_budget=2.0, delta=1e-6)

    def charges(sigma):
        return [{"name": "d1", "noise_multiplier": sigma, "sample_rate": 0.02, "steps": 200}]

    sigma = noise_multiplier_on_ledger(ledger, charges=charges)
    assert ledger.entries == ()
    ledger.spend_subsampled_gaussian(**charges(sigma)[0])
    assert 0.99 * 2.0 < ledger.epsilon_spent() <= 2.0


def test_causal_effects_recover_a_known_model():
    from privfair.generative.effects import causal_effect

    rng = np.random.default_rng(3)
    n = 40_000
    s = rng.integers(0, 2, n)
    a = rng.integers(0, 3, n)
    m = np.where(rng.random(n) < 0.8, s, 1 - s)
    y = (rng.random(n) < 0.1 + 0.3 * s + 0.3 * m + 0.1 * (a == 2)).astype(np.int64)
    codes = {"a": a, "s": s, "m": np.asarray(m), "y": y}
    dag = parse_dag({"edges": [["s", "m"], ["m", "y"], ["s", "y"], ["a", "y"]]}, DOMAIN)
    effect = lambda paths=None: causal_effect(  # noqa: E731
        codes, DOMAIN, dag, protected="s", outcome="y", rng=np.random.default_rng(0),
        paths=paths)
    # TE = 0.3 + 0.3 * (P(m=1|s=1) - P(m=1|s=0)) = 0.48; direct 0.3; through m 0.18.
    assert effect() == pytest.approx(0.48, abs=0.02)
    assert effect(dag.path_edges("s", "y")) == pytest.approx(0.30, abs=0.02)
    assert effect(dag.path_edges("s", "y", through=["m"])) == pytest.approx(0.18, abs=0.02)
    # Independent S and Y: no effect.
    flat = {**codes, "y": rng.integers(0, 2, n)}
    assert causal_effect(flat, DOMAIN, dag, protected="s", outcome="y",
                         rng=np.random.default_rng(0)) == pytest.approx(0.0, abs=0.02)
