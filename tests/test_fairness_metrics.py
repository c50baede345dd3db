import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.core.errors import DomainError, RoleError
from privfair.evaluation.fairness_metrics import (
    CLASSIFIER_METRICS,
    DATA_METRICS,
    average_odds_difference,
    classifier_fairness,
    conditional_demographic_parity,
    conditional_outcome_difference,
    conditional_true_negative_rate_balance,
    conditional_true_positive_rate_balance,
    data_fairness,
    demographic_parity,
    false_negative_rate_balance,
    false_positive_rate_balance,
    group_indicator,
    outcome_difference,
    outcome_indicator,
    outcome_protected_cmi,
    statistical_parity_difference,
    true_negative_rate_balance,
    true_positive_rate_balance,
)

# Eight rows; s = 1 is privileged, a is admissible, y the true outcome, o the decision,
# r a second protected attribute with three categories (privileged code 0).
#
#   row  s  a  y  o  r
#    0   1  0  1  1  0
#    1   1  0  0  1  0
#    2   1  1  1  1  1
#    3   1  1  0  0  2
#    4   0  0  1  0  0
#    5   0  0  0  0  1
#    6   0  1  1  1  0
#    7   0  1  1  0  2
FRAME = pd.DataFrame({
    "s": [1, 1, 1, 1, 0, 0, 0, 0],
    "a": [0, 0, 1, 1, 0, 0, 1, 1],
    "y": [1, 0, 1, 0, 1, 0, 1, 1],
    "r": [0, 0, 1, 2, 0, 1, 0, 2],
})
DOMAIN = {"s": 2, "a": 2, "y": 2, "r": 3}
PRED = np.array([1, 1, 1, 0, 0, 0, 1, 0])
S = FRAME["s"].to_numpy().astype(bool)
Y = FRAME["y"].to_numpy().astype(bool)
A = FRAME["a"].to_numpy()


def test_cod_by_hand():
    # P(Y=1|g=0): rows 4-7 have y = 1,0,1,1 → 3/4; P(Y=1|g=1): rows 0-3 → 2/4
    assert outcome_difference(y_true=Y, group=S) == pytest.approx(0.75 - 0.5)


def test_conditional_cod_by_hand():
    # a=0: unprivileged rows 4,5 y=(1,0) → .5; privileged rows 0,1 y=(1,0) → .5; d = 0
    # a=1: unprivileged rows 6,7 y=(1,1) → 1;  privileged rows 2,3 y=(1,0) → .5; d = .5
    # P(A=0) = P(A=1) = 1/2 → .25
    result = conditional_outcome_difference(y_true=Y, group=S, strata=A)
    assert result == (pytest.approx(0.25), 1.0, 2)


def test_prefair_unconditional_measures_by_hand():
    # DP: P(O=1|S=1) rows 0-3 o=(1,1,1,0) → 3/4; P(O=1|S=0) rows 4-7 o=(0,0,1,0) → 1/4
    assert demographic_parity(y_pred=PRED, group=S) == pytest.approx(0.5)
    # TPRB: Y=1,S=1 rows 0,2 o=(1,1) → 1; Y=1,S=0 rows 4,6,7 o=(0,1,0) → 1/3
    assert true_positive_rate_balance(y_true=Y, y_pred=PRED, group=S) == pytest.approx(2 / 3)
    # TNRB: P(O=0|Y=0,S=1) rows 1,3 o=(1,0) → 1/2; P(O=0|Y=0,S=0) row 5 o=0 → 1
    assert true_negative_rate_balance(y_true=Y, y_pred=PRED, group=S) == pytest.approx(-0.5)


def test_prefair_conditional_measures_by_hand():
    # CDP: a=0 S=1 rows 0,1 o=(1,1) → 1, S=0 rows 4,5 o=(0,0) → 0, d = 1
    #      a=1 S=1 rows 2,3 o=(1,0) → .5, S=0 rows 6,7 o=(1,0) → .5, d = 0 → ½·1 + ½·0
    assert conditional_demographic_parity(y_pred=PRED, group=S, strata=A) == (
        pytest.approx(0.5), 1.0, 2)
    # CTPRB (Y=1 rows 0,2,4,6,7): a=0 S=1 row 0 → 1, S=0 row 4 → 0, d = 1
    #                            a=1 S=1 row 2 → 1, S=0 rows 6,7 → 1/2, d = 1/2
    # marginal weights P(A=a) = (1/2, 1/2) → .75
    ctprb = conditional_true_positive_rate_balance(y_true=Y, y_pred=PRED, group=S, strata=A)
    assert ctprb == (pytest.approx(0.75), 1.0, 2)
    # conditional weights P(A=a|Y=1) = (2/5, 3/5) → (2·1 + 3·.5)/5 = .7
    ctprb = conditional_true_positive_rate_balance(y_true=Y, y_pred=PRED, group=S, strata=A,
                                                   stratum_weights="conditional")
    assert ctprb.value == pytest.approx(0.7)
    # CTNRB (Y=0 rows 1,3,5): a=0 S=1 row 1 o=1 → P(O=0) = 0; S=0 row 5 o=0 → 1; d = −1
    #                         a=1 S=1 row 3, S=0 none → unusable, dropped
    # marginal: only a=0 is used, coverage P(A=0) = 4/8
    assert conditional_true_negative_rate_balance(y_true=Y, y_pred=PRED, group=S, strata=A) == (
        pytest.approx(-1.0), 0.5, 1)
    # conditional: coverage P(A=0|Y=0) = 2/3
    result = conditional_true_negative_rate_balance(y_true=Y, y_pred=PRED, group=S, strata=A,
                                                    stratum_weights="conditional")
    assert result == (pytest.approx(-1.0), pytest.approx(2 / 3), 1)


