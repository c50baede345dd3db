"""Empirical privacy audit: a statistical lower bound on each mechanism's ε.

For a mechanism M and a pair of neighbouring datasets (D, D′) chosen to be worst-case, an
(ε, δ)-DP M satisfies, for every event E, ``P[M(D′) ∈ E] ≤ e^ε · P[M(D) ∈ E] + δ``. The
audit runs M many times on each dataset, counts how often a distinguishing event E (fixed in
advance, never tuned on the runs) happens, and bounds both probabilities with Clopper–Pearson
intervals at 97.5 % each, so that with 95 % confidence

    ε ≥ ln((p′_low − δ) / p_high).

A lower bound above the claimed ε is proof, at that confidence, that the mechanism breaks
its claim; a bound below it is consistent with the claim (it cannot prove privacy).

Each ``audit_*`` function runs one mechanism the pipeline uses, through the same library
function the pipeline calls, and returns an :class:`AuditResult`. This module reads no
private data: it builds its own synthetic neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from privfair.core.accounting import (
    PrivacyLedger,
    exponential_rho,
    gaussian_sigma,
    zcdp_epsilon,
    zcdp_rho,
)

__all__ = [
    "AuditResult",
    "MECHANISMS",
    "audit_aim_round",
    "audit_cathist",
    "audit_discrete_gaussian_marginals",
    "audit_end_to_end",
    "audit_exponential_selection",
    "audit_gaussian_marginals",
    "audit_quantiles",
    "clopper_pearson",
    "epsilon_lower_bound",
    "run_audit",
]

#: One run of a mechanism on D (``neighbour=False``) or D′; True when the event happens.
Trial = Callable[[bool, np.random.Generator], bool]


@dataclass(frozen=True)
class AuditResult:
    """One mechanism's audit: claimed ε against the 95 % lower bound from the runs."""

    mechanism: str
    claimed_epsilon: float
    delta: float
    epsilon_lower_bound: float
    trials: int
    hits_d: int
    hits_neighbour: int
    neighbours: str
    event: str

    @property
    def passed(self) -> bool:
        return self.epsilon_lower_bound <= self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def clopper_pearson(hits: int, trials: int, *, alpha: float) -> tuple[float, float]:
    """Two-sided exact binomial interval with coverage ``1 - alpha``."""
    from scipy.stats import beta

    if not 0 <= hits <= trials or trials < 1:
        raise ValueError(f"expected 0 <= hits <= trials, trials >= 1; got {hits}/{trials}")
    low = 0.0 if hits == 0 else float(beta.ppf(alpha / 2, hits, trials - hits + 1))
    high = 1.0 if hits == trials else float(beta.ppf(1 - alpha / 2, hits + 1, trials - hits))
    return low, high


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


def run_audit(trial: Trial, *, mechanism: str, claimed_epsilon: float, delta: float,
              trials: int, seed: int, neighbours: str, event: str) -> AuditResult:
    """Run ``trial`` ``trials`` times on each dataset and bound ε."""
    rng_d, rng_n = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    hits_d = sum(bool(trial(False, rng_d)) for _ in range(trials))
    hits_n = sum(bool(trial(True, rng_n)) for _ in range(trials))
    return AuditResult(
        mechanism=mechanism, claimed_epsilon=float(claimed_epsilon), delta=float(delta),
        epsilon_lower_bound=epsilon_lower_bound(hits_d, hits_n, trials, delta=delta),
        trials=trials, hits_d=hits_d, hits_neighbour=hits_n, neighbours=neighbours,
        event=event)


def _ledger() -> PrivacyLedger:
    return PrivacyLedger(rho_budget=1e9)


# --- the mechanisms -------------------------------------------------------------------------


