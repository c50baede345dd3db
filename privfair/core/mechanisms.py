"""The mechanism layer: every privacy noise draw of the library is made here.

Each mechanism, in one call, charges the run's :class:`PrivacyLedger` (sensitivity and scale
in the :class:`LedgerEntry`) before anything is drawn, hands the query to
:func:`record_query` (tests and audits), then draws noise at :func:`noise_factor` × the
declared scale from the passed Generator. :data:`MECHANISMS` lists them by the ``mechanism``
name each records; ``tests/test_mechanism_layer.py`` fails on a noise draw or a ledger
charge anywhere else in the library.

* :func:`gaussian_mechanism` adds N(0, σ²) to a whole vector at once, or, with
  ``discrete=True``, exact discrete Gaussian noise (Canonne, Kamath and Steinke 2020), which
  has no floating-point side channel and is the option for production releases. Its
  integers come from the operating system's CSPRNG (``random.SystemRandom``) unless a test
  passes a seeded ``random.Random`` as ``discrete_source``.
* :func:`exponential_mechanism` selects one candidate with the Gumbel-max trick;
  :func:`exponential_first_admissible` is the same draw over the candidates a predicate
  admits (AIM's selection).
* :func:`laplace_mechanism`: Laplace noise, pure ε-DP (LapMech, PrivPC*, a row count).
* :func:`grid_laplace_mechanism`: exact discrete Laplace noise on a grid of floats
  (:func:`laplace_grid`), so that the release has no floating-point side channel (the
  functional mechanism).
* :func:`sparse_laplace_histogram`: Laplace counts over a huge declared universe, thresholded,
  with the values outside the active domain drawn as noise would lift them (CatHist).
* :func:`row_laplace_mechanism`: per-row noise of density ∝ exp(−‖η_i‖₂ / b), pure ε-DP over
  the sum of the rows' L2 changes (DPNE's objective perturbation).
* :func:`subsampled_gaussian`: DP-SGD's noise, charged once for all its Poisson-subsampled
  steps; the returned :class:`SubsampledGaussian` adds the noise of each step (torch).

:func:`sample_discrete_gaussian`, :func:`sample_discrete_laplace` and
:func:`sample_row_laplace` are the samplers; only the mechanisms here call them.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privfair.core.accounting import (
    LedgerEntry,
    PrivacyLedger,
    exponential_rho,
    gaussian_rho,
    joint_noise_multiplier,
    laplace_rho,
    subsampled_gaussian_rdp,
)

#: The layer's mechanisms, by the ``mechanism`` name each hands to :func:`record_query`
#: (the audit counts its coverage against this list).
MECHANISMS: tuple[str, ...] = (
    "gaussian",             # gaussian_mechanism (float and exact discrete)
    "exponential",          # exponential_mechanism, exponential_first_admissible
    "laplace",              # laplace_mechanism
    "grid-laplace",         # grid_laplace_mechanism
    "sparse-laplace",       # sparse_laplace_histogram
    "row-laplace",          # row_laplace_mechanism
    "subsampled-gaussian",  # subsampled_gaussian: SubsampledGaussian's draws
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
_MISDECLARED: contextvars.ContextVar[tuple[tuple[str, float], ...]] = contextvars.ContextVar(
    "privfair_misdeclared", default=())


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
def misdeclared(site: str, factor: float) -> Iterator[None]:
    """Audits only: every layer call whose ledger name starts with ``site`` behaves as if its
    caller had declared ``factor`` × the true sensitivity (a subsampled Gaussian: ``factor`` ×
    the true sampling rate) and calibrated its noise to that declaration.

    Unlike :func:`scaled_noise`, the layer records the misdeclared sensitivity with the noise
    it draws (a Gaussian records σ × ``factor`` and sensitivity × ``factor``, so the same ρ;
    an exponential mechanism the same ε over sensitivity × ``factor``; a subsampled Gaussian
    the curve of rate × ``factor``): draws match their declaration, so only an audit of the
    real claim against the real output can catch it. Nested calls compose.
    """
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
    if not site:
        raise ValueError("site: expected the start of a ledger name, got ''")
    token = _MISDECLARED.set((*_MISDECLARED.get(), (site, float(factor))))
    try:
        yield
    finally:
        _MISDECLARED.reset(token)


def declaration_factor(name: str) -> float:
    """The factor :func:`misdeclared` set for the layer call named ``name`` (1 outside)."""
    factor = 1.0
    for site, f in _MISDECLARED.get():
        if name.startswith(site):
            factor *= f
    return factor


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
    declared = declaration_factor(name)  # 1 outside an audit's misdeclared()
    sigma, sensitivity = sigma * declared, sensitivity * declared
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
    gauss: npt.NDArray[np.float64] = rng.normal(0.0, drawn, size=values.shape)
    return values.astype(np.float64) + gauss


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
    sensitivity = sensitivity * declaration_factor(name)  # 1 outside an audit's misdeclared()
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


def exponential_first_admissible(
    scores: np.ndarray, admissible: Callable[[int], bool], *, epsilon: float,
    sensitivity: float, rng: np.random.Generator, ledger: PrivacyLedger, name: str,
) -> tuple[int, int]:
    """The exponential mechanism over the admissible candidates, testing as few as possible.

    With Gumbel noise ``g``, ``argmax_i ε·score_i/(2Δ) + g_i`` over a set samples
    ``∝ exp(ε·score/(2Δ))`` on that set; walking the noisy scores in decreasing order and
    taking the first admissible candidate is that argmax over the admissible set. So the
    output has exactly the distribution of the mechanism run on the admissible candidates,
    but ``admissible`` (a junction-tree build in AIM) runs only until the first success.
    ``admissible`` must not read private data. Charged once, ε²/8 zCDP, before the draw.

    Returns
    -------
    (int, int)
        The index picked and how many candidates were examined.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("exponential mechanism needs a non-empty 1-D array of scores")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    sensitivity = sensitivity * declaration_factor(name)  # 1 outside an audit's misdeclared()
    ledger.spend(LedgerEntry(name=name, mechanism="exponential",
                             sensitivity=float(sensitivity), rho=exponential_rho(epsilon=epsilon),
                             epsilon=float(epsilon), queries=int(scores.size)))
    record_query(name=name, mechanism="exponential", exact=scores, sensitivity=sensitivity,
                 scale=2 * sensitivity / epsilon)
    noisy = (epsilon / (2 * sensitivity) * scores
             + noise_factor() * rng.gumbel(size=scores.size))
    for examined, i in enumerate(np.argsort(-noisy, kind="stable"), start=1):
        if admissible(int(i)):
            return int(i), examined
    raise ValueError("no admissible candidate")


