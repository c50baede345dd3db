"""benchmarks/_gan_metrics.py scores a peer's table (outside privfair) as the library would."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from privfair.core.domain import Domain
from privfair.evaluation.utility import marginal_tvd
from privfair.release.kinds.gan.stages import data_fairness

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "_gan_metrics.py"
_SPEC = importlib.util.spec_from_file_location("_gan_metrics", _PATH)
metrics = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault(_SPEC.name, metrics)  # dataclasses look their module up by name
_SPEC.loader.exec_module(metrics)

ATTRIBUTES, SIZES = ("a", "s", "b", "y"), (3, 2, 4, 2)


def _table(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {a: rng.integers(0, k, size=n) for a, k in zip(ATTRIBUTES, SIZES, strict=True)}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_marginal_tvd_matches_the_library(k):
    rng = np.random.default_rng(k)
    real, synthetic = _table(rng, 500), _table(rng, 300)
    expected = marginal_tvd(real, synthetic, Domain(ATTRIBUTES, SIZES), k)
    got = metrics.marginal_tvd(real, synthetic, metrics.Sizes(ATTRIBUTES, SIZES), k=k)
    assert got == pytest.approx(expected, abs=1e-12)


def test_marginal_tvd_of_disjoint_tables_is_one():
    domain = metrics.Sizes(("a", "b"), (2, 3))
    zeros = {"a": np.zeros(4, dtype=int), "b": np.zeros(4, dtype=int)}
    ones = {"a": np.ones(2, dtype=int), "b": np.ones(2, dtype=int)}
    assert metrics.marginal_tvd(zeros, ones, domain, k=1) == 1.0
    assert metrics.marginal_tvd(zeros, zeros, domain, k=2) == 0.0


def test_risk_difference_matches_data_fairness():
    rng = np.random.default_rng(7)
    codes = _table(rng, 400)
    domain = Domain(ATTRIBUTES, SIZES)
    expected = data_fairness(codes, domain, protected="s", outcome="y",
                             rng=np.random.default_rng(0))["rd"]
    got = metrics.risk_difference(codes, metrics.Sizes(ATTRIBUTES, SIZES), protected="s",
                                  outcome="y")
    assert got == expected


def test_risk_difference_known_value():
    # P(y=1 | s=1) = 3/4, P(y=1 | s=0) = 1/4.
    codes = {"s": np.array([1, 1, 1, 1, 0, 0, 0, 0]), "y": np.array([1, 1, 1, 0, 1, 0, 0, 0])}
    assert metrics.risk_difference(codes, metrics.Sizes(("s", "y"), (2, 2)), protected="s",
                                   outcome="y") == 0.5


def test_classifier_scores_same_with_sizes_and_domain():
    rng = np.random.default_rng(3)
    train, test = _table(rng, 300), _table(rng, 100)
    train["y"] = (train["a"] == 2).astype(int)  # learnable outcome
    test["y"] = (test["a"] == 2).astype(int)
    with_domain = metrics.classifier_scores(train, test, Domain(ATTRIBUTES, SIZES),
                                            protected="s", outcome="y")
    with_sizes = metrics.classifier_scores(train, test, metrics.Sizes(ATTRIBUTES, SIZES),
                                           protected="s", outcome="y")
    assert with_sizes == with_domain
    assert with_sizes["accuracy"] == 1.0
