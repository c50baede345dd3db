"""The statistics of the audit: Clopper–Pearson bounds, the event chosen on calibration runs,
and the run of one mechanism with its negative controls.

An audited mechanism is described by a *draw*: ``draw(n, rng)`` runs the mechanism ``n``
times on D and ``n`` times on D′ and returns one scalar score per run (a statistic close to
the log-likelihood ratio of the two output distributions, large when the output looks like
D′). The audit

1. draws calibration runs and picks the event ``score ≥ t`` or ``score ≤ t``, read as
   evidence for D′ over D or (the symmetric inequality, D and D′ swapped) for D over D′,
   whose projected lower bound at the fresh trial count is the largest;
2. counts that one event on fresh runs, never seen by step 1, and bounds ε with
   Clopper–Pearson intervals: with 95 % confidence ``ε ≥ ln((p′_low − δ) / p_high)``.

Because the event is fixed before the fresh runs, the bound is valid whatever step 1 chose.
A *negative control* is the same audit of the same library mechanism called with a smaller
noise scale (``noise`` < 1: σ × noise, ε / noise); the audit has power only if the
control's bound exceeds the claimed ε.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from privfair.core.accounting import PrivacyLedger

__all__ = [
    "AuditResult",
    "Control",
    "ControlResult",
    "Draw",
    "audit_mechanism",
    "choose_event",
    "claimed_epsilon",
    "clopper_pearson",
    "epsilon_lower_bound",
    "fresh_ledger",
]

#: ``draw(n, rng) -> (scores on D, scores on D′)``, ``n`` runs each.
Draw = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]]
#: ``make(noise) -> Draw``: the mechanism with every noise scale multiplied by ``noise``.
DrawFactory = Callable[[float], Draw]

#: Most thresholds tried on the calibration runs (evenly spaced in rank).
MAX_THRESHOLDS = 600


@dataclass(frozen=True)
class Control:
    """A negative control: the mechanism with its noise scaled by ``noise`` (< 1)."""

    label: str
    noise: float


HALF_NOISE = Control("half noise", 0.5)


@dataclass(frozen=True)
class ControlResult:
    """One negative control's audit at the same trial count as the real mechanism."""

    label: str
    noise: float
    epsilon_lower_bound: float
    hits_d: int
    hits_neighbour: int
    event: str


@dataclass(frozen=True)
class AuditResult:
    """One mechanism's audit: claimed ε against the 95 % lower bound from the runs.

    ``trials`` fresh runs on each of D and D′ (``calibration_trials`` more on each chose the
    event). ``controls`` are the negative controls, each of which must give a bound above
    ``claimed_epsilon`` for the audit to have shown any power.
    """

    mechanism: str
    claimed_epsilon: float
    delta: float
    epsilon_lower_bound: float
    trials: int
    hits_d: int
    hits_neighbour: int
    neighbours: str
    event: str
    calibration_trials: int = 0
    statistic: str = ""
    controls: tuple[ControlResult, ...] = ()
    seconds: float = 0.0
    notes: str = ""

    @property
    def passed(self) -> bool:
        """The bound is consistent with the claim (no proof of a violation)."""
        return self.epsilon_lower_bound <= self.claimed_epsilon

    @property
    def controls_caught(self) -> bool:
        """Every negative control's bound exceeds the claim (the audit can fail)."""
        return all(c.epsilon_lower_bound > self.claimed_epsilon for c in self.controls)

    @property
    def control_bound(self) -> float | None:
        """The first (main) negative control's lower bound, if any."""
        return self.controls[0].epsilon_lower_bound if self.controls else None

    @property
    def verdict(self) -> str:
        if not self.passed:
            return "VIOLATION"
        return "ok" if self.controls_caught else "NO POWER"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["controls"] = [asdict(c) for c in self.controls]
        return {**out, "passed": self.passed, "controls_caught": self.controls_caught,
                "verdict": self.verdict}


def clopper_pearson(hits: int, trials: int, *, alpha: float) -> tuple[float, float]:
    """Two-sided exact binomial interval with coverage ``1 - alpha``."""
    from scipy.stats import beta

    if not 0 <= hits <= trials or trials < 1:
        raise ValueError(f"expected 0 <= hits <= trials, trials >= 1; got {hits}/{trials}")
    low = 0.0 if hits == 0 else float(beta.ppf(alpha / 2, hits, trials - hits + 1))
    high = 1.0 if hits == trials else float(beta.ppf(1 - alpha / 2, hits + 1, trials - hits))
    return low, high


