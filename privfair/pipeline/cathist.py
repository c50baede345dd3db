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
3. draws ``k ~ Binomial(n, p)``, the number of empty bins whose noise would have passed ``tau``,
   samples ``k`` labels from the universe and gives each the weight ``tau + Exponential(epsilon)``
   (the law of Laplace noise conditioned on exceeding ``tau``).

The whole release is epsilon-DP, hence ``epsilon**2 / 2``-zCDP, and is charged to the ledger
before any noise is drawn. Like the paper, the binomial slightly overcounts the empty bins (it
uses ``n`` trials, not ``n`` minus the active domain), which only adds outside values.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privfair.core.accounting import LedgerEntry, PrivacyLedger, laplace_rho

__all__ = [
    "CatHistResult",
    "UniverseSampler",
    "cathist",
    "cathist_threshold",
    "f_fidelity",
    "outside_probability",
    "random_word_sampler",
]

#: ``sampler(k, rng)`` returns ``k`` labels drawn from the declared universe.
UniverseSampler = Callable[[int, np.random.Generator], Sequence[str]]


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
        How many released categories were drawn from the universe. It is a function of
        ``Binomial(n, p)`` and the sampler only, so it reveals nothing about the data.
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
    domain_size: float,
    tolerance: float,
    epsilon: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    universe_sampler: UniverseSampler,
    name: str = "cathist",
) -> CatHistResult:
    """Release a DP histogram of an open-domain column (Algorithm 1 of Rodriguez & Howe 2018).

    Parameters
    ----------
    true_counts : mapping of str to int
        The private active histogram ``(C, S)``: each value that occurs and its count. It
        is read only to add noise; nothing about it is returned except through the noise.
    domain_size : int or float
        ``n``, the size of the declared universe (a whole number, may exceed 2**31).
    tolerance : float
        ``rho_tol`` in (0, 1): probability of releasing no value from outside the active
        domain.
    epsilon : float
        Pure-DP parameter; Laplace scale is ``1/epsilon`` (sensitivity 1, add/remove).
    rng : numpy.random.Generator
        The only source of randomness (noise, the binomial and the sampler).
    ledger : PrivacyLedger
        Charged ``epsilon**2 / 2`` (zCDP of an epsilon-DP mechanism) before any noise.
    universe_sampler : callable
        ``universe_sampler(k, rng) -> k labels`` drawn from the declared universe, e.g.
        :func:`random_word_sampler`. It must not look at the data.
    name : str
        Ledger entry name.

    Returns
    -------
    CatHistResult
    """
    tau = cathist_threshold(epsilon=epsilon, domain_size=domain_size, tolerance=tolerance)
    p = outside_probability(domain_size=domain_size, tolerance=tolerance)
    labels = [str(c) for c in true_counts]
    counts = np.asarray([true_counts[c] for c in true_counts], dtype=np.float64)
    if counts.size and (not np.all(np.isfinite(counts)) or np.any(counts < 0)):
        raise ValueError("true_counts: expected finite, non-negative counts")
    # The ledger entry counts one query per value of the universe: the mechanism stands for
    # noisy counts of all n bins, and the active-domain size is private, so it is not logged.
    ledger.spend(LedgerEntry(
        name=name, mechanism="laplace", sensitivity=1.0, rho=laplace_rho(epsilon=epsilon),
        epsilon=float(epsilon), queries=int(domain_size),
    ))
    noisy = counts + rng.laplace(0.0, 1.0 / epsilon, size=counts.size)
    keep = noisy >= tau  # Algorithm 1 line 8 removes s_i < tau
    released = dict(zip((lab for lab, k in zip(labels, keep, strict=True) if k),
                        noisy[keep].tolist(), strict=True))
    # The listing prints "k <- 1/2 e^{-eps tau}", but the text (and the privacy argument) draw
    # k from Binomial(n, p) with p = 1/2 e^{-eps tau}: the number of empty bins whose Laplace
    # noise exceeds tau. numpy's binomial takes int64 n, so n = 2.9e10 is fine.
    k = int(rng.binomial(int(domain_size), p))
    outside = _sample_universe(universe_sampler, k, rng)
    weights = tau + rng.exponential(1.0 / epsilon, size=len(outside))
    n_outside = 0
    for label, weight in zip(outside, weights.tolist(), strict=True):
        # The release is a set of bins: a drawn label equal to a released one (or to an
        # earlier draw) adds no new bin. This looks only at released output.
        if label not in released:
            released[label] = weight
            n_outside += 1
    order = sorted(released)
    values = np.asarray([released[c] for c in order], dtype=np.float64)
    values.setflags(write=False)
    return CatHistResult(categories=tuple(order), noisy_counts=values, tau=float(tau),
                         n_outside=n_outside)


def _sample_universe(sampler: UniverseSampler, k: int, rng: np.random.Generator) -> list[str]:
    if k == 0:
        return []
    drawn = sampler(k, rng)
    if isinstance(drawn, str) or len(drawn) != k:
        raise ValueError(f"universe_sampler: expected a sequence of {k} labels")
    if not all(isinstance(x, str) for x in drawn):
        raise ValueError("universe_sampler: expected string labels")
    return list(drawn)


def random_word_sampler(*, length: int = 12, alphabet: str = string.ascii_lowercase
                        ) -> UniverseSampler:
    """A universe sampler of uniform random words of ``length`` letters.

    The universe has ``len(alphabet) ** length`` values (26**12 ~ 9.5e16 by default); it
    stands in for "all English words" when no word list is at hand.
    """
    if length < 1 or len(alphabet) < 2:
        raise ValueError("random_word_sampler: expected length >= 1 and at least 2 letters")
    letters = np.array(list(alphabet))

    def sample(k: int, rng: np.random.Generator) -> list[str]:
        picks = letters[rng.integers(0, letters.size, size=(k, length))]
        return ["".join(row) for row in picks]

    return sample


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
