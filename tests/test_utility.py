import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privfair.core.domain import Domain
from privfair.core.errors import DomainError
from privfair.evaluation.utility import (
    average_correlation_difference,
    ci_test,
    conditional_mutual_information,
    correlation_difference_breakdown,
    cramers_v,
    cramers_v_pairs,
    ks_statistics,
    marginal_tvd,
    marginal_tvd_breakdown,
)

# Tiny tables shared by the hand-computed checks.
DOMAIN = Domain(("a", "b"), (3, 2))
REAL = pd.DataFrame({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1]})
SYNTH = pd.DataFrame({"a": [0, 1, 2, 2], "b": [0, 0, 0, 1]})


# --------------------------------------------------------------------------------- TVD


def test_one_way_tvd_by_hand():
    # a: real p = (2, 2, 0)/4, synthetic q = (1, 1, 2)/4
    #    TVD = ½(|.5−.25| + |.5−.25| + |0−.5|) = ½(.25 + .25 + .5) = 0.5
    # b: real p = (2, 2)/4, synthetic q = (3, 1)/4 → ½(.25 + .25) = 0.25
    per = marginal_tvd_breakdown(REAL, SYNTH, DOMAIN, 1)
    assert per == {("a",): pytest.approx(0.5), ("b",): pytest.approx(0.25)}
    # Average over the two 1-way marginals: (0.5 + 0.25)/2 = 0.375
    assert marginal_tvd(REAL, SYNTH, DOMAIN, 1) == pytest.approx(0.375)


def test_two_way_tvd_by_hand():
    # real cells (a,b): (0,0) (0,1) (1,0) (1,1), each 1/4
    # synthetic cells:  (0,0) (1,0) (2,0) (2,1), each 1/4
    # |p − q|: (0,0) 0, (0,1) .25, (1,0) 0, (1,1) .25, (2,0) .25, (2,1) .25 → sum 1 → TVD .5
    assert marginal_tvd(REAL, SYNTH, DOMAIN, 2) == pytest.approx(0.5)
    assert list(marginal_tvd_breakdown(REAL, SYNTH, DOMAIN, 2)) == [("a", "b")]


def test_three_way_breakdown_covers_every_triple():
    domain = Domain(("a", "b", "c", "d"), (2, 3, 2, 4))
    rng = np.random.default_rng(0)
    real = {a: rng.integers(0, s, 50) for a, s in domain.items()}
    synth = {a: rng.integers(0, s, 70) for a, s in domain.items()}
    per = marginal_tvd_breakdown(real, synth, domain, 3)
    assert list(per) == [("a", "b", "c"), ("a", "b", "d"), ("a", "c", "d"), ("b", "c", "d")]
    assert marginal_tvd(real, synth, domain, 3) == pytest.approx(np.mean(list(per.values())))
    # Restricting the attributes restricts the marginals (put in domain order).
    assert list(marginal_tvd_breakdown(real, synth, domain, 2, attributes=["d", "a"])) == [
        ("a", "d")]


def test_mapping_and_frame_inputs_agree():
    as_mapping = {c: REAL[c].to_numpy() for c in REAL}
    assert marginal_tvd(as_mapping, SYNTH, {"a": 3, "b": 2}, 2) == pytest.approx(0.5)


def _tables(draw, n_max=30):
    sizes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    domain = Domain(tuple(f"x{i}" for i in range(len(sizes))), tuple(sizes))

    def table():
        n = draw(st.integers(1, n_max))
        return {a: np.array(draw(st.lists(st.integers(0, s - 1), min_size=n, max_size=n)),
                            dtype=np.int64) for a, s in domain.items()}

    return domain, table(), table()


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 2))
def test_tvd_invariants(data, k):
    domain, p, q = _tables(data.draw)
    assert marginal_tvd(p, p, domain, k) == 0.0
    forward = marginal_tvd_breakdown(p, q, domain, k)
    backward = marginal_tvd_breakdown(q, p, domain, k)
    for clique, value in forward.items():
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(backward[clique])
    # A k-way TVD is at least the TVD of any of its (k−1)-way sub-marginals.
    if k == 2:
        one = marginal_tvd_breakdown(p, q, domain, 1)
        for (x, y), value in forward.items():
            assert value >= max(one[(x,)], one[(y,)]) - 1e-12


def test_tvd_of_disjoint_supports_is_one():
    domain = {"a": 4}
    assert marginal_tvd({"a": np.array([0, 1])}, {"a": np.array([2, 3, 3])}, domain) == 1.0