def audit_gaussian_marginals(*, trials: int, seed: int = 0, epsilon: float = 1.0,
                             delta: float = 1e-6, discrete: bool = False) -> AuditResult:
    """The Gaussian mechanism on a one-way marginal (σ for ρ(ε, δ), sensitivity 1).

    D′ adds one row to cell 0; E is "noisy cell 0 exceeds its count in D by 2σ" (the
    likelihood ratio grows with the threshold; 2σ keeps E frequent enough to estimate).
    """
    from privfair.core.mechanisms import gaussian_mechanism

    sigma = gaussian_sigma(rho=zcdp_rho(epsilon=epsilon, delta=delta), sensitivity=1.0)
    counts = np.array([40, 25, 35], dtype=np.int64)
    threshold = counts[0] + 2.0 * sigma

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        values = counts + np.array([1, 0, 0]) if neighbour else counts
        noisy = gaussian_mechanism(values, sigma=sigma, sensitivity=1.0, rng=rng,
                                   ledger=_ledger(), name="audit", discrete=discrete)
        return bool(noisy[0] > threshold)

    return run_audit(trial, mechanism="gaussian marginals" + (" (discrete)" if discrete else ""),
                     claimed_epsilon=epsilon, delta=delta, trials=trials, seed=seed,
                     neighbours="one-way counts; D' adds one row to cell 0",
                     event="noisy cell 0 > count + 2 sigma")


def audit_discrete_gaussian_marginals(*, trials: int, seed: int = 6, epsilon: float = 1.0,
                                      delta: float = 1e-6) -> AuditResult:
    """:func:`audit_gaussian_marginals` with the exact discrete Gaussian (OS CSPRNG), the
    noise recommended for production (``--discrete-noise``)."""
    return audit_gaussian_marginals(trials=trials, seed=seed, epsilon=epsilon, delta=delta,
                                    discrete=True)


def audit_exponential_selection(*, trials: int, seed: int = 1, epsilon: float = 1.0,
                                candidates: int = 50) -> AuditResult:
    """The selection exponential mechanism (MST / PreFair pair choice), ε-DP.

    Worst case for add/remove: each candidate's score is its own marginal's L1 error, so one
    row can raise candidate 0 by Δ and lower every other by Δ. E is "candidate 0 chosen".
    """
    from privfair.core.mechanisms import exponential_mechanism

    base = np.zeros(candidates)
    base[1:] = 1.0
    flipped = 1.0 - base

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        scores = flipped if neighbour else base
        pick = exponential_mechanism(scores, epsilon=epsilon, sensitivity=1.0, rng=rng,
                                     ledger=_ledger(), name="audit")
        return pick == 0

    return run_audit(trial, mechanism="selection exponential mechanism",
                     claimed_epsilon=epsilon, delta=0.0, trials=trials, seed=seed,
                     neighbours=f"{candidates} candidates; D' moves candidate 0 up by the "
                                "sensitivity and the rest down",
                     event="candidate 0 selected")


def audit_quantiles(*, trials: int, seed: int = 2, epsilon: float = 1.0) -> AuditResult:
    """DP quantile bin edges (``dp_bins``): the median edge by the exponential mechanism.

    D has 10 values at 20 and 10 at 80 in [0, 100]; D′ adds one value at 0, which moves the
    median's rank target. E is "the released edge is below 20" (the interval under the
    lower cluster, whose score the new value raises).
    """
    from privfair.domains.quantiles import dp_quantile_edges

    data = np.array([20.0] * 10 + [80.0] * 10)
    extended = np.concatenate([data, [0.0]])
    rho = exponential_rho(epsilon=epsilon)

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        edges = dp_quantile_edges(extended if neighbour else data, bins=2, lower=0.0,
                                  upper=100.0, integer=False, rho=rho, rng=rng,
                                  ledger=_ledger(), name="audit")
        return len(edges) > 2 and edges[1] < 20.0

    return run_audit(trial, mechanism="DP quantiles (dp_bins)", claimed_epsilon=epsilon,
                     delta=0.0, trials=trials, seed=seed,
                     neighbours="10 values at 20, 10 at 80; D' adds one at 0",
                     event="median edge < 20")


CatHistFn = Callable[..., Any]


