"""Choosing DP-SGD's noise multiplier before training (no torch).

Two questions, answered by bisection on σ (ε falls as σ grows):

* :func:`noise_multiplier_for`: the smallest σ whose Poisson-subsampled Gaussian, composed over
  ``steps``, is (ε, δ)-DP by dp-accounting's RDP accountant.
* :func:`noise_multiplier_on_ledger`: the smallest σ whose charges the ledger itself accepts,
  tried on copies of the ledger, so the answer agrees with the ledger's own accountant
  whatever it composes with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from privfair.core.errors import BudgetExceededError

__all__ = [
    "MAX_NOISE_MULTIPLIER",
    "noise_multiplier_for",
    "noise_multiplier_on_ledger",
    "subsampled_gaussian_epsilon",
]

#: Above this σ DP-SGD learns nothing useful; a budget that needs more is refused.
MAX_NOISE_MULTIPLIER = 1e3
_BISECTION_STEPS = 50


def _check(sample_rate: float, steps: int) -> None:
    if not (0 < sample_rate <= 1):
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")


def subsampled_gaussian_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int,
                                delta: float) -> float:
    """ε at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (dp-accounting RDP)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    _check(sample_rate, steps)
    from privfair.core.accounting import RDP_ORDERS

    # The ledger's order grid: dp-accounting's default fractional orders fail to converge at
    # large sampling rates (and log warnings).
    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(RDP_ORDERS))
    accountant.compose(dp_accounting.PoissonSampledDpEvent(
        sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)
    return float(accountant.get_epsilon(delta))


def _bisect(fits: Callable[[float], bool], what: str) -> float:
    lo, hi = 1e-2, 1.0
    while not fits(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_NOISE_MULTIPLIER:
            raise BudgetExceededError(
                f"{what}: the budget would need a DP-SGD noise multiplier above "
                f"{MAX_NOISE_MULTIPLIER:g}; raise epsilon or lower epochs")
    if fits(lo):
        return lo
    for _ in range(_BISECTION_STEPS):
        mid = math.sqrt(lo * hi)
        if fits(mid):
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-3:
            break
    return hi


def noise_multiplier_for(*, epsilon: float, delta: float, sample_rate: float,
                         steps: int) -> float:
    """Smallest noise multiplier σ with ε(σ, q, steps) ≤ ``epsilon`` at ``delta``."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    _check(sample_rate, steps)
    return _bisect(lambda sigma: subsampled_gaussian_epsilon(
        noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta) <= epsilon,
        "noise_multiplier_for")


def noise_multiplier_on_ledger(ledger: Any, *, charges: Callable[[float], Sequence[dict]],
                               ) -> float:
    """Smallest σ (to 0.1%) such that the ledger accepts every charge in ``charges(σ)``.

    ``charges(σ)`` returns keyword arguments for ``ledger.spend_subsampled_gaussian`` (one
    dict per release per step, e.g. the gradient sum and DPSGD-F's clipped counts). Each try
    runs on a copy of the ledger; the ledger itself is not touched. The ledger's composed ε is
    smooth and decreasing in log σ, so false position on log ε finds σ in a few accountant
    calls (each costs a fraction of a second); the answer is then checked by the ledger's own
    budget test.
    """
    state = ledger.state_dict()
    budget = float(ledger.epsilon_budget)
    unbounded = {**state, "epsilon_budget": 1e12}

    def gap(log_sigma: float) -> float:
        trial = type(ledger).from_state_dict(unbounded)
        for kwargs in charges(math.exp(log_sigma)):
            trial.spend_subsampled_gaussian(**kwargs)
        return math.log(max(trial.epsilon_spent(), 1e-300)) - math.log(budget)

    def fits(sigma: float) -> bool:
        trial = type(ledger).from_state_dict(state)
        try:
            for kwargs in charges(sigma):
                trial.spend_subsampled_gaussian(**kwargs)
        except BudgetExceededError:
            return False
        return True

    lo, hi = 0.0, math.log(2.0)
    f_lo, f_hi = gap(lo), gap(hi)
    while f_lo < 0:  # σ = e^lo already fits: step down
        hi, f_hi, lo = lo, f_lo, lo - math.log(4.0)
        if lo < math.log(1e-3):
            break
        f_lo = gap(lo)
    while f_hi > 0:
        lo, f_lo, hi = hi, f_hi, hi + math.log(4.0)
        if hi > math.log(MAX_NOISE_MULTIPLIER):
            raise BudgetExceededError(
                "DP-SGD calibration: the budget would need a noise multiplier above "
                f"{MAX_NOISE_MULTIPLIER:g}; raise epsilon or lower epochs")
        f_hi = gap(hi)
    side = 0
    for _ in range(_BISECTION_STEPS):
        if hi - lo < 1e-3 or f_lo <= 0:
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        x = min(max(x, lo + 1e-4), hi - 1e-4)
        f = gap(x)
        if f > 0:
            lo, f_lo = x, f
            f_hi = f_hi / 2 if side == -1 else f_hi  # Illinois step: no one-sided stall
            side = -1
        else:
            hi, f_hi = x, f
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
        if abs(f) < 2e-4:
            break
    sigma = math.exp(hi)
    for _ in range(100):
        if fits(sigma):
            return sigma
        sigma *= 1.001
    raise BudgetExceededError("DP-SGD calibration: no noise multiplier fits the ledger")
