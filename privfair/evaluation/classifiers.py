"""Downstream classifiers: train on a synthetic table, test on real held-out rows.

This module is long on purpose: three classifiers behind one entry point, plus their scoring;
keeping them together keeps the train-on-synthetic, test-on-real protocol in one place.

Three kinds share one entry point, :func:`fit_predict`:

* ``"logistic"``: L2-penalised logistic regression fitted with L-BFGS (``scipy.optimize``),
  numpy only. Penalty as in scikit-learn: ``½‖w‖² + C·Σ log-loss``, intercept unpenalised.
* ``"random_forest"``: scikit-learn's ``RandomForestClassifier`` (imported on use; raises
  ``ModuleNotFoundError`` naming the missing package when scikit-learn is absent).
* ``"mlp"``: a small ReLU network in torch on the CPU (imported on use). Initialisation and
  batch order come from a local ``torch.Generator`` seeded with ``seed``, inside
  ``torch.random.fork_rng`` so the global torch RNG is left as it was: same seed, same output.

Features are one-hot encoded from integer codes with the declared domain (:func:`one_hot`),
never from the data, so train and test matrices always have the same columns. Metrics
(:func:`classification_metrics`) always come with a majority-class baseline beside them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import optimize, sparse, special, stats

from privfair.core.errors import DomainError
from privfair.evaluation.fairness_metrics import outcome_indicator
from privfair.evaluation.utility import DomainLike, TableLike, as_domain, codes, n_rows

__all__ = [
    "KINDS",
    "classification_metrics",
    "evaluate_classifier",
    "f1_score",
    "fit_predict",
    "one_hot",
    "roc_auc",
    "train_and_predict",
]

KINDS = ("logistic", "random_forest", "mlp")

_DEFAULTS: dict[str, dict[str, Any]] = {
    "logistic": {"C": 1.0, "max_iter": 1000, "tol": 1e-8},
    "random_forest": {"n_estimators": 100, "max_depth": None, "min_samples_leaf": 1,
                      "max_features": "sqrt"},
    "mlp": {"hidden": (64, 32), "epochs": 20, "batch_size": 256, "lr": 3e-3,
            "weight_decay": 1e-4, "num_threads": 1},
}


# ---------------------------------------------------------------------------------------------
# Features


def one_hot(table: TableLike, domain: DomainLike, attributes: Sequence[str], *,
            name: str = "table") -> np.ndarray:
    """One-hot encode integer codes over the declared domain.

    Parameters
    ----------
    table : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain; attribute ``a`` gets ``domain.size(a)`` columns, in the order given.
    attributes : sequence of str
        Attributes to encode.
    name : str, optional
        How the table is named in error messages.

    Returns
    -------
    ndarray of float64, shape (n_rows, sum of sizes)
        Exactly one 1 per attribute block of each row.
    """
    dom = as_domain(domain)
    attrs = [attributes] if isinstance(attributes, str) else list(attributes)
    if not attrs:
        raise DomainError("features: expected at least one feature attribute")
    n = n_rows(table, name=name)
    width = sum(dom.size(a) for a in attrs)
    out = np.zeros((n, width), dtype=np.float64)
    rows = np.arange(n)
    offset = 0
    for a in attrs:
        out[rows, offset + codes(table, a, dom, name=name)] = 1.0
        offset += dom.size(a)
    return out


# ---------------------------------------------------------------------------------------------
# Models


def _options(kind: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    merged = dict(_DEFAULTS[kind])
    for key, value in (options or {}).items():
        if key not in merged:
            raise ValueError(f"options: unknown option {key!r} for kind {kind!r}; expected "
                             f"some of {sorted(merged)}")
        merged[key] = value
    return merged


def _logistic(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *,
              C: float, max_iter: int, tol: float) -> np.ndarray:
    if not C > 0:
        raise ValueError(f"options: C must be positive, got {C!r}")
    n, d = x_train.shape
    y = y_train.astype(np.float64)
    # Objective divided by C·n (same minimiser, better scaled):
    # mean log-loss + ‖w‖² / (2 C n).
    lam = 1.0 / (C * n)
    # one-hot features are mostly zeros: two sparse products per step instead of two dense
    # ones (a 300,000-row evaluation spent minutes here)
    design: Any = x_train
    design_t: Any = x_train.T
    if x_train.size and np.count_nonzero(x_train) < 0.25 * x_train.size:
        design = sparse.csr_matrix(x_train)
        design_t = design.T.tocsr()

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        z = design @ w + b
        loss = float(np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * (w @ w))
        residual = (special.expit(z) - y) / n
        grad = np.empty(d + 1)
        grad[:d] = design_t @ residual + lam * w
        grad[d] = residual.sum()
        return loss, grad

    result = optimize.minimize(objective, np.zeros(d + 1), jac=True, method="L-BFGS-B",
                               options={"maxiter": int(max_iter), "gtol": tol})
    w, b = result.x[:d], result.x[d]
    return special.expit(x_test @ w + b)


def _random_forest(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *,
                   seed: int, **params: Any) -> np.ndarray:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "kind='random_forest' needs scikit-learn, which is not installed; install "
            "scikit-learn or use kind='logistic' or 'mlp'"
        ) from exc
    model = RandomForestClassifier(random_state=seed, n_jobs=1, **params)
    model.fit(x_train, y_train)
    column = list(model.classes_).index(1)
    return model.predict_proba(x_test)[:, column].astype(np.float64)


def _mlp(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, seed: int,
         hidden: Sequence[int], epochs: int, batch_size: int, lr: float,
         weight_decay: float, num_threads: int) -> np.ndarray:
    import torch
    from torch import nn

    widths = [int(h) for h in hidden]
    if any(h < 1 for h in widths) or min(int(epochs), int(batch_size), int(num_threads)) < 1:
        raise ValueError("options: hidden widths, epochs, batch_size and num_threads must be "
                         "positive")
    n, d = x_train.shape
    previous_threads = torch.get_num_threads()
    # A fixed thread count keeps float reductions, hence results, identical across machines;
    # for a network this small one thread is also the fastest.
    torch.set_num_threads(int(num_threads))
    try:
        return _train_mlp(torch, nn, x_train, y_train, x_test, seed=seed, widths=widths,
                          epochs=int(epochs), batch_size=int(batch_size), lr=float(lr),
                          weight_decay=float(weight_decay))
    finally:
        torch.set_num_threads(previous_threads)


def _train_mlp(torch: Any, nn: Any, x_train: np.ndarray, y_train: np.ndarray,
               x_test: np.ndarray, *, seed: int, widths: list[int], epochs: int,
               batch_size: int, lr: float, weight_decay: float) -> np.ndarray:
    n, d = x_train.shape
    with torch.random.fork_rng(devices=[]):
        generator = torch.Generator().manual_seed(int(seed))
        layers: list[nn.Module] = []
        fan_in = d
        for h in [*widths, 1]:
            layers.append(nn.Linear(fan_in, h))
            layers.append(nn.ReLU())
            fan_in = h
        model = nn.Sequential(*layers[:-1])
        with torch.no_grad():
            # PyTorch's default Linear init, drawn from the local generator.
            for layer in model:
                if isinstance(layer, nn.Linear):
                    bound = 1.0 / math.sqrt(layer.in_features)
                    layer.weight.uniform_(-bound, bound, generator=generator)
                    layer.bias.uniform_(-bound, bound, generator=generator)
        features = torch.as_tensor(x_train, dtype=torch.float32)
        labels = torch.as_tensor(y_train, dtype=torch.float32)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        loss_fn = nn.BCEWithLogitsLoss()
        model.train()
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, batch_size):
                batch = order[start:start + batch_size]
                optimiser.zero_grad()
                loss = loss_fn(model(features[batch]).squeeze(1), labels[batch])
                loss.backward()
                optimiser.step()
        model.eval()
        with torch.no_grad():
            logits = model(torch.as_tensor(x_test, dtype=torch.float32)).squeeze(1)
            return torch.sigmoid(logits).numpy().astype(np.float64)


def _matrix(x: np.ndarray, parameter: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{parameter}: expected a 2-D feature matrix, got {arr.ndim} "
                         "dimensions")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{parameter}: expected numeric features, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{parameter}: features must be finite")
    return arr


def _labels(y: np.ndarray, parameter: str, n: int) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{parameter}: expected a 1-D array of {n} labels")
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer) or (
            arr.size and (arr.min() < 0 or arr.max() > 1)):
        raise ValueError(f"{parameter}: expected 0/1 labels")
    return arr.astype(np.int64)


def fit_predict(kind: str, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, *,
                seed: int, options: Mapping[str, Any] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Fit a classifier on ``(X_train, y_train)`` and predict ``X_test``.

    Parameters
    ----------
    kind : {"logistic", "random_forest", "mlp"}
        Model family (see the module docstring).
    X_train : ndarray, shape (n_train, d)
        Training features (e.g. from :func:`one_hot`).
    y_train : ndarray of 0/1 or bool, shape (n_train,)
        Training labels, 1 favourable.
    X_test : ndarray, shape (n_test, d)
        Test features, same columns as ``X_train``.
    seed : int
        Seed of the model's randomness (unused by the deterministic logistic fit).
    options : mapping, optional
        Hyper-parameters of the kind. ``logistic``: ``C`` (1.0), ``max_iter``, ``tol``;
        ``random_forest``: ``n_estimators`` (100), ``max_depth``, ``min_samples_leaf``,
        ``max_features``; ``mlp``: ``hidden`` ((64, 32)), ``epochs`` (20), ``batch_size``
        (256), ``lr`` (3e-3), ``weight_decay`` (1e-4), ``num_threads`` (1; torch's thread
        count is set for the fit and restored after).

    Returns
    -------
    y_pred : ndarray of int64
        0/1 decisions, ``y_score >= 0.5``.
    y_score : ndarray of float64
        Estimated ``P(Y = 1 | x)``.

    Notes
    -----
    When ``y_train`` holds a single class the model is not fitted: every test row gets that
    class, with score 1.0 or 0.0.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {list(KINDS)}, got {kind!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    x_train = _matrix(X_train, "X_train")
    x_test = _matrix(X_test, "X_test")
    if x_train.shape[0] == 0:
        raise ValueError("X_train: no training rows")
    if x_test.shape[1] != x_train.shape[1]:
        raise ValueError(f"X_test: has {x_test.shape[1]} columns, X_train has "
                         f"{x_train.shape[1]}")
    y = _labels(y_train, "y_train", x_train.shape[0])
    params = _options(kind, options)
    if np.all(y == y[0]):
        score = np.full(x_test.shape[0], float(y[0]))
    elif kind == "logistic":
        score = _logistic(x_train, y, x_test, **params)
    elif kind == "random_forest":
        score = _random_forest(x_train, y, x_test, seed=int(seed), **params)
    else:
        score = _mlp(x_train, y, x_test, seed=int(seed), **params)
    return (score >= 0.5).astype(np.int64), score


# ---------------------------------------------------------------------------------------------
# Metrics


def f1_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """F1 of the positive class, ``2TP / (2TP + FP + FN)``; 0.0 when that is 0/0.

    Parameters
    ----------
    y_true, y_pred : ndarray of 0/1 or bool
        Labels and decisions.

    Returns
    -------
    float
    """
    y = _labels(y_true, "y_true", np.asarray(y_true).size).astype(bool)
    o = _labels(y_pred, "y_pred", y.size).astype(bool)
    tp = int(np.count_nonzero(y & o))
    denominator = 2 * tp + int(np.count_nonzero(~y & o)) + int(np.count_nonzero(y & ~o))
    return 2 * tp / denominator if denominator else 0.0


def roc_auc(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """Area under the ROC curve (Mann–Whitney, ties count one half).

    Parameters
    ----------
    y_true : ndarray of 0/1 or bool
        Labels.
    y_score : ndarray of float
        Scores, higher meaning more likely positive.

    Returns
    -------
    float
        AUC in ``[0, 1]``; ``nan`` when ``y_true`` holds a single class.
    """
    y = _labels(y_true, "y_true", np.asarray(y_true).size).astype(bool)
    score = np.asarray(y_score, dtype=np.float64)
    if score.shape != y.shape or not np.all(np.isfinite(score)):
        raise ValueError(f"y_score: expected {y.size} finite scores")
    n_pos = int(np.count_nonzero(y))
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = stats.rankdata(score)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, y_score: np.ndarray, *,
                           baseline_class: int) -> dict[str, float]:
    """Accuracy, F1 and ROC AUC, each beside a majority-class baseline.

    Parameters
    ----------
    y_true : ndarray of 0/1 or bool
        True labels of the test rows.
    y_pred : ndarray of 0/1 or bool
        Decisions.
    y_score : ndarray of float
        Scores for the AUC.
    baseline_class : {0, 1}
        The constant prediction of the baseline (the training majority class).

    Returns
    -------
    dict of str to float
        ``accuracy``, ``f1``, ``roc_auc`` and ``baseline_accuracy``, ``baseline_f1``,
        ``baseline_roc_auc`` (0.5: a constant score ranks nothing; ``nan`` with one class),
        plus ``test_positive_rate``.
    """
    if baseline_class not in (0, 1):
        raise ValueError(f"baseline_class: expected 0 or 1, got {baseline_class!r}")
    y = _labels(y_true, "y_true", np.asarray(y_true).size)
    o = _labels(y_pred, "y_pred", y.size)
    if y.size == 0:
        raise ValueError("y_true: no test rows")
    constant = np.full(y.size, baseline_class, dtype=np.int64)
    auc = roc_auc(y, y_score)
    return {
        "accuracy": float(np.mean(y == o)),
        "f1": f1_score(y, o),
        "roc_auc": auc,
        "baseline_accuracy": float(np.mean(y == constant)),
        "baseline_f1": f1_score(y, constant),
        "baseline_roc_auc": float("nan") if math.isnan(auc) else 0.5,
        "test_positive_rate": float(np.mean(y)),
    }


def _feature_list(features: Sequence[str] | None, domain: DomainLike, outcome: str
                  ) -> list[str]:
    dom = as_domain(domain)
    if outcome not in dom:
        raise DomainError(f"outcome: attribute {outcome!r} is not in the declared domain")
    if features is None:
        return [a for a in dom if a != outcome]
    chosen = [features] if isinstance(features, str) else list(features)
    if outcome in chosen:
        raise DomainError(f"features: the outcome {outcome!r} cannot be a feature")
    for a in chosen:
        if a not in dom:
            raise DomainError(f"features: attribute {a!r} is not in the declared domain")
    if len(set(chosen)) != len(chosen):
        raise DomainError(f"features: lists an attribute twice: {chosen}")
    return chosen


def train_and_predict(kind: str, train: TableLike, test: TableLike, domain: DomainLike, *,
                      outcome: str, seed: int, features: Sequence[str] | None = None,
                      favorable: int | Collection[int] | None = None,
                      options: Mapping[str, Any] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Encode two tables of codes, fit on ``train`` and predict ``test``.

    Parameters
    ----------
    kind : {"logistic", "random_forest", "mlp"}
        Model family.
    train : DataFrame or mapping of str to ndarray
        Training table (typically synthetic).
    test : DataFrame or mapping of str to ndarray
        Test table (typically real held-out rows).
    domain : Domain or mapping of str to int
        Declared domain, which fixes the one-hot columns.
    outcome : str
        Label attribute, binarised by ``favorable``.
    seed : int
        Model seed.
    features : sequence of str, optional
        Feature attributes (default: every declared attribute but the outcome).
    favorable : int or collection of int, optional
        Favourable outcome code(s); default 1 for a binary outcome.
    options : mapping, optional
        Hyper-parameters (see :func:`fit_predict`).

    Returns
    -------
    y_pred, y_score : ndarray
        As :func:`fit_predict`, one per test row (feed ``y_pred`` to
        :func:`privfair.evaluation.fairness_metrics.classifier_fairness`).
    """
    feats = _feature_list(features, domain, outcome)
    x_train = one_hot(train, domain, feats, name="train")
    x_test = one_hot(test, domain, feats, name="test")
    y_train = outcome_indicator(train, domain, outcome, favorable=favorable, name="train")
    return fit_predict(kind, x_train, y_train, x_test, seed=seed, options=options)


