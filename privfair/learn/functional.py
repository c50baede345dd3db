"""PFLR and PFLR*: DP and fair logistic regression by the functional mechanism (Xu 2021, ch. 8).

The logistic loss is replaced by its second-order Taylor expansion around 0 (Zhang et al.
2012), ``f(w) = λ1ᵀw + wᵀΛ2w`` with ``λ1 = Σ_i (1/2 − y_i) x_i`` and ``Λ2 = Σ_i x_i x_iᵀ / 8``.
Laplace noise on the coefficients (on a grid, below) makes the minimiser ε-DP; the
decision-boundary covariance (Zafar et al.) ``g(w) = Σ_i (s_i − c) x_iᵀw`` is the fairness term.

* ``privlr``: the functional mechanism alone (PrivLR in the dissertation's tables).
* ``pflr`` (Alg. 5): the fairness term's coefficients perturbed with the loss's, one release.
* ``pflr-star`` (Alg. 6): the fairness direction ``μ = Σ_i (s_i − c) x_i`` is released on its
  own with ``ε_g``, the loss's coefficients with ``ε_f = ε − ε_g``.

The fairness term (``fairness_term``). Eq. 8.1 penalises ``α |g_D(w) − τ|`` with ``g_D(w) =
μᵀw`` the decision-boundary covariance (Eq. 3.17, up to 1/n) and ``α = 1, τ = 0``:

* ``"absolute"`` (Eq. 8.1 as written; the default): minimise ``λ̄1ᵀw + wᵀΛ̄2w + α |μ̃ᵀw|``. It
  is an exact penalty: with ``w(ν) = −½ Λ̄2⁻¹ (λ̄1 + ν μ̃)`` and ``ν₀`` the multiplier that makes
  ``μ̃ᵀw(ν₀) = 0``, the minimiser is ``w(clip(ν₀, −α, α))`` (:func:`minimise`), so the fit
  reaches zero covariance whenever ``α ≥ |ν₀|`` and never goes past it. PFLR releases ``(λ1,
  μ, Λ2)`` as one vector; PFLR* uses its released shift ``μ̃`` as the direction (the
  coefficients' noise is then centred at 0; ``μ̃`` is public once released, so using it as a
  constraint rather than a noise mean is post-processing of the same two releases).
* ``"signed"`` (Alg. 6 line 5 as printed, and Alg. 5 with the erratum below): ``α μ`` added to
  ``λ1``, a linear term that shifts the minimiser by ``−½ α Λ2⁻¹ μ`` whatever the covariance
  it reaches. Since ``−½ Λ2⁻¹ Σ_i (½ − y_i) x_i`` is 4 × the least-squares fit of ``y`` on
  ``x`` (minus ½), the shift is the same fit with ``y_i`` replaced by ``y_i − α (s_i − c)``:
  where ``x`` predicts ``s`` well (Adult: relationship = husband / wife) α = 1 subtracts the
  whole group gap and overshoots into reverse disparity (issue 40: |RD| 0.276 at ε = 100,
  where the exact penalty gives ≈ 0.01; ``ν₀ ≈ 0.34`` there). Kept as a named setting.

Sensitivities (add/remove-one-row neighbours, the project's convention, so no factor 2 of the
dissertation's replace-one bounds). With one-hot rows, ``||x||_1 = B`` exactly
(:attr:`~privfair.learn.features.FeatureEncoding.row_l1_bound`) and entries in [0, 1], so a
row added or removed changes ``λ1 = Σ_i (½ − y_i) x_i`` by ``|½ − y| ||x||_1 = B/2`` in L1, the
``d²`` ordered entries of ``Λ2 = Σ_i x_i x_iᵀ / 8`` by ``Σ_lm x_l x_m / 8 = ||x||_1² / 8 =
B²/8``, and ``μ = Σ_i (s_i − c) x_i`` (``c`` fixed: public, or released before) by ``|s − c|
||x||_1 ≤ max(c, 1 − c) B =: m B``. The L1 sensitivity of a release is the sum over the parts
it holds:

* ``privlr``: ``(λ1, Λ2)``, ``Δ = B/2 + B²/8``.
* ``pflr``, signed: ``(λ1 + α μ, Λ2)``; the row moves ``λ1 + α μ`` by ``|½ − y + α (s − c)|
  B ≤ (½ + α m) B``, so ``Δ = (½ + α m) B + B²/8``.
* ``pflr``, absolute: ``(λ1, μ, Λ2)``, ``2d + d²`` values; ``Δ = (½ + m) B + B²/8``, free of
  α (α only weighs the released μ̃ in the minimisation, post-processing). At α = 1 it is the
  signed bound, and it is Eq. 8.3's ``(3/2) d + d²/8`` per half in our convention.
* ``pflr-star``, either term: ``μ`` with ``Δ_g = m B`` at ``ε_g``; ``(λ1, Λ2)`` at ``ε_f``
  with ``Δ_f = B/2 + B²/8`` (signed: centred at the public ``α μ̃``, which does not move
  with the row, so it adds nothing).

Errata of the dissertation fixed here (spec §9 item 8):

* PFLR's printed coefficient ``|(s_i − s̄) x_i|`` (absolute value per record, Alg. 5 line 3)
  carries no group contrast: it is ``≈ 2 s̄(1 − s̄) Σ x``, a shrinkage term; Eq. 8.1's
  absolute value is of the whole sum, which is not a polynomial. ``"absolute"`` keeps it
  outside the polynomial (above), ``"signed"`` drops it; both use the signed ``(s_i − c) x_i``.
* ``s̄`` is a statistic of the private data, so a per-record decomposition that treats it as a
  constant leaks. ``c`` is a DP estimate of P(S = 1) from a Laplace histogram of the group
  column, charged to the ledger (``centre_share`` of ε), or a public value passed as ``centre``.
* PFLR*'s variance statement ignores the noise in μ̃: the first-order coefficients have variance
  ``2(Δ_f/ε_f)² + 2(α Δ_g/ε_g)²``, not ``2(Δ_f/ε_f)²``; :func:`noise_scales` reports both parts.

Floating-point safety (Mironov 2012). Floating-point Laplace noise added to a float leaks the
true value through the low-order bits of the sum: the privacy audit found exact float values
of its statistic that occurred on D and almost never on D′ (lower bounds of 2.3 to 2.6 for a
claim of ε = 1 at 10 000 trials; tests/test_float_leak.py). Every release here (the group
histogram, PFLR*'s shift, the coefficients, the latter centred at the public ``α μ̃`` before
rounding) is therefore made on a grid (:func:`laplace_grid`): for ``m`` values of L1
sensitivity ``Δ`` at ``ε``, a granularity ``g = 2^k ≤ 2^−22 min(Δ/m, Δ/ε)`` (a power of two, so
its multiples are exact floats), the values rounded to multiples of ``g``, and ``g · L`` added,
``L`` exact discrete Laplace integers, ``P(L = k) ∝ exp(−|k|/t)``, drawn from the passed
Generator with integer arithmetic only (the layer's
:func:`privfair.core.mechanisms.grid_laplace_mechanism`, which also charges the release).
Rounding moves each value by at most ``g/2``, so the rounded vectors of neighbours differ by at
most ``Δ' = Δ + m g`` in L1, and ``t = ⌈Δ'/(ε g)⌉`` makes the privacy loss ``Δ'/(g t) ≤ ε``
exactly. The ledger charge is unchanged: ε for each release, as a pure ε-DP ("laplace") entry,
whose sensitivity is now ``Δ'``; the noise scale ``t g`` is ``Δ/ε`` to within a factor
``1 + 2^−21`` (what :func:`noise_scales` reports with ``dimension``). The released values are
multiples of ``g`` (floats past ``2^53 g`` are all multiples of ``g``), so no bit of them depends
on the data except through the grid point; whatever is computed from them is post-processing.

The noisy ``Λ̄2`` is released as it is noised, on all ``d²`` ordered entries (the count the
sensitivity uses) and not symmetrised, so that it stays on the grid; :func:`minimise`
symmetrises it (post-processing). It is in general not positive definite, so the quadratic
has no minimiser.
Spectral trimming (Zhang et al. 2012, §5): eigen-directions whose eigenvalue is below
``trim_floor`` are dropped and the quadratic is minimised in the span of the others, ``w̄ =
−½ V_k diag(1/λ_k) V_kᵀ λ̄1``. It is post-processing, costs no privacy, never returns NaN, and the
number of trimmed directions is reported. If every direction is trimmed ``w̄ = 0``. The
absolute fairness term is minimised in the same span: ``ν₀ = −μ̃ᵀH⁺λ̄1 / μ̃ᵀH⁺μ̃`` with ``H⁺``
the trimmed inverse (``ν = 0`` if ``μ̃`` has no component in the span).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from privfair.core.accounting import LedgerEntry, PrivacyLedger, laplace_rho

# The grid and its noise are the layer's (grid_laplace_mechanism); re-exported here.
from privfair.core.mechanisms import GRID_BITS, LaplaceGrid, grid_laplace_mechanism, laplace_grid

Variant = Literal["privlr", "pflr", "pflr-star"]
VARIANTS: tuple[str, ...] = ("privlr", "pflr", "pflr-star")
FairnessTerm = Literal["absolute", "signed"]
FAIRNESS_TERMS: tuple[str, ...] = ("absolute", "signed")
__all__ = ["DEFAULT_SETTING", "FAIRNESS_SETTINGS", "FAIRNESS_TERMS", "GRID_BITS",
           "PAPER_SETTING", "VARIANTS", "FairnessSetting", "FunctionalLogisticRegression",
           "LaplaceGrid", "NoiseScales", "NoisyObjective", "dp_group_centre", "laplace_grid",
           "minimise", "noise_scales", "noisy_objective"]


@dataclass(frozen=True)
class FairnessSetting:
    """A named choice of PFLR / PFLR*'s fairness knobs (``FAIRNESS_SETTINGS``).

    ``kwargs()`` are the keyword arguments of :class:`FunctionalLogisticRegression` (and of
    :func:`noisy_objective`) it stands for.
    """

    fairness_term: FairnessTerm
    alpha: float
    fairness_share: float
    source: str

    def kwargs(self) -> dict[str, Any]:
        return {"fairness_term": self.fairness_term, "alpha": self.alpha,
                "fairness_share": self.fairness_share}


#: The dissertation's setting: Eq. 8.1's ``α |g_D(w) − τ|`` with α = 1, τ = 0, and Table 8.1's
#: ε_f = ε/2 for PFLR*.
PAPER_SETTING = "xu2021"
#: The library's default (the class's defaults): the paper's.
DEFAULT_SETTING = "default"
FAIRNESS_SETTINGS: dict[str, FairnessSetting] = {
    PAPER_SETTING: FairnessSetting(
        "absolute", 1.0, 0.5, "Xu 2021 Eq. 8.1 (alpha = 1, tau = 0), Table 8.1 (eps_f = eps/2)"),
    DEFAULT_SETTING: FairnessSetting(
        "absolute", 1.0, 0.5, "privfair's default: the paper's exact penalty"),
    # Alg. 6 line 5 as printed (noise centred at μ̃): overshoots on Adult (module docstring).
    "signed-shift": FairnessSetting(
        "signed", 1.0, 0.5, "Xu 2021 Alg. 6 line 5 as printed: the linear shift alpha * mu"),
    # The default before issue 40: the signed shift with α tuned down on Adult.
    "signed-shift-0.3": FairnessSetting(
        "signed", 0.3, 0.5, "the signed shift at alpha = 0.3 (privfair's default until issue "
                            "40)"),
}


@dataclass(frozen=True)
class NoiseScales:
    """Laplace scales of one fit, all public (functions of ε, B, α, c and d)."""

    coefficients: float  # scale b = Δ/ε of each coefficient of λ1 and Λ2
    shift: float  # scale of the released fairness shift μ̃ (PFLR* only, else 0)
    centre: float  # scale of each count of the group histogram (0 if c was public)


@dataclass(frozen=True)
class NoisyObjective:
    """The released polynomial ``λ̄1ᵀw + wᵀΛ̄2w`` (post-noise, safe to keep), and with the
    absolute fairness term its penalty ``fairness_weight · |fairnessᵀw|``.

    ``linear`` and ``quadratic`` (d × d, not symmetrised) are multiples of ``granularity``;
    PFLR*'s released shift μ̃ is ``shift``, on its own grid (signed: the centre of the linear
    coefficients' noise). ``fairness`` is the released μ̃ of the absolute term (PFLR: on
    ``granularity``, released with the coefficients; PFLR*: ``shift``), None otherwise. A
    granularity of 0 means not a release (an objective built by hand).
    """

    linear: np.ndarray
    quadratic: np.ndarray
    granularity: float = 0.0
    shift: np.ndarray | None = None
    shift_granularity: float = 0.0
    fairness: np.ndarray | None = None
    fairness_weight: float = 0.0


def _check_xys(x: np.ndarray, y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, ...]:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    s = np.asarray(s, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"X: expected a 2-d array, got {x.ndim} dimensions")
    if y.shape != (x.shape[0],) or s.shape != (x.shape[0],):
        raise ValueError("y and s: expected one value per row of X")
    if not (np.all((y == 0) | (y == 1)) and np.all((s == 0) | (s == 1))):
        raise ValueError("y and s: expected values in {0, 1}")
    return x, y, s


@dataclass(frozen=True)
class _Split:
    """The ε of each release and the L1 sensitivity of its values (before the grid)."""

    centre: float
    shift: float
    coefficients: float
    shift_sensitivity: float
    coefficient_sensitivity: float
    #: PFLR's absolute term: μ is released with the coefficients, ``(λ1, μ, Λ2)``.
    joint_fairness: bool = False

    def coefficient_count(self, d: int) -> int:
        """Values in the coefficients' release: ``d + d²``, or ``2d + d²`` with μ."""
        return (2 * d if self.joint_fairness else d) + d * d


