import itertools

import numpy as np
import pytest

from privfair.core.domain import Domain
from privfair.synth.estimation import (
    BeliefPropagation,
    GraphicalModel,
    build_junction_tree,
    estimate,
    estimate_total,
    fit_exact,
    fit_independent,
    simplex_fit,
)
from privfair.synth.measure import Measurement, count_marginals


def _chain_data(rng, n=20_000):
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4
    c = (b + rng.integers(0, 3, n)) % 5
    d = (c > 2).astype(np.int64)
    return Domain(("a", "b", "c", "d"), (3, 4, 5, 2)), {"a": a, "b": b, "c": c, "d": d}



def brute_force_joint(domain, potentials):
    """The normalised distribution ∝ exp(Σ potentials), by enumerating every cell."""
    joint = np.zeros(domain.shape(domain.attributes))
    for idx in itertools.product(*(range(s) for s in domain.sizes)):
        values = dict(zip(domain.attributes, idx, strict=True))
        joint[idx] = sum(t[tuple(values[x] for x in c)] for c, t in potentials.items())
    joint = np.exp(joint - joint.max())
    return joint / joint.sum()

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
    joint = brute_force_joint(domain, potentials)
    for c in cliques:
        axes = tuple(i for i, a in enumerate(domain.attributes) if a not in c)
        np.testing.assert_allclose(got[c], joint.sum(axis=axes), atol=1e-12)


def test_belief_propagation_matches_brute_force_on_a_branching_tree_with_zeros():
    # Cliques with several children, a fill-in clique, a separate component and cells of
    # zero mass (the Hugin downward pass divides by upward messages, zero where those are).
    rng = np.random.default_rng(3)
    domain = Domain(tuple("abcdefg"), (2, 3, 2, 3, 2, 2, 3))
    cliques = [("a", "b"), ("a", "c"), ("a", "d"), ("c", "e"), ("d", "e"), ("f",), ("g",)]
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    potentials[("a", "b")][1, :] = -1e4  # a = 1 has no mass (exp underflows to 0)
    potentials[("d", "e")][0, 1] = -1e4
    tree = build_junction_tree(domain, cliques)
    assert max(len(c) for c in tree.cliques) == 3 and len(tree.cliques) >= 4
    bp = BeliefPropagation(domain, tree, cliques)
    beliefs = bp.calibrate(potentials)
    joint = brute_force_joint(domain, potentials)
    assert joint[1].sum() == 0.0
    for i, c in enumerate(tree.cliques):
        axes = tuple(k for k, a in enumerate(domain.attributes) if a not in c)
        np.testing.assert_allclose(beliefs[i][0], joint.sum(axis=axes), atol=1e-12)
    for c, got in bp.marginals(beliefs, cliques).items():
        axes = tuple(k for k, a in enumerate(domain.attributes) if a not in c)
        np.testing.assert_allclose(got, joint.sum(axis=axes), atol=1e-12)


def test_a_fit_cut_short_keeps_its_fallback_only_when_that_is_better():
    rng = np.random.default_rng(4)
    domain = Domain(("a", "b", "c"), (2, 3, 2))
    data = {"a": rng.integers(0, 2, 3000), "b": rng.integers(0, 3, 3000),
            "c": rng.integers(0, 2, 3000)}
    loop = [("a", "b"), ("b", "c"), ("a", "c")]  # mirror descent (no exact fit)
    ms = _noisy(count_marginals(domain, loop, [data]), rng, 5.0)
    full = estimate(domain, ms)
    assert full.report.converged and not full.report.kept_fallback
    short = estimate(domain, ms, max_iters=2, fallback=full.potentials)
    assert not short.report.converged and short.report.kept_fallback
    assert short.report.loss == pytest.approx(full.report.loss, rel=1e-9)
    for c in loop:
        np.testing.assert_allclose(short.marginal(c), full.marginal(c), rtol=1e-9)
    worse = {c: 5 * rng.normal(size=domain.shape(c)) for c in loop}
    plain = estimate(domain, ms, max_iters=2)
    kept_own = estimate(domain, ms, max_iters=2, fallback=worse)
    assert not kept_own.report.kept_fallback
    assert kept_own.report.loss == plain.report.loss
    # a converged fit never looks at its fallback
    assert not estimate(domain, ms, fallback=worse).report.kept_fallback


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
    model = estimate(domain, ms, tol=1e-6, max_iters=10_000, method="mirror-descent")
    assert model.report.converged
    assert model.report.iterations < 10_000
    capped = estimate(domain, ms, tol=0.0, max_iters=40, method="mirror-descent")
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


def _noisy(tables, rng, sigma):
    return [Measurement(c, t + rng.normal(0, sigma, t.shape), np.full(t.shape, sigma))
            for c, t in tables.items()]


