"""Scores the GAN benchmarks share, in numpy and scikit-learn only (no privfair import).

``benchmarks/dpctgan_adult.py`` runs in a peer library's own venv, where privfair is not
installed, and must score its synthetic table exactly as ``benchmarks/gan_adult.py`` scores the
project's GANs; both import these functions. The definitions are the library's: RD(D) as in
``privfair.release.kinds.gan.stages.data_fairness`` and the average k-way TVD as in
``privfair.evaluation.utility.marginal_tvd`` (tests/test_gan_metrics.py checks both agree).

A *domain* here is anything that iterates over attribute names in table order and has
``size(attribute)``: privfair's ``Domain``, or :class:`Sizes` where privfair is absent.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sizes:
    """Attribute names in table order with their number of categories (codes 0 .. size-1)."""

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def size(self, attribute: str) -> int:
        """Number of categories of ``attribute``."""
        return self.sizes[self.attributes.index(attribute)]


def one_hot(codes, domain, attributes):
    n = len(codes[attributes[0]])
    x = np.zeros((n, sum(domain.size(a) for a in attributes)), dtype=np.float32)
    start = 0
    for a in attributes:
        x[np.arange(n), start + np.asarray(codes[a])] = 1.0
        start += domain.size(a)
    return x


def classifier_scores(train, test, domain, *, protected, outcome):
    """TSTR scores of a logistic regression on one-hot X: accuracy, RD(η), DTPR, DFPR.

    The positive outcome and the privileged group are the last code of ``outcome`` and
    ``protected``; the rates are differences privileged − other on ``test``.
    """
    from sklearn.linear_model import LogisticRegression

    features = [a for a in domain if a != outcome]
    y_train = np.asarray(train[outcome]) == domain.size(outcome) - 1
    if len(np.unique(y_train)) < 2:
        return {"accuracy": float("nan")}
    clf = LogisticRegression(max_iter=1000).fit(one_hot(train, domain, features), y_train)
    pred = clf.predict(one_hot(test, domain, features))
    y = np.asarray(test[outcome]) == domain.size(outcome) - 1
    s = np.asarray(test[protected]) == domain.size(protected) - 1

    def rate(mask):
        return float(pred[mask].mean()) if mask.any() else float("nan")

    return {"accuracy": float((pred == y).mean()), "rd_eta": rate(s) - rate(~s),
            "dtpr": rate(s & y) - rate(~s & y), "dfpr": rate(s & ~y) - rate(~s & ~y)}


def risk_difference(codes: Mapping[str, np.ndarray], domain, *, protected: str,
                    outcome: str) -> float:
    """RD(D) = P(Y = last | S = last) − P(Y = last | S = first) for binary S.

    For more than two groups, the largest gap between the groups present (as
    ``data_fairness`` does); NaN when no group is present.
    """
    s = np.asarray(codes[protected])
    positive = np.asarray(codes[outcome]) == domain.size(outcome) - 1
    rates = [float(positive[s == k].mean()) if np.any(s == k) else float("nan")
             for k in range(domain.size(protected))]
    if len(rates) == 2:
        return rates[1] - rates[0]
    finite = [r for r in rates if np.isfinite(r)]
    return max(finite) - min(finite) if finite else float("nan")


def marginal_tvd(real: Mapping[str, np.ndarray], synthetic: Mapping[str, np.ndarray], domain,
                 *, k: int) -> float:
    """Average over every k-subset of attributes of ½ Σ |p − q| between normalised marginals."""
    attributes = list(domain)
    n_real, n_syn = len(real[attributes[0]]), len(synthetic[attributes[0]])
    distances = []
    for clique in itertools.combinations(attributes, k):
        # The joint code of the clique; small here (Adult's largest 3-way cell count is ~10⁴).
        cells = int(np.prod([domain.size(a) for a in clique]))
        keys = [np.ravel_multi_index(tuple(np.asarray(table[a]) for a in clique),
                                     tuple(domain.size(a) for a in clique))
                for table in (real, synthetic)]
        p = np.bincount(keys[0], minlength=cells) / n_real
        q = np.bincount(keys[1], minlength=cells) / n_syn
        distances.append(0.5 * float(np.abs(p - q).sum()))
    return float(np.mean(distances))