def _split(*, epsilon: float, variant: Variant, row_l1_bound: float, centre: float,
           alpha: float, fairness_share: float, centre_share: float,
           fairness_term: FairnessTerm = "absolute") -> _Split:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if fairness_term not in FAIRNESS_TERMS:
        raise ValueError(f"fairness_term must be one of {FAIRNESS_TERMS}, "
                         f"got {fairness_term!r}")
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not 0 <= centre_share < 1:
        raise ValueError(f"centre_share must be in [0, 1), got {centre_share!r}")
    if variant == "pflr-star" and not 0 < fairness_share < 1:
        raise ValueError(f"fairness_share must be in (0, 1), got {fairness_share!r}")
    b = float(row_l1_bound)
    eps_centre = centre_share * epsilon
    eps_model = epsilon - eps_centre
    spread = max(centre, 1 - centre)
    quadratic = b * b / 8
    eps_shift = fairness_share * eps_model if variant == "pflr-star" else 0.0
    # The fairness part of PFLR's one release (module docstring): α μ signed, μ absolute.
    weight = (alpha if fairness_term == "signed" else 1.0) if variant == "pflr" else 0.0
    coef = (0.5 + weight * spread) * b + quadratic
    return _Split(eps_centre, eps_shift, eps_model - eps_shift, spread * b, coef,
                  variant == "pflr" and fairness_term == "absolute")