def _check_epsilon(epsilon: float, sensitivity: float) -> None:
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity)
            and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")


def _laplace_entry(name: str, *, epsilon: float, sensitivity: float,
                   queries: int) -> LedgerEntry:
    return LedgerEntry(name=name, mechanism="laplace", sensitivity=float(sensitivity),
                       rho=laplace_rho(epsilon=epsilon), epsilon=float(epsilon),
                       queries=int(queries))


def laplace_mechanism(
    values: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
    queries: int | None = None,
) -> np.ndarray:
    """Release ``values + Laplace(0, b)`` in every entry, ``b = sensitivity / epsilon``.

    Parameters
    ----------
    values : ndarray
        The exact answers; any shape.
    epsilon : float
        Pure ε of the release, charged as ρ = ε²/2 (a ``"laplace"`` entry) before any draw.
    sensitivity : float
        L1 sensitivity of the whole ``values`` vector under add/remove-one-row neighbours.
    rng : numpy.random.Generator
        Source of the noise.
    ledger : PrivacyLedger
        The run's ledger.
    name : str
        What is being measured, for the ledger.
    queries : int, optional
        What the ledger records (default ``values.size``); pass a public number when the
        answers' count is not.

    Returns
    -------
    ndarray of float64, same shape as ``values``.
    """
    _check_epsilon(epsilon, sensitivity)
    values = np.asarray(values, dtype=np.float64)
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=sensitivity,
                                queries=values.size if queries is None else queries))
    scale = sensitivity / epsilon
    record_query(name=name, mechanism="laplace", exact=values, sensitivity=sensitivity,
                 scale=scale)
    return values + rng.laplace(0.0, scale * noise_factor(), size=values.shape)


