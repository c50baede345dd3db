"""Privacy accounting: zCDP, generalized to Rényi DP curves over a grid of orders.

This module is long on purpose: the whole accountant (zCDP, Rényi curves, the conversions
and the ledger) sits in one file so that an auditor can check composition in one read.

Every private read is charged to one :class:`PrivacyLedger`. Two kinds of entries compose in it:

* zCDP steps (Gaussian, exponential, Laplace): each carries its ρ, and its Rényi curve is
  derived from it: ρ-zCDP is the curve α ↦ ρα. Pure ε-DP steps (Laplace, and the exponential
  mechanism's ε) use the tight ε-DP → RDP bound of Mironov (2017, Prop. 10),
  ``log((sinh(αε) − sinh((α−1)ε)) / sinh(ε)) / (α − 1)``, which randomized response attains.
* Poisson-subsampled Gaussian steps (DP-SGD): zCDP cannot express privacy amplification by
  subsampling, so the entry stores its RDP curve on :data:`RDP_ORDERS`.

As long as a ledger holds only zCDP steps it behaves as before: ρ adds up and the budget check
is on ρ, with the tight conversion of Canonne, Kamath and Steinke (2020, Prop. 12 / Cor. 13):

.. math::

    \\delta(\\varepsilon) = \\inf_{\\alpha > 1}
        \\frac{\\exp\\big((\\alpha - 1)(\\alpha\\rho - \\varepsilon)\\big)}{\\alpha - 1}
        \\Big(1 - \\frac{1}{\\alpha}\\Big)^{\\alpha}

Once it holds an RDP entry, curves add up order by order, and the budget check converts the
composed curve to (ε, δ) at the ledger's δ and compares it with the ledger's ε budget (a ρ budget
implies one through the CKS conversion above). Two conversions are offered:

* ``"classic"``: ε = min_α rdp(α) + log(1/δ)/(α − 1) (Mironov 2017, Prop. 3). The ε printed in
  the DP-SGD literature of the moments-accountant era (e.g. Xu 2021, ch. 9) use it.
* ``"balle2020"`` (default): ε = min_α rdp(α) + log((α−1)/α) − (log δ + log α)/(α − 1) (Balle et
  al. 2020, Thm 21; the same bound as CKS for zCDP), which is never larger.

The subsampled-Gaussian curve comes from Google's ``dp-accounting`` (its ``RdpAccountant``),
not opacus's RDP analysis: both compute the same series (Mironov, Talwar and Zhang 2019), but
``dp-accounting`` is a pure numpy/scipy package while importing anything from opacus imports
torch, and this module is in ``core/``, which must import without torch. The two agree to
1e-9 (tests/test_accounting_rdp.py cross-checks them).

:data:`RDP_ORDERS` is the integer grid 2..255 of the moments accountant (so published ε are
reproduced exactly with the classic conversion), extended with large orders up to 1024 (small
ε) and with the orders 1.25, 1.5 and 1.75 below 2, where the conversion of a large composed ε
(a lifetime of many releases, or ε near 100) finds its optimum. Below 2 the subsampled
Gaussian's series in ``dp-accounting`` may not converge at large sampling rates (it returns
inf) or lose precision at large σ; as Rényi divergence is non-decreasing in α, the value at
α = 2 is a valid bound there, so the curve takes the smaller of the two.

Curves stored on the earlier grid (:data:`LEGACY_RDP_ORDERS`, 2..1024, in ledgers, manifests
and lifetime ledgers of format 3) still load: :func:`rdp_on_grid` extends them below 2 with
their value at α = 2, a valid (if loose) bound for the same reason.

Neighbouring datasets differ by adding or removing one row.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from privfair.core.errors import BudgetExceededError

#: An RDP curve: one Rényi divergence bound per order of :data:`RDP_ORDERS` (or of the
#: orders a function is given).
RdpCurve = npt.NDArray[np.float64]

# Relative slack for float rounding when shares of a budget are added back up.
_BUDGET_RTOL = 1e-9


def _check_epsilon_delta(epsilon: float, delta: float) -> None:
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise ValueError(f"delta must be in the open interval (0, 1), got {delta!r}")


def zcdp_delta(*, rho: float, epsilon: float) -> float:
    """Smallest δ such that ρ-zCDP implies (ε, δ)-DP (CKS 2020 tight conversion)."""
    if rho < 0 or epsilon < 0:
        raise ValueError(f"rho and epsilon must be >= 0, got rho={rho}, epsilon={epsilon}")
    if rho == 0:
        return 0.0

    def log_delta(alpha: float) -> float:
        return ((alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha)
                - math.log(alpha - 1))

    # The exponent is convex in alpha; its derivative (2α−1)ρ − ε + log(1−1/α) is increasing,
    # so bisection on the derivative finds the minimiser.
    lo, hi = 1.0 + 1e-12, max(2.0, (epsilon + 1) / (2 * rho) + 2)
    for _ in range(200):
        mid = (lo + hi) / 2
        settled = mid in (lo, hi)  # adjacent floats: later steps repeat this one
        if (2 * mid - 1) * rho - epsilon + math.log1p(-1 / mid) < 0:
            lo = mid
        else:
            hi = mid
        if settled:
            break
    return min(1.0, math.exp(log_delta((lo + hi) / 2)))


@functools.lru_cache(maxsize=1024)
def zcdp_epsilon(*, rho: float, delta: float) -> float:
    """Smallest ε such that ρ-zCDP implies (ε, δ)-DP."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if rho == 0:
        return 0.0
    lo, hi = 0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        settled = mid in (lo, hi)
        if zcdp_delta(rho=rho, epsilon=mid) > delta:
            lo = mid
        else:
            hi = mid
        if settled:
            break
    return hi