def _grids(split: _Split, dimension: int) -> tuple[LaplaceGrid | None, ...]:
    """Grids of the group histogram, the shift and the coefficients (None if not released).
    The group histogram has L1 sensitivity 1 (a row is in one of its 2 bins)."""
    d = dimension
    return (laplace_grid(sensitivity=1.0, epsilon=split.centre, coordinates=2)
            if split.centre > 0 else None,
            laplace_grid(sensitivity=split.shift_sensitivity, epsilon=split.shift,
                         coordinates=d) if split.shift > 0 else None,
            laplace_grid(sensitivity=split.coefficient_sensitivity, epsilon=split.coefficients,
                         coordinates=split.coefficient_count(d)))


def noise_scales(*, epsilon: float, variant: Variant, row_l1_bound: float, centre: float,
                 alpha: float = 1.0, fairness_share: float = 0.5,
                 centre_share: float = 0.0, dimension: int | None = None,
                 fairness_term: FairnessTerm = "absolute") -> NoiseScales:
    """Laplace scales of each release for a budget ``epsilon`` (see the module docstring).

    With ``dimension`` (d, the number of features) they are the scales ``t g`` of the grid
    noise a fit draws; without it the Laplace scales ``Δ/ε`` they stand for (at most a factor
    ``1 + 2^−21`` smaller).
    """
    split = _split(epsilon=epsilon, variant=variant, row_l1_bound=row_l1_bound, centre=centre,
                   alpha=alpha, fairness_share=fairness_share, centre_share=centre_share,
                   fairness_term=fairness_term)
    if dimension is not None:
        return NoiseScales(*(0.0 if grid is None else grid.scale
                             for grid in reversed(_grids(split, dimension))))
    return NoiseScales(split.coefficient_sensitivity / split.coefficients,
                       split.shift_sensitivity / split.shift if split.shift > 0 else 0.0,
                       1 / split.centre if split.centre > 0 else 0.0)