def _current_cathist(counts: Mapping[str, int], *, universe_values: tuple[str, ...],
                     tolerance: float, epsilon: float, rng: np.random.Generator) -> set[str]:
    from privfair.domains.cathist import ValueListUniverse, cathist

    result = cathist(counts, universe=ValueListUniverse(universe_values), tolerance=tolerance,
                     epsilon=epsilon, rng=rng, ledger=_ledger())
    return set(result.categories)


def audit_cathist(*, trials: int, seed: int = 3, epsilon: float = 1.0,
                  release: CatHistFn | None = None) -> AuditResult:
    """CatHist on a declared universe of 20 values (tolerance 0.01), ε-DP.

    D holds value "v00" 50 times; D′ adds one row holding "v07", a value of the universe.
    E is "v07 is released". ``release(counts, universe_values=, tolerance=, epsilon=, rng=)``
    returns the released category set; the default is today's :func:`cathist` (pass an
    adapter to audit another implementation, e.g. the one before issue 10).
    """
    universe = tuple(f"v{i:02d}" for i in range(20))
    release = release or _current_cathist
    d, neighbour_counts = {"v00": 50}, {"v00": 50, "v07": 1}

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        released = release(neighbour_counts if neighbour else d, universe_values=universe,
                           tolerance=0.01, epsilon=epsilon, rng=rng)
        return "v07" in released

    return run_audit(trial, mechanism="CatHist", claimed_epsilon=epsilon, delta=0.0,
                     trials=trials, seed=seed,
                     neighbours="universe of 20 values; D' adds one row with a value absent "
                                "from D",
                     event="that value is released")


def audit_aim_round(*, trials: int, seed: int = 4, rho_round: float = 0.05,
                    delta: float = 1e-6) -> AuditResult:
    """One AIM round: exponential-mechanism selection of a clique, then its Gaussian
    measurement, with AIM's split of the round's ρ (10 % select, 90 % measure).

    Quality is AIM's: weight × (L1 error of the current estimate − expected noise); the
    estimate is a fixed uniform model (public). D′ adds one row to cell 0 of clique 0. E is
    "clique 0 selected and its cell 0 measured above count + 2σ".
    """
    from privfair.core.mechanisms import exponential_mechanism, gaussian_mechanism

    sigma = math.sqrt(1 / (2 * 0.9 * rho_round))
    epsilon_select = math.sqrt(8 * 0.1 * rho_round)
    # Clique 0 is far from the current estimate (so AIM tends to pick it); the rest near it.
    tables = [np.array([40, 10, 10, 10]), *(np.array([15 + k, 15, 15 - k, 15])
                                            for k in range(5))]
    weight = 1.0

    estimate = np.full(4, 15.0)  # the current model's marginal: post-noise, so public

    def quality(tabs: list[np.ndarray]) -> np.ndarray:
        return np.array([weight * (np.abs(t - estimate).sum()
                                   - math.sqrt(2 / math.pi) * sigma * t.size) for t in tabs])

    neighbour_tables = [tables[0] + np.array([1, 0, 0, 0]), *tables[1:]]
    threshold = tables[0][0] + 2 * sigma

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        tabs = neighbour_tables if neighbour else tables
        ledger = _ledger()
        pick = exponential_mechanism(quality(tabs), epsilon=epsilon_select,
                                     sensitivity=weight, rng=rng, ledger=ledger,
                                     name="audit select")
        noisy = gaussian_mechanism(tabs[pick], sigma=sigma, sensitivity=1.0, rng=rng,
                                   ledger=ledger, name="audit measure")
        return pick == 0 and bool(noisy[0] > threshold)

    return run_audit(trial, mechanism="AIM round (select + measure)",
                     claimed_epsilon=zcdp_epsilon(rho=rho_round, delta=delta), delta=delta,
                     trials=trials, seed=seed,
                     neighbours="6 candidate 2x2 marginals; D' adds one row to clique 0",
                     event="clique 0 selected and cell 0 > count + 2 sigma")