@functools.lru_cache(maxsize=1024)
def zcdp_rho(*, epsilon: float, delta: float) -> float:
    """Largest ρ such that ρ-zCDP implies (ε, δ)-DP.

    Examples
    --------
    >>> round(zcdp_rho(epsilon=1.0, delta=1e-9), 5)
    0.01497
    """
    _check_epsilon_delta(epsilon, delta)
    lo, hi = 0.0, epsilon + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        settled = mid in (lo, hi)
        if zcdp_delta(rho=mid, epsilon=epsilon) <= delta:
            lo = mid
        else:
            hi = mid
        if settled:
            break
    return lo


def gaussian_rho(*, sigma: float, sensitivity: float) -> float:
    """ρ of the Gaussian mechanism with L2 sensitivity Δ and scale σ: Δ²/(2σ²)."""
    return sensitivity**2 / (2 * sigma**2)


def gaussian_sigma(*, rho: float, sensitivity: float) -> float:
    """Scale σ that makes the Gaussian mechanism ρ-zCDP: Δ/√(2ρ)."""
    if rho <= 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    return sensitivity / math.sqrt(2 * rho)


def exponential_rho(*, epsilon: float) -> float:
    """ρ of the exponential mechanism with parameter ε: ε²/8 (bounded-range analysis)."""
    return epsilon**2 / 8


def exponential_epsilon(*, rho: float) -> float:
    """Parameter ε of an exponential mechanism that is ρ-zCDP: √(8ρ)."""
    return math.sqrt(8 * rho)


def laplace_rho(*, epsilon: float) -> float:
    """ρ of an ε-DP mechanism such as Laplace: ε²/2 (Bun and Steinke 2016, Prop. 1.4)."""
    return epsilon**2 / 2