def test_tvd_on_a_huge_domain_uses_sparse_counts():
    # 6000 × 6000 = 36M cells > the dense limit: keys are re-densified with numpy.unique.
    domain = {"a": 6000, "b": 6000}
    real = {"a": np.array([0, 5999, 5999, 17]), "b": np.array([5999, 0, 0, 3])}
    synth = {"a": np.array([0, 5999]), "b": np.array([5999, 1])}
    # real: (0,5999) .25, (5999,0) .5, (17,3) .25; synthetic: (0,5999) .5, (5999,1) .5
    # |p−q| = .25 + .5 + .25 + .5 = 1.5 → TVD .75
    assert marginal_tvd(real, synth, domain, 2) == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pd.DataFrame({"a": [0, 3], "b": [0, 1]}), "'a'.*0..2"),
        (pd.DataFrame({"a": [0, 1]}), "missing column 'b'"),
        (pd.DataFrame({"a": [0.0, 1.0], "b": [0, 1]}), "'a'.*integer codes"),
        (pd.DataFrame({"a": pd.array([0, None], dtype="Int64"), "b": [0, 1]}),
         "'a' has missing values"),
    ],
)
def test_bad_columns_are_named(table, message):
    with pytest.raises(DomainError, match=message):
        marginal_tvd(REAL, table, DOMAIN, 1)


def test_bad_k_and_empty_tables_are_refused():
    with pytest.raises(DomainError, match="k: expected an integer in 1..2"):
        marginal_tvd(REAL, SYNTH, DOMAIN, 3)
    with pytest.raises(DomainError, match="k:"):
        marginal_tvd(REAL, SYNTH, DOMAIN, 0)
    with pytest.raises(DomainError, match="synthetic: the table has no rows"):
        marginal_tvd(REAL, SYNTH.iloc[:0], DOMAIN, 1)
    with pytest.raises(DomainError, match="'zzz' is not in the declared domain"):
        marginal_tvd(REAL, SYNTH, DOMAIN, 1, attributes=["zzz"])


def test_nullable_integer_columns_are_accepted():
    nullable = SYNTH.astype("Int64")
    assert marginal_tvd(REAL, nullable, DOMAIN, 2) == pytest.approx(0.5)


# --------------------------------------------------------------------------------- Cramér's V


def test_cramers_v_by_hand():
    # Perfect association, n = 20: χ² = 20, φ² = 1.
    # φ̃² = 1 − 1·1/19 = 18/19; r̃ − 1 = c̃ − 1 = 1 − 1/19 = 18/19 → V = 1.
    assert cramers_v(np.array([[10, 0], [0, 10]])) == pytest.approx(1.0)
    # [[10, 5], [5, 10]], n = 30: E = 7.5 everywhere, χ² = 4 · 2.5²/7.5 = 10/3, φ² = 1/9.
    # Uncorrected: V = sqrt(φ²/1) = 1/3.
    table = np.array([[10, 5], [5, 10]])
    assert cramers_v(table, bias_correction=False) == pytest.approx(1 / 3)
    # Bergsma: φ̃² = 1/9 − 1/29 = 20/261; r̃ − 1 = 1 − 1/29 = 28/29;
    # V² = (20/261)(29/28) = 580/7308 = 5/63.
    assert cramers_v(table) == pytest.approx(math.sqrt(5 / 63))
    # A declared but empty category (a zero row) is dropped: same value.
    assert cramers_v(np.array([[10, 5], [0, 0], [5, 10]])) == pytest.approx(math.sqrt(5 / 63))


def test_cramers_v_degenerate_cases():
    assert cramers_v(np.array([[5, 5], [5, 5]])) == 0.0  # independent
    assert cramers_v(np.array([[3, 4, 5]])) == 0.0  # one row: nothing to associate
    # Dependence below the bias: χ² = 4·.5²/7.5 = 2/15, φ² = 1/225 < 1/29 → φ̃² = 0 → V = 0.
    assert cramers_v(np.array([[8, 7], [7, 8]])) == 0.0
    with pytest.raises(DomainError, match="contingency"):
        cramers_v(np.array([[1, -1], [0, 2]]))


def test_cramers_v_pairs_match_the_crosstab():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 3, 400)
    y = (x + rng.integers(0, 2, 400)) % 4
    frame = pd.DataFrame({"x": x, "y": y})
    expected = cramers_v(pd.crosstab(frame.x, frame.y).to_numpy())
    assert cramers_v_pairs(frame, {"x": 3, "y": 5}) == {("x", "y"): pytest.approx(expected)}


