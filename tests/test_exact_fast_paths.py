"""The fast paths of issue 23.5 give exactly what the binary searches they replace gave.

Numeric binning (:func:`privfair.contracts.encoding._counted_bin_codes`) counts edges
instead of a ``searchsorted`` over clipped values; i.i.d. sampling
(:func:`privfair.synth.sampling._inverse_cdf`) runs a branchless binary search per group
instead of one ``searchsorted`` over every group's shifted CDF. Same codes, bit for bit,
for a given seed: release hashes (tests/test_parity.py) do not move.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfair.contracts.encoding import _bin_codes, _counted_bin_codes
from privfair.synth.sampling import _inverse_cdf


def _searchsorted_draw(shifted: np.ndarray, u: np.ndarray, parent_key: np.ndarray
                       ) -> np.ndarray:
    k = shifted.shape[1]
    flat = np.searchsorted(shifted.ravel(), u, side="right") - parent_key * k
    return np.minimum(flat, k - 1)


@pytest.mark.parametrize("seed", range(4))
def test_counted_binning_is_the_binary_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        edges = np.unique(np.round(rng.normal(0, 10, int(rng.integers(2, 40))),
                                   int(rng.integers(0, 3))))
        if len(edges) < 2:
            continue
        # bounds on, inside, outside the edges, infinite, or beside each other
        lower, upper = sorted(rng.choice(np.concatenate(
            [edges, rng.normal(0, 15, 4), [-np.inf, np.inf]]), 2))
        values = np.concatenate([rng.normal(0, 15, 200), edges, [lower, upper],
                                 [np.nan, np.inf, -np.inf], np.round(rng.normal(0, 10, 50))])
        expected = _bin_codes(list(edges), np.clip(values, lower, upper))
        got = _counted_bin_codes(list(edges), lower, upper, values)
        assert got.dtype == expected.dtype == np.int64
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", range(4))
def test_inverse_cdf_is_the_global_searchsorted(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        groups, k, n = int(rng.integers(1, 30)), int(rng.integers(1, 70)), int(
            rng.integers(0, 2000))
        cond = rng.dirichlet(np.full(k, float(rng.choice([0.05, 0.3, 1.0, 5.0]))),
                             size=groups)
        if rng.random() < 0.3:  # empty cells: repeated CDF values
            cond[rng.random(cond.shape) < 0.3] = 0.0
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0
        shifted = cdf + np.arange(groups)[:, None]
        parent_key = rng.integers(0, groups, n)
        u = rng.random(n) + parent_key
        if n:  # draws on the thresholds themselves and at the groups' ends
            at = rng.integers(0, n, n // 3)
            u[at] = shifted[parent_key[at], rng.integers(0, k, len(at))]
            u[:5] = parent_key[:5] + rng.choice([0.0, 1.0], min(n, 5))
        got = _inverse_cdf(shifted, u, parent_key)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, _searchsorted_draw(shifted, u, parent_key))


def test_inverse_cdf_falls_back_on_an_unsorted_table() -> None:
    rng = np.random.default_rng(5)
    shifted = np.array([[0.5, 0.2, 1.0], [1.1, np.nan, 2.0]])  # a negative mass, a NaN
    parent_key = rng.integers(0, 2, 500)
    u = rng.random(500) + parent_key
    np.testing.assert_array_equal(_inverse_cdf(shifted, u, parent_key),
                                  _searchsorted_draw(shifted, u, parent_key))