# Integer orders 2..255 are the grid of the moments accountant; see the module docstring.
LEGACY_RDP_ORDERS: tuple[float, ...] = (
    *(float(a) for a in range(2, 256)), 320.0, 384.0, 512.0, 768.0, 1024.0,
)
#: Orders below 2 (issue 32.9): they help the conversion of large composed ε.
LOW_RDP_ORDERS: tuple[float, ...] = (1.25, 1.5, 1.75)
RDP_ORDERS: tuple[float, ...] = (*LOW_RDP_ORDERS, *LEGACY_RDP_ORDERS)


def rdp_on_grid(values: Sequence[float]) -> RdpCurve:
    """An RDP curve on :data:`RDP_ORDERS`, from values on it or on :data:`LEGACY_RDP_ORDERS`.

    A legacy curve (no orders below 2) takes its value at α = 2 for α < 2: Rényi divergence
    is non-decreasing in α, so that is a valid bound there.

    Examples
    --------
    >>> rdp_on_grid([0.5] * len(LEGACY_RDP_ORDERS))[:4].tolist()
    [0.5, 0.5, 0.5, 0.5]
    """
    curve = np.asarray(values, dtype=float)
    if curve.ndim == 1 and curve.size == len(LEGACY_RDP_ORDERS):
        return np.concatenate([np.full(len(LOW_RDP_ORDERS), curve[0]), curve])
    if curve.ndim != 1 or curve.size != len(RDP_ORDERS):
        raise ValueError(f"an RDP curve has {curve.size} values; expected one per order of "
                         f"the grid ({len(RDP_ORDERS)}, or {len(LEGACY_RDP_ORDERS)} on the "
                         "grid before orders below 2)")
    return curve

Conversion = Literal["classic", "balle2020"]
CONVERSIONS: tuple[str, ...] = ("classic", "balle2020")


def _orders_array(orders: Sequence[float]) -> npt.NDArray[np.float64]:
    array = np.asarray(orders, dtype=float)
    if array.ndim != 1 or array.size == 0 or np.any(array <= 1):
        raise ValueError("orders must be a non-empty sequence of Rényi orders > 1")
    return array


def zcdp_rdp(*, rho: float, orders: Sequence[float] = RDP_ORDERS) -> RdpCurve:
    """RDP curve of a ρ-zCDP step: α ↦ ρα."""
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho must be a finite number >= 0, got {rho!r}")
    return rho * _orders_array(orders)


def pure_dp_rdp(*, epsilon: float, orders: Sequence[float] = RDP_ORDERS) -> RdpCurve:
    """Tight RDP curve of an ε-DP step (Mironov 2017, Prop. 10).

    It is randomized response's Rényi divergence, ``log((e^{αε} + e^{(1−α)ε}) / (1 + e^ε))
    / (α − 1)``, computed in log space; it never exceeds ``min(ε, αε²/2)``.

    Examples
    --------
    >>> round(float(pure_dp_rdp(epsilon=1.0, orders=[2.0])[0]), 6)
    0.735326
    """
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    alpha = _orders_array(orders)
    if epsilon == 0:
        return np.zeros_like(alpha)
    log_ratio = ((alpha - 1) * epsilon + np.log1p(np.exp((1 - 2 * alpha) * epsilon))
                 - math.log1p(math.exp(-epsilon)))
    return np.minimum(log_ratio / (alpha - 1), epsilon)


def subsampled_gaussian_rdp(*, noise_multiplier: float, sample_rate: float, steps: int,
                            orders: Sequence[float] = RDP_ORDERS) -> RdpCurve:
    """RDP curve of ``steps`` Poisson-subsampled Gaussian steps, from ``dp-accounting``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the L2 sensitivity.
    sample_rate : float
        Probability q that a row is in a step's batch (Poisson sampling).
    steps : int
        Number of steps composed.
    """
    _check_subsampled_gaussian(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                               steps=steps)
    one_step = _subsampled_gaussian_step(float(noise_multiplier), float(sample_rate),
                                         tuple(float(a) for a in _orders_array(orders)))
    return int(steps) * np.asarray(one_step)