def test_acd_by_hand():
    domain = {"x": 2, "y": 2}
    # real: x = y on 20 rows (10 and 10) → V = 1 (see above)
    real = {"x": np.repeat([0, 1], 10), "y": np.repeat([0, 1], 10)}
    # synthetic: table [[10, 5], [5, 10]] → V = sqrt(5/63)
    synth = {"x": np.repeat([0, 0, 1, 1], [10, 5, 5, 10]),
             "y": np.repeat([0, 1, 0, 1], [10, 5, 5, 10])}
    expected = 1 - math.sqrt(5 / 63)
    assert correlation_difference_breakdown(real, synth, domain) == {
        ("x", "y"): pytest.approx(expected)}
    assert average_correlation_difference(real, synth, domain) == pytest.approx(expected)
    assert average_correlation_difference(real, real, domain) == 0.0


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_acd_invariants(data):
    domain, p, q = _tables(data.draw)
    acd = average_correlation_difference(p, q, domain)
    assert 0.0 <= acd <= 1.0
    assert acd == pytest.approx(average_correlation_difference(q, p, domain))
    assert average_correlation_difference(p, p, domain) == 0.0


# --------------------------------------------------------------------------------- KS


def test_ks_by_hand_and_against_scipy():
    # a: CDF real (.5, 1, 1), synthetic (.25, .5, 1) → max |diff| = .5
    result = ks_statistics(REAL, SYNTH, DOMAIN)
    assert result["a"].statistic == pytest.approx(0.5)
    # b: CDF real (.5, 1), synthetic (.75, 1) → .25
    assert result["b"].statistic == pytest.approx(0.25)
    rng = np.random.default_rng(2)
    real = {"v": rng.integers(0, 10, 300)}
    synth = {"v": np.minimum(rng.integers(0, 10, 200) + rng.integers(0, 2, 200), 9)}
    ours = ks_statistics(real, synth, {"v": 10})["v"]
    reference = stats.ks_2samp(real["v"], synth["v"], method="asymp")
    assert ours.statistic == pytest.approx(reference.statistic)
    assert 0.0 <= ours.p_value <= 1.0
    assert ks_statistics(real, real, {"v": 10})["v"] == (0.0, 1.0)


# --------------------------------------------------------------------------------- CI test


def _two_by_two():
    # x by y counts [[10, 5], [5, 10]]
    return {"x": np.repeat([0, 0, 1, 1], [10, 5, 5, 10]),
            "y": np.repeat([0, 1, 0, 1], [10, 5, 5, 10])}


def test_g_test_by_hand():
    # E = 15·15/30 = 7.5 in every cell.
    # G = 2[2·10·ln(10/7.5) + 2·5·ln(5/7.5)] = 40 ln(4/3) + 20 ln(2/3) ≈ 3.3980, dof 1
    expected = 40 * math.log(4 / 3) + 20 * math.log(2 / 3)
    g, dof, p = ci_test(_two_by_two(), "x", "y", None, {"x": 2, "y": 2})
    assert g == pytest.approx(expected)
    assert dof == 1
    assert p == pytest.approx(stats.chi2.sf(expected, 1))
    reference = stats.chi2_contingency(np.array([[10, 5], [5, 10]]), correction=False,
                                       lambda_="log-likelihood")
    assert g == pytest.approx(reference.statistic)
    # I(X;Y) = G / 2n = G / 60 nats
    assert conditional_mutual_information(_two_by_two(), "x", "y", (), {"x": 2, "y": 2}) == (
        pytest.approx(expected / 60))


def test_stratified_g_test_counts_only_non_empty_strata():
    base = _two_by_two()
    # z = 0: the 2×2 table above; z = 1: x is always 0, y splits 3/3 (G = 0, one row of X);
    # z = 2 is declared but never occurs.
    frame = {
        "x": np.concatenate([base["x"], np.zeros(6, dtype=np.int64)]),
        "y": np.concatenate([base["y"], np.repeat([0, 1], 3)]),
        "z": np.repeat([0, 1], [30, 6]),
    }
    domain = {"x": 2, "y": 2, "z": 3}
    expected_g = 40 * math.log(4 / 3) + 20 * math.log(2 / 3)
    # adjusted: stratum 0 gives (2−1)(2−1) = 1, stratum 1 gives (1−1)(2−1) = 0 → dof 1
    g, dof, p = ci_test(frame, "x", "y", "z", domain)
    assert (g, dof) == (pytest.approx(expected_g), 1)
    assert p == pytest.approx(stats.chi2.sf(expected_g, 1))
    # declared: two non-empty strata × (2−1)(2−1) → dof 2 (z = 2 is not counted)
    g, dof, p = ci_test(frame, "x", "y", ["z"], domain, adjust_dof=False)
    assert (g, dof) == (pytest.approx(expected_g), 2)
    # I(X;Y|Z) = G / 2n with n = 36
    assert conditional_mutual_information(frame, "x", "y", "z", domain) == pytest.approx(
        expected_g / 72)


