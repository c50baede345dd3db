import functools

import numpy as np
import pytest
from scipy import stats

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.synth.estimation import estimate
from privfair.synth.measure import Measurement, compress_domain, count_marginals, measure_marginals
from privfair.synth.sampling import decompress, sample_model, systematic_round


@functools.cache
def _model():
    rng = np.random.default_rng(5)
    n = 30_000
    a = rng.integers(0, 3, n)
    b = (a + (rng.random(n) < 0.3)) % 4
    c = (b * 2 + rng.integers(0, 2, n)) % 5
    d = rng.integers(0, 2, n)
    domain = Domain(("a", "b", "c", "d"), (3, 4, 5, 2))
    cliques = [("a",), ("b",), ("c",), ("d",), ("a", "b"), ("b", "c"), ("b", "d")]
    tables = count_marginals(domain, cliques, [{"a": a, "b": b, "c": c, "d": d}])
    ms = [Measurement(k, v.astype(float), np.full(v.shape, 1e-3)) for k, v in tables.items()]
    return domain, estimate(domain, ms)


def _tvd(p, q):
    return 0.5 * np.abs(p / p.sum() - q / q.sum()).sum()


def test_sampling_is_reproducible_from_a_seed():
    _, model = _model()
    one = sample_model(model, 1000, rng=np.random.default_rng(42))
    two = sample_model(model, 1000, rng=np.random.default_rng(42))
    three = sample_model(model, 1000, rng=np.random.default_rng(43))
    assert all(np.array_equal(one[a], two[a]) for a in one)
    assert not all(np.array_equal(one[a], three[a]) for a in one)


@pytest.mark.parametrize("mode", ["iid", "round"])
def test_samples_follow_the_model(mode):
    domain, model = _model()
    n = 20_000
    rows = sample_model(model, n, rng=np.random.default_rng(0), mode=mode)
    for clique in [("a", "b"), ("b", "c"), ("b", "d")]:
        expected = model.marginal(clique) / model.total * n
        counts = count_marginals(domain, [clique], [rows])[clique]
        keep = expected > 5
        chi = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
        assert stats.chi2.sf(chi, keep.sum() - 1) > 1e-3


def test_round_mode_has_lower_variance_than_iid():
    domain, model = _model()
    n = 5_000
    errors = {"iid": [], "round": []}
    for mode in errors:
        for seed in range(20):
            rows = sample_model(model, n, rng=np.random.default_rng(seed), mode=mode)
            table = count_marginals(domain, [("b", "c")], [rows])[("b", "c")]
            errors[mode].append(_tvd(table, model.marginal(("b", "c"))))
    # Rounded counts match the model almost exactly on the sampled tree edges.
    assert np.mean(errors["round"]) < 0.25 * np.mean(errors["iid"])
    # Non-adjacent pairs are not distorted by rounding: c and d are independent given b.
    rows = sample_model(model, n, rng=np.random.default_rng(0), mode="round")
    cd = count_marginals(domain, [("c", "d")], [rows])[("c", "d")]
    bc = model.marginal(("b", "c")) / model.total
    bd = model.marginal(("b", "d")) / model.total
    pb = bc.sum(axis=1)
    expected_cd = np.einsum("bc,bd->cd", bc, bd / pb[:, None])
    assert _tvd(cd, expected_cd) < 0.03


def test_systematic_round_is_exact_in_sum_and_unbiased():
    rng = np.random.default_rng(0)
    expected = np.array([[0.5, 1.25, 2.25], [3.3, 0.3, 0.4]])
    totals = np.array([4, 4])
    draws = np.stack([systematic_round(expected, totals, rng) for _ in range(4000)])
    assert np.all(draws.sum(axis=2) == totals)
    np.testing.assert_allclose(draws.mean(axis=0), expected, atol=0.05)


def test_compression_scales_the_merged_bucket_and_decompresses_inside_it():
    domain = Domain(("a",), (6,))
    true = {("a",): np.array([5000, 4000, 3, 1, 0, 2])}
    ledger = PrivacyLedger(rho_budget=1.0)
    (m,) = measure_marginals(true, [("a",)], rho=0.005, rng=np.random.default_rng(0),
                             ledger=ledger, name="1-way")
    compression, measured = compress_domain([m], domain, threshold=3.0)
    assert list(compression.merged["a"]) == [2, 3, 4, 5]
    (merged_m,) = measured
    sigma = m.stddev[0]
    assert merged_m.stddev[-1] == pytest.approx(sigma * 2)  # sqrt(4 merged cells)
    assert merged_m.values[-1] == pytest.approx(m.values[2:].sum())
    codes = {"a": np.array([0, 1, 2, 2, 2, 2])}
    back = decompress(codes, compression, rng=np.random.default_rng(1))["a"]
    assert list(back[:2]) == [0, 1]
    assert set(back[2:]) <= {2, 3, 4, 5}
