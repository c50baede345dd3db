"""The declared cost of a model release, fixed from public inputs before any read (issue 20).

A model release never reserves "whatever the lifetime has left": its Rényi curve is declared
up front and reserved, and the run is calibrated never to spend more, order by order.

* Rows the contract's policies touched (issue 21.2): their noisy counts through the Gaussian
  mechanism with ρ_pol = :data:`~privfair.release.policy_counts.POLICY_SHARE` ×
  zcdp_rho(ε, δ) (L2 sensitivity √(columns the model reads)), always, in the first noise
  stage; its curve ρ_pol·α is part of the declared one.
* Held-out evaluation (``holdout > 0``): per-group confusion matrices through the Gaussian
  mechanism with ρ_eval = ``evaluation_share`` × zcdp_rho(ε, δ) (L2 sensitivity 1: a held-out
  person is in one cell).
* ``pflr``, ``pflr-star``, ``privlr``: the functional mechanism is pure ε_m-DP, split as
  :mod:`privfair.learn.functional` splits it (centre, shift, coefficients); ε_m is the
  largest ε that fits next to the policy counts and the evaluation within (ε, δ).
  Its curve is known from ε_m alone.
* ``dpsgd``, ``dpsgd-f``, ``naive``: a Laplace count of the training rows (``ROW_COUNT_SHARE``
  of ε) fixes the Poisson rate at run time. The declared curve assumes the public lower
  bound ``min_rows``: q₀ = min(1, b/min_rows), T₀ = epochs/q₀ and the smallest σ₀ that fits
  (ε, δ). After the DP count ñ the run takes q = min(1, b/ñ), T = epochs/q and the smallest
  σ whose curve stays at or below the declared one at every order
  (:func:`calibrate_to_curve`): a run with fewer rows than ``min_rows`` gets more noise,
  never a larger cost.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeGuard, TypeVar

import numpy as np

from privfair.core.accounting import (
    LedgerEntry,
    PrivacyLedger,
    gaussian_rho,
    laplace_rho,
)
from privfair.core.budget import Budget
from privfair.core.errors import BudgetExceededError, PrivfairError
from privfair.release.policy_counts import LEDGER_NAME as POLICY_ENTRY
from privfair.release.policy_counts import POLICY_SHARE

if TYPE_CHECKING:
    from privfair.learn.dpsgd import Method, SGDSettings

FunctionalModel = Literal["pflr", "pflr-star", "privlr"]
SGDModel = Literal["dpsgd", "dpsgd-f", "naive"]
FUNCTIONAL_MODELS: tuple[FunctionalModel, ...] = ("pflr", "pflr-star", "privlr")
SGD_MODELS: tuple[SGDModel, ...] = ("dpsgd", "dpsgd-f", "naive")
MODELS = FUNCTIONAL_MODELS + SGD_MODELS
#: Share of ε spent on the DP count of training rows that sets DP-SGD's sampling rate.
ROW_COUNT_SHARE = 0.01
#: Share of the functional mechanism's ε spent on the DP group centre (its default).
CENTRE_SHARE = 0.02
#: Name of the evaluation's ledger entry.
EVALUATION_ENTRY = "held-out confusion matrices per group"


class ModelReleaseError(PrivfairError, ValueError):
    """A model release cannot go ahead as asked."""


def is_functional(model: str) -> TypeGuard[FunctionalModel]:
    """Whether ``model`` is a functional-mechanism model (PFLR, PFLR*, PrivLR)."""
    return model in FUNCTIONAL_MODELS


def is_sgd(model: str) -> TypeGuard[SGDModel]:
    """Whether ``model`` is trained by DP-SGD (DP-SGD, DP-SGD-F, naive)."""
    return model in SGD_MODELS


T = TypeVar("T")


def planned(value: T | None, name: str) -> T:
    """A :class:`ModelBudget` field that the plan sets for the model family that reads it."""
    if value is None:  # pragma: no cover - plan_budget sets every field its family reads
        raise ModelReleaseError(f"the model budget declares no {name} for this model")
    return value


class PolicyFields(TypedDict):
    """The :class:`ModelBudget` fields of the noisy counts of rows the policies touched."""

    policy_sigma: float
    policy_sensitivity: float
    policy_cells: int


@dataclass(frozen=True)
class ModelBudget:
    """How one model release spends its (ε, δ); every number public."""

    epsilon: float
    delta: float
    #: The declared Rényi curve (on RDP_ORDERS): what the run reserves.
    curve: tuple[float, ...]
    #: σ of the held-out confusion counts, or None without held-out evaluation.
    evaluation_sigma: float | None = None
    evaluation_cells: int = 0
    #: Functional models: the ε given to the functional mechanism.
    model_epsilon: float | None = None
    #: DP-SGD: ε of the row count, the declared q₀, T₀, σ₀ and its gradient-part curve.
    count_epsilon: float | None = None
    min_rows: int | None = None
    sample_rate: float | None = None
    steps: int | None = None
    noise_multiplier: float | None = None
    sgd_curve: tuple[float, ...] | None = None
    #: The noisy counts of rows the contract's policies touched: σ, L2 sensitivity, cells.
    policy_sigma: float | None = None
    policy_sensitivity: float = 1.0
    policy_cells: int = 0

    @property
    def policy_rho(self) -> float:
        return 0.0 if self.policy_sigma is None else gaussian_rho(
            sigma=self.policy_sigma, sensitivity=self.policy_sensitivity)

    @property
    def evaluation_rho(self) -> float:
        return 0.0 if self.evaluation_sigma is None else gaussian_rho(
            sigma=self.evaluation_sigma, sensitivity=1.0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "declared_rdp": [float(v) for v in self.curve],
            "policy_counts": (None if self.policy_sigma is None else
                              {"sigma": self.policy_sigma, "rho": self.policy_rho,
                               "l2_sensitivity": self.policy_sensitivity,
                               "cells": self.policy_cells, "share": POLICY_SHARE}),
            "evaluation": (None if self.evaluation_sigma is None else
                           {"sigma": self.evaluation_sigma, "rho": self.evaluation_rho,
                            "cells": self.evaluation_cells})}
        if self.model_epsilon is not None:
            out["functional_mechanism_epsilon"] = self.model_epsilon
        if self.count_epsilon is not None:
            out["dpsgd_declared"] = {
                "row_count_epsilon": self.count_epsilon, "min_rows": self.min_rows,
                "sample_rate": self.sample_rate, "steps": self.steps,
                "noise_multiplier": self.noise_multiplier}
        return out


def laplace_entry(name: str, epsilon: float, *, queries: int = 1,
                  sensitivity: float = 1.0) -> LedgerEntry:
    return LedgerEntry(name=name, mechanism="laplace", sensitivity=float(sensitivity),
                       rho=laplace_rho(epsilon=epsilon), epsilon=float(epsilon),
                       queries=int(queries))


def evaluation_entry(sigma: float, cells: int) -> LedgerEntry:
    """The entry :func:`privfair.core.mechanisms.gaussian_mechanism` records for the counts."""
    return LedgerEntry(name=EVALUATION_ENTRY, mechanism="gaussian", sensitivity=1.0,
                       rho=gaussian_rho(sigma=sigma, sensitivity=1.0), sigma=float(sigma),
                       queries=int(cells))


def policy_entry(rho: float, *, sensitivity: float, cells: int) -> tuple[float, LedgerEntry]:
    """σ and the entry :func:`privfair.release.policy_counts.measure_policy_counts` records
    when it is given ``rho`` (the same floats, so the run's curve is the declared one)."""
    sigma = sensitivity / math.sqrt(2.0 * rho)
    return sigma, LedgerEntry(name=POLICY_ENTRY, mechanism="gaussian",
                              sensitivity=float(sensitivity),
                              rho=gaussian_rho(sigma=sigma, sensitivity=sensitivity),
                              sigma=float(sigma), queries=int(cells))


def row_count_entry(epsilon: float) -> LedgerEntry:
    return laplace_entry("training row count", epsilon)


def functional_entries(model: str, epsilon: float, *,
                       fairness_share: float) -> list[LedgerEntry]:
    """The ε split of :func:`privfair.learn.functional.noisy_objective` (its curve only)."""
    centre = CENTRE_SHARE * epsilon if model != "privlr" else 0.0
    rest = epsilon - centre
    shift = fairness_share * rest if model == "pflr-star" else 0.0
    label = {"privlr": "PrivLR", "pflr": "PFLR", "pflr-star": "PFLR*"}[model]
    out = []
    if centre > 0:
        out.append(laplace_entry("group histogram (fairness centre)", centre))
    if shift > 0:
        out.append(laplace_entry(f"fairness shift ({label})", shift))
    out.append(laplace_entry(f"functional mechanism ({label})", rest - shift))
    return out


def _ledger(epsilon: float, delta: float, entries: Sequence[LedgerEntry] = ()) -> PrivacyLedger:
    ledger = PrivacyLedger(epsilon_budget=epsilon, delta=delta, accounting="rdp")
    for entry in entries:
        ledger.spend(entry)
    return ledger


def _fits(ledger: PrivacyLedger, entries: Sequence[LedgerEntry]) -> bool:
    try:
        ledger.check_entries(*entries)
    except BudgetExceededError:
        return False
    return True


def smallest_sigma(fits: Callable[[float], bool], *, start: float = 1.0) -> float:
    """Smallest σ (to 0.5 %) with ``fits(σ)``; ``fits`` must be monotone in σ."""
    lo, hi = start / 2, start
    while not fits(hi):
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise ModelReleaseError("epsilon is too small for DP-SGD at these epochs and "
                                    "batch size (noise multiplier above 1e4)")
    while lo > 0.05 and fits(lo):
        lo, hi = lo / 2, lo
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def sgd_settings(*, method: Method, sample_rate: float, steps: int, expected_batch_size: float,
                 sigma: float, clip: float, learning_rate: float | None = None,
                 hidden: Sequence[int] = ()) -> SGDSettings:
    from privfair.learn.dpsgd import SGDSettings

    return SGDSettings(method=method, sample_rate=sample_rate, steps=steps,
                       expected_batch_size=expected_batch_size, noise_multiplier=sigma,
                       clip=clip, learning_rate=learning_rate, hidden=tuple(hidden))


def sgd_curve(*, method: Method, sample_rate: float, steps: int, sigma: float, groups: int,
              clip: float) -> np.ndarray:
    """The Rényi curve of a DP-SGD run's entries (gradients and, for dpsgd-f/naive, counts)."""
    settings = sgd_settings(method=method, sample_rate=sample_rate, steps=steps,
                            expected_batch_size=1.0, sigma=sigma, clip=clip)
    curve: np.ndarray = np.sum([e.rdp_curve() for e in settings.ledger_entries(groups=groups)],
                               axis=0)
    return curve


def rate_and_steps(*, batch_size: int, rows: float, epochs: int) -> tuple[float, int]:
    """q = min(1, b/rows) and T = epochs/q (at least one step)."""
    rate = min(1.0, batch_size / max(rows, 1.0))
    return rate, max(1, int(epochs / rate))


def calibrate_noise_multiplier(*, method: Method, sample_rate: float, steps: int,
                               ledger: PrivacyLedger, groups: int, clip: float,
                               expected_batch_size: float) -> float:
    """Smallest σ (to 0.5%) whose run fits what ``ledger`` has left (σ1 = 10σ for the counts)."""
    def fits(sigma: float) -> bool:
        settings = sgd_settings(method=method, sample_rate=sample_rate, steps=steps,
                                expected_batch_size=expected_batch_size, sigma=sigma,
                                clip=clip)
        return _fits(ledger, settings.ledger_entries(groups=groups))

    return smallest_sigma(fits)


def calibrate_to_curve(*, method: Method, sample_rate: float, steps: int, groups: int,
                       clip: float, bound: Sequence[float], start: float = 1.0) -> float:
    """Smallest σ (to 0.5%) whose run's curve is at or below ``bound`` at every order."""
    limit = np.asarray(bound, dtype=float)

    def fits(sigma: float) -> bool:
        curve = sgd_curve(method=method, sample_rate=sample_rate, steps=steps, sigma=sigma,
                          groups=groups, clip=clip)
        return bool(np.all(curve <= limit))

    return smallest_sigma(fits, start=start)


@functools.lru_cache(maxsize=64)  # the CLI plans a run twice (cost line, then the run)
def plan_budget(*, model: str, epsilon: float, delta: float, holdout: float,
                evaluation_share: float, groups: int, fairness_share: float = 0.5,
                min_rows: int = 1000, batch_size: int = 256, epochs: int = 20,
                clip: float = 0.5, policy_sensitivity: float = 1.0,
                policy_cells: int = 1) -> ModelBudget:
    """The declared cost of a model release, from its public parameters only.

    ``policy_sensitivity`` and ``policy_cells``: the L2 sensitivity and the number of cells
    of the touched-rows counts (:func:`~privfair.contracts.encoding.policy_sensitivity` and
    :func:`~privfair.contracts.encoding.policy_cells` of the columns the model reads).
    """
    rho = Budget(epsilon=epsilon, delta=delta).rho
    sigma_pol, pol = policy_entry(POLICY_SHARE * rho, sensitivity=policy_sensitivity,
                                  cells=policy_cells)
    base: list[LedgerEntry] = [pol]
    policies = PolicyFields(policy_sigma=sigma_pol,
                            policy_sensitivity=float(policy_sensitivity),
                            policy_cells=int(policy_cells))
    sigma_eval, cells = None, 0
    if holdout > 0:
        cells = 4 * groups  # group × true label × predicted label
        sigma_eval = math.sqrt(1 / (2 * evaluation_share * rho))
        base.append(evaluation_entry(sigma_eval, cells))
    if model in FUNCTIONAL_MODELS:
        scratch = _ledger(epsilon, delta, base)
        # the largest ε_m that fits next to the policy counts and the evaluation
        lo, hi = 0.0, epsilon
        for _ in range(50):
            mid = (lo + hi) / 2
            ok = _fits(scratch, functional_entries(model, mid, fairness_share=fairness_share))
            lo, hi = (mid, hi) if ok else (lo, mid)
        eps_m = lo
        if eps_m <= 0:
            raise ModelReleaseError("evaluation_share leaves the model no budget")
        curve = _ledger(epsilon, delta, [
            *base, *functional_entries(model, eps_m, fairness_share=fairness_share)]).rdp()
        return ModelBudget(epsilon, delta, tuple(float(v) for v in curve),
                           evaluation_sigma=sigma_eval, evaluation_cells=cells,
                           model_epsilon=eps_m, **policies)
    if not is_sgd(model):
        raise ModelReleaseError(f"model: {model!r} is not one of {list(MODELS)}")
    count_eps = ROW_COUNT_SHARE * epsilon
    scratch = _ledger(epsilon, delta, [*base, row_count_entry(count_eps)])
    rate, steps = rate_and_steps(batch_size=batch_size, rows=min_rows, epochs=epochs)
    sigma = calibrate_noise_multiplier(method=model, sample_rate=rate, steps=steps,
                                       ledger=scratch, groups=groups, clip=clip,
                                       expected_batch_size=rate * min_rows)
    gradients = sgd_curve(method=model, sample_rate=rate, steps=steps, sigma=sigma,
                          groups=groups, clip=clip)
    curve = scratch.rdp() + gradients
    return ModelBudget(epsilon, delta, tuple(float(v) for v in curve),
                       evaluation_sigma=sigma_eval, evaluation_cells=cells,
                       count_epsilon=count_eps, min_rows=min_rows, sample_rate=rate,
                       steps=steps, noise_multiplier=sigma,
                       sgd_curve=tuple(float(v) for v in gradients), **policies)
