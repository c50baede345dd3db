"""Privacy accounting in zero-concentrated differential privacy (zCDP).

Every private read is charged to one :class:`PrivacyLedger` in units of ρ (rho). Composition in
zCDP is addition, so the ledger's total is the sum of its entries. Conversion between ρ-zCDP and
(ε, δ)-DP uses the tight bound of Canonne, Kamath and Steinke (2020, Prop. 12 / Cor. 13):

.. math::

    \\delta(\\varepsilon) = \\inf_{\\alpha > 1}
        \\frac{\\exp\\big((\\alpha - 1)(\\alpha\\rho - \\varepsilon)\\big)}{\\alpha - 1}
        \\Big(1 - \\frac{1}{\\alpha}\\Big)^{\\alpha}

Neighbouring datasets differ by adding or removing one row.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from privfair.core.errors import BudgetExceededError

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
        if (2 * mid - 1) * rho - epsilon + math.log1p(-1 / mid) < 0:
            lo = mid
        else:
            hi = mid
    return min(1.0, math.exp(log_delta((lo + hi) / 2)))


def zcdp_epsilon(*, rho: float, delta: float) -> float:
    """Smallest ε such that ρ-zCDP implies (ε, δ)-DP."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if rho == 0:
        return 0.0
    lo, hi = 0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if zcdp_delta(rho=rho, epsilon=mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


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
        if zcdp_delta(rho=mid, epsilon=epsilon) <= delta:
            lo = mid
        else:
            hi = mid
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


@dataclass(frozen=True)
class LedgerEntry:
    """One charged step.

    Attributes
    ----------
    name : str
        What was measured, e.g. ``"one-way marginals"``.
    mechanism : str
        ``"gaussian"``, ``"discrete-gaussian"``, ``"exponential"`` or ``"laplace"``.
    sensitivity : float
        L2 sensitivity for Gaussian mechanisms, score sensitivity for the exponential
        mechanism, L1 sensitivity for Laplace.
    rho : float
        zCDP cost of the step.
    sigma : float or None
        Noise scale of Gaussian mechanisms.
    epsilon : float or None
        Parameter of exponential or Laplace mechanisms.
    queries : int
        Number of scalar queries answered in the step.
    """

    name: str
    mechanism: str
    sensitivity: float
    rho: float
    sigma: float | None = None
    epsilon: float | None = None
    queries: int = 1


class PrivacyLedger:
    """A zCDP budget and the record of everything charged to it.

    Mechanisms call :meth:`spend` *before* drawing noise, so a step that would go past the
    budget raises :class:`~privfair.core.errors.BudgetExceededError` with nothing released.

    Parameters
    ----------
    rho_budget : float
        Total ρ available.
    delta : float, optional
        δ used to report the spent budget as (ε, δ).
    """

    def __init__(self, *, rho_budget: float, delta: float | None = None) -> None:
        if not (math.isfinite(rho_budget) and rho_budget > 0):
            raise ValueError(f"rho_budget must be a finite number > 0, got {rho_budget!r}")
        if delta is not None and not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        self.rho_budget = float(rho_budget)
        self.delta = delta
        self._entries: list[LedgerEntry] = []

    @classmethod
    def from_epsilon_delta(cls, *, epsilon: float, delta: float) -> PrivacyLedger:
        """A ledger whose budget is the largest ρ that still gives (ε, δ)-DP."""
        return cls(rho_budget=zcdp_rho(epsilon=epsilon, delta=delta), delta=delta)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    @property
    def spent(self) -> float:
        return math.fsum(e.rho for e in self._entries)

    @property
    def remaining(self) -> float:
        return max(0.0, self.rho_budget - self.spent)

    def check(self, rho: float) -> None:
        """Raise if ``rho`` more would exceed the budget."""
        if not (math.isfinite(rho) and rho > 0):
            raise ValueError(f"a step must cost a finite rho > 0, got {rho!r}")
        if self.spent + rho > self.rho_budget * (1 + _BUDGET_RTOL):
            raise BudgetExceededError(
                f"privacy budget exceeded: step costs rho={rho:.6g} but only "
                f"{self.remaining:.6g} of {self.rho_budget:.6g} is left"
            )

    def spend(self, entry: LedgerEntry) -> None:
        """Check then record a step. Call before any noise is drawn."""
        self.check(entry.rho)
        self._entries.append(entry)

    def epsilon_spent(self, delta: float | None = None) -> float:
        """ε of the spent ρ at ``delta`` (the ledger's δ by default)."""
        delta = self.delta if delta is None else delta
        if delta is None:
            raise ValueError("delta is needed to express the spent budget as (epsilon, delta)")
        return zcdp_epsilon(rho=self.spent, delta=delta)

    def guarantee(self) -> dict[str, Any]:
        """The end-to-end guarantee of what has been spent."""
        out: dict[str, Any] = {"rho": self.spent, "rho_budget": self.rho_budget}
        if self.delta is not None:
            out["delta"] = self.delta
            out["epsilon"] = self.epsilon_spent()
            out["epsilon_budget"] = zcdp_epsilon(rho=self.rho_budget, delta=self.delta)
        out["neighbours"] = "add/remove one row"
        out["accounting"] = "zCDP, tight CKS conversion to (epsilon, delta)"
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "rho_budget": self.rho_budget,
            "delta": self.delta,
            "entries": [asdict(e) for e in self._entries],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PrivacyLedger:
        ledger = cls(rho_budget=state["rho_budget"], delta=state.get("delta"))
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