# --- discrete Laplace on a grid of floats ------------------------------------------------
#: The grid's granularity is at most 2^-GRID_BITS of the noise scale and of Δ/m.
GRID_BITS = 22


@dataclass(frozen=True)
class LaplaceGrid:
    """Discrete Laplace noise on the multiples of ``granularity`` (Mironov 2012's fix).

    ``steps`` is t, the scale of the integer noise L; ``sensitivity`` is Δ' = Δ + m g, the L1
    bound of the rounded vector, exact. See :func:`laplace_grid`.
    """

    granularity: float
    steps: int
    sensitivity: Fraction

    @property
    def scale(self) -> float:
        """Scale of the noise ``g · L`` (the Laplace scale it stands for)."""
        return float(self.steps * Fraction(self.granularity))


def laplace_grid(*, sensitivity: float, epsilon: float, coordinates: int) -> LaplaceGrid:
    """The grid and integer scale for ``coordinates`` values of L1 sensitivity ``sensitivity``
    released with ``epsilon`` (pure ε-DP).

    For ``m`` values of L1 sensitivity ``Δ`` at ``ε``, the granularity is a power of two
    ``g ≤ 2^−22 min(Δ/m, Δ/ε)`` (its multiples are exact floats); rounding to the grid moves
    each value by at most ``g/2``, so rounded neighbours differ by at most ``Δ' = Δ + m g``,
    and ``t = ⌈Δ'/(ε g)⌉`` makes the privacy loss ``Δ'/(g t) ≤ ε`` exactly.
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if coordinates < 1:
        raise ValueError(f"coordinates must be >= 1, got {coordinates!r}")
    bound = min(sensitivity / coordinates, sensitivity / epsilon)
    granularity = math.ldexp(1.0, math.frexp(bound)[1] - 1 - GRID_BITS)  # 2^⌊log2 bound⌋ / 2^22
    if not granularity >= 2.0**-1000:
        raise ValueError("sensitivity/epsilon: the grid would leave the normal floats")
    rounded = Fraction(sensitivity) + coordinates * Fraction(granularity)
    steps = math.ceil(rounded / (Fraction(epsilon) * Fraction(granularity)))
    return LaplaceGrid(granularity, steps, rounded)


def grid_laplace_mechanism(
    values: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
) -> np.ndarray:
    """Release ``values`` rounded to the grid of :func:`laplace_grid`, plus ``g · L``.

    ``L`` are exact discrete Laplace integers, ``P(L = k) ∝ exp(−|k|/t)``, whose bits all come
    from ``rng`` (:func:`sample_discrete_laplace`), so no bit of the output depends on the
    data except through the grid point. Charged ε as a pure ε-DP ``"laplace"`` entry whose
    sensitivity is the rounded vector's ``Δ'``; the noise scale ``t g`` is ``Δ/ε`` to within
    a factor ``1 + 2^−21``.

    Parameters
    ----------
    values : ndarray
        The exact answers, finite; any shape (the grid is sized for ``values.size``).
    epsilon : float
        Pure ε of the release.
    sensitivity : float
        L1 sensitivity Δ of the whole ``values`` vector, before rounding.
    rng, ledger, name
        As for :func:`laplace_mechanism`.

    Returns
    -------
    ndarray of float64, same shape as ``values``: multiples of the grid's granularity.
    """
    _check_epsilon(epsilon, sensitivity)
    values = np.asarray(values, dtype=np.float64)
    grid = laplace_grid(sensitivity=sensitivity, epsilon=epsilon, coordinates=values.size)
    steps = np.rint(values / grid.granularity)
    if not np.all(np.isfinite(steps)):
        raise ValueError("values: expected finite numbers")
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=float(grid.sensitivity),
                                queries=values.size))
    record_query(name=name, mechanism="grid-laplace", exact=values,
                 sensitivity=float(grid.sensitivity), scale=grid.scale)
    drawn = grid.steps if noise_factor() == 1.0 else max(1, round(grid.steps * noise_factor()))
    noise = sample_discrete_laplace(values.size, scale=drawn, rng=rng)
    # Python integers: exact whatever their size; float() of an integer past 2^53 rounds to a
    # multiple of a larger power of two, still a multiple of g.
    noisy = np.array([float(int(k) + int(n)) for k, n in zip(steps.ravel(), noise, strict=True)])
    return (noisy * grid.granularity).reshape(values.shape)


# --- CatHist's thresholded histogram over a declared universe ------------------------------


@dataclass(frozen=True, eq=False)
class SparseHistogram:
    """What :func:`sparse_laplace_histogram` releases.

    Attributes
    ----------
    kept : ndarray of bool
        Which of the passed active counts were released (noisy count ≥ threshold).
    counts : ndarray of float64
        Their noisy counts.
    outside : tuple
        Values drawn from outside the active domain (from ``sample_outside``).
    outside_counts : ndarray of float64
        Their counts: threshold + Exponential(b), Laplace noise conditioned on exceeding it.
    threshold : float
        τ = −ln(2p)/ε.
    """

    kept: np.ndarray
    counts: np.ndarray
    outside: tuple[Any, ...]
    outside_counts: np.ndarray
    threshold: float


def sparse_laplace_histogram(
    counts: np.ndarray,
    *,
    universe_size: int,
    outside_probability: float,
    epsilon: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
    sample_outside: Callable[[int], Sequence[Any]],
) -> SparseHistogram:
    """Laplace(1/ε) counts of all ``universe_size`` bins, released above a threshold, drawing
    only the active ones (Rodriguez and Howe 2018, Algorithm 1: CatHist).

    The active counts (L1 sensitivity 1) get Laplace(b = 1/ε) noise and are kept when at
    least ``τ = −ln(2p)/ε``; then ``k ~ Binomial(n, p)`` and ``sample_outside(k)`` (the
    caller's uniform draw of k universe values, minus the active ones) stand for the empty
    bins whose noise would have passed τ, each with count ``τ + Exponential(b)``. The whole
    release is ε-DP, charged as one ``"laplace"`` entry of ``universe_size`` queries (the
    active-domain size is private, so it is not logged).

    Parameters
    ----------
    counts : ndarray
        The active counts (private), finite and non-negative.
    universe_size : int
        n, the declared universe's size (public).
    outside_probability : float
        p = ½e^{−ετ}, the chance that one empty bin is released, in (0, 1/2]; passed by the
        caller, who computes it without cancellation for huge n.
    epsilon : float
        Pure ε of the release.
    rng, ledger, name
        As for :func:`laplace_mechanism`.
    sample_outside : callable
        ``sample_outside(k)``: k distinct values drawn uniformly from the declared universe,
        minus the active ones (public randomness, from ``rng``).
    """
    _check_epsilon(epsilon, 1.0)
    if not 0 < outside_probability <= 0.5:
        raise ValueError(f"outside_probability must be in (0, 1/2], got {outside_probability!r}")
    if isinstance(universe_size, bool) or not isinstance(universe_size, int | np.integer) \
            or universe_size < 1:
        raise ValueError(f"universe_size must be an integer >= 1, got {universe_size!r}")
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or (counts.size and (not np.all(np.isfinite(counts))
                                             or np.any(counts < 0))):
        raise ValueError("counts: expected a 1-D array of finite, non-negative counts")
    threshold = -math.log(2.0 * outside_probability) / epsilon
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=1.0,
                                queries=int(universe_size)))
    scale = 1.0 / epsilon
    record_query(name=name, mechanism="sparse-laplace", exact=counts, sensitivity=1.0,
                 scale=scale)
    factor = noise_factor()
    noisy = counts + rng.laplace(0.0, scale * factor, size=counts.size)
    kept = noisy >= threshold
    # Under scaled_noise an empty bin passes τ with the probability of the scaled noise.
    p = (outside_probability if factor == 1.0
         else 0.5 * math.exp(-threshold / (scale * factor)))
    # numpy's binomial takes int64 n, so n = 2.9e10 is fine.
    outside = tuple(sample_outside(int(rng.binomial(int(universe_size), p))))
    weights = threshold + rng.exponential(scale * factor, size=len(outside))
    return SparseHistogram(kept=kept, counts=noisy[kept], outside=outside,
                           outside_counts=weights, threshold=float(threshold))


# --- DPNE's objective perturbation: per-row L2 Laplace noise --------------------------------


def sample_row_laplace(rows: int, dim: int, *, scale: float,
                       rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """``rows`` vectors in R^dim of density ∝ exp(−‖η‖₂ / scale): Gamma(dim, scale) norms,
    uniform directions."""
    norms = rng.gamma(shape=dim, scale=scale, size=rows)
    directions = rng.normal(size=(rows, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * norms[:, None]


def row_laplace_mechanism(
    values: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
) -> np.ndarray:
    """Release ``values + η`` (``values`` n × k), each row η_i of density ∝ exp(−‖η_i‖₂ / b),
    ``b = sensitivity / epsilon``.

    ``sensitivity`` bounds ``Σ_i ‖v_i − v'_i‖₂`` between neighbours (the L2 norm per row,
    summed over rows), so the density ratio is at most e^ε: pure ε-DP, charged as a
    ``"laplace"`` entry of n·k queries before any draw (DPNE's objective perturbation).
    """
    _check_epsilon(epsilon, sensitivity)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.size == 0:
        raise ValueError("values: expected a non-empty 2-D array (one row per vector)")
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=sensitivity,
                                queries=values.size))
    scale = sensitivity / epsilon
    record_query(name=name, mechanism="row-laplace", exact=values, sensitivity=sensitivity,
                 scale=scale)
    rows, dim = values.shape
    return values + sample_row_laplace(rows, dim, scale=scale * noise_factor(), rng=rng)


# --- DP-SGD: Poisson-subsampled Gaussian steps (torch) ---------------------------------------


def subsampled_gaussian_entry(*, name: str, noise_multiplier: float, sample_rate: float,
                              steps: int, sensitivity: float,
                              count_noise_multiplier: float | None = None,
                              queries: int | None = None) -> LedgerEntry:
    """The entry :func:`subsampled_gaussian` records (for planning a run's cost on a copy).

    The gradient sum has noise ``σ C`` and L2 sensitivity ``C``; with
    ``count_noise_multiplier`` σ1, counts of the same Poisson batch (sensitivity 1, noise σ1)
    are released with it: one subsampled Gaussian at ``σ_eff = (σ⁻² + σ1⁻²)^(−1/2)``,
    recorded with sensitivity ``C √(1 + (σ/σ1)²)`` and noise ``σ C``.
    """
    if not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity)
            and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    if count_noise_multiplier is None:
        sigma, sens = float(noise_multiplier), float(sensitivity)
    else:
        sigma = joint_noise_multiplier(noise_multiplier, count_noise_multiplier)
        sens = sensitivity * math.sqrt(1 + (noise_multiplier / count_noise_multiplier) ** 2)
    # 1 outside an audit's misdeclared(): the rate the claim states, not the sampler's.
    sample_rate = min(1.0, sample_rate * declaration_factor(name))
    curve = subsampled_gaussian_rdp(noise_multiplier=sigma, sample_rate=sample_rate,
                                    steps=steps)
    return LedgerEntry(
        name=name, mechanism="subsampled-gaussian", sensitivity=float(sens),
        rho=steps / (2 * sigma**2), sigma=float(sigma * sens),
        queries=int(steps if queries is None else queries),
        sample_rate=float(sample_rate), steps=int(steps), rdp=tuple(curve.tolist()))


@dataclass(frozen=True)
class SubsampledGaussian:
    """DP-SGD's noise, already charged (:func:`subsampled_gaussian`): each method adds one
    step's noise to a torch tensor, from the passed ``torch.Generator``.

    Attributes
    ----------
    name : str
        The ledger entry's name (each draw is recorded under it).
    noise_multiplier : float
        σ: the gradient noise's standard deviation over the step's clipping bound.
    sensitivity : float
        The largest clipping bound C a step may use.
    count_noise_multiplier : float or None
        σ1 of the counts answered on the same batch (DPSGD-F, the naive reweighting).
    entry : LedgerEntry
        What was charged.
    """

    name: str
    noise_multiplier: float
    sensitivity: float
    count_noise_multiplier: float | None
    entry: LedgerEntry

    def add_gradient_noise(self, summed: Any, *, generator: Any,
                           sensitivity: float | None = None) -> Any:
        """``summed + N(0, (σ C)² I)``: the clipped gradient sum of one step, noised.

        ``sensitivity`` is the clipping bound C the step used (default: the declared
        largest); a bound above the declared one is refused.
        """
        bound = self.sensitivity if sensitivity is None else float(sensitivity)
        # 1e-6: a bound clamped to the declared one in float32 may exceed it by 2^-24.
        if not (math.isfinite(bound) and 0 < bound <= self.sensitivity * (1 + 1e-6)):
            raise ValueError(f"sensitivity: the step's clipping bound {bound!r} is not in "
                             f"(0, {self.sensitivity!r}], the bound that was charged")
        return self._add(summed, generator=generator, what=self.name,
                         sensitivity=bound, scale=self.noise_multiplier * bound)

    def add_count_noise(self, counts: Any, *, generator: Any) -> Any:
        """``counts + N(0, σ1² I)``: counts of the step's batch (a row is in one count: L2
        sensitivity 1)."""
        if self.count_noise_multiplier is None:
            raise ValueError(f"{self.name}: no count noise was charged with the gradients")
        return self._add(counts, generator=generator, what=f"{self.name}: counts",
                         sensitivity=1.0, scale=self.count_noise_multiplier)

    def _add(self, exact: Any, *, generator: Any, what: str, sensitivity: float,
             scale: float) -> Any:
        # torch imported here: core/ must import without torch (only DP-SGD needs it).
        import torch

        if not isinstance(generator, torch.Generator):
            raise TypeError("generator: expected a torch.Generator")
        if _RECORDER.get() is not None:
            record_query(name=what, mechanism="subsampled-gaussian",
                         exact=exact.detach().cpu().double().numpy(),
                         sensitivity=sensitivity, scale=scale)
        noise = torch.normal(0.0, scale * noise_factor(), size=tuple(exact.shape),
                             generator=generator, dtype=exact.dtype, device=exact.device)
        return exact + noise


def subsampled_gaussian(
    *,
    ledger: PrivacyLedger,
    name: str,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    sensitivity: float,
    count_noise_multiplier: float | None = None,
    queries: int | None = None,
) -> SubsampledGaussian:
    """Charge ``steps`` Poisson-subsampled Gaussian steps once, and return their noise.

    Parameters
    ----------
    ledger : PrivacyLedger
        Charged :func:`subsampled_gaussian_entry` (its Rényi curve) before any draw.
    name : str
        What the steps release.
    noise_multiplier : float
        σ: gradient noise std over the clipping bound.
    sample_rate : float
        Poisson sampling rate q.
    steps : int
        Number of steps the returned object may noise.
    sensitivity : float
        The largest clipping bound C of a step's gradient sum (L2).
    count_noise_multiplier : float, optional
        σ1 of counts of the same batch released with the gradients (accounted jointly).
    queries : int, optional
        What the ledger records (default ``steps``).
    """
    entry = subsampled_gaussian_entry(
        name=name, noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps,
        sensitivity=sensitivity, count_noise_multiplier=count_noise_multiplier,
        queries=queries)
    ledger.spend(entry)
    return SubsampledGaussian(name=name, noise_multiplier=float(noise_multiplier),
                              sensitivity=float(sensitivity),
                              count_noise_multiplier=(None if count_noise_multiplier is None
                                                      else float(count_noise_multiplier)),
                              entry=entry)


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
) -> npt.NDArray[np.int64]:
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
