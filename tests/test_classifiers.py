import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from privfair.core.errors import DomainError
from privfair.evaluation.classifiers import (
    classification_metrics,
    evaluate_classifier,
    f1_score,
    fit_predict,
    one_hot,
    roc_auc,
    train_and_predict,
)


def test_library_imports_without_torch_or_prefect():
    code = ("import sys, privfair.evaluation.classifiers, privfair.evaluation.utility, "
            "privfair.evaluation.fairness_metrics; "
            "assert 'torch' not in sys.modules and 'prefect' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_hot_uses_the_declared_domain():
    table = {"a": np.array([0, 2, 1]), "b": np.array([1, 0, 1])}
    # a has 3 declared codes, b has 3 although only 0 and 1 occur: 6 columns.
    expected = np.array([
        # a0 a1 a2  b0 b1 b2
        [1, 0, 0, 0, 1, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 1, 0, 0, 1, 0],
    ], dtype=float)
    np.testing.assert_array_equal(one_hot(table, {"a": 3, "b": 3}, ["a", "b"]), expected)
    with pytest.raises(DomainError, match="test: column 'a': codes outside the declared"):
        one_hot({"a": np.array([3])}, {"a": 3}, ["a"], name="test")


def test_f1_and_auc_by_hand():
    # TP = 2 (rows 0, 4), FP = 1 (row 2), FN = 1 (row 1): F1 = 2·2/(2·2 + 1 + 1) = 2/3
    assert f1_score(np.array([1, 1, 0, 0, 1]), np.array([1, 0, 1, 0, 1])) == pytest.approx(
        2 / 3)
    # Nothing positive anywhere: 0/0 → 0.
    assert f1_score(np.array([0, 0]), np.array([0, 0])) == 0.0
    # Positives score .35 and .8, negatives .1 and .4: of the 4 (pos, neg) pairs,
    # .35 > .1, .35 < .4, .8 > .1, .8 > .4 → 3/4
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75
    # Ties count ½: positives .5, .9; negatives .5, .5 → (½ + ½ + 1 + 1)/4
    assert roc_auc(np.array([0, 1, 0, 1]), np.array([0.5, 0.5, 0.5, 0.9])) == 0.75
    assert math.isnan(roc_auc(np.array([1, 1]), np.array([0.2, 0.3])))


def test_metrics_carry_a_majority_baseline():
    y = np.array([1, 0, 0, 0])
    result = classification_metrics(y, np.array([1, 0, 0, 1]), np.array([.9, .1, .2, .6]),
                                    baseline_class=0)
    # accuracy 3/4; F1 = 2·1/(2 + 1 + 0) = 2/3; AUC: the positive outranks all 3 negatives → 1
    assert result["accuracy"] == 0.75
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["roc_auc"] == 1.0
    # baseline predicts 0 everywhere: accuracy 3/4, F1 0, AUC ½
    assert (result["baseline_accuracy"], result["baseline_f1"], result["baseline_roc_auc"]) == (
        0.75, 0.0, 0.5)
    # baseline predicting 1: accuracy 1/4, F1 = 2·1/(2 + 3) = 2/5
    result = classification_metrics(y, y, y.astype(float), baseline_class=1)
    assert (result["baseline_accuracy"], result["baseline_f1"]) == (0.25, pytest.approx(0.4))


def test_logistic_recovers_group_rates_when_barely_penalised():
    # One categorical feature; a=0: 3 of 4 positive, a=1: 1 of 4 positive.
    # The unpenalised MLE of a saturated logistic model is the empirical rate per category.
    x = one_hot({"a": np.repeat([0, 1], 4)}, {"a": 2}, ["a"])
    y = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    pred, score = fit_predict("logistic", x, y, np.eye(2), seed=0, options={"C": 1e6})
    np.testing.assert_allclose(score, [0.75, 0.25], atol=1e-3)
    assert pred.tolist() == [1, 0]


def _toy(n, rng):
    # y is a deterministic function of a and b; c is noise. Separable, P(y=1) = 1/3 + 1/9.
    a = rng.integers(0, 3, n)
    b = rng.integers(0, 3, n)
    c = rng.integers(0, 4, n)
    y = ((a == 2) | ((a == 1) & (b == 1))).astype(np.int64)
    return pd.DataFrame({"a": a, "b": b, "c": c, "y": y})


DOMAIN = {"a": 3, "b": 3, "c": 4, "y": 2}


@pytest.mark.parametrize("kind", ["logistic", "mlp", "random_forest"])
def test_separable_toy_problem(kind):
    if kind == "random_forest":
        pytest.importorskip("sklearn")
    rng = np.random.default_rng(11)
    train, test = _toy(600, rng), _toy(300, rng)
    result = evaluate_classifier(kind, train, test, DOMAIN, outcome="y", seed=5)
    assert result["accuracy"] > 0.9
    assert result["roc_auc"] > 0.9
    # The baseline is always reported next to the model, and is beaten here.
    assert result["majority_class"] == 0
    assert result["baseline_accuracy"] == pytest.approx(1 - test["y"].mean())
    assert result["baseline_roc_auc"] == 0.5
    assert result["accuracy"] > result["baseline_accuracy"]
    assert (result["n_train"], result["n_test"]) == (600, 300)


def test_mlp_is_deterministic_and_leaves_global_state_alone():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    train, test = _toy(300, rng), _toy(100, rng)
    state = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    options = {"epochs": 5}
    _, first = train_and_predict("mlp", train, test, DOMAIN, outcome="y", seed=7,
                                 options=options)
    _, again = train_and_predict("mlp", train, test, DOMAIN, outcome="y", seed=7,
                                 options=options)
    _, other = train_and_predict("mlp", train, test, DOMAIN, outcome="y", seed=8,
                                 options=options)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.get_num_threads() == threads


def test_single_class_training_predicts_that_class():
    x = np.zeros((3, 2))
    pred, score = fit_predict("logistic", x, np.ones(3, dtype=int), np.zeros((2, 2)), seed=0)
    assert pred.tolist() == [1, 1]
    assert score.tolist() == [1.0, 1.0]


def test_bad_arguments_are_named():
    x, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match="kind: expected one of"):
        fit_predict("svm", x, y, x, seed=0)
    with pytest.raises(ValueError, match="options: unknown option 'depth' for kind 'logistic'"):
        fit_predict("logistic", x, y, x, seed=0, options={"depth": 3})
    with pytest.raises(ValueError, match="X_test: has 3 columns, X_train has 2"):
        fit_predict("logistic", x, y, np.zeros((1, 3)), seed=0)
    with pytest.raises(ValueError, match="y_train: expected 0/1 labels"):
        fit_predict("logistic", x, np.array([0, 2, 0, 1]), x, seed=0)
    with pytest.raises(ValueError, match="seed: expected an integer"):
        fit_predict("logistic", x, y, x, seed=None)
    rng = np.random.default_rng(0)
    with pytest.raises(DomainError, match="features: the outcome 'y' cannot be a feature"):
        evaluate_classifier("logistic", _toy(10, rng), _toy(10, rng), DOMAIN, outcome="y",
                            features=["a", "y"], seed=0)