@functools.lru_cache(maxsize=256)
def _subsampled_gaussian_step(noise_multiplier: float, sample_rate: float,
                              orders: tuple[float, ...]) -> tuple[float, ...]:
    # Cached: calibration and planning ask for the same curve many times. RDP composes
    # linearly, so the curve of T steps is T times this one.
    # Imported here: dp-accounting pulls in scipy/mpmath, which zCDP-only users never need.
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    event = dp_accounting.PoissonSampledDpEvent(
        sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier))
    alpha = np.asarray(orders)
    whole = alpha == np.round(alpha)
    out = np.full(alpha.shape, np.inf)
    accountant = RdpAccountant(orders=alpha[whole].tolist())
    accountant.compose(event)
    out[whole] = accountant.rdp
    if not whole.all():
        # Fractional orders: dp-accounting's series may fail to converge (inf, with a logged
        # warning) or lose precision; RDP is non-decreasing in α, so the value at the next
        # integer order bounds it (see the module docstring).
        absl = logging.getLogger("absl")
        level = absl.level
        absl.setLevel(logging.ERROR)
        try:
            fractional = RdpAccountant(orders=alpha[~whole].tolist())
            fractional.compose(event)
        finally:
            absl.setLevel(level)
        for i, value in zip(np.flatnonzero(~whole), fractional.rdp, strict=True):
            above = np.flatnonzero(whole & (alpha > alpha[i]))
            cap = out[above[np.argmin(alpha[above])]] if above.size else np.inf
            out[i] = min(value if np.isfinite(value) and value >= 0 else np.inf, cap)
    return tuple(float(v) for v in out)


def joint_noise_multiplier(*multipliers: float) -> float:
    """Noise multiplier of Gaussian queries answered together on one sampled batch.

    Queries ``i`` with L2 sensitivity ``Δ_i`` and noise ``σ_i Δ_i`` on the same batch are one
    Gaussian mechanism: scaled by ``1/(σ_i Δ_i)`` each has unit noise and sensitivity
    ``1/σ_i``, so the pair's L2 sensitivity is ``(Σ σ_i⁻²)^(1/2)`` and its multiplier
    ``σ_eff = (Σ σ_i⁻²)^(−1/2)``. Accounting them as one subsampled Gaussian at ``σ_eff`` is
    what the sampling allows; composing them as independently sampled queries is not.
    """
    if not multipliers or not all(math.isfinite(s) and s > 0 for s in multipliers):
        raise ValueError(f"noise multipliers must be finite numbers > 0, got {multipliers!r}")
    # typeshed types float ** float as Any (a negative base gives a complex); the sum is > 0.
    multiplier: float = math.fsum(s ** -2 for s in multipliers) ** -0.5
    return multiplier


