"""The mechanism layer: every privacy noise draw of the library is made here.

Each mechanism, in one call, charges the run's :class:`PrivacyLedger` (sensitivity and scale
in the :class:`LedgerEntry`) before anything is drawn, hands the query to
:func:`record_query` (tests and audits), then draws noise at :func:`noise_factor` × the
declared scale from the passed Generator. :data:`MECHANISMS` lists them by the ``mechanism``
name each records; ``tests/test_mechanism_layer.py`` fails on a noise draw or a ledger
charge anywhere else in the library.

Every noisy value a release publishes is exact (issue 41.2: no floating-point side channel,
Mironov 2012): integer answers get exact discrete noise, real answers are rounded to a grid
and get the grid step times exact integer noise; which one is decided by the answers' dtype,
never by their values. The exact samplers work in integer arithmetic (Canonne, Kamath and
Steinke 2020) with uniform integers drawn from the passed Generator's own words.

* :func:`gaussian_mechanism`: exact discrete Gaussian noise N_Z(0, σ²) on integer answers,
  or on the grid of :func:`gaussian_grid` for real ones (same ρ, exactly). ``discrete=False``
  (floating-point Gaussian) is kept for benchmarks only; no release uses it.
* :func:`exponential_mechanism` selects one candidate with the Gumbel-max trick;
  :func:`exponential_first_admissible` is the same draw over the candidates a predicate
  admits (AIM's selection). They publish an index, never a noisy number.
* :func:`laplace_mechanism`: pure ε-DP Laplace noise, exact: discrete Laplace of the rational
  scale Δ/ε on integer answers (LapMech, a row count), the grid otherwise.
* :func:`grid_laplace_mechanism`: exact discrete Laplace noise on a grid of floats
  (:func:`laplace_grid`), so that the release has no floating-point side channel (the
  functional mechanism, PrivPC*'s moments).
* :func:`sparse_laplace_histogram`: exact discrete Laplace counts over a huge declared
  universe, thresholded, with the values outside the active domain drawn as noise would lift
  them (CatHist).
* :func:`row_laplace_mechanism`: per-row noise of density ∝ exp(−‖η_i‖₂ / b), pure ε-DP over
  the sum of the rows' L2 changes (DPNE's objective perturbation; continuous, and the noisy
  objective is never published, only the optimiser's embedding).
* :func:`subsampled_gaussian`: DP-SGD's noise, charged once for all its Poisson-subsampled
  steps; the returned :class:`SubsampledGaussian` adds the noise of each step (torch,
  floating-point: no per-step noisy value is published, only the trained weights).

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


#: A grid's granularity is at most 2^-GRID_BITS of the noise scale and of the sensitivity per
#: coordinate (Δ/m for Laplace, Δ/⌈√m⌉ for Gaussian noise).
GRID_BITS = 22


@dataclass(frozen=True)
class GaussianGrid:
    """Exact discrete Gaussian noise on the multiples of ``granularity`` for real answers.

    ``sensitivity`` is Δ' = Δ + g⌈√m⌉, the L2 bound of the rounded vector, and ``sigma_steps``
    the exact rational σ' / g with σ' = σ Δ'/Δ, so the rounded release's ρ = Δ'²/(2σ'²) is
    Δ²/(2σ²) exactly. See :func:`gaussian_grid`.
    """

    granularity: float
    sigma_steps: Fraction
    sensitivity: Fraction

    @property
    def sigma(self) -> float:
        """Standard deviation of the noise ``g · Z`` (σ' = σ Δ'/Δ)."""
        return float(self.sigma_steps * Fraction(self.granularity))


def gaussian_grid(*, sensitivity: float, sigma: float, coordinates: int) -> GaussianGrid:
    """The grid and integer-noise scale for ``coordinates`` real answers of L2 sensitivity
    ``sensitivity`` released with Gaussian noise ``sigma``.

    The granularity is a power of two ``g ≤ 2^−22 min(Δ/⌈√m⌉, σ)`` (its multiples are exact
    floats). Rounding each answer to the nearest multiple moves it by at most g/2, so rounded
    neighbours differ by at most ``Δ' = Δ + g⌈√m⌉`` in L2. The discrete Gaussian
    N_Z(0, (σ'/g)²) added to the integers ``x/g`` is ρ = (Δ'/g)²/(2(σ'/g)²)-zCDP
    (Canonne, Kamath and Steinke 2020, Theorem 14), and σ' = σΔ'/Δ (exact rationals) makes
    that ρ = Δ²/(2σ²): the declared cost, at a noise larger by a factor ≤ 1 + 2^−22.
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    if coordinates < 1:
        raise ValueError(f"coordinates must be >= 1, got {coordinates!r}")
    root = math.isqrt(coordinates - 1) + 1  # ⌈√m⌉
    bound = min(sensitivity / root, sigma)
    granularity = math.ldexp(1.0, math.frexp(bound)[1] - 1 - GRID_BITS)
    if not granularity >= 2.0**-1000:
        raise ValueError("sensitivity/sigma: the grid would leave the normal floats")
    g = Fraction(granularity)
    rounded = Fraction(sensitivity) + root * g
    return GaussianGrid(granularity, Fraction(sigma) * rounded / (Fraction(sensitivity) * g),
                        rounded)


def _on_grid(steps: np.ndarray, noise: Sequence[int] | np.ndarray, granularity: float,
             shape: tuple[int, ...]) -> np.ndarray:
    # Python integers: exact whatever their size; float() of an integer past 2^53 rounds to a
    # multiple of a larger power of two, still a multiple of g.
    noisy = np.array([float(int(k) + int(n)) for k, n in zip(steps.ravel(), noise, strict=True)])
    return (noisy * granularity).reshape(shape)


def _grid_steps(values: np.ndarray, granularity: float) -> np.ndarray:
    steps = np.rint(np.asarray(values, dtype=np.float64) / granularity)
    if not np.all(np.isfinite(steps)):
        raise ValueError("values: expected finite numbers")
    return steps


def gaussian_mechanism(
    values: np.ndarray,
    *,
    sigma: float,
    sensitivity: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    name: str,
    discrete: bool = True,
    discrete_source: random.Random | None = None,
) -> np.ndarray:
    """Release ``values + noise`` with noise of scale ``sigma`` in every entry.

    By default the noise is exact (no floating-point side channel, Mironov 2012): integer
    answers (an integer dtype: counts) get exact discrete Gaussian noise N_Z(0, σ²)
    (Canonne, Kamath and Steinke 2020); real answers (a float dtype) are rounded to the grid
    of :func:`gaussian_grid` and get ``g`` × exact discrete Gaussian noise at the same ρ.
    Which of the two is decided by the dtype, never by the values.

    Parameters
    ----------
    values : ndarray
        The exact answers; any shape.
    sigma : float
        Noise scale.
    sensitivity : float
        L2 sensitivity of the whole ``values`` vector under add/remove-one-row neighbours.
    rng : numpy.random.Generator
        Source of randomness (every bit of the exact samplers' uniform integers).
    ledger : PrivacyLedger
        Charged ``sensitivity² / (2 σ²)`` before any noise is drawn.
    name : str
        What is being measured, for the ledger.
    discrete : bool
        Exact noise (the default). ``False``: floating-point Gaussian noise, kept only for
        the benchmarks that compare the two; no release uses it.
    discrete_source : random.Random, optional
        Tests and audits only: a seeded source for the exact noise instead of ``rng``.

    Returns
    -------
    ndarray of float64, same shape as ``values``: integers, or multiples of the grid's ``g``.
    """
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    values = np.asarray(values)
    declared = declaration_factor(name)  # 1 outside an audit's misdeclared()
    sigma, sensitivity = sigma * declared, sensitivity * declared
    rho = gaussian_rho(sigma=sigma, sensitivity=sensitivity)
    integers = np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_
    grid = (gaussian_grid(sensitivity=sensitivity, sigma=sigma, coordinates=max(values.size, 1))
            if discrete and not integers else None)
    steps = _grid_steps(values, grid.granularity) if grid is not None else None
    declared_sens, declared_sigma = ((float(grid.sensitivity), grid.sigma) if grid is not None
                                     else (float(sensitivity), float(sigma)))
    ledger.spend(LedgerEntry(
        name=name,
        mechanism="discrete-gaussian" if discrete else "gaussian",
        sensitivity=declared_sens,
        rho=rho,
        sigma=declared_sigma,
        queries=int(values.size),
    ))
    record_query(name=name, mechanism="gaussian", exact=values, sensitivity=declared_sens,
                 scale=declared_sigma)
    factor = noise_factor()
    if not discrete:
        gauss: npt.NDArray[np.float64] = rng.normal(0.0, sigma * factor, size=values.shape)
        return values.astype(np.float64) + gauss
    if grid is None:
        noise = _discrete_gaussian_ints(values.size, sigma=Fraction(sigma) * Fraction(factor),
                                        rng=rng, source=discrete_source)
        return _on_grid(values.astype(np.int64), noise, 1.0, values.shape)
    assert steps is not None
    noise = _discrete_gaussian_ints(values.size, sigma=grid.sigma_steps * Fraction(factor),
                                    rng=rng, source=discrete_source)
    return _on_grid(steps, noise, grid.granularity, values.shape)


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
    """Release ``values`` plus exact Laplace noise of scale ``b = sensitivity / epsilon``.

    Integer answers (an integer dtype: counts) get exact discrete Laplace noise,
    P(k) ∝ exp(−|k|/b) with b the exact rational Δ/ε; real answers (a float dtype) go
    through :func:`grid_laplace_mechanism` (rounded to a grid, discrete Laplace steps).
    Which of the two is decided by the dtype, never by the values. No floating-point noise.

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
    ndarray of float64, same shape as ``values``: integers, or multiples of the grid's g.
    """
    _check_epsilon(epsilon, sensitivity)
    values = np.asarray(values)
    if not (np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_):
        if queries is not None and queries != values.size:
            raise ValueError("queries: real answers are released on a grid sized for "
                             "values.size; pass integer answers to record another count")
        return grid_laplace_mechanism(values, epsilon=epsilon, sensitivity=sensitivity,
                                      rng=rng, ledger=ledger, name=name)
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=sensitivity,
                                queries=values.size if queries is None else queries))
    scale = sensitivity / epsilon
    record_query(name=name, mechanism="laplace", exact=values, sensitivity=sensitivity,
                 scale=scale)
    # b = Δ/ε as an exact rational: neighbours' integer answers differ by at most Δ in L1,
    # so P(k)/P(k') ≤ exp(Δ/b) = exp(ε) exactly.
    exact_scale = Fraction(sensitivity) / Fraction(epsilon) * Fraction(noise_factor())
    noise = sample_discrete_laplace(values.size, scale=exact_scale, rng=rng)
    noisy: npt.NDArray[np.float64] = (values.astype(np.int64)
                                      + noise.reshape(values.shape)).astype(np.float64)
    return noisy


# --- discrete Laplace on a grid of floats ------------------------------------------------


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
    return _on_grid(steps, noise, grid.granularity, values.shape)


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
    only the active ones (Rodriguez and Howe 2018, Algorithm 1: CatHist), with exact noise.

    The active counts (integers, L1 sensitivity 1) get exact discrete Laplace noise
    (P(z) ∝ r^|z|, r = e^(−ε)) and are kept when at least ``τ = −ln(2p)/ε``, i.e. at least
    ``k = ⌈τ⌉``; then ``m ~ Binomial(n, r^k/(1 + r))`` (the exact chance that an empty bin's
    noise reaches k; ``p`` only sets τ) and ``sample_outside(m)`` (the caller's uniform draw
    of m universe values, minus the active ones) stand for the empty bins whose noise would
    have passed, each with count ``k + (Z | Z ≥ 0)``. The whole
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
                                             or np.any(counts < 0)
                                             or np.any(counts != np.rint(counts)))):
        raise ValueError("counts: expected a 1-D array of finite, non-negative integer counts")
    threshold = -math.log(2.0 * outside_probability) / epsilon
    ledger.spend(_laplace_entry(name, epsilon=epsilon, sensitivity=1.0,
                                queries=int(universe_size)))
    scale = 1.0 / epsilon
    record_query(name=name, mechanism="sparse-laplace", exact=counts, sensitivity=1.0,
                 scale=scale)
    # Exact discrete Laplace, P(z) ∝ r^|z| with r = e^(−1/b), b = 1/ε (times the audit's
    # factor) as an exact rational: each bin's count is ε-DP, thresholding is post-processing.
    exact_scale = Fraction(1) / Fraction(epsilon) * Fraction(noise_factor())
    noisy = counts.astype(np.int64) + sample_discrete_laplace(counts.size, scale=exact_scale,
                                                              rng=rng)
    # Integers pass τ exactly when they reach ⌈τ⌉ = k; an empty bin does with probability
    # P(Z ≥ k) = r^k / (1 + r) (k ≥ 0), which the outside draw must match (not ½e^(−ετ), the
    # continuous noise's). The binomial's inputs are public (n, ε, p): no data reaches it.
    first = max(0, math.ceil(threshold))
    kept = noisy >= first
    ratio = math.exp(-1.0 / float(exact_scale))
    p = ratio**first / (1.0 + ratio)
    # numpy's binomial takes int64 n, so n = 2.9e10 is fine.
    outside = tuple(sample_outside(int(rng.binomial(int(universe_size), p))))
    # An empty bin's count given that it passed: k + (Z | Z ≥ 0), Z | Z ≥ 0 geometric,
    # P(j) ∝ r^j; drawn exactly by keeping the non-negative draws of Z.
    above: list[int] = []
    while len(above) < len(outside):
        draws = sample_discrete_laplace(2 * (len(outside) - len(above)), scale=exact_scale,
                                        rng=rng)
        above.extend(int(z) for z in draws if z >= 0)
    weights = first + np.asarray(above[:len(outside)], dtype=np.int64)
    return SparseHistogram(kept=kept, counts=noisy[kept].astype(np.float64), outside=outside,
                           outside_counts=weights.astype(np.float64),
                           threshold=float(threshold))


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