def test_safes_classifier_measures_by_hand():
    # SPD = P(Ŷ=1|g=0) − P(Ŷ=1|g=1) = 1/4 − 3/4
    assert statistical_parity_difference(y_pred=PRED, group=S) == pytest.approx(-0.5)
    # FPR: unprivileged row 5 → 0; privileged rows 1,3 → 1/2
    # TPR: unprivileged rows 4,6,7 → 1/3; privileged rows 0,2 → 1
    # AOD = ½[(0 − ½) + (⅓ − 1)] = ½(−½ − ⅔) = −7/12
    assert average_odds_difference(y_true=Y, y_pred=PRED, group=S) == pytest.approx(-7 / 12)
    # FNR balance = FNR_u − FNR_p = (1 − ⅓) − 0 = 2/3
    assert false_negative_rate_balance(y_true=Y, y_pred=PRED, group=S) == pytest.approx(2 / 3)
    # FPR balance = FPR_u − FPR_p = 0 − ½
    assert false_positive_rate_balance(y_true=Y, y_pred=PRED, group=S) == pytest.approx(-0.5)


def test_cmi_by_hand():
    # I(Y; S | A) on raw codes.
    # a=0 (rows 0,1,4,5): s=1 → y (1,0), s=0 → y (1,0): independent, contributes 0.
    # a=1 (rows 2,3,6,7), n_a = 4: counts (s=1,y=0)=1, (s=1,y=1)=1, (s=0,y=1)=2;
    #   margins s: 2,2; y: 1,3.  E = 2·1/4=.5, 2·3/4=1.5, 1.5
    #   Σ O ln(O/E) = ln(1/.5) + ln(1/1.5) + 2 ln(2/1.5) = ln(64/27)
    # G = 2 ln(64/27); I = G / (2·8) = ln(64/27)/8
    # dof: stratum a=0 → (2−1)(2−1) = 1, stratum a=1 → y observed {0,1}, s {0,1} → 1; total 2
    result = outcome_protected_cmi(FRAME, DOMAIN, outcome="y", protected="s", admissible="a")
    assert result.cmi == pytest.approx(math.log(64 / 27) / 8)
    assert result.statistic == pytest.approx(2 * math.log(64 / 27))
    assert result.dof == 2


def test_data_fairness_report():
    report = data_fairness(FRAME, DOMAIN, protected=["s", "r"], outcome="y", admissible="a",
                           privileged={"r": 0})
    assert list(report) == ["s", "r", "s+r"]
    assert set(report["s"]) == set(DATA_METRICS)
    assert report["s"]["COD"] == pytest.approx(0.25)
    assert report["s"]["conditional_COD"] == pytest.approx(0.25)
    assert report["s"]["CMI"] == pytest.approx(math.log(64 / 27) / 8)
    # r privileged = code 0: rows 0,1,4,6 y=(1,0,1,1) → 3/4; others rows 2,3,5,7 y=(1,0,0,1)
    # → 1/2.  COD = 1/2 − 3/4
    assert report["r"]["COD"] == pytest.approx(-0.25)
    # joint privileged = s=1 and r=0: rows 0,1 y=(1,0) → 1/2;
    # everyone else rows 2-7 y=(1,0,1,0,1,1) → 4/6.  COD = 2/3 − 1/2 = 1/6
    assert report["s+r"]["COD"] == pytest.approx(1 / 6)
    assert list(data_fairness(FRAME, DOMAIN, protected=["s", "r"], outcome="y",
                              privileged={"r": 0}, joint=False)) == ["s", "r"]