@pytest.mark.parametrize("sigma", [0.5, 20.0, 200.0])
def test_exact_fit_of_a_tree_matches_mirror_descent_and_never_loses(sigma):
    rng = np.random.default_rng(11)
    domain, data = _chain_data(rng, n=5_000)
    cliques = [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c"), ("c", "d")]
    ms = _noisy(count_marginals(domain, cliques, [data]), rng, sigma)
    exact = estimate(domain, ms)
    descent = estimate(domain, ms, method="mirror-descent", tol=1e-9, max_iters=20_000)
    assert exact.report.losses == [exact.report.loss]  # the interior-point path ran
    # the same convex problem: the exact minimiser is at least as good, and close to it
    assert exact.report.loss <= descent.report.loss + 1e-6 * abs(descent.report.loss)
    if sigma <= 20:  # far noisier than the counts, the loss is nearly flat: not unique
        for c in cliques[4:]:
            tvd = np.abs(exact.marginal(c) - descent.marginal(c)).sum() / (2 * exact.total)
            assert tvd < 2e-3
    # a valid distribution: non-negative and summing to the total on every clique
    for c in cliques:
        assert exact.marginal(c).min() >= 0
        assert exact.marginal(c).sum() == pytest.approx(exact.total)


def test_exact_fit_is_skipped_for_a_loop_and_mirror_descent_runs():
    rng = np.random.default_rng(12)
    domain = Domain(("a", "b", "c"), (2, 3, 2))
    data = {"a": rng.integers(0, 2, 3000), "b": rng.integers(0, 3, 3000),
            "c": rng.integers(0, 2, 3000)}
    loop = [("a", "b"), ("b", "c"), ("a", "c")]  # triangulated into one unmeasured triple
    ms = _noisy(count_marginals(domain, loop, [data]), rng, 5.0)
    tree = build_junction_tree(domain, loop)
    targets = [(m.clique, m.values, 1 / m.stddev**2) for m in ms]
    assert fit_exact(domain, tree, targets, total=3000.0) is None
    model = estimate(domain, ms, max_iters=60)
    assert model.report.iterations > 1 and len(model.report.losses) > 1


def test_exact_fit_leaves_an_unmeasured_attribute_uniform():
    rng = np.random.default_rng(13)
    domain = Domain(("a", "b", "z"), (2, 3, 4))
    data = {"a": rng.integers(0, 2, 1000), "b": rng.integers(0, 3, 1000)}
    ms = _noisy(count_marginals(domain.project(["a", "b"]), [("a", "b")], [data]), rng, 1.0)
    model = estimate(domain, ms)
    assert model.report.losses == [model.report.loss]
    np.testing.assert_allclose(model.marginal(["z"]) / model.total, np.full(4, 0.25))


def test_simplex_fit_satisfies_its_optimality_conditions():
    rng = np.random.default_rng(14)
    for _ in range(50):
        k = int(rng.integers(1, 9))
        y = rng.normal(20, 30, k)
        w = rng.uniform(0.1, 3.0, k)
        total = float(rng.uniform(1, 100))
        p = simplex_fit(y, w, total)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        # KKT: w·(total·p − y) equals −τ on the support and is ≥ −τ off it
        g = w * (total * p - y)
        support = p > 1e-12
        tau = -g[support][0]
        np.testing.assert_allclose(-g[support], tau, rtol=1e-9, atol=1e-9)
        assert np.all(-g[~support] <= tau + 1e-9)


def test_fit_independent_is_the_minimiser_mirror_descent_approaches():
    rng = np.random.default_rng(15)
    domain = Domain(("a", "b"), (4, 3))
    ms = [Measurement(("a",), np.array([500.0, -3.0, 20.0, 480.0]), np.full(4, 10.0)),
          Measurement(("b",), np.array([300.0, 700.0, 2.0]), np.array([10.0, 10.0, 30.0]))]
    probabilities, total = fit_independent(domain, ms)
    descent = estimate(domain, ms, method="mirror-descent", tol=1e-10, max_iters=20_000)
    assert total == pytest.approx(descent.total)
    assert probabilities["a"][1] == 0.0  # a negative count is clipped exactly
    for a in domain:
        np.testing.assert_allclose(probabilities[a], descent.marginal([a]) / descent.total,
                                   atol=1e-4)
    del rng


def test_pair_marginals_across_cliques_and_components_match_brute_force():
    rng = np.random.default_rng(17)
    domain = Domain(("a", "b", "c", "d", "e", "f"), (2, 3, 2, 4, 3, 2))
    cliques = [("a", "b"), ("b", "c", "d"), ("d", "e"), ("f",)]  # f: its own component
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    model = GraphicalModel.from_potentials(domain, potentials, total=1000.0)
    joint = brute_force_joint(domain, potentials)
    for a in domain:
        pairs = model.pair_marginals(a)
        assert set(pairs) == set(domain.attributes) - {a}
        for b, table in pairs.items():
            i, j = domain.position(a), domain.position(b)
            other = tuple(k for k in range(len(domain)) if k not in (i, j))
            expected = joint.sum(axis=other)
            expected = expected if i < j else expected.T
            np.testing.assert_allclose(table, 1000.0 * expected, atol=1e-9)