def _entry(name: str, epsilon: float, queries: int, grid: LaplaceGrid | None) -> LedgerEntry:
    sensitivity = 0.0 if grid is None else float(grid.sensitivity)
    return LedgerEntry(name=name, mechanism="laplace", sensitivity=sensitivity,
                       rho=laplace_rho(epsilon=max(epsilon, 1e-300)), epsilon=float(epsilon),
                       queries=int(queries))


def dp_group_centre(s: np.ndarray, *, entry: LedgerEntry, ledger: PrivacyLedger,
                    rng: np.random.Generator) -> float:
    """DP estimate of P(S = 1): a histogram of the two groups on a grid with discrete Laplace
    noise (``entry``, as planned, is what the layer charges first; see the module
    docstring), clamped to [0, 1]."""
    if entry.epsilon is None:
        raise ValueError(f"entry {entry.name!r}: the group histogram is pure ε-DP; no ε given")
    ones = float(np.sum(s == 1))
    noisy = np.maximum(grid_laplace_mechanism(
        np.array([float(s.size) - ones, ones]), epsilon=float(entry.epsilon), sensitivity=1.0,
        rng=rng, ledger=ledger, name=entry.name), 0.0)
    total = float(noisy.sum())
    return 0.5 if total <= 0 else float(noisy[1] / total)