def _check_subsampled_gaussian(*, noise_multiplier: float, sample_rate: float,
                               steps: int) -> None:
    if not (isinstance(noise_multiplier, int | float) and math.isfinite(noise_multiplier)
            and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
    if not (isinstance(sample_rate, int | float) and 0 < sample_rate <= 1):
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")


def rdp_epsilon(*, rdp: Sequence[float] | RdpCurve, delta: float,
                orders: Sequence[float] = RDP_ORDERS,
                conversion: Conversion = "balle2020") -> tuple[float, float]:
    """(ε, optimal order) of an RDP curve at ``delta``.

    ``conversion="classic"`` is ε = min_α rdp(α) + log(1/δ)/(α − 1); ``"balle2020"`` is
    ε = min_α rdp(α) + log((α−1)/α) − (log δ + log α)/(α − 1), never larger.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
    alpha = _orders_array(orders)
    curve = np.asarray(rdp, dtype=float)
    if curve.shape != alpha.shape:
        raise ValueError(f"rdp has {curve.size} values for {alpha.size} orders")
    if not np.any(curve):
        return 0.0, float(alpha[0])  # nothing composed: no privacy loss at all
    if conversion == "classic":
        eps = curve + math.log(1 / delta) / (alpha - 1)
    else:
        eps = curve + np.log1p(-1 / alpha) - (math.log(delta) + np.log(alpha)) / (alpha - 1)
    best = int(np.argmin(eps))
    return max(0.0, float(eps[best])), float(alpha[best])


@dataclass(frozen=True)
class LedgerEntry:
    """One charged step.

    Attributes
    ----------
    name : str
        What was measured, e.g. ``"one-way marginals"``.
    mechanism : str
        ``"gaussian"``, ``"discrete-gaussian"``, ``"exponential"``, ``"laplace"`` or
        ``"subsampled-gaussian"``.
    sensitivity : float
        L2 sensitivity for Gaussian mechanisms, score sensitivity for the exponential
        mechanism, L1 sensitivity for Laplace.
    rho : float
        zCDP cost of the step. For a subsampled Gaussian it is the bound without amplification
        by subsampling (valid, loose); its ``rdp`` curve is what the ledger composes.
    sigma : float or None
        Noise standard deviation of Gaussian mechanisms.
    epsilon : float or None
        Parameter of exponential or Laplace mechanisms.
    queries : int
        Number of scalar queries answered in the step.
    sample_rate : float or None
        Poisson sampling rate q of a subsampled Gaussian.
    steps : int or None
        Number of subsampled-Gaussian steps composed in the entry.
    rdp : tuple of float or None
        The entry's RDP curve on :data:`RDP_ORDERS`, for steps zCDP cannot express.
    """

    name: str
    mechanism: str
    sensitivity: float
    rho: float
    sigma: float | None = None
    epsilon: float | None = None
    queries: int = 1
    sample_rate: float | None = None
    steps: int | None = None
    rdp: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.rdp is not None:
            # JSON round trips give lists; the entry stays hashable and comparable.
            # A curve on the grid before orders below 2 is extended (rdp_on_grid).
            try:
                curve = rdp_on_grid(self.rdp)
            except ValueError as exc:
                raise ValueError(f"entry {self.name!r}: {exc}") from None
            object.__setattr__(self, "rdp", tuple(float(v) for v in curve))

    def rdp_curve(self) -> RdpCurve:
        """The entry's RDP curve on :data:`RDP_ORDERS` (stored, or derived from ρ and ε)."""
        if self.rdp is not None:
            return np.asarray(self.rdp, dtype=float)
        curve = zcdp_rdp(rho=self.rho)
        if self.mechanism in ("laplace", "exponential") and self.epsilon is not None:
            curve = np.minimum(curve, pure_dp_rdp(epsilon=self.epsilon))
        return curve


_RDP_ONLY_FIELDS = ("sample_rate", "steps", "rdp")


def _entry_dict(entry: LedgerEntry) -> dict[str, Any]:
    # zCDP entries keep the fields they always had, so existing manifests read the same.
    raw = asdict(entry)
    if entry.rdp is None:
        for key in _RDP_ONLY_FIELDS:
            if raw[key] is None:
                del raw[key]
    return raw


class PrivacyLedger:
    """A privacy budget and the record of everything charged to it.

    Mechanisms call :meth:`spend` *before* drawing noise, so a step that would go past the
    budget raises :class:`~privfair.core.errors.BudgetExceededError` with nothing released.

    Parameters
    ----------
    rho_budget : float, optional
        Total ρ available. Implies an ε budget at ``delta`` (CKS conversion).
    delta : float, optional
        δ used to report the spent budget as (ε, δ); needed once the ledger holds RDP entries.
    epsilon_budget : float, optional
        Total ε available at ``delta``; implies a ρ budget when ``rho_budget`` is not given.
    conversion : {"balle2020", "classic"}
        RDP → (ε, δ) conversion used for RDP checks and in :meth:`guarantee`.
    accounting : {"zcdp", "rdp"}
        ``"rdp"`` composes Rényi curves from the first entry on (so pure ε-DP steps count with
        their tight curve, not ρ = ε²/2); ``"zcdp"`` switches to curves only once an entry
        needs one.
    """

    def __init__(self, *, rho_budget: float | None = None, delta: float | None = None,
                 epsilon_budget: float | None = None,
                 conversion: Conversion = "balle2020",
                 accounting: Literal["zcdp", "rdp"] = "zcdp") -> None:
        if delta is not None and not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if conversion not in CONVERSIONS:
            raise ValueError(f"conversion must be one of {CONVERSIONS}, got {conversion!r}")
        if accounting not in ("zcdp", "rdp"):
            raise ValueError(f"accounting must be 'zcdp' or 'rdp', got {accounting!r}")
        if accounting == "rdp" and delta is None:
            raise ValueError("accounting='rdp' needs delta")
        if rho_budget is None and epsilon_budget is None:
            raise ValueError("a ledger needs rho_budget or epsilon_budget")
        if epsilon_budget is not None:
            if delta is None:
                raise ValueError("epsilon_budget needs delta")
            _check_epsilon_delta(epsilon_budget, delta)
        if rho_budget is not None and not (math.isfinite(rho_budget) and rho_budget > 0):
            raise ValueError(f"rho_budget must be a finite number > 0, got {rho_budget!r}")
        # The implied budget is converted on first use (a bisection; mechanisms check often).
        self._rho_budget = None if rho_budget is None else float(rho_budget)
        self.delta = delta
        self._epsilon_budget = None if epsilon_budget is None else float(epsilon_budget)
        self._epsilon_given = epsilon_budget is not None
        self.conversion: Conversion = conversion
        self._always_rdp = accounting == "rdp"
        self._entries: list[LedgerEntry] = []

    @classmethod
    def from_epsilon_delta(cls, *, epsilon: float, delta: float) -> PrivacyLedger:
        """A ledger whose budget is the largest ρ that still gives (ε, δ)-DP."""
        return cls(rho_budget=zcdp_rho(epsilon=epsilon, delta=delta), delta=delta)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    @property
    def uses_rdp(self) -> bool:
        """Whether the ledger holds a step that only an RDP curve describes."""
        return self._always_rdp or any(e.rdp is not None for e in self._entries)

    @property
    def spent(self) -> float:
        """ρ spent (for subsampled Gaussian entries, their unamplified zCDP bound)."""
        return math.fsum(e.rho for e in self._entries)

    @property
    def remaining(self) -> float:
        return max(0.0, self.rho_budget - self.spent)

    @property
    def rho_budget(self) -> float:
        """ρ budget: the one given, or the one the ε budget implies (CKS)."""
        if self._rho_budget is None:
            self._rho_budget = zcdp_rho(epsilon=self._epsilon_budget, delta=self.delta)
        return self._rho_budget

    @property
    def epsilon_budget(self) -> float | None:
        """ε budget at the ledger's δ: the one given, or the one the ρ budget implies."""
        if self.delta is None:
            return self._epsilon_budget
        return self._epsilon_budget_at(self.delta)

    def _epsilon_budget_at(self, delta: float) -> float:
        """ε budget at ``delta`` (the ledger's): the one given, or the one ρ implies."""
        if self._epsilon_budget is None:
            self._epsilon_budget = zcdp_epsilon(rho=self.rho_budget, delta=delta)
        return self._epsilon_budget

    def rdp(self) -> RdpCurve:
        """Composed RDP curve of everything spent, on :data:`RDP_ORDERS`."""
        total = np.zeros(len(RDP_ORDERS))
        for entry in self._entries:
            total += entry.rdp_curve()
        return total

    def _curve_epsilon(self, entries: Sequence[LedgerEntry], delta: float) -> float:
        """ε of ``entries`` composed as RDP curves; when every entry is pure ε-DP, no more than
        the sum of their ε (basic composition: (Σε, 0)-DP, which the curves can miss by the
        log(1/δ)/(α − 1) of the largest order)."""
        if not entries:
            return 0.0
        curve = np.sum([e.rdp_curve() for e in entries], axis=0)
        eps = rdp_epsilon(rdp=curve, delta=delta, conversion=self.conversion)[0]
        pure = [e.epsilon for e in entries if e.rdp is None and e.epsilon is not None
                and e.mechanism in ("laplace", "exponential")]
        if len(pure) == len(entries):
            eps = min(eps, math.fsum(pure))
        return eps

    def _check_curve(self, extra: Sequence[LedgerEntry], what: str) -> None:
        if self.delta is None:
            raise ValueError("a ledger composing RDP curves needs delta")
        eps = self._curve_epsilon([*self._entries, *extra], self.delta)
        budget = self._epsilon_budget_at(self.delta)
        if eps > budget * (1 + _BUDGET_RTOL):
            spent = self._curve_epsilon(self._entries, self.delta)
            raise BudgetExceededError(
                f"privacy budget exceeded: {what} would bring epsilon to {eps:.6g} at "
                f"delta={self.delta:g} ({self.conversion} conversion), over the budget "
                f"{budget:.6g}; {spent:.6g} is spent")

    def check(self, rho: float) -> None:
        """Raise if a zCDP step of ``rho`` more would exceed the budget."""
        if not (math.isfinite(rho) and rho > 0):
            raise ValueError(f"a step must cost a finite rho > 0, got {rho!r}")
        if self.uses_rdp:
            self._check_curve([LedgerEntry("check", "gaussian", 1.0, rho=rho)],
                              f"a step of rho={rho:.6g}")
            return
        if self.spent + rho > self.rho_budget * (1 + _BUDGET_RTOL):
            raise BudgetExceededError(
                f"privacy budget exceeded: step costs rho={rho:.6g} but only "
                f"{self.remaining:.6g} of {self.rho_budget:.6g} is left"
            )

    def check_entries(self, *entries: LedgerEntry) -> None:
        """Raise if recording all of ``entries`` would exceed the budget; records nothing.

        Lets a mechanism with several releases refuse before its first private read.
        """
        for entry in entries:
            if not (math.isfinite(entry.rho) and entry.rho > 0):
                raise ValueError(f"a step must cost a finite rho > 0, got {entry.rho!r}")
        if not entries:
            return
        if self.uses_rdp or any(e.rdp is not None for e in entries):
            names = ", ".join(repr(e.name) for e in entries)
            self._check_curve(entries, f"step{'s' if len(entries) > 1 else ''} {names}")
        else:
            self.check(math.fsum(e.rho for e in entries))

    def spend(self, entry: LedgerEntry) -> None:
        """Check then record a step. Call before any noise is drawn."""
        self.check_entries(entry)
        self._entries.append(entry)

    def spend_subsampled_gaussian(self, *, name: str, noise_multiplier: float,
                                  sample_rate: float, steps: int,
                                  sensitivity: float = 1.0) -> LedgerEntry:
        """Check then record ``steps`` Poisson-subsampled Gaussian steps (DP-SGD).

        Parameters
        ----------
        name : str
            What the steps release, e.g. ``"dpsgd gradients"``.
        noise_multiplier : float
            Noise standard deviation divided by ``sensitivity``.
        sample_rate : float
            Poisson sampling rate q.
        steps : int
            Number of steps.
        sensitivity : float
            L2 sensitivity of one step's sum (the clipping bound); recorded, the privacy cost
            depends only on the multiplier.

        Returns
        -------
        LedgerEntry
            The recorded entry (mechanism ``"subsampled-gaussian"``).

        Raises
        ------
        BudgetExceededError
            If the steps would take the ledger past its budget; nothing is recorded.
        """
        if not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity)
                and sensitivity > 0):
            raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
        curve = subsampled_gaussian_rdp(noise_multiplier=noise_multiplier,
                                        sample_rate=sample_rate, steps=steps)
        entry = LedgerEntry(
            name=name, mechanism="subsampled-gaussian", sensitivity=float(sensitivity),
            rho=int(steps) / (2 * float(noise_multiplier) ** 2),
            sigma=float(noise_multiplier) * float(sensitivity), queries=int(steps),
            sample_rate=float(sample_rate), steps=int(steps), rdp=tuple(curve.tolist()),
        )
        self.spend(entry)
        return entry

    def epsilon_spent(self, delta: float | None = None) -> float:
        """ε of everything spent at ``delta`` (the ledger's δ by default)."""
        delta = self.delta if delta is None else delta
        if delta is None:
            raise ValueError("delta is needed to express the spent budget as (epsilon, delta)")
        if self.uses_rdp or self.conversion == "classic":
            return self._curve_epsilon(self._entries, delta)
        return zcdp_epsilon(rho=self.spent, delta=delta)

    def guarantee(self) -> dict[str, Any]:
        """The end-to-end guarantee of what has been spent."""
        # With RDP entries, the ρ sum is only the unamplified bound: shown under its own name.
        out: dict[str, Any] = ({"rho": None, "rho_unamplified_bound": self.spent}
                               if self.uses_rdp else {"rho": self.spent})
        out["rho_budget"] = self.rho_budget
        if self.delta is not None:
            out["delta"] = self.delta
            out["epsilon"] = self.epsilon_spent()
            out["epsilon_budget"] = self.epsilon_budget
        out["neighbours"] = "add/remove one row"
        if self.uses_rdp:
            out["accounting"] = (f"Renyi DP composed over {len(RDP_ORDERS)} orders "
                                 f"({RDP_ORDERS[0]:g}..{RDP_ORDERS[-1]:g})")
            out["conversion"] = self.conversion
        elif self.conversion == "classic":
            out["accounting"] = "zCDP as RDP curves, classic conversion to (epsilon, delta)"
            out["conversion"] = "classic"
        else:
            out["accounting"] = "zCDP, tight CKS conversion to (epsilon, delta)"
            out["conversion"] = "balle2020"
        if self.delta is not None and (self.uses_rdp or self.conversion == "classic"):
            out["optimal_order"] = rdp_epsilon(rdp=self.rdp(), delta=self.delta,
                                               conversion=self.conversion)[1]
        return out

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "rho_budget": self.rho_budget,
            "delta": self.delta,
            "entries": [_entry_dict(e) for e in self._entries],
        }
        if self._epsilon_given:
            state["epsilon_budget"] = self._epsilon_budget
        if self.conversion != "balle2020":
            state["conversion"] = self.conversion
        if self._always_rdp:
            state["accounting"] = "rdp"
        if self.uses_rdp:
            state["rdp_orders"] = list(RDP_ORDERS)
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PrivacyLedger:
        orders = state.get("rdp_orders")
        if orders is not None and tuple(float(a) for a in orders) not in (RDP_ORDERS,
                                                                       LEGACY_RDP_ORDERS):
            raise ValueError("the saved ledger's RDP orders differ from this version's grid")
        ledger = cls(rho_budget=state["rho_budget"], delta=state.get("delta"),
                     epsilon_budget=state.get("epsilon_budget"),
                     conversion=state.get("conversion", "balle2020"),
                     accounting=state.get("accounting", "zcdp"))
        for raw in state["entries"]:
            ledger.spend(LedgerEntry(**raw))
        return ledger

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.state_dict(), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> PrivacyLedger:
        return cls.from_state_dict(json.loads(Path(path).read_text()))

    def __repr__(self) -> str:
        return (f"PrivacyLedger(spent={self.spent:.6g}, rho_budget={self.rho_budget:.6g}, "
                f"entries={len(self._entries)})")