def evaluate_classifier(kind: str, train: TableLike, test: TableLike, domain: DomainLike, *,
                        outcome: str, seed: int, features: Sequence[str] | None = None,
                        favorable: int | Collection[int] | None = None,
                        options: Mapping[str, Any] | None = None
                        ) -> dict[str, float | int | str]:
    """Train on ``train`` (synthetic), test on ``test`` (real), report metrics with a baseline.

    The baseline always predicts the majority class of the *training* labels (ties: 0), i.e.
    the best classifier that ignores the features.

    Parameters
    ----------
    kind : {"logistic", "random_forest", "mlp"}
        Model family.
    train, test : DataFrame or mapping of str to ndarray
        Training and test tables of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    outcome : str
        Label attribute.
    seed : int
        Model seed.
    features : sequence of str, optional
        Feature attributes (default: every declared attribute but the outcome).
    favorable : int or collection of int, optional
        Favourable outcome code(s).
    options : mapping, optional
        Hyper-parameters (see :func:`fit_predict`).

    Returns
    -------
    dict
        ``kind``, ``n_train``, ``n_test``, ``majority_class`` and the keys of
        :func:`classification_metrics`.
    """
    y_pred, y_score = train_and_predict(kind, train, test, domain, outcome=outcome, seed=seed,
                                        features=features, favorable=favorable,
                                        options=options)
    return {"kind": kind, **score_predictions(train, test, domain, outcome=outcome,
                                              y_pred=y_pred, y_score=y_score,
                                              favorable=favorable)}


def score_predictions(train: TableLike, test: TableLike, domain: DomainLike, *, outcome: str,
                      y_pred: np.ndarray, y_score: np.ndarray,
                      favorable: int | Collection[int] | None = None
                      ) -> dict[str, float | int]:
    """Metrics of predictions on ``test`` beside the majority-class baseline of ``train``."""
    y_train = outcome_indicator(train, domain, outcome, favorable=favorable, name="train")
    y_test = outcome_indicator(test, domain, outcome, favorable=favorable, name="test")
    majority = int(np.count_nonzero(y_train) * 2 > y_train.size)
    report: dict[str, float | int] = {
        "n_train": int(y_train.size),
        "n_test": int(y_test.size),
        "majority_class": majority,
    }
    report.update(classification_metrics(y_test, y_pred, y_score, baseline_class=majority))
    return report
