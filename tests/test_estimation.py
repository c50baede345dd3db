import itertools

import numpy as np
import pytest

from privfair.core.domain import Domain
from privfair.synth.estimation import (
    BeliefPropagation,
    build_junction_tree,
    estimate,
    estimate_total,
)
from privfair.synth.measure import Measurement, count_marginals


def _chain_data(rng, n=20_000):
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = (b + rng.integers(0, 3, n)) % 5
    d = (c > 2).astype(np.int64)
    return Domain(("a", "b", "c", "d"), (3, 4, 5, 2)), {"a": a, "b": b, "c": c, "d": d}


def test_junction_tree_of_a_cycle_is_triangulated():
    domain = Domain(("a", "b", "c", "d"), (2, 2, 2, 2))
    tree = build_junction_tree(domain, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")])
    assert all(len(c) == 3 for c in tree.cliques)
    assert len(tree.cliques) == 2
    covered = set().union(*tree.cliques)
    assert covered == set(domain.attributes)


def test_belief_propagation_matches_brute_force_on_a_loopy_model():
    rng = np.random.default_rng(0)
    domain = Domain(("a", "b", "c", "d"), (2, 3, 2, 3))
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    tree = build_junction_tree(domain, cliques)
    bp = BeliefPropagation(domain, tree, cliques)
    beliefs = bp.calibrate(potentials)
    got = bp.marginals(beliefs, cliques)
    joint = np.zeros(domain.shape(domain.attributes))
    for idx in itertools.product(*(range(s) for s in domain.sizes)):
        values = dict(zip(domain.attributes, idx, strict=True))
        joint[idx] = sum(potentials[c][tuple(values[a] for a in c)] for c in cliques)
    joint = np.exp(joint - joint.max())
    joint /= joint.sum()
    for c in cliques:
        axes = tuple(i for i, a in enumerate(domain.attributes) if a not in c)
        np.testing.assert_allclose(got[c], joint.sum(axis=axes), atol=1e-12)


def test_estimation_recovers_true_marginals_as_noise_vanishes():
    rng = np.random.default_rng(1)
    domain, data = _chain_data(rng)
    cliques = [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c"), ("c", "d")]
    tables = count_marginals(domain, cliques, [data])
    errors = []
    for sigma in (10.0, 0.1, 0.001):
        ms = [Measurement(c, t + rng.normal(0, sigma, t.shape), np.full(t.shape, sigma))
              for c, t in tables.items()]
        model = estimate(domain, ms)
        assert model.report.iterations > 0
        errors.append(max(np.abs(model.marginal(c) - tables[c]).sum() / 20_000
                          for c in cliques[4:]))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-5


def test_estimation_stops_on_tolerance_not_iteration_cap():
    rng = np.random.default_rng(2)
    domain, data = _chain_data(rng)
    cliques = [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c"), ("c", "d")]
    tables = count_marginals(domain, cliques, [data])
    ms = [Measurement(c, t + rng.normal(0, 20, t.shape), np.full(t.shape, 20.0))
          for c, t in tables.items()]
    model = estimate(domain, ms, tol=1e-6, max_iters=10_000)
    assert model.report.converged
    assert model.report.iterations < 10_000
    capped = estimate(domain, ms, tol=0.0, max_iters=40)
    assert not capped.report.converged and capped.report.iterations == 40
    assert capped.report.loss >= model.report.loss


def test_total_is_the_inverse_variance_weighted_estimate():
    ms = [Measurement(("a",), np.array([60.0, 40.0]), np.array([1.0, 1.0])),  # sum 100, var 2
          Measurement(("b",), np.array([30.0, 30.0, 50.0]), np.full(3, 2.0))]  # sum 110, var 12
    expected = (100 / 2 + 110 / 12) / (1 / 2 + 1 / 12)
    assert estimate_total(ms) == pytest.approx(expected)


def test_model_save_and_load_round_trip(tmp_path):
    import io

    from privfair.synth.estimation import GraphicalModel

    rng = np.random.default_rng(3)
    domain, data = _chain_data(rng, n=2000)
    cliques = [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c"), ("c", "d")]
    tables = count_marginals(domain, cliques, [data])
    ms = [Measurement(c, t + rng.normal(0, 5, t.shape), np.full(t.shape, 5.0))
          for c, t in tables.items()]
    model = estimate(domain, ms)
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    loaded = GraphicalModel.load(buffer)
    assert loaded.total == model.total and loaded.report.iterations == model.report.iterations
    for clique in [("a", "b"), ("c", "d")]:
        np.testing.assert_allclose(loaded.marginal(clique), model.marginal(clique), rtol=1e-12)
