"""fit_exact hands Clarabel numpy CSC arrays instead of SciPy matrices.

The arrays must be SciPy's (same pattern, same sums: the solver's pivots and so the released
fit follow them), and Clarabel must take them as they are: if a Clarabel upgrade stops
reading the duck type, fit_exact still works through its SciPy fallback, and this file fails
so that the lost import time is noticed.
"""

from __future__ import annotations

import clarabel
import numpy as np
import pytest
import scipy.sparse as sparse

from privfair.core.domain import Domain
from privfair.synth.estimation import (
    CscMatrix,
    build_junction_tree,
    fit_exact,
)


def _random_coo(rng: np.random.Generator, *, integer: bool):
    m, n = (int(s) for s in rng.integers(1, 9, size=2))
    k = int(rng.integers(0, 40))
    # Few cells, many entries: duplicates, some cancelling, and empty columns.
    rows, cols = rng.integers(0, m, size=k), rng.integers(0, n, size=k)
    data = (rng.integers(-2, 3, size=k).astype(np.float64) if integer
            else rng.normal(size=k))
    return data, rows, cols, (m, n)


@pytest.mark.parametrize("seed", range(200))
def test_coo_to_csc_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    data, rows, cols, shape = _random_coo(rng, integer=seed % 2 == 0)
    mine = CscMatrix.from_coo(data, rows, cols, shape=shape)
    theirs = sparse.csc_matrix((data, (rows, cols)), shape=shape)
    assert theirs.has_canonical_format
    assert mine.shape == theirs.shape
    np.testing.assert_array_equal(mine.indptr, theirs.indptr)
    np.testing.assert_array_equal(mine.indices, theirs.indices)
    if seed % 2 == 0:  # small integers sum exactly in any order: bit for bit
        np.testing.assert_array_equal(mine.data, theirs.data)
    else:  # SciPy sums duplicates in an unspecified order
        np.testing.assert_allclose(mine.data, theirs.data, rtol=1e-14, atol=1e-15)
    assert mine.indptr.dtype == mine.indices.dtype == np.int64
    assert mine.data.dtype == np.float64
    x = rng.normal(size=shape[1])
    # SciPy's product of the same arrays, to the last bit (fit_exact's right-hand side).
    same = sparse.csc_matrix((mine.data, mine.indices, mine.indptr), shape=shape)
    np.testing.assert_array_equal(mine.matvec(x), same @ x)


@pytest.mark.parametrize("values", [[3.0, 0.0, 1.5, 0.0], [0.0, 0.0], [2.0], []])
def test_diagonal_matches_scipy_diags(values):
    mine = CscMatrix.diagonal(np.array(values))
    theirs = sparse.diags(np.array(values), format="csc")
    assert mine.shape == theirs.shape
    np.testing.assert_array_equal(mine.indptr, theirs.indptr)
    np.testing.assert_array_equal(mine.indices, theirs.indices)
    np.testing.assert_array_equal(mine.data, theirs.data)


def _solve(P, A):
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    q = np.array([-3.0, -2.0, 0.5, 0.0])
    b = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    cones = [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(4)]
    return clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()


def test_clarabel_reads_the_numpy_container_directly():
    # min ½ x'Px + q'x  s.t.  Σx = 1 (with a duplicate entry to sum), x ≥ 0.
    rows = np.array([0, 0, 0, 0, 0, 1, 2, 3, 4])
    cols = np.array([0, 1, 2, 3, 3, 0, 1, 2, 3])
    vals = np.array([1.0, 1.0, 1.0, 0.5, 0.5, -1.0, -1.0, -1.0, -1.0])
    weights = np.array([2.0, 1.0, 0.0, 4.0])
    A = CscMatrix.from_coo(vals, rows, cols, shape=(5, 4))
    # No fallback here: a TypeError or AttributeError means Clarabel stopped reading it.
    mine = _solve(CscMatrix.diagonal(weights), A)
    theirs = _solve(sparse.diags(weights, format="csc"),
                    sparse.csc_matrix((vals, (rows, cols)), shape=(5, 4)))
    assert str(mine.status) == str(theirs.status) == "Solved"
    assert mine.iterations == theirs.iterations
    np.testing.assert_array_equal(np.asarray(mine.x), np.asarray(theirs.x))
    np.testing.assert_allclose(mine.x, [2 / 3, 1 / 3, 0.0, 0.0], atol=1e-6)


def test_fit_exact_solves_without_the_scipy_fallback(monkeypatch):
    def refuse(self):
        raise AssertionError("fit_exact fell back to SciPy matrices")

    monkeypatch.setattr(CscMatrix, "to_scipy", refuse)
    domain = Domain(("a", "b", "c"), (2, 3, 2))
    rng = np.random.default_rng(0)
    cliques = [("a", "b"), ("b", "c")]
    tree = build_junction_tree(domain, cliques)
    targets = [(c, rng.uniform(50, 150, size=domain.shape(c)), np.ones(domain.shape(c)))
               for c in [*cliques, ("a",)]]
    fit = fit_exact(domain, tree, targets, total=600.0)
    assert fit is not None and set(fit.potentials) == set(cliques)