def noisy_objective(x: np.ndarray, y: np.ndarray, s: np.ndarray, *, epsilon: float,
                    variant: Variant, row_l1_bound: float, ledger: PrivacyLedger,
                    rng: np.random.Generator, alpha: float = 1.0, fairness_share: float = 0.5,
                    centre: float | None = None, centre_share: float = 0.02,
                    fairness_term: FairnessTerm = "absolute"
                    ) -> tuple[NoisyObjective, NoiseScales, float]:
    """Charge the ledger, then release the noisy polynomial of ``variant`` on a grid.

    Returns the objective, the noise scales (of the grid noise drawn) and the centre ``c``
    used. Each release is charged its ε as a pure ε-DP entry whose sensitivity is the L1
    bound of its rounded values (module docstring); all noise comes from ``rng``.
    """
    x, y, s = _check_xys(x, y, s)
    row_l1 = np.abs(x).sum(axis=1)
    if row_l1.size and row_l1.max() > row_l1_bound * (1 + 1e-9):
        raise ValueError("X: a row's L1 norm exceeds row_l1_bound; the sensitivity would not "
                         "hold (encode with FeatureEncoding)")
    if np.any((x < 0) | (x > 1)):
        raise ValueError("X: expected entries in [0, 1]")
    needs_centre = variant != "privlr"
    if centre is not None and not 0 <= centre <= 1:
        raise ValueError(f"centre must be in [0, 1], got {centre!r}")
    share = centre_share if needs_centre and centre is None else 0.0
    d = x.shape[1]

    def split_at(c: float) -> _Split:
        return _split(centre=c, epsilon=epsilon, variant=variant, row_l1_bound=row_l1_bound,
                      alpha=alpha, fairness_share=fairness_share, centre_share=share,
                      fairness_term=fairness_term)

    split = split_at(0.5 if centre is None else centre)
    label = {"privlr": "PrivLR", "pflr": "PFLR", "pflr-star": "PFLR*"}[variant]
    names = ("group histogram (fairness centre)", f"fairness shift ({label})",
             f"functional mechanism ({label})")
    epsilons = (split.centre, split.shift, split.coefficients)

    def entries(grids: tuple[LaplaceGrid | None, ...]) -> list[LedgerEntry]:
        return [_entry(name, eps, queries, grid) for name, eps, queries, grid
                in zip(names, epsilons, (2, d, split.coefficient_count(d)), grids,
                       strict=True)]

    planned = [e for e, eps in zip(entries(_grids(split, d)), epsilons, strict=True)
               if eps > 0]
    # The whole cost is checked before the first private read (the centre is one).
    ledger.check_entries(*planned)
    if split.centre > 0:
        centre = dp_group_centre(s, entry=planned[0], ledger=ledger, rng=rng)
        # Each release's ε is fixed; its sensitivity Δ(c) and grid follow the released c.
        split = split_at(centre)
    centre = 0.5 if centre is None else float(centre)
    grids = _grids(split, d)
    _, shift_entry, coef_entry = entries(grids)
    _, shift_grid, coef_grid = grids
    assert coef_grid is not None
    linear = (0.5 - y) @ x
    quadratic = (x.T @ x) / 8
    shift = (s - centre) @ x
    released_shift = None
    signed = fairness_term == "signed"
    parts = [linear]
    if variant == "pflr":
        # Signed: λ1 + α μ; absolute: μ released beside λ1 (module docstring's Δ for each).
        parts = [linear + alpha * shift] if signed else [linear, shift]
    elif variant == "pflr-star":
        assert shift_grid is not None
        released_shift = grid_laplace_mechanism(
            shift, epsilon=split.shift, sensitivity=split.shift_sensitivity, rng=rng,
            ledger=ledger, name=shift_entry.name)
        if signed:
            # The coefficients' noise is centred at α μ̃, public once released.
            parts = [linear + alpha * released_shift]
    # The coefficients are one release (one charge, one grid): d + d² values, 2d + d² with μ.
    coefficients = grid_laplace_mechanism(
        np.concatenate([*parts, quadratic.ravel()]), epsilon=split.coefficients,
        sensitivity=split.coefficient_sensitivity, rng=rng, ledger=ledger,
        name=coef_entry.name)
    fairness = None
    if variant == "pflr" and not signed:
        fairness = coefficients[d:2 * d]
    elif variant == "pflr-star" and not signed:
        fairness = released_shift
    objective = NoisyObjective(
        coefficients[:d], coefficients[len(parts) * d:].reshape(d, d), coef_grid.granularity,
        released_shift, 0.0 if shift_grid is None else shift_grid.granularity,
        fairness, float(alpha) if fairness is not None else 0.0)
    scales = NoiseScales(*(0.0 if grid is None else grid.scale for grid in reversed(grids)))
    return objective, scales, centre