def audit_end_to_end(*, trials: int, seed: int = 5, epsilon: float = 1.0,
                     delta: float = 1e-6, rows: int = 60) -> AuditResult:
    """A whole small release (PreFair-greedy synthesizer: one-way marginals, selection,
    2-way marginals, estimation), ε claimed for the release.

    D has ``rows`` rows over 4 binary attributes; D′ adds one row. E is "the release's
    estimated total (the default synthetic row count) exceeds len(D) + 2"."""
    import pandas as pd

    from privfair.core.domain import Domain, Roles
    from privfair.synth.synthesizer import FairSynthesizer

    domain = Domain(("sex", "edu", "job", "income"), (2, 2, 2, 2))
    roles = Roles(protected=("sex",), admissible=("edu",), outcome=("income",))
    rng0 = np.random.default_rng(99)

    frame = pd.DataFrame({a: rng0.integers(0, 2, size=rows) for a in domain.attributes})
    extended = pd.concat([frame, frame.iloc[[0]]], ignore_index=True)

    def trial(neighbour: bool, rng: np.random.Generator) -> bool:
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=epsilon, delta=delta,
                                method="prefair-greedy", max_iters=30)
        synth.fit(extended if neighbour else frame, rng=rng)
        return bool(synth.model_.total > rows + 2)

    return run_audit(trial, mechanism="end-to-end release (prefair-greedy)",
                     claimed_epsilon=epsilon, delta=delta, trials=trials, seed=seed,
                     neighbours=f"{rows} rows x 4 binary attributes; D' adds one row",
                     event="estimated total > len(D) + 2")


#: Name -> (audit function, trials of the full audit). The suite runs them with few trials.
MECHANISMS: dict[str, tuple[Callable[..., AuditResult], int]] = {
    "gaussian": (audit_gaussian_marginals, 30_000),
    "gaussian-discrete": (audit_discrete_gaussian_marginals, 20_000),
    "selection": (audit_exponential_selection, 40_000),
    "quantiles": (audit_quantiles, 40_000),
    "cathist": (audit_cathist, 20_000),
    "aim-round": (audit_aim_round, 40_000),
    "end-to-end": (audit_end_to_end, 400),
}


def run_all(*, names: list[str] | None = None, scale: float = 1.0,
            progress: Callable[[AuditResult], None] | None = None,
            cathist_release: CatHistFn | None = None) -> list[AuditResult]:
    """Audit every mechanism in :data:`MECHANISMS` (or ``names``) with its full trial count
    times ``scale``; ``progress(result)`` is told as each one finishes."""
    unknown = sorted(set(names or ()) - set(MECHANISMS))
    if unknown:
        raise ValueError(f"mechanism: unknown {unknown}; expected some of {sorted(MECHANISMS)}")
    results = []
    for name in names or list(MECHANISMS):
        function, trials = MECHANISMS[name]
        kwargs: dict[str, Any] = {"trials": max(10, round(trials * scale))}
        if name == "cathist" and cathist_release is not None:
            kwargs["release"] = cathist_release
        result = function(**kwargs)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def legacy_cathist_release(module_path: str) -> CatHistFn:
    """An adapter auditing a CatHist module with the pre-issue-10 API (``domain_size`` and a
    ``universe_sampler``) the way the pipeline called it: random 12-letter words."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("privfair_legacy_cathist", module_path)
    if spec is None or spec.loader is None:
        raise ValueError(f"legacy CatHist: cannot load {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while executing it
    spec.loader.exec_module(module)

    def release(counts: Mapping[str, int], *, universe_values: tuple[str, ...],
                tolerance: float, epsilon: float, rng: np.random.Generator) -> set[str]:
        result = module.cathist(counts, domain_size=len(universe_values), tolerance=tolerance,
                                epsilon=epsilon, rng=rng, ledger=_ledger(),
                                universe_sampler=module.random_word_sampler())
        return set(result.categories)

    return release