# --- exact samplers (Canonne, Kamath, Steinke 2020, Algorithms 1-3) -------------------------
# Integer arithmetic only (every rational is kept as a numerator and a denominator), so the
# output distribution is exact. The uniform integers come from a random.Random whose bits all
# come from the numpy Generator the caller passed (_GeneratorBits): the Generator is seeded
# from the OS in production (release/seeds.py), every bit of it is used, and a Mersenne
# Twister reseeded from 63 bits of it is never involved, so a test seed reproduces the draws
# and a production run's draws are as unpredictable as its Generator.


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


def _bernoulli_exp_neg(num: int, den: int, source: random.Random) -> bool:
    """Bernoulli(exp(−num/den)) for integers num ≥ 0, den ≥ 1 (CKS Algorithm 1)."""
    while num > den:  # exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋))
        if not _bernoulli_exp_neg(1, 1, source):
            return False
        num -= den
    k = 1  # γ ≤ 1: draw Bernoulli(γ/k) for k = 1, 2, ... until one fails; odd k: success
    while source.randrange(den * k) < num:
        k += 1
    return k % 2 == 1


def _discrete_laplace(t: int, source: random.Random, s: int = 1) -> int:
    """Discrete Laplace with scale t/s, P(x) ∝ exp(−|x| s/t) (CKS Algorithm 2)."""
    while True:
        u = source.randrange(t)
        if not _bernoulli_exp_neg(u, t, source):
            continue
        v = 0
        while _bernoulli_exp_neg(1, 1, source):
            v += 1
        magnitude = (u + t * v) // s
        negative = source.randrange(2) == 1
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def _discrete_gaussian_one(num: int, den: int, source: random.Random) -> int:
    """One draw of N_Z(0, σ²), σ² = num/den (CKS Algorithm 3)."""
    t = math.isqrt(num // den) + 1
    while True:
        y = _discrete_laplace(t, source)
        # γ = (|y| − σ²/t)² / (2σ²) = (|y|·den·t − num)² / (2·num·den·t²)
        if _bernoulli_exp_neg((abs(y) * den * t - num) ** 2, 2 * num * den * t * t, source):
            return y


def _rational(value: float | Fraction, what: str) -> Fraction:
    exact = Fraction(value)
    if not (exact > 0 and math.isfinite(float(exact))):
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return exact


def sample_discrete_gaussian(
    size: int, *, sigma: float | Fraction, rng: np.random.Generator | None = None,
    source: random.Random | None = None,
) -> npt.NDArray[np.int64]:
    """Draw ``size`` exact samples of the discrete Gaussian N_Z(0, σ²).

    σ² is the exact square of the rational ``sigma`` (a float is the rational it holds).
    The uniform integers come from ``rng`` (every bit of it, :class:`_GeneratorBits`), or
    from ``source`` (tests and audits: a seeded ``random.Random``); one of them is needed.
    """
    draws = _discrete_gaussian_ints(size, sigma=sigma, rng=rng, source=source)
    if any(abs(z) >= 2**63 for z in draws):
        raise OverflowError("sigma: draws beyond int64 (use the mechanism, which keeps them "
                            "as Python integers)")
    return np.array(draws, dtype=np.int64).reshape(size)


def _discrete_gaussian_ints(size: int, *, sigma: float | Fraction,
                            rng: np.random.Generator | None,
                            source: random.Random | None) -> list[int]:
    """:func:`sample_discrete_gaussian` as Python integers (exact whatever their size)."""
    variance = _rational(sigma, "sigma") ** 2
    if source is None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng: expected a numpy.random.Generator")
        source = _GeneratorBits(rng)
    num, den = variance.numerator, variance.denominator
    return [_discrete_gaussian_one(num, den, source) for _ in range(size)]


def sample_discrete_laplace(size: int, *, scale: int | Fraction,
                            rng: np.random.Generator) -> np.ndarray:
    """Draw ``size`` exact samples of the discrete Laplace, P(k) ∝ exp(−|k| / ``scale``).

    Integer arithmetic only (Canonne, Kamath and Steinke 2020, Algorithm 2; a rational
    ``scale`` = t/s is exact), with the uniform integers taken from ``rng``. ``scale`` must
    be below 2^56 (so the draws fit in int64 but for a tail of probability < e^−128).
    """
    if isinstance(scale, bool) or not isinstance(scale, int | Fraction) \
            or not 0 < scale < 2**56:
        raise ValueError(f"scale must be an integer or a Fraction in (0, 2^56), got {scale!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng: expected a numpy.random.Generator")
    exact = Fraction(scale)
    source = _GeneratorBits(rng)
    return np.fromiter((_discrete_laplace(exact.numerator, source, exact.denominator)
                        for _ in range(size)), dtype=np.int64, count=size)