def test_classifier_fairness_report():
    report = classifier_fairness(FRAME, PRED, DOMAIN, protected="s", outcome="y", admissible="a")
    assert list(report) == ["s"]
    values = report["s"]
    assert set(values) == set(CLASSIFIER_METRICS)
    expected = {"DP": 0.5, "TPRB": 2 / 3, "TNRB": -0.5, "CDP": 0.5, "CTPRB": 0.75,
                "CTNRB": -1.0, "SPD": -0.5, "AOD": -7 / 12, "FNR_balance": 2 / 3,
                "FPR_balance": -0.5}
    assert values == pytest.approx(expected)


def test_without_admissible_conditional_equals_unconditional():
    report = classifier_fairness(FRAME, PRED, DOMAIN, protected="s", outcome="y")["s"]
    assert report["CDP"] == pytest.approx(report["DP"])
    assert report["CTPRB"] == pytest.approx(report["TPRB"])
    assert report["CTNRB"] == pytest.approx(report["TNRB"])
    data = data_fairness(FRAME, DOMAIN, protected="s", outcome="y")["s"]
    assert data["conditional_COD"] == pytest.approx(data["COD"])


def test_binarisation_conventions():
    # Binary protected attribute: code 1 is privileged by default.
    assert group_indicator(FRAME, DOMAIN, "s").tolist() == [True] * 4 + [False] * 4
    # A set of privileged codes.
    assert group_indicator(FRAME, DOMAIN, "r", privileged={"r": [1, 2]}).tolist() == [
        False, False, True, True, False, True, False, True]
    # A three-category outcome needs its favourable code(s).
    frame = {"y3": np.array([0, 1, 2, 2])}
    assert outcome_indicator(frame, {"y3": 3}, "y3", favorable={1, 2}).tolist() == [
        False, True, True, True]
    with pytest.raises(RoleError, match="favorable: outcome 'y3' has 3 categories"):
        outcome_indicator(frame, {"y3": 3}, "y3")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"protected": "r"}, RoleError, "protected attribute 'r' has 3 categories"),
        ({"protected": "s", "privileged": {"r": 0}}, RoleError,
         "privileged: \\['r'\\] are not among the protected"),
        ({"protected": "s", "privileged": {"s": [0, 1]}}, DomainError,
         "privileged\\['s'\\]: must name some but not all"),
        ({"protected": "s", "privileged": {"s": 2}}, DomainError,
         "privileged\\['s'\\]: expected codes in 0..1"),
        ({"protected": "s", "admissible": "s"}, RoleError, "both protected and admissible"),
        ({"protected": "zz"}, RoleError, "protected: attribute 'zz' is not in the declared"),
        ({"protected": []}, RoleError, "at least one protected attribute"),
    ],
)
def test_bad_roles_and_groups_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        data_fairness(FRAME, DOMAIN, outcome="y", **kwargs)


def test_bad_predictions_are_named():
    with pytest.raises(DomainError, match="y_pred: has 3 entries, expected 8"):
        classifier_fairness(FRAME, PRED[:3], DOMAIN, protected="s", outcome="y")
    with pytest.raises(DomainError, match="y_pred: expected only 0 and 1"):
        classifier_fairness(FRAME, PRED * 2, DOMAIN, protected="s", outcome="y")
    with pytest.raises(DomainError, match="stratum_weights"):
        classifier_fairness(FRAME, PRED, DOMAIN, protected="s", outcome="y",
                            stratum_weights="uniform")


def test_empty_group_gives_nan_not_an_error():
    everyone_privileged = np.ones(8, dtype=bool)
    assert math.isnan(demographic_parity(y_pred=PRED, group=everyone_privileged))
    assert math.isnan(conditional_demographic_parity(y_pred=PRED, group=everyone_privileged,
                                                     strata=A).value)


binary = st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 2)),
                  min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(binary)
def test_relations_between_the_two_families(rows):
    y, o, g, a = (np.array(c) for c in zip(*rows, strict=True))
    kw = {"y_true": y, "y_pred": o, "group": g}

    def same(u, v):
        return (math.isnan(u) and math.isnan(v)) or u == pytest.approx(v)

    # SAFES is unprivileged − privileged, PreFair privileged − unprivileged.
    assert same(statistical_parity_difference(y_pred=o, group=g),
                -demographic_parity(y_pred=o, group=g))
    assert same(false_negative_rate_balance(**kw), true_positive_rate_balance(**kw))
    assert same(false_positive_rate_balance(**kw), true_negative_rate_balance(**kw))
    # One stratum: conditional = unconditional.
    one = np.zeros(y.size, dtype=np.int64)
    assert same(conditional_true_positive_rate_balance(**kw, strata=one).value,
                true_positive_rate_balance(**kw))
    # Every measure is a difference of probabilities.
    for value in (demographic_parity(y_pred=o, group=g),
                  average_odds_difference(**kw),
                  conditional_demographic_parity(y_pred=o, group=g, strata=a).value):
        assert math.isnan(value) or -1.0 <= value <= 1.0