def _bounds(hits_d: np.ndarray, hits_n: np.ndarray, trials: int, *, delta: float,
            confidence: float) -> np.ndarray:
    """Vectorised :func:`epsilon_lower_bound` over arrays of hit counts."""
    from scipy.stats import beta

    alpha = 1.0 - confidence
    hits_d = np.asarray(hits_d, dtype=np.float64)
    hits_n = np.asarray(hits_n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_high = np.where(hits_d >= trials, 1.0,
                          beta.ppf(1 - alpha / 2, hits_d + 1, np.maximum(trials - hits_d, 1)))
        p_low = np.where(hits_n <= 0, 0.0,
                         beta.ppf(alpha / 2, np.maximum(hits_n, 1), trials - hits_n + 1))
        ratio = (p_low - delta) / p_high
        out = np.where(ratio > 1.0, np.log(np.where(ratio > 0, ratio, 1.0)), 0.0)
    return out


def epsilon_lower_bound(hits_d: int, hits_neighbour: int, trials: int, *, delta: float,
                        confidence: float = 0.95) -> float:
    """``ln((p′_low − δ) / p_high)`` from Clopper–Pearson bounds; 0 when uninformative.

    Each probability gets a one-sided bound at level ``(1 - confidence) / 2`` (two-sided
    intervals at ``1 - confidence``), so both hold together with probability ``confidence``.
    """
    alpha = 1.0 - confidence
    _, p_high = clopper_pearson(hits_d, trials, alpha=alpha)
    p_low, _ = clopper_pearson(hits_neighbour, trials, alpha=alpha)
    if p_low - delta <= 0 or p_high <= 0:
        return 0.0
    return max(0.0, math.log((p_low - delta) / p_high))


@dataclass(frozen=True)
class Event:
    """``score ≥ threshold`` (``upper``) or ``score ≤ threshold``, and which dataset it
    favours: D′ (``ln((P_D′(E) − δ) / P_D(E))``) or D, the symmetric inequality."""

    threshold: float
    upper: bool
    favours_neighbour: bool = True

    def hits(self, scores: np.ndarray) -> int:
        scores = np.asarray(scores, dtype=np.float64)
        return int(np.sum(scores >= self.threshold if self.upper
                          else scores <= self.threshold))

    def describe(self, statistic: str) -> str:
        side = ">=" if self.upper else "<="
        swap = "" if self.favours_neighbour else " (D and D' swapped)"
        return f"{statistic} {side} {self.threshold:.6g}{swap}"


def choose_event(scores_d: np.ndarray, scores_n: np.ndarray, *, trials: int,
                 delta: float) -> Event:
    """The event with the largest projected bound on ``trials`` fresh runs.

    Tries both tails and both roles at every threshold. Calibration hit rates are
    projected to ``trials`` runs and bounded as the fresh counts will be, so a threshold
    deep in a tail (tiny counts, wide intervals) loses to one that the fresh runs can
    actually confirm.
    """
    scores_d = np.asarray(scores_d, dtype=np.float64)
    scores_n = np.asarray(scores_n, dtype=np.float64)
    pooled = np.unique(np.concatenate([scores_d, scores_n]))
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return Event(0.0, True)
    if pooled.size > MAX_THRESHOLDS:
        pooled = pooled[np.linspace(0, pooled.size - 1, MAX_THRESHOLDS).round().astype(int)]
    sorted_d, sorted_n = np.sort(scores_d), np.sort(scores_n)
    scale_d, scale_n = trials / max(sorted_d.size, 1), trials / max(sorted_n.size, 1)
    best, best_bound = Event(float(pooled[0]), True), -1.0
    for upper in (True, False):
        if upper:  # counts of score ≥ t
            on_d = sorted_d.size - np.searchsorted(sorted_d, pooled, side="left")
            on_n = sorted_n.size - np.searchsorted(sorted_n, pooled, side="left")
        else:  # counts of score ≤ t
            on_d = np.searchsorted(sorted_d, pooled, side="right")
            on_n = np.searchsorted(sorted_n, pooled, side="right")
        on_d, on_n = np.round(on_d * scale_d), np.round(on_n * scale_n)
        for favours_neighbour in (True, False):
            low, high = (on_d, on_n) if favours_neighbour else (on_n, on_d)
            bounds = _bounds(low, high, trials, delta=delta, confidence=0.95)
            i = int(np.argmax(bounds))
            if bounds[i] > best_bound:
                best, best_bound = Event(float(pooled[i]), upper, favours_neighbour), bounds[i]
    return best


def _count(event: Event, scores_d: np.ndarray, scores_n: np.ndarray) -> tuple[int, int]:
    """(hits on the side the event disfavours, hits on the side it favours)."""
    if event.favours_neighbour:
        return event.hits(scores_d), event.hits(scores_n)
    return event.hits(scores_n), event.hits(scores_d)


def _one_audit(draw: Draw, *, trials: int, calibration: int, delta: float,
               seed: np.random.SeedSequence) -> tuple[Event, int, int]:
    rng_cal, rng_fresh = (np.random.default_rng(s) for s in seed.spawn(2))
    cal_d, cal_n = draw(calibration, rng_cal)
    event = choose_event(cal_d, cal_n, trials=trials, delta=delta)
    fresh_d, fresh_n = draw(trials, rng_fresh)
    if len(fresh_d) != trials or len(fresh_n) != trials:
        raise RuntimeError(f"draw returned {len(fresh_d)}/{len(fresh_n)} runs, not {trials}")
    hits_d, hits_n = _count(event, fresh_d, fresh_n)
    return event, hits_d, hits_n


def audit_mechanism(make: DrawFactory, *, mechanism: str, claimed_epsilon: float,
                    delta: float, trials: int, seed: int, neighbours: str, statistic: str,
                    calibration: int | None = None,
                    controls: Sequence[Control] = (HALF_NOISE,),
                    notes: str = "") -> AuditResult:
    """Audit ``make(1.0)`` and each control ``make(c.noise)`` with ``trials`` fresh runs.

    Parameters
    ----------
    make : callable
        ``make(noise)`` returns the draw of the mechanism with its noise scaled by ``noise``
        (1 for the mechanism as the library calibrates it).
    claimed_epsilon, delta : float
        The claim (ε at δ) the ledger makes for ``make(1.0)``.
    trials : int
        Fresh runs on each dataset; ``calibration`` (default ``trials // 2``) more choose the
        event.
    seed : int
        Seeds every run; the real mechanism and each control get independent streams.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials!r}")
    calibration = max(1, trials // 2) if calibration is None else calibration
    start = time.perf_counter()
    streams = np.random.SeedSequence(seed).spawn(1 + len(controls))
    event, hits_d, hits_n = _one_audit(make(1.0), trials=trials, calibration=calibration,
                                       delta=delta, seed=streams[0])
    results = []
    for control, stream in zip(controls, streams[1:], strict=True):
        c_event, c_d, c_n = _one_audit(make(control.noise), trials=trials,
                                       calibration=calibration, delta=delta, seed=stream)
        results.append(ControlResult(
            label=control.label, noise=control.noise,
            epsilon_lower_bound=epsilon_lower_bound(c_d, c_n, trials, delta=delta),
            hits_d=c_d, hits_neighbour=c_n, event=c_event.describe(statistic)))
    return AuditResult(
        mechanism=mechanism, claimed_epsilon=float(claimed_epsilon), delta=float(delta),
        epsilon_lower_bound=epsilon_lower_bound(hits_d, hits_n, trials, delta=delta),
        trials=trials, hits_d=hits_d, hits_neighbour=hits_n, neighbours=neighbours,
        event=event.describe(statistic), calibration_trials=calibration,
        statistic=statistic, controls=tuple(results),
        seconds=round(time.perf_counter() - start, 2), notes=notes)


def fresh_ledger(*, delta: float | None = None) -> PrivacyLedger:
    """A ledger with room for anything: each audit run is charged to its own."""
    return PrivacyLedger(rho_budget=1e12, delta=delta)


def claimed_epsilon(charge: Callable[[PrivacyLedger], Any], *, delta: float) -> float:
    """ε at ``delta`` that the ledger records for one run: ``charge(ledger)`` runs it.

    The ledger composes Rényi curves from the first entry, so pure ε-DP steps count as
    what they are (a lone ε-DP step claims exactly its ε, at any δ).
    """
    ledger = PrivacyLedger(rho_budget=1e12, delta=delta, accounting="rdp")
    charge(ledger)
    return float(ledger.epsilon_spent(delta))