def test_cmi_is_zero_under_exact_conditional_independence():
    # Within each stratum the x × y table is a product of its margins.
    rows = []
    for z, (px, py) in enumerate([((1, 3), (2, 2)), ((2, 1), (1, 4))]):
        for x, cx in enumerate(px):
            for y, cy in enumerate(py):
                rows += [(x, y, z)] * (cx * cy)
    frame = pd.DataFrame(rows, columns=["x", "y", "z"])
    domain = {"x": 2, "y": 2, "z": 2}
    assert conditional_mutual_information(frame, "x", "y", "z", domain) == pytest.approx(
        0.0, abs=1e-12)
    assert ci_test(frame, "x", "y", "z", domain).p_value == pytest.approx(1.0)


def test_joint_variables_are_allowed():
    rng = np.random.default_rng(0)
    frame = {"a": rng.integers(0, 2, 200), "b": rng.integers(0, 3, 200),
             "c": rng.integers(0, 2, 200)}
    domain = {"a": 2, "b": 3, "c": 2}
    result = ci_test(frame, ["a", "b"], "c", None, domain, adjust_dof=False)
    assert result.dof == (6 - 1) * (2 - 1)


def _draw_ci(rng, n, dependent):
    z = rng.integers(0, 4, n)
    x = (z + rng.integers(0, 3, n)) % 3
    noise = rng.integers(0, 3, n)
    # independent: y depends on z and fresh noise only; dependent: y copies x half the time
    y = (z + noise) % 3
    if dependent:
        y = np.where(rng.random(n) < 0.5, x, y)
    return {"x": x, "y": y, "z": z}


def test_ci_test_is_calibrated_under_independence():
    rng = np.random.default_rng(20240607)
    domain = {"x": 3, "y": 3, "z": 4}
    p_values = np.array([ci_test(_draw_ci(rng, 400, False), "x", "y", "z", domain).p_value
                         for _ in range(200)])
    # Under H0 p-values are ~ U(0, 1): not systematically small.
    assert np.mean(p_values < 0.05) < 0.1
    assert 0.35 < p_values.mean() < 0.65
    assert stats.kstest(p_values, "uniform").pvalue > 0.001


def test_ci_test_detects_dependence():
    rng = np.random.default_rng(3)
    result = ci_test(_draw_ci(rng, 400, True), "x", "y", "z", {"x": 3, "y": 3, "z": 4})
    assert result.p_value < 1e-10
    assert result.dof == 4 * (3 - 1) * (3 - 1)


def test_ci_test_refuses_bad_arguments():
    domain = {"x": 2, "y": 2}
    with pytest.raises(DomainError, match="x and given share attributes \\['x'\\]"):
        ci_test(_two_by_two(), "x", "y", "x", domain)
    with pytest.raises(DomainError, match="given: attribute 'w' is not in the declared domain"):
        ci_test(_two_by_two(), "x", "y", "w", domain)
    with pytest.raises(DomainError, match="frame: the table has no rows"):
        ci_test({"x": np.array([], dtype=int), "y": np.array([], dtype=int)}, "x", "y", None,
                domain)
    with pytest.raises(DomainError, match="columns have different lengths"):
        ci_test({"x": np.array([0, 1]), "y": np.array([0])}, "x", "y", None, domain)


def test_permutation_ci_test_is_calibrated_on_sparse_strata():
    # X ⟂ Y | Z with many sparse strata, where the chi-square approximation is poor.
    rng = np.random.default_rng(12)
    pvalues = []
    for _ in range(40):
        z = rng.integers(0, 60, 400)
        x = (rng.random(400) < 0.2 + 0.01 * (z % 50)).astype(np.int64)
        y = (rng.random(400) < 0.7 - 0.01 * (z % 50)).astype(np.int64)
        frame = {"x": x, "y": y, "z": z}
        result = ci_test(frame, "x", "y", "z", {"x": 2, "y": 2, "z": 60}, permutations=99,
                         rng=rng)
        pvalues.append(result.p_value)
    assert 0.3 < np.mean(pvalues) < 0.7
    assert np.mean(np.array(pvalues) < 0.05) < 0.15
    dependent = {"x": x, "y": x.copy(), "z": z}
    assert ci_test(dependent, "x", "y", "z", {"x": 2, "y": 2, "z": 60}, permutations=99,
                   rng=rng).p_value == pytest.approx(0.01)
