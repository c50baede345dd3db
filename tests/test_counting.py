"""Exact contingency tables: joint-table counting of pairs equals counting each pair."""

import itertools

import numpy as np
import pytest

from privfair.core.domain import Domain
from privfair.core.errors import DomainError
from privfair.synth.measure import MarginalCounter, all_pairs, count_marginals


def _direct(domain, cliques, columns):
    out = {}
    for clique in cliques:
        key = np.zeros(len(columns[domain.attributes[0]]), dtype=np.int64)
        for a in clique:
            key = key * domain.size(a) + np.asarray(columns[a], dtype=np.int64)
        out[clique] = np.bincount(key, minlength=domain.cells(clique)).reshape(
            domain.shape(clique))
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.uint64])
def test_pairs_from_joint_tables_equal_direct_counts(dtype):
    rng = np.random.default_rng(0)
    # small and large attributes: some pairs come from joint tables, some are counted alone
    domain = Domain(tuple(f"x{i}" for i in range(9)), (2, 3, 5, 2, 40, 7, 3, 200, 4))
    batches = [{a: rng.integers(0, s, n).astype(dtype) for a, s in domain.items()}
               for n in (1000, 777, 1)]
    cliques = [(a,) for a in domain] + all_pairs(domain) + [("x0", "x1", "x2")]
    counter = MarginalCounter(domain, cliques)
    assert counter._joints and counter._direct  # both paths are exercised
    got = count_marginals(domain, cliques, batches)
    whole = {a: np.concatenate([b[a] for b in batches]) for a in domain}
    want = _direct(domain, cliques, whole)
    assert list(got) == cliques
    for clique in cliques:
        np.testing.assert_array_equal(got[clique], want[clique])
        assert got[clique].dtype == np.int64


def test_counting_refuses_codes_outside_the_domain():
    domain = Domain(("a", "b"), (2, 3))
    with pytest.raises(DomainError, match="'b'"):
        count_marginals(domain, list(itertools.combinations("ab", 2)),
                        [{"a": np.array([0, 1]), "b": np.array([0, 3])}])
