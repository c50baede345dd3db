"""Empirical privacy audit: a statistical lower bound on each mechanism's ε, and proof that
the audit can fail.

For a mechanism M and a pair of neighbouring datasets (D, D′) chosen to be worst-case, an
(ε, δ)-DP M satisfies, for every event E, ``P[M(D′) ∈ E] ≤ e^ε · P[M(D) ∈ E] + δ``. The
audit runs M many times on each dataset, counts how often a distinguishing event E happens,
and bounds both probabilities with Clopper–Pearson intervals at 97.5 % each, so that with
95 % confidence

    ε ≥ ln((p′_low − δ) / p_high).

E is ``statistic ≥ t`` (or the symmetric ``≤ t`` with D and D′ swapped), where the statistic
is (close to) the log-likelihood ratio of the two output distributions and t is chosen on
separate calibration runs (:mod:`.core`). A bound above the claimed ε proves, at that
confidence, that the mechanism breaks its claim. Each mechanism also runs *negative
controls*, the same library function called with less noise (σ halved or ε doubled; for the
Gaussian also the noise removed): their bounds must exceed the claim, or the audit could not
have caught anything.

Every ``audit_*`` function runs one mechanism through the library function a release calls
and returns an :class:`AuditResult`. This package reads no private data: it builds its own
neighbours.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from privfair.evaluation.audit.core import (
    AuditResult,
    ControlResult,
    claimed_epsilon,
    clopper_pearson,
    epsilon_lower_bound,
    fresh_ledger,
)
from privfair.evaluation.audit.graphs import audit_dpne, audit_lapmech, audit_privpc
from privfair.evaluation.audit.models import (
    audit_d1_step,
    audit_dpsgd,
    audit_dpsgd_f,
    audit_functional,
)
from privfair.evaluation.audit.tables import (
    CatHistFn,
    audit_aim_round,
    audit_aim_selection,
    audit_cathist,
    audit_discrete_gaussian_marginals,
    audit_end_to_end,
    audit_exponential_selection,
    audit_gaussian_marginals,
    audit_quantiles,
)

__all__ = [
    "MECHANISMS",
    "AuditResult",
    "ControlResult",
    "Entry",
    "audit_aim_round",
    "audit_aim_selection",
    "audit_cathist",
    "audit_d1_step",
    "audit_discrete_gaussian_marginals",
    "audit_dpne",
    "audit_dpsgd",
    "audit_dpsgd_f",
    "audit_end_to_end",
    "audit_exponential_selection",
    "audit_functional",
    "audit_gaussian_marginals",
    "audit_lapmech",
    "audit_privpc",
    "audit_quantiles",
    "claimed_epsilon",
    "clopper_pearson",
    "epsilon_lower_bound",
    "legacy_cathist_release",
    "run_all",
]


@dataclass(frozen=True)
class Entry:
    """A mechanism of the registry: its audit and trial counts (fresh runs per dataset)."""

    function: Callable[..., AuditResult]
    trials: int
    quick: int

    def __iter__(self):  # ``function, trials = MECHANISMS[name]`` keeps working
        return iter((self.function, self.trials))


#: Name -> audit and trial counts. The full counts take about 200 CPU seconds (500 s on 2
#: cores shared at load 7), the quick ones (``--quick``, CI) about 55; every negative
#: control exceeds its claim at both.
MECHANISMS: dict[str, Entry] = {
    "gaussian": Entry(audit_gaussian_marginals, 100_000, 2_000),
    "gaussian-discrete": Entry(audit_discrete_gaussian_marginals, 20_000, 3_000),
    "selection": Entry(audit_exponential_selection, 40_000, 2_000),
    "aim-selection": Entry(audit_aim_selection, 40_000, 2_000),
    "quantiles": Entry(audit_quantiles, 40_000, 2_000),
    "cathist": Entry(audit_cathist, 40_000, 2_000),
    "aim-round": Entry(audit_aim_round, 40_000, 3_000),
    "privlr": Entry(partial(audit_functional, variant="privlr"), 10_000, 2_000),
    "pflr": Entry(partial(audit_functional, variant="pflr"), 10_000, 2_000),
    "pflr-star": Entry(partial(audit_functional, variant="pflr-star"), 10_000, 2_000),
    # The same release, events on exact float values (Mironov 2012's floating-point attack).
    "pflr-floats": Entry(partial(audit_functional, variant="pflr", event="exact-float"),
                         10_000, 2_000),
    "dpsgd": Entry(audit_dpsgd, 20_000, 2_000),
    "dpsgd-f": Entry(audit_dpsgd_f, 10_000, 1_500),
    "d1": Entry(audit_d1_step, 4_000, 1_000),
    "privpc": Entry(audit_privpc, 10_000, 2_000),
    "lapmech": Entry(audit_lapmech, 10_000, 2_000),
    "dpne": Entry(audit_dpne, 20_000, 2_000),
    "end-to-end": Entry(audit_end_to_end, 8_000, 3_000),
}


def run_all(*, names: list[str] | None = None, scale: float = 1.0, quick: bool = False,
            progress: Callable[[AuditResult], None] | None = None,
            cathist_release: CatHistFn | None = None) -> list[AuditResult]:
    """Audit every mechanism in :data:`MECHANISMS` (or ``names``).

    Parameters
    ----------
    names : list of str, optional
        Keys of :data:`MECHANISMS`; all by default.
    scale : float
        Multiplies each trial count (at least 10 runs).
    quick : bool
        Start from the quick trial counts instead of the full ones.
    progress : callable, optional
        ``progress(result)`` as each audit finishes.
    cathist_release : callable, optional
        Audit this CatHist implementation instead of today's (:func:`legacy_cathist_release`).
    """
    unknown = sorted(set(names or ()) - set(MECHANISMS))
    if unknown:
        raise ValueError(f"mechanism: unknown {unknown}; expected some of {sorted(MECHANISMS)}")
    results = []
    for name in names or list(MECHANISMS):
        entry = MECHANISMS[name]
        kwargs: dict[str, Any] = {
            "trials": max(10, round((entry.quick if quick else entry.trials) * scale))}
        if name == "cathist" and cathist_release is not None:
            kwargs["release"] = cathist_release
        result = entry.function(**kwargs)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def legacy_cathist_release(module_path: str) -> CatHistFn:
    """An adapter auditing a CatHist module with the pre-issue-10 API (``domain_size`` and a
    ``universe_sampler``) the way the pipeline called it: random 12-letter words."""
    spec = importlib.util.spec_from_file_location("privfair_legacy_cathist", module_path)
    if spec is None or spec.loader is None:
        raise ValueError(f"legacy CatHist: cannot load {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while executing it
    spec.loader.exec_module(module)

    def release(counts: Mapping[str, int], *, universe_values: tuple[str, ...],
                tolerance: float, epsilon: float, rng: np.random.Generator) -> set[str]:
        result = module.cathist(counts, domain_size=len(universe_values), tolerance=tolerance,
                                epsilon=epsilon, rng=rng, ledger=fresh_ledger(),
                                universe_sampler=module.random_word_sampler())
        return set(result.categories)

    return release
