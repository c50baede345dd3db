"""Choosing DP-SGD's noise multiplier before training (no torch).

Two questions, answered by bisection on σ (ε falls as σ grows):

* :func:`noise_multiplier_for`: the smallest σ whose Poisson-subsampled Gaussian, composed over
  ``steps``, is (ε, δ)-DP by dp-accounting's RDP accountant.
* :func:`noise_multiplier_on_ledger`: the smallest σ whose charges the ledger itself accepts,
  tried on copies of the ledger, so the answer agrees with the ledger's own accountant
  whatever it composes with, and, when a ``limit`` is given, whose composed Rényi curve that
  limit accepts too (a GAN release: the lifetime ledger's charge for the curve must not pass
  the run's declared ρ).

:func:`count_rho` is the ρ of a GAN's anchor counts (a share of the ε the ledger has left).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from privfair.core.domain import Domain
from privfair.core.errors import BudgetExceededError

__all__ = [
    "GAN_NOISE_TVD_LIMIT",
    "MARGINAL_SHARE",
    "MAX_NOISE_MULTIPLIER",
    "anchor_pairs",
    "count_rho",
    "gan_small_n",
    "noise_multiplier_for",
    "noise_multiplier_on_ledger",
    "subsampled_gaussian_epsilon",
]

#: Above this σ DP-SGD learns nothing useful; a budget that needs more is refused.
MAX_NOISE_MULTIPLIER = 1e3
_BISECTION_STEPS = 50
#: A GAN's default share of the ledger's remaining ε for its (S, Y) and anchor counts.
MARGINAL_SHARE = 0.25
#: A curve's limit: its cost over what it may cost (≤ 1 fits), e.g. the lifetime's charge for
#: it over the run's declared ρ.
Limit = Callable[[Any], float]


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
    from privfair.core.accounting import LEGACY_RDP_ORDERS

    # The ledger's integer orders: dp-accounting's fractional orders fail to converge at large
    # sampling rates (and log warnings); the ledger itself guards its orders below 2.
    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(LEGACY_RDP_ORDERS))
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


def count_rho(ledger: Any, share: float = MARGINAL_SHARE) -> float:
    """ρ of a GAN's counts: ``share`` of the ε the ledger has left at its δ, as zCDP."""
    from privfair.core.accounting import zcdp_rho

    if ledger.delta is None:
        raise ValueError("ledger: a delta is needed to split the budget between the GAN's "
                         "counts and DP-SGD")
    left = ledger.epsilon_budget - ledger.epsilon_spent()
    if left <= 0:
        raise BudgetExceededError("privacy budget exhausted: nothing is left for the GAN")
    return zcdp_rho(epsilon=share * left, delta=ledger.delta)


def noise_multiplier_on_ledger(ledger: Any, *, charges: Callable[[float], Sequence[dict]],
                               limit: Limit | None = None) -> float:
    """Smallest σ (to 0.1%) such that the ledger accepts every charge in ``charges(σ)``
    and, with a ``limit``, ``limit(curve) ≤ 1`` for the ledger's composed Rényi curve after
    them (both fall as σ grows).

    ``charges(σ)`` returns keyword arguments for ``ledger.spend_subsampled_gaussian`` (one
    dict per release per step, e.g. the gradient sum and DPSGD-F's clipped counts). Each try
    runs on a copy of the ledger; the ledger itself is not touched. The ledger's composed ε is
    smooth and decreasing in log σ, so false position on log ε finds σ in a few accountant
    calls (each costs a fraction of a second); the answer is then checked by the ledger's own
    budget test. A ``limit`` the ledger's σ already meets changes nothing; otherwise σ is
    found again on the larger of the two log-gaps (still decreasing in σ).
    """
    state = ledger.state_dict()
    budget = float(ledger.epsilon_budget)
    unbounded = {**state, "epsilon_budget": 1e12}

    def trial(sigma: float, from_state: dict[str, Any]) -> Any:
        book = type(ledger).from_state_dict(from_state)
        for kwargs in charges(sigma):
            book.spend_subsampled_gaussian(**kwargs)
        return book

    def ledger_gap(log_sigma: float) -> float:
        book = trial(math.exp(log_sigma), unbounded)
        return math.log(max(book.epsilon_spent(), 1e-300)) - math.log(budget)

    def ledger_fits(sigma: float) -> bool:
        try:
            trial(sigma, state)
        except BudgetExceededError:
            return False
        return True

    sigma = _false_position(ledger_gap, ledger_fits)
    if limit is None or limit(trial(sigma, unbounded).rdp()) <= 1.0:
        return sigma

    def both_gap(log_sigma: float) -> float:
        book = trial(math.exp(log_sigma), unbounded)
        return max(math.log(max(book.epsilon_spent(), 1e-300)) - math.log(budget),
                   math.log(max(limit(book.rdp()), 1e-300)))

    def both_fit(sigma: float) -> bool:
        return ledger_fits(sigma) and limit(trial(sigma, unbounded).rdp()) <= 1.0

    return _false_position(both_gap, both_fit)


def _false_position(gap: Callable[[float], float], fits: Callable[[float], bool]) -> float:
    """Smallest σ (to 0.1%) with ``fits(σ)``; ``gap(log σ)`` is a log-ratio, > 0 when σ is
    too small, decreasing in σ."""
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


def anchor_pairs(domain: Domain, protected: str, outcome: str,
                 method: str) -> tuple[tuple[str, str], ...]:
    """The pair marginals the generator is anchored to (public: method and domain only)."""
    others = [x for x in domain if x not in (protected, outcome)]
    pairs = [(x, outcome) for x in others]
    if method in ("dpgan", "acgan"):
        pairs += [(x, protected) for x in others]
    if method == "dpgan":  # ACGAN's y and s are independent by construction: no (S, Y) pair
        pairs += [(protected, outcome)]
    return tuple(pairs)


#: The GAN's small-n rule (issue 42.1): the tables' limit for a tree's pairs
#: (:data:`privfair.synth.structure.TREE_NOISE_TVD_LIMIT`), on the expected TVD that the
#: counts' noise alone puts on an average measured pair.
GAN_NOISE_TVD_LIMIT = 0.15


def gan_small_n(n_hat: float, domain: Domain, pairs: tuple[tuple[str, str], ...],
                sigma: float) -> dict[str, Any]:
    """Whether the run's own noisy pair marginals can carry any signal at this noisy row
    count: a pair of ``c`` cells measured at σ has expected noise TVD ``σ·√(2/π)·c/(2n̂)``.
    Above :data:`GAN_NOISE_TVD_LIMIT` on the average pair the generator would learn noise
    (credit table, 1,000 rows, ε = 1: σ ≈ 104 a cell, 1-way TVD 0.22 where independence
    reaches 0.04): the release is the independence model instead. Public σ, public domain,
    the noisy n̂: post-processing of DP output."""
    cells = (math.fsum(domain.size(a) * domain.size(b) for a, b in pairs) / len(pairs)
             if pairs else 0.0)
    noise = sigma * math.sqrt(2 / math.pi) * cells / (2 * max(float(n_hat), 1.0))
    return {"pair_noise_tvd": noise, "limit": GAN_NOISE_TVD_LIMIT,
            "fallback": bool(noise > GAN_NOISE_TVD_LIMIT), "noisy_rows": float(n_hat),
            "pairs": len(pairs), "counts_sigma": float(sigma)}