def minimise(objective: NoisyObjective, *, trim_floor: float = 0.0
             ) -> tuple[np.ndarray, int]:
    """Minimiser of ``λ̄1ᵀw + wᵀΛ̄2w + α |μ̃ᵀw|`` (α, μ̃: ``fairness_weight``, ``fairness``; no
    penalty without them) after spectral trimming; ``(w, directions trimmed)``.

    In the kept span the objective is strictly convex, and ``w`` is optimal iff ``λ̄1 + 2Hw +
    α ξ μ̃ = 0`` with ``ξ ∈ ∂|μ̃ᵀw|``: ``w(ν) = −½ H⁺(λ̄1 + ν μ̃)`` with ``ν = clip(ν₀, −α, α)``,
    where ``μ̃ᵀw(ν₀) = 0`` (if ``|ν₀| ≤ α``, ``ξ = ν₀/α``; otherwise ``μ̃ᵀw(±α)`` has the sign
    of ``ν₀ ∓ α``, ``ξ = ±1``).
    """
    quadratic = (objective.quadratic + objective.quadratic.T) / 2
    values, vectors = np.linalg.eigh(quadratic)
    keep = values > max(trim_floor, 0.0)
    if not np.any(keep):
        return np.zeros_like(objective.linear), int(values.size)
    kept = vectors[:, keep]

    def solve(vector: np.ndarray) -> np.ndarray:  # H⁺ vector in the kept span
        return np.asarray(kept @ ((kept.T @ vector) / values[keep]))

    linear = objective.linear
    if objective.fairness is not None and objective.fairness_weight > 0:
        direction = objective.fairness
        along = solve(direction)
        curvature = float(direction @ along)  # μ̃ᵀH⁺μ̃ ≥ 0
        if curvature > 0 and math.isfinite(curvature):
            nu = -float(direction @ solve(linear)) / curvature
            nu = min(max(nu, -objective.fairness_weight), objective.fairness_weight)
            linear = linear + nu * direction
    w = -0.5 * solve(linear)
    return w, int(np.sum(~keep))


