"""Noise mechanisms. Each one charges the ledger, then draws noise from a passed Generator.

* :func:`gaussian_mechanism` adds N(0, σ²) to a whole vector at once, or, with
  ``discrete=True``, exact discrete Gaussian noise (Canonne, Kamath and Steinke 2020), which
  has no floating-point side channel and is the option for production releases. Its
  integers come from the operating system's CSPRNG (``random.SystemRandom``) unless a test
  passes a seeded ``random.Random`` as ``discrete_source``.
* :func:`exponential_mechanism` selects one candidate with the Gumbel-max trick.
* :func:`sample_discrete_laplace` draws exact discrete Laplace integers from an explicitly
  passed Generator; the functional mechanism (``learn.functional``) puts them on a grid of
  floats so that its releases have no floating-point side channel either.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from privfair.core.accounting import (
    LedgerEntry,
    PrivacyLedger,
    exponential_rho,
    gaussian_rho,
)


# --- the layer's audit hooks ------------------------------------------------------------------
# Audits and tests, never a release, set these through the two context managers below. A
# context variable (not a module global or an environment variable) so that nothing outside
# the audit's own call stack can shrink the noise of a production run.


@dataclass(frozen=True)
class Query:
    """One privacy query as the layer saw it: what the audit and the neighbour suite check.

    ``exact`` is a copy of the exact answer (private: only ever held in a test or an audit
    on data it built); ``scale`` the declared noise scale (σ for Gaussian noise, b for
    Laplace, the Gumbel scale 2Δ/ε for the exponential mechanism).
    """

    name: str
    mechanism: str
    exact: np.ndarray
    sensitivity: float
    scale: float


_NOISE_FACTOR: contextvars.ContextVar[float] = contextvars.ContextVar(
    "privfair_noise_factor", default=1.0)
_RECORDER: contextvars.ContextVar[list[Query] | None] = contextvars.ContextVar(
    "privfair_query_recorder", default=None)


@contextlib.contextmanager
def scaled_noise(factor: float) -> Iterator[None]:
    """Audits only: draw every privacy noise of the layer at ``factor`` × its declared scale.

    The ledger still records the declared scale, so an audit run under ``factor < 1`` is a
    mechanism that breaks its claim, which the audit must catch.
    """
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
    token = _NOISE_FACTOR.set(float(factor))
    try:
        yield
    finally:
        _NOISE_FACTOR.reset(token)


@contextlib.contextmanager
def recorded_queries() -> Iterator[list[Query]]:
    """Tests and audits only: collect a :class:`Query` for every draw made inside."""
    queries: list[Query] = []
    token = _RECORDER.set(queries)
    try:
        yield queries
    finally:
        _RECORDER.reset(token)


def noise_factor() -> float:
    """The factor :func:`scaled_noise` set (1 outside an audit)."""
    return _NOISE_FACTOR.get()


def record_query(*, name: str, mechanism: str, exact: np.ndarray | float,
                 sensitivity: float, scale: float) -> None:
    """Hand a query to the recorder, if a test or an audit installed one."""
    queries = _RECORDER.get()
    if queries is not None:
        queries.append(Query(name=name, mechanism=mechanism,
                             exact=np.array(exact, dtype=np.float64, copy=True),
                             sensitivity=float(sensitivity), scale=float(scale)))


def gaussian_mechanism(
    values: np.ndarray,
    *,
    sigma: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
    discrete: bool = False,
    discrete_source: random.Random | None = None,
) -> np.ndarray:
    """Release ``values + noise`` with noise of scale ``sigma`` in every entry.

    Parameters
    ----------
    values : ndarray
        The exact answers; any shape. With ``discrete=True`` they must be integers.
    sigma : float
        Noise scale.
    sensitivity : float
        L2 sensitivity of the whole ``values`` vector under add/remove-one-row neighbours.
    rng : numpy.random.Generator
        Source of randomness.
    ledger : PrivacyLedger
        Charged ``sensitivity² / (2 σ²)`` before any noise is drawn.
    name : str
        What is being measured, for the ledger.
    discrete : bool
        Draw exact discrete Gaussian noise instead of floating-point Gaussian noise.
    discrete_source : random.Random, optional
        Tests only: a seeded source for the discrete noise. Default: the OS CSPRNG (``rng``
        is not used for discrete noise, so a seeded Generator cannot make it predictable).

    Returns
    -------
    ndarray of float64, same shape as ``values``.
    """
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    values = np.asarray(values)
    ledger.spend(LedgerEntry(
        name=name,
        mechanism="discrete-gaussian" if discrete else "gaussian",
        sensitivity=float(sensitivity),
        rho=gaussian_rho(sigma=sigma, sensitivity=sensitivity),
        sigma=float(sigma),
        queries=int(values.size),
    ))
    record_query(name=name, mechanism="gaussian", exact=values, sensitivity=sensitivity,
                 scale=sigma)
    drawn = sigma * noise_factor()
    if discrete:
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError("discrete Gaussian noise needs integer values (counts)")
        noise = sample_discrete_gaussian(values.size, sigma=drawn, source=discrete_source)
        return (values.astype(np.int64) + noise.reshape(values.shape)).astype(np.float64)
    return values.astype(np.float64) + rng.normal(0.0, drawn, size=values.shape)


def exponential_mechanism(
    scores: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
    log_base: np.ndarray | None = None,
    queries: int | None = None,
) -> int:
    """Pick index i with probability ∝ base_i · exp(ε · score_i / (2 Δ)).

    Implemented as argmax of ``ε·score/(2Δ) + log base + Gumbel noise``, which samples exactly
    that distribution in one vectorized draw. ``log_base`` is a data-independent base measure
    (e.g. interval lengths for a continuous range; ``-inf`` excludes a candidate). Charged
    ε²/8 zCDP. ``queries`` is what the ledger records (default: the number of candidates);
    pass a data-independent number when the candidates come from the data (DP quantiles
    have one candidate per gap between private values, so their count is n + 1).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("exponential mechanism needs a non-empty 1-D array of scores")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    ledger.spend(LedgerEntry(
        name=name,
        mechanism="exponential",
        sensitivity=float(sensitivity),
        rho=exponential_rho(epsilon=epsilon),
        epsilon=float(epsilon),
        queries=int(scores.size if queries is None else queries),
    ))
    record_query(name=name, mechanism="exponential", exact=scores, sensitivity=sensitivity,
                 scale=2 * sensitivity / epsilon)
    logits = epsilon / (2 * sensitivity) * scores
    if log_base is not None:
        logits = logits + np.asarray(log_base, dtype=np.float64)
    return int(np.argmax(logits + noise_factor() * rng.gumbel(size=scores.size)))


