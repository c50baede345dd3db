"""Belief propagation's sums and factors (issue 43.3: AIM's speed), against plain numpy."""

import itertools

import numpy as np
import pytest

from privfair.core.domain import Domain
from privfair.synth.estimation import (
    BeliefPropagation,
    GraphicalModel,
    build_junction_tree,
    summation,
)


def brute_force_joint(domain, potentials):
    """The normalised distribution ∝ exp(Σ potentials), summed cell by cell."""
    log_joint = np.zeros(domain.shape(domain.attributes))
    for c, theta in potentials.items():
        view = [domain.size(a) if a in c else 1 for a in domain.attributes]
        log_joint = log_joint + theta.reshape(view)
    joint = np.exp(log_joint - log_joint.max())
    return joint / joint.sum()


@pytest.mark.parametrize("shape", [(3, 1, 4, 2, 5), (1, 6, 2, 3, 1), (2, 3, 2, 3, 2, 3),
                                   (3, 100, 90)])  # the last: blocks past BLAS threading
def test_summation_equals_einsum_for_every_set_of_kept_axes(shape):
    rng = np.random.default_rng(0)
    table = rng.random(shape)
    axes = list(range(len(shape)))
    for k in range(len(shape) + 1):
        for keep in itertools.combinations(axes, k):
            got = summation(shape, list(keep))(table)
            expected = np.einsum(table, axes, list(keep))
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_summation_refuses_axes_out_of_order():
    with pytest.raises(ValueError, match="ascending"):
        summation((2, 3, 4), [2, 0])


def test_many_potentials_in_one_clique_calibrate_to_the_brute_force_joint():
    # AIM puts many 1-, 2- and 3-way potentials into one maximal clique; their sum is built
    # pairwise (smallest union first) rather than one after another.
    rng = np.random.default_rng(5)
    domain = Domain(tuple("abcdefg"), (2, 3, 4, 2, 3, 2, 3))
    # ... and g's clique holds one potential, which the factor must not shift in place
    cliques = [("a", "b", "c"), ("a", "b"), ("c", "d"), ("b", "d"), ("a",), ("d",),
               ("a", "c", "d"), ("d", "e"), ("e", "f"), ("f",), ("c",), ("g",)]
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    saved = {c: t.copy() for c, t in potentials.items()}
    tree = build_junction_tree(domain, cliques)
    assert max(domain.cells(c) for c in tree.cliques) == 48  # a, b, c, d in one clique
    bp = BeliefPropagation(domain, tree, cliques)
    joint = brute_force_joint(domain, potentials)
    for _ in range(2):  # the second call reuses the cached plan
        beliefs = bp.calibrate(potentials)
        for i, c in enumerate(tree.cliques):
            other = tuple(k for k, a in enumerate(domain.attributes) if a not in c)
            np.testing.assert_allclose(beliefs[i][0], joint.sum(axis=other), atol=1e-12)
        for c, got in bp.marginals(beliefs, cliques).items():
            other = tuple(k for k, a in enumerate(domain.attributes) if a not in c)
            np.testing.assert_allclose(got, joint.sum(axis=other), atol=1e-12)
    # products and shifts are done in place on fresh tables, never on the potentials
    for c in cliques:
        np.testing.assert_array_equal(potentials[c], saved[c])


def test_pair_marginals_of_a_wide_clique_match_brute_force():
    # pair_marginals' batched sums and broadcast products on a 4-attribute clique
    rng = np.random.default_rng(9)
    domain = Domain(tuple("abcdef"), (3, 2, 4, 3, 2, 3))
    cliques = [("a", "b", "c", "d"), ("c", "d", "e"), ("e", "f")]
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    model = GraphicalModel.from_potentials(domain, potentials, total=500.0)
    joint = brute_force_joint(domain, potentials)
    for a in domain:
        for b, table in model.pair_marginals(a).items():
            i, j = domain.position(a), domain.position(b)
            other = tuple(k for k in range(len(domain)) if k not in (i, j))
            expected = joint.sum(axis=other)
            np.testing.assert_allclose(table, 500.0 * (expected if i < j else expected.T),
                                       atol=1e-9)


def test_pair_marginals_of_some_attributes_skip_nothing_they_need():
    # AIM asks each attribute only for its uncovered partners; subtrees holding none of them
    # are not entered, and those holding one (however far) still are.
    rng = np.random.default_rng(11)
    domain = Domain(tuple("abcdefg"), (2, 3, 2, 3, 2, 3, 2))
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("c", "f"), ("g",)]
    potentials = {c: rng.normal(size=domain.shape(c)) for c in cliques}
    model = GraphicalModel.from_potentials(domain, potentials, total=100.0)
    full = {a: model.pair_marginals(a) for a in domain}
    for a in domain:
        for others in ({"e"}, {"f", "g"}, {"b", "e"}, set(domain.attributes) - {a}):
            others = others - {a}
            got = model.pair_marginals(a, others)
            assert set(got) == others
            for b in others:
                np.testing.assert_array_equal(got[b], full[a][b])
