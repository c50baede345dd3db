"""CatHist: a differentially private histogram over a weakly constrained (open) domain.

Algorithm 1 of Rodriguez and Howe (2018), "Privacy-Preserving Synthetic Datasets Over Weakly
Constrained Domains". A text column's *declared* universe has ``n`` values (e.g. all English
words, n = 1.71e5) but only a few occur (the active domain, which is private). Releasing only
active values is not differentially private (their Theorem 2.2), and adding noise to all ``n``
counts is infeasible, so CatHist:

1. derives a threshold ``tau = -ln(2 (1 - rho_tol**(1/n))) / epsilon`` from the tolerance
   ``rho_tol``, the probability that *no* value from outside the active domain is released
   (``rho_tol = (1 - p)**n`` with ``p = exp(-epsilon tau) / 2`` the chance that Laplace noise
   lifts an empty bin above ``tau``);
2. adds Laplace(1/epsilon) noise to each active count (L1 sensitivity 1 under add/remove one
   row) and removes noisy counts below ``tau``;
3. draws ``k ~ Binomial(n, p)``, samples ``k`` distinct labels uniformly from the *declared*
   universe, drops those that hit the active domain, and gives each remaining label the weight
   ``tau + Exponential(epsilon)`` (the law of Laplace noise conditioned on exceeding ``tau``).

Step 3 draws every one of the ``n`` universe values independently with probability ``p`` and
keeps the inactive ones: exactly what Laplace noise on all ``n`` bins would have released
above ``tau``. That is what makes the whole release epsilon-DP, hence ``epsilon**2 / 2``-zCDP
(charged before any noise), and it needs two things the paper leaves implicit:

* labels come from the universe the contract declares (:class:`ValueListUniverse`,
  :class:`WordUniverse`), never from an unrelated generator: a value of the universe absent
  from the data must be as likely to appear as the paper's analysis says;
* a draw that hits an active value (released or suppressed) is dropped, so a present value
  gets one chance (its noisy count), not two; and data values outside the declared universe
  are never counted (they fall in the column's open bucket), since nothing else could ever
  release them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.core.mechanisms import sparse_laplace_histogram

__all__ = [
    "MAX_UNIVERSE_SIZE",
    "CatHistResult",
    "Universe",
    "ValueListUniverse",
    "WordUniverse",
    "cathist",
    "cathist_threshold",
    "f_fidelity",
    "outside_probability",
    "sample_outside",
]

#: numpy draws uniform indices and binomials in int64; larger universes are refused.
MAX_UNIVERSE_SIZE = 2**62


class Universe(Protocol):
    """A declared universe with a canonical enumeration ``label(0) .. label(size - 1)``."""

    @property
    def size(self) -> int: ...

    def __contains__(self, label: object) -> bool: ...

    def label(self, index: int) -> str: ...


@dataclass(frozen=True)
class ValueListUniverse:
    """An enumerable universe: the listed values, in sorted order."""

    values: tuple[str, ...]

    def __post_init__(self) -> None:
        values = tuple(sorted(set(self.values)))
        if not values or not all(isinstance(v, str) for v in values):
            raise ValueError("a value-list universe needs at least one string value")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_members", frozenset(values))

    @property
    def size(self) -> int:
        return len(self.values)

    def __contains__(self, label: object) -> bool:
        return label in self._members  # type: ignore[attr-defined]

    def label(self, index: int) -> str:
        return self.values[index]


@dataclass(frozen=True)
class WordUniverse:
    """Every word over ``alphabet`` of ``min_length`` to ``max_length`` letters.

    The canonical enumeration is shortlex: shorter words first, then in the alphabet's order.
    """

    alphabet: str
    max_length: int
    min_length: int = 1

    def __post_init__(self) -> None:
        if len(set(self.alphabet)) != len(self.alphabet) or len(self.alphabet) < 2:
            raise ValueError("a word universe needs an alphabet of >= 2 distinct characters")
        if not 1 <= self.min_length <= self.max_length:
            raise ValueError(f"a word universe needs 1 <= min_length <= max_length, got "
                             f"{self.min_length}..{self.max_length}")
        if self.size > MAX_UNIVERSE_SIZE:
            raise ValueError(f"a word universe of {self.size:.3g} values is larger than "
                             f"{MAX_UNIVERSE_SIZE:.3g}; expected a shorter max_length")

    @property
    def size(self) -> int:
        b = len(self.alphabet)
        return sum(b**k for k in range(self.min_length, self.max_length + 1))

    def __contains__(self, label: object) -> bool:
        return (isinstance(label, str) and self.min_length <= len(label) <= self.max_length
                and set(label) <= set(self.alphabet))

    def label(self, index: int) -> str:
        if not 0 <= index < self.size:
            raise IndexError(index)
        b, length = len(self.alphabet), self.min_length
        while index >= b**length:
            index -= b**length
            length += 1
        letters = []
        for _ in range(length):
            index, digit = divmod(index, b)
            letters.append(self.alphabet[digit])
        return "".join(reversed(letters))


def sample_outside(universe: Universe, k: int, active: Iterable[str],
                   rng: np.random.Generator) -> list[str]:
    """``k`` distinct universe labels drawn uniformly, minus those in ``active``.

    A uniform k-subset after ``k ~ Binomial(n, p)`` includes each universe value independently
    with probability ``p``; dropping the active ones leaves exactly the inactive values that
    Laplace noise on every bin would have lifted above the threshold.
    """
    n = universe.size
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw {k} distinct values from a universe of {n}")
    if 4 * k >= n:
        picked = rng.choice(n, size=k, replace=False).tolist()
    else:
        chosen: dict[int, None] = {}
        while len(chosen) < k:
            for i in rng.integers(0, n, size=k - len(chosen)).tolist():
                chosen.setdefault(i, None)
        picked = list(chosen)[:k]
    skip = set(active)
    return [lab for lab in map(universe.label, picked) if lab not in skip]


@dataclass(frozen=True, eq=False)
class CatHistResult:
    """A released CatHist histogram; safe to publish.

    Attributes
    ----------
    categories : tuple of str
        Released categories, sorted lexicographically so that their order says nothing
        about which ones came from the data and which from the universe sampler. They serve
        as the column's domain (``open_categories`` of :meth:`Contract.domain`).
    noisy_counts : ndarray of float64
        Released weight of each category (read-only), all ``>= tau``.
    tau : float
        The threshold used.
    n_outside : int
        How many released categories were drawn from the universe. Which labels were drawn
        is not part of the DP output: keep this for tests, never publish it.
    """

    categories: tuple[str, ...]
    noisy_counts: np.ndarray
    tau: float
    n_outside: int

    def as_dict(self) -> dict[str, float]:
        """``{category: noisy count}``."""
        return dict(zip(self.categories, self.noisy_counts.tolist(), strict=True))


def _check_params(*, epsilon: float, domain_size: float, tolerance: float) -> None:
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(domain_size, int | float) and math.isfinite(domain_size)
            and domain_size >= 1 and float(domain_size).is_integer()):
        raise ValueError(f"domain_size must be a whole number >= 1, got {domain_size!r}")
    if not (isinstance(tolerance, int | float) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be in the open interval (0, 1), got {tolerance!r}")


def outside_probability(*, domain_size: float, tolerance: float) -> float:
    """``p = 1 - rho_tol**(1/n)``: chance that one empty bin is released.

    Computed as ``-expm1(ln(rho_tol) / n)``, which keeps full precision when ``n`` is huge
    (``rho_tol**(1/n)`` rounds to 1 for n = 2.9e10 and would lose most digits).
    """
    _check_params(epsilon=1.0, domain_size=domain_size, tolerance=tolerance)
    return -math.expm1(math.log(tolerance) / domain_size)


def cathist_threshold(*, epsilon: float, domain_size: float, tolerance: float) -> float:
    """``tau = -ln(2 (1 - rho_tol**(1/n))) / epsilon`` (Algorithm 1, line 4).

    Raises
    ------
    ValueError
        If ``rho_tol**(1/n) < 1/2``: the derivation assumes ``tau >= 0``.
    """
    _check_params(epsilon=epsilon, domain_size=domain_size, tolerance=tolerance)
    p = outside_probability(domain_size=domain_size, tolerance=tolerance)
    if p > 0.5:
        raise ValueError(
            f"tolerance={tolerance!r} with domain_size={domain_size!r} gives "
            "tolerance**(1/domain_size) < 1/2 (a negative threshold); expected a larger "
            "tolerance or domain"
        )
    return -math.log(2.0 * p) / epsilon


def cathist(
    true_counts: Mapping[str, int],
    *,
    universe: Universe,
    tolerance: float,
    epsilon: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str = "cathist",
) -> CatHistResult:
    """Release a DP histogram of an open-domain column (Algorithm 1 of Rodriguez & Howe 2018).

    Parameters
    ----------
    true_counts : mapping of str to int
        The private active histogram ``(C, S)``: each value that occurs and its count. It
        is read only to add noise; nothing about it is returned except through the noise.
        Values outside ``universe`` are ignored (the caller maps them to its open bucket).
    universe : Universe
        The declared universe (``n = universe.size``), e.g. :class:`ValueListUniverse` or
        :class:`WordUniverse`; outside labels are drawn from it.
    tolerance : float
        ``rho_tol`` in (0, 1): probability of releasing no value from outside the active
        domain.
    epsilon : float
        Pure-DP parameter; Laplace scale is ``1/epsilon`` (sensitivity 1, add/remove).
    rng : numpy.random.Generator
        The only source of randomness (noise, the binomial and the draws).
    ledger : PrivacyLedger
        Charged ``epsilon**2 / 2`` (zCDP of an epsilon-DP mechanism) before any noise.
    name : str
        Ledger entry name.

    Returns
    -------
    CatHistResult
    """
    domain_size = universe.size
    if not 1 <= domain_size <= MAX_UNIVERSE_SIZE:
        raise ValueError(f"universe: expected 1 to {MAX_UNIVERSE_SIZE} values, got {domain_size}")
    tau = cathist_threshold(epsilon=epsilon, domain_size=domain_size, tolerance=tolerance)
    p = outside_probability(domain_size=domain_size, tolerance=tolerance)
    labels = [str(c) for c in true_counts if str(c) in universe]
    counts = np.asarray([true_counts[c] for c in true_counts if str(c) in universe],
                        dtype=np.float64)
    if counts.size and (not np.all(np.isfinite(counts)) or np.any(counts < 0)):
        raise ValueError("true_counts: expected finite, non-negative counts")
    # The layer charges one query per value of the universe (the mechanism stands for noisy
    # counts of all n bins; the active-domain size is private), adds Laplace(1/ε) noise,
    # removes noisy counts below tau (Algorithm 1 line 8), and draws k ~ Binomial(n, p) with
    # p = 1/2 e^{-eps tau} (the listing prints "k <- 1/2 e^{-eps tau}", but the text and the
    # privacy argument draw k, the number of empty bins whose noise exceeds tau) and their
    # weights tau + Exponential(1/ε).
    histogram = sparse_laplace_histogram(
        counts, universe_size=domain_size, outside_probability=p, epsilon=epsilon, rng=rng,
        ledger=ledger, name=name,
        sample_outside=lambda k: sample_outside(universe, k, labels, rng))
    released = dict(zip((lab for lab, k in zip(labels, histogram.kept, strict=True) if k),
                        histogram.counts.tolist(), strict=True))
    released.update(zip(histogram.outside, histogram.outside_counts.tolist(), strict=True))
    order = sorted(released)
    values = np.asarray([released[c] for c in order], dtype=np.float64)
    values.setflags(write=False)
    return CatHistResult(categories=tuple(order), noisy_counts=values, tau=float(tau),
                         n_outside=len(histogram.outside))


def f_fidelity(true_counts: Mapping[str, int], released: CatHistResult) -> float:
    """The fidelity score F of Rodriguez & Howe (2018, §4, "Evaluation Metric").

    The paper defines F as "the product of the probability densities of the true
    distribution and the results of Algorithm 1 over the intersection of the category sets",
    with F = 1 when the category sets are equal and F = 0 when they are disjoint. We read
    "probability density over the intersection" as the probability mass each distribution
    puts on the intersection ``I`` of the active categories (count > 0) and the released ones:

    .. math:: F = P_{true}(I) \\cdot P_{released}(I),

    where ``P_true`` normalises the true counts and ``P_released`` the released noisy counts.
    This is the reading that satisfies both stated boundary cases: equal sets give 1 * 1 and
    disjoint sets give 0. (A per-category sum of products, sum_c p_c q_c, would not reach 1
    for equal sets.) F drops both when true categories are suppressed by the threshold and
    when random categories take released mass.

    This is an evaluation metric: it reads the true counts and must not be published as
    part of a release.
    """
    truth = {str(c): float(v) for c, v in true_counts.items()}
    if any(not math.isfinite(v) or v < 0 for v in truth.values()):
        raise ValueError("true_counts: expected finite, non-negative counts")
    total_true = math.fsum(truth.values())
    if total_true <= 0:
        raise ValueError("true_counts: expected a positive total count")
    released_mass = dict(zip(released.categories, released.noisy_counts.tolist(), strict=True))
    total_released = math.fsum(released_mass.values())
    common = [c for c in released_mass if truth.get(c, 0.0) > 0]
    if not common or total_released <= 0:
        return 0.0
    p_true = math.fsum(truth[c] for c in common) / total_true
    p_released = math.fsum(released_mass[c] for c in common) / total_released
    return p_true * p_released