# --- exact discrete Gaussian (Canonne, Kamath, Steinke 2020, Algorithms 1-3) ---------------
# Integer and rational arithmetic only, so the output distribution is exact. The uniform
# integers come from the OS CSPRNG (random.SystemRandom): a Mersenne Twister seeded with 63
# bits of a numpy Generator would make "exact" noise predictable from 63 bits of state.


def _bernoulli(p: Fraction, source: random.Random) -> bool:
    return source.randrange(p.denominator) < p.numerator


def _bernoulli_exp_neg(gamma: Fraction, source: random.Random) -> bool:
    """Bernoulli(exp(−γ)) for rational γ ≥ 0, without floating point."""
    while gamma > 1:
        if not _bernoulli_exp_neg(Fraction(1), source):
            return False
        gamma -= 1
    k = 1
    while _bernoulli(gamma / k, source):
        k += 1
    return k % 2 == 1


def _discrete_laplace(scale: int, source: random.Random) -> int:
    """Discrete Laplace with parameter t (P(x) ∝ exp(−|x|/t))."""
    while True:
        u = source.randrange(scale)
        if not _bernoulli_exp_neg(Fraction(u, scale), source):
            continue
        v = 0
        while _bernoulli_exp_neg(Fraction(1), source):
            v += 1
        magnitude = u + scale * v
        negative = source.randrange(2) == 1
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def _discrete_gaussian_one(sigma2: Fraction, source: random.Random) -> int:
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = _discrete_laplace(t, source)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if _bernoulli_exp_neg(gamma, source):
            return y


def sample_discrete_gaussian(
    size: int, *, sigma: float, source: random.Random | None = None
) -> np.ndarray:
    """Draw ``size`` exact samples of the discrete Gaussian N_Z(0, σ²).

    σ² is taken as the exact rational value of the float ``sigma**2``. ``source`` supplies
    the uniform integers: ``random.SystemRandom()`` (the OS CSPRNG) by default; tests may pass
    a seeded ``random.Random`` to reproduce draws.
    """
    source = random.SystemRandom() if source is None else source
    sigma2 = Fraction(sigma) ** 2
    return np.fromiter((_discrete_gaussian_one(sigma2, source) for _ in range(size)),
                       dtype=np.int64, count=size)


# --- exact discrete Laplace from a numpy Generator -----------------------------------------
# The same exact sampler (CKS Algorithm 2), fed with the bits of the Generator the caller
# passes: every bit is drawn from that Generator (its whole state, OS-seeded in production),
# never from a Mersenne Twister reseeded from it, and a seeded Generator reproduces the draws.


class _GeneratorBits(random.Random):
    """``random.Random`` whose bits all come from ``rng`` (64-bit words, drawn in blocks).

    Overriding :meth:`getrandbits` makes ``randrange`` use it alone (``_randbelow`` by
    rejection on whole bits), so the uniform integers are exact; the inherited Mersenne
    Twister state is never read.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._words: list[int] = []
        super().__init__(0)

    def getrandbits(self, k: int) -> int:
        bits, have = 0, 0
        while have < k:
            if not self._words:
                self._words = self._rng.integers(0, 2**64, size=256,
                                                 dtype=np.uint64).tolist()
            bits, have = (bits << 64) | self._words.pop(), have + 64
        return bits >> (have - k)

    def random(self) -> float:
        return self.getrandbits(53) * 2.0**-53


def sample_discrete_laplace(size: int, *, scale: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``size`` exact samples of the discrete Laplace, P(k) ∝ exp(−|k| / ``scale``).

    Integer arithmetic only (Canonne, Kamath and Steinke 2020, Algorithm 2 with an integer
    scale), with the uniform integers taken from ``rng``. ``scale`` must be a positive integer
    below 2^56 (so the draws fit in int64 but for a tail of probability < e^−128).
    """
    if not isinstance(scale, int) or not 0 < scale < 2**56:
        raise ValueError(f"scale must be an integer in [1, 2^56), got {scale!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng: expected a numpy.random.Generator")
    source = _GeneratorBits(rng)
    return np.fromiter((_discrete_laplace(scale, source) for _ in range(size)),
                       dtype=np.int64, count=size)
