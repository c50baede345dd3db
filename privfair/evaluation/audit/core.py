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

Gaussian mechanisms are audited by a *Gaussian-DP fit* instead (``fit="gdp"``, as the 2026
Gaussian-DP audits of MST and AIM do): their statistic is a projection of the output on the
direction the neighbour moves it, N(m, s²) on D and N(m + Δ_true/σ · s, s²) on D′, so its
standardised mean shift μ̂ estimates the mechanism's μ = Δ_true/σ, whatever sensitivity the
code declared. The one-sided 95 % lower confidence limit of μ converts to ε at the audit's δ
through the μ-GDP curve ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth and Su
2022), compared with the ledger's claim at the same δ. Unlike a threshold event, the fit uses
every run, and at a small δ (:data:`GDP_DELTA`) the exact Gaussian curve sits within 5 % of the
ledger's Rényi conversion, so a correct mechanism audits at 0.9 of its claim and one whose
sensitivity is declared at half its value at about twice it. The bound is parametric: it
holds to the extent the statistic is Gaussian (exactly for a Gaussian mechanism's
projection; by the central limit theorem for compositions of many small steps).
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
    "fit_audit",
    "fresh_ledger",
    "gdp_delta",
    "gdp_fit",
    "gdp_epsilon",
    "gdp_mu_lower_bound",
]

#: δ at which Gaussian-DP fits are compared with the ledger's claim: the project's default
#: release δ, where the exact μ-GDP curve is within 5 % of the ledger's Rényi conversion
#: (6.17 against 6.47 at μ = 1).
GDP_DELTA = 1e-9

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
    fit: str = "threshold"

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


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-Gaussian DP: ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``."""
    from scipy.stats import norm

    if mu <= 0:
        return 0.0
    # e^ε Φ(·) in log space: ε reaches μ²/2, beyond exp's range for a noiseless control.
    return float(norm.cdf(-epsilon / mu + mu / 2)
                 - math.exp(epsilon + norm.logcdf(-epsilon / mu - mu / 2)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with ``gdp_delta(mu, ε) ≤ delta``: μ-GDP's ε at ``delta`` (0 when μ ≤ 0
    or δ(0) ≤ δ)."""
    from scipy.optimize import brentq

    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    if math.isinf(mu):
        return math.inf
    high = 1.0
    while gdp_delta(mu, high) > delta:
        high *= 2
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, high, xtol=1e-10))


def gdp_mu_lower_bound(scores_d: np.ndarray, scores_n: np.ndarray, *,
                       confidence: float = 0.95) -> tuple[float, float]:
    """(μ̂, one-sided lower confidence limit of μ) from a statistic N(m, s²) on D and
    N(m + μ s, s²) on D′.

    μ̂ is the difference of the means over the pooled standard deviation; its standard error
    is ``√(1/n_D + 1/n_D′ + μ̂² / (2 (n_D + n_D′)))`` (the mean difference, then the
    estimated scale).
    """
    from scipy.stats import norm

    d = np.asarray(scores_d, dtype=np.float64)
    n = np.asarray(scores_n, dtype=np.float64)
    if d.size < 2 or n.size < 2:
        raise ValueError(f"expected at least 2 runs on each side, got {d.size}/{n.size}")
    pooled = math.sqrt(((d.size - 1) * d.var(ddof=1) + (n.size - 1) * n.var(ddof=1))
                       / (d.size + n.size - 2))
    if pooled == 0:  # no noise at all: D and D' are told apart without error
        return (math.inf, math.inf) if n.mean() > d.mean() else (0.0, 0.0)
    mu = float((n.mean() - d.mean()) / pooled)
    se = math.sqrt(1 / d.size + 1 / n.size + mu**2 / (2 * (d.size + n.size)))
    return mu, mu - float(norm.ppf(confidence)) * se


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
                    notes: str = "", fit: str = "threshold") -> AuditResult:
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
    fit : {"threshold", "gdp"}
        ``threshold``: a Clopper–Pearson bound on an event chosen on calibration runs.
        ``gdp``: the Gaussian-DP fit of the statistic on ``trials`` runs of each dataset
        (no calibration), its μ's 95 % lower limit converted to ε at ``delta``.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials!r}")
    if fit == "gdp":
        return fit_audit(make, gdp_fit, mechanism=mechanism, claimed_epsilon=claimed_epsilon,
                         delta=delta, trials=trials, seed=seed, neighbours=neighbours,
                         statistic=statistic, controls=controls, notes=notes)
    if fit != "threshold":
        raise ValueError(f"fit must be 'threshold' or 'gdp', got {fit!r}")
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


#: ``fit(scores_d, scores_n, delta) -> (ε lower bound, what the fit found)``: a parametric
#: bound from ``trials`` runs on each dataset.
Fit = Callable[[np.ndarray, np.ndarray, float], tuple[float, str]]


def gdp_fit(scores_d: np.ndarray, scores_n: np.ndarray, delta: float) -> tuple[float, str]:
    """The Gaussian-DP fit: μ's 95 % lower limit (:func:`gdp_mu_lower_bound`) as ε at δ."""
    mu, mu_low = gdp_mu_lower_bound(scores_d, scores_n)
    bound = math.inf if math.isinf(mu_low) else gdp_epsilon(mu_low, delta)
    return bound, f"GDP fit: mu {mu:.4g}, 95% lower {mu_low:.4g}"


def _fit_one(draw: Draw, fit: Fit, *, trials: int, delta: float,
             seed: np.random.SeedSequence) -> tuple[float, str]:
    scores_d, scores_n = draw(trials, np.random.default_rng(seed))
    if len(scores_d) != trials or len(scores_n) != trials:
        raise RuntimeError(f"draw returned {len(scores_d)}/{len(scores_n)} runs, not {trials}")
    return fit(np.asarray(scores_d), np.asarray(scores_n), delta)


def fit_audit(make: DrawFactory, fit: Fit, *, mechanism: str, claimed_epsilon: float,
              delta: float, trials: int, seed: int, neighbours: str, statistic: str,
              controls: Sequence[Control] = (HALF_NOISE,), notes: str = "",
              label: str = "gdp") -> AuditResult:
    """:func:`audit_mechanism` with a parametric ``fit`` of ``trials`` runs on each dataset
    (no calibration runs) in place of the threshold event."""
    if not 0 < delta < 1:
        raise ValueError(f"a parametric fit needs delta in (0, 1), got {delta!r}")
    if trials < 2:
        raise ValueError(f"trials must be >= 2, got {trials!r}")
    start = time.perf_counter()
    streams = np.random.SeedSequence(seed).spawn(1 + len(controls))
    bound, found = _fit_one(make(1.0), fit, trials=trials, delta=delta, seed=streams[0])
    results = []
    for control, stream in zip(controls, streams[1:], strict=True):
        c_bound, c_found = _fit_one(make(control.noise), fit, trials=trials, delta=delta,
                                    seed=stream)
        results.append(ControlResult(
            label=control.label, noise=control.noise, epsilon_lower_bound=c_bound,
            hits_d=0, hits_neighbour=0, event=c_found))
    return AuditResult(
        mechanism=mechanism, claimed_epsilon=float(claimed_epsilon), delta=float(delta),
        epsilon_lower_bound=bound, trials=trials, hits_d=0, hits_neighbour=0,
        neighbours=neighbours, event=found, calibration_trials=0, statistic=statistic,
        controls=tuple(results), seconds=round(time.perf_counter() - start, 2), notes=notes,
        fit=label)


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
