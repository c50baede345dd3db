"""Exact contingency tables: joint-table counting of pairs equals counting each pair."""

import itertools
import zlib

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


@pytest.mark.parametrize("method", ["mst", "prefair-greedy", "independent"])
def test_a_tree_reads_the_data_once_and_measures_what_two_reads_gave(method):
    """One counting pass serves the one-way tables and the candidate pairs (on 100M rows the
    second pass was 8 s of a 94 s release), and the release is the one two passes made."""
    from privfair.core.domain import Roles
    from privfair.synth.synthesizer import FairSynthesizer

    rng = np.random.default_rng(3)
    domain = Domain(("s", "a", "b", "y"), (2, 3, 4, 2))
    data = {a: rng.integers(0, k, 5000) for a, k in domain.items()}
    data["y"] = (data["a"] + data["s"] > 1).astype(np.int64)  # a dependence to select
    roles = Roles(protected=("s",), outcome=("y",), admissible=("a",))
    calls: list[list[tuple[str, ...]]] = []

    def counter(cliques):
        calls.append(list(cliques))
        return count_marginals(domain, list(cliques), [data])

    def fit(counting):
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=2.0, delta=1e-9,
                                method=method)
        return synth.measure(rng=lambda stage: np.random.default_rng(zlib.crc32(stage.encode())),
                             counter=counting)

    once = fit(counter)
    assert len(calls) == 1
    pairs = set(all_pairs(domain))
    assert set(calls[0]) == {(a,) for a in domain} | (set() if method == "independent"
                                                       else pairs)

    def pass_per_request(cliques):  # the old protocol: one-way first, pairs on demand
        return count_marginals(domain, list(cliques), [data])

    twice = fit(pass_per_request)
    assert once.structure_.edges == twice.structure_.edges
    for mine, theirs in zip(once.selected_, twice.selected_, strict=True):
        assert mine.clique == theirs.clique
        np.testing.assert_array_equal(mine.values, theirs.values)