class FunctionalLogisticRegression:
    """PrivLR, PFLR or PFLR*: an ε-DP (and fair) logistic regression.

    Parameters
    ----------
    epsilon : float
        Total budget of the fit (the centre estimate, the shift and the coefficients).
    variant : {"pflr", "pflr-star", "privlr"}
    row_l1_bound : float
        Public bound on ``||x||_1`` of a row (``FeatureEncoding.row_l1_bound``).
    alpha : float
        Weight of the fairness term (Eq. 8.1; the paper's 1 is the default). With
        ``fairness_term="absolute"`` it bounds the multiplier of the zero-covariance
        constraint, which holds exactly whenever ``α ≥ |ν₀|`` (≈ 0.34 on Adult); with
        ``"signed"`` it is the size of the shift, and 1 overshoots on Adult (module docstring).
    fairness_term : {"absolute", "signed"}
        Eq. 8.1's ``α |μᵀw|`` (an exact penalty) or the linear shift ``α μᵀw``. Named
        combinations of these knobs: :data:`FAIRNESS_SETTINGS` (``PAPER_SETTING``,
        ``DEFAULT_SETTING``).
    fairness_share : float
        PFLR*: the share ε_g/ε of the fairness shift (Table 8.1 uses 1/2).
    centre : float, optional
        Public P(S = 1); if None it is estimated with ``centre_share`` of ε.
    centre_share : float
        Share of ε spent on the DP centre.
    trim_floor : float, optional
        Eigenvalues of the noisy quadratic at or below it are trimmed. By default it is
        ``2 b √d``, about the spectral norm of the symmetrised Laplace noise (entries of
        variance ``b²``): directions whose curvature the noise could have made are dropped.
        One-hot blocks sum to the intercept, so ``Λ2`` itself is singular and its null
        directions would otherwise be inverted noise.
    rng : numpy.random.Generator
        Source of the noise.
    """

    def __init__(self, *, epsilon: float, variant: Variant = "pflr-star",
                 row_l1_bound: float, rng: np.random.Generator, alpha: float = 1.0,
                 fairness_term: FairnessTerm = "absolute", fairness_share: float = 0.5,
                 centre: float | None = None, centre_share: float = 0.02,
                 trim_floor: float | None = None) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if fairness_term not in FAIRNESS_TERMS:
            raise ValueError(f"fairness_term must be one of {FAIRNESS_TERMS}, "
                             f"got {fairness_term!r}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng: expected a numpy.random.Generator")
        self.epsilon = epsilon
        self.variant: Variant = variant
        self.row_l1_bound = row_l1_bound
        self.rng = rng
        self.alpha = alpha
        self.fairness_term: FairnessTerm = fairness_term
        self.fairness_share = fairness_share
        self.centre = centre
        self.centre_share = centre_share
        self.trim_floor = trim_floor

    def fit(self, X: np.ndarray, y: np.ndarray, s: np.ndarray, *,
            ledger: PrivacyLedger) -> FunctionalLogisticRegression:
        """Charge ``ledger`` and fit; ``s`` is the binary protected attribute."""
        objective, scales, centre = noisy_objective(
            X, y, s, epsilon=self.epsilon, variant=self.variant,
            row_l1_bound=self.row_l1_bound, ledger=ledger, rng=self.rng, alpha=self.alpha,
            fairness_share=self.fairness_share, centre=self.centre,
            centre_share=self.centre_share, fairness_term=self.fairness_term)
        floor = self.trim_floor
        if floor is None:
            floor = 2 * scales.coefficients * math.sqrt(objective.linear.size)
        self.coef_, self.trimmed_ = minimise(objective, trim_floor=floor)
        self.noise_scales_ = scales
        self.centre_ = centre
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float) @ self.coef_

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        p = 1 / (1 + np.exp(-np.clip(self.decision_function(X), -500, 500)))
        return np.column_stack([1 - p, p])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (self.decision_function(X) > 0).astype(np.int64)

    def hyper_parameters(self) -> dict[str, Any]:
        return {"variant": self.variant, "epsilon": self.epsilon, "alpha": self.alpha,
                "fairness_term": self.fairness_term, "fairness_share": self.fairness_share, "centre_share": self.centre_share,
                "row_l1_bound": self.row_l1_bound, "trim_floor": self.trim_floor}
