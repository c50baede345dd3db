"""privfair's lifetime ledger against Google's dp-accounting on a mixed sequence (issue 32.9).

A dataset's lifetime (ε = 10, δ = 1e-6) is charged, in order: three table releases (zCDP:
Gaussian measurements of ρ each), a DP-SGD model (the declared curve of ``train --model
dpsgd``: Gaussian policy and evaluation counts, a Laplace row count, Poisson-subsampled
Gaussian gradients), a functional model (``pflr``: Gaussian counts and the functional
mechanism's pure-DP Laplace steps) and a causal graph (zCDP: exponential steps at ε²/8 and
Laplace steps at ε²/2). Each release is composed

* by privfair's :class:`~privfair.store.ledger.LifetimeLedger` (what ``ledger show`` prints);
* by dp-accounting's ``RdpAccountant`` on the same orders, with the same analysis of each step
  (``same``): zCDP steps as ``ZCDpEvent``, Gaussian as ``GaussianDpEvent``, DP-SGD as
  ``PoissonSampledDpEvent`` composed ``steps`` times, a pure ε-DP step as binary randomized
  response (the tight ε-DP curve), and the curves' sum converted by dp-accounting's
  ``compute_epsilon``: these must agree;
* by the ``RdpAccountant`` with each step's own event where dp-accounting has a tighter one
  (``native``: the causal graph's scalar Laplace steps as ``LaplaceDpEvent``): the ledger
  must be at or above it;
* by the PLD accountant (``pld``) where every step of a release has a PLD event (Gaussian,
  scalar Laplace, Poisson-subsampled Gaussian): tighter than any RDP conversion, for scale.

Prints JSON: ε at the lifetime δ per release (its own charge) and composed.

    python benchmarks/accounting_vs_dp_accounting.py
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

LIFETIME = (10.0, 1e-6)


@dataclass(frozen=True)
class Step:
    """One mechanism of a release, as dp-accounting sees it."""

    kind: str  # "zcdp", "gaussian", "subsampled-gaussian", "pure", "laplace"
    rho: float = 0.0
    noise_multiplier: float = 0.0
    sample_rate: float = 0.0
    steps: int = 1
    epsilon: float = 0.0


@dataclass(frozen=True)
class Release:
    name: str
    #: What the lifetime ledger records: {"rho": ρ} (zCDP) or {"rdp": curve}.
    charge: dict[str, Any]
    steps: tuple[Step, ...]
    #: Steps with a tighter dp-accounting event, in place of ``steps`` (None: the same).
    native: tuple[Step, ...] | None = None
    #: Whether every step has a PLD event.
    pld: bool = True


def _entry_steps(entries: Sequence[Any]) -> tuple[Step, ...]:
    out = []
    for e in entries:
        if e.mechanism == "subsampled-gaussian":
            out.append(Step("subsampled-gaussian", noise_multiplier=e.sigma / e.sensitivity,
                            sample_rate=e.sample_rate, steps=e.steps))
        elif e.mechanism in ("gaussian", "discrete-gaussian"):
            out.append(Step("gaussian", noise_multiplier=e.sigma / e.sensitivity))
        elif e.mechanism == "laplace":
            out.append(Step("pure", epsilon=e.epsilon))
        else:
            raise ValueError(f"no dp-accounting event for {e.mechanism!r}")
    return tuple(out)


def _model(model: str, epsilon: float, delta: float) -> Release:
    from privfair.release.kinds.model.budget import (
        evaluation_entry,
        functional_entries,
        plan_budget,
        policy_entry,
        row_count_entry,
        sgd_settings,
    )

    budget = plan_budget(model=model, epsilon=epsilon, delta=delta, holdout=0.2,
                         evaluation_share=0.1, groups=2)
    entries = [policy_entry(budget.policy_rho, sensitivity=budget.policy_sensitivity,
                            cells=budget.policy_cells)[1],
               evaluation_entry(budget.evaluation_sigma, budget.evaluation_cells)]
    if budget.model_epsilon is not None:
        entries += functional_entries(model, budget.model_epsilon, fairness_share=0.5)
        pld = False  # the functional mechanism's noise is a Laplace vector, not one scalar
    else:
        entries.append(row_count_entry(budget.count_epsilon))
        entries += sgd_settings(method=model, sample_rate=budget.sample_rate,
                                steps=budget.steps, expected_batch_size=1.0,
                                sigma=budget.noise_multiplier, clip=0.5
                                ).ledger_entries(groups=2)
        pld = True
    curve = np.sum([e.rdp_curve() for e in entries], axis=0)
    assert np.allclose(curve, budget.curve, rtol=1e-12), "the entries are the declared curve"
    steps = _entry_steps(entries)
    native = tuple(Step("laplace", epsilon=s.epsilon) if s.kind == "pure" else s
                   for s in steps) if pld else None
    return Release(f"model {model} (epsilon {epsilon:g}, delta {delta:g})",
                   {"rdp": [float(v) for v in budget.curve]}, steps, native=native, pld=pld)


def _table(method: str, epsilon: float, delta: float) -> Release:
    from privfair.core.accounting import zcdp_rho

    rho = zcdp_rho(epsilon=epsilon, delta=delta)
    return Release(f"table {method} (epsilon {epsilon:g}, delta {delta:g})", {"rho": rho},
                   (Step("zcdp", rho=rho),),
                   native=(Step("gaussian", noise_multiplier=1 / math.sqrt(2 * rho)),))


def _causal_graph(epsilon: float, delta: float, *, selections: int = 10,
                  tests: int = 5) -> Release:
    """A graph release of ρ = zcdp_rho(ε, δ): half on exponential selections (ε²/8 each),
    half on scalar Laplace test statistics (ε²/2 each); the lifetime charges its ρ."""
    from privfair.core.accounting import zcdp_rho

    rho = zcdp_rho(epsilon=epsilon, delta=delta)
    eps_exp = math.sqrt(8 * rho / 2 / selections)
    eps_lap = math.sqrt(2 * rho / 2 / tests)
    exponential = tuple(Step("zcdp", rho=eps_exp**2 / 8) for _ in range(selections))
    laplace = tuple(Step("zcdp", rho=eps_lap**2 / 2) for _ in range(tests))
    native = exponential + tuple(Step("laplace", epsilon=eps_lap) for _ in range(tests))
    return Release(f"causal graph privpc (epsilon {epsilon:g}, delta {delta:g}): "
                   f"{selections} exponential, {tests} Laplace", {"rho": rho},
                   exponential + laplace, native=native, pld=False)


def mixed_sequence() -> list[Release]:
    return [_table("mst", 1.0, 1e-9), _table("aim", 2.0, 1e-6), _table("prefair", 0.5, 1e-9),
            _model("dpsgd", 1.0, 1e-6), _model("pflr", 1.0, 1e-6),
            _causal_graph(1.0, 1e-6)]


# --- dp-accounting ---------------------------------------------------------------------------


def _rdp_curve(steps: Sequence[Step], orders: Sequence[float]) -> np.ndarray:
    """The steps' composed RDP curve by dp-accounting's RdpAccountant (randomized response,
    defined for replace-one neighbours, in an accountant of its own: a pure ε-DP step's
    curve is the same for either relation)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    add_remove = RdpAccountant(orders=list(orders))
    replace = RdpAccountant(
        orders=list(orders),
        neighboring_relation=dp_accounting.privacy_accountant.NeighboringRelation.REPLACE_ONE)
    for s in steps:
        if s.kind == "zcdp":
            add_remove.compose(dp_accounting.ZCDpEvent(s.rho))
        elif s.kind == "gaussian":
            add_remove.compose(dp_accounting.GaussianDpEvent(s.noise_multiplier))
        elif s.kind == "subsampled-gaussian":
            add_remove.compose(dp_accounting.PoissonSampledDpEvent(
                s.sample_rate, dp_accounting.GaussianDpEvent(s.noise_multiplier)), s.steps)
        elif s.kind == "laplace":
            add_remove.compose(dp_accounting.LaplaceDpEvent(1 / s.epsilon))
        elif s.kind == "pure":
            replace.compose(dp_accounting.RandomizedResponseDpEvent(
                noise_parameter=2 / (1 + math.exp(s.epsilon)), num_buckets=2))
        else:
            raise ValueError(s.kind)
    return np.asarray(add_remove._rdp) + np.asarray(replace._rdp)


def _rdp_epsilon(curve: np.ndarray, orders: Sequence[float], delta: float) -> float:
    from dp_accounting.rdp import rdp_privacy_accountant

    finite = np.isfinite(curve)  # dp-accounting leaves out orders it could not compute
    return float(rdp_privacy_accountant.compute_epsilon(
        np.asarray(orders)[finite], curve[finite], delta)[0])


def _pld_epsilon(steps: Sequence[Step], delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(value_discretization_interval=1e-4)
    for s in steps:
        if s.kind == "gaussian":
            accountant.compose(dp_accounting.GaussianDpEvent(s.noise_multiplier))
        elif s.kind == "subsampled-gaussian":
            accountant.compose(dp_accounting.PoissonSampledDpEvent(
                s.sample_rate, dp_accounting.GaussianDpEvent(s.noise_multiplier)), s.steps)
        elif s.kind == "laplace":
            accountant.compose(dp_accounting.LaplaceDpEvent(1 / s.epsilon))
        else:
            raise ValueError(f"no PLD event for {s.kind!r}")
    return float(accountant.get_epsilon(delta))


# --- the comparison ----------------------------------------------------------------------------


def compare(releases: Sequence[Release] | None = None, *, lifetime: tuple[float, float] = LIFETIME,
            pld: bool = True) -> dict[str, Any]:
    """ε at the lifetime δ, per release and composed: privfair's ledger and dp-accounting's."""
    from privfair.core.accounting import RDP_ORDERS
    from privfair.store.ledger import LifetimeLedger

    releases = list(mixed_sequence() if releases is None else releases)
    epsilon_budget, delta = lifetime
    rows = []
    curves_same, curves_native = [], []
    for r in releases:
        alone = LifetimeLedger("bench", epsilon_budget, delta, [dict(r.charge)])
        same = _rdp_curve(r.steps, RDP_ORDERS)
        native = _rdp_curve(r.native or r.steps, RDP_ORDERS)
        curves_same.append(same)
        curves_native.append(native)
        rows.append({
            "release": r.name,
            "charged_by": "renyi curve" if "rdp" in r.charge else "zcdp rho",
            "ledger_epsilon": alone.epsilon_spent(),
            "dp_accounting_rdp_same_epsilon": _rdp_epsilon(same, RDP_ORDERS, delta),
            "dp_accounting_rdp_native_epsilon": _rdp_epsilon(native, RDP_ORDERS, delta),
            "dp_accounting_pld_epsilon": (_pld_epsilon(r.native or r.steps, delta)
                                          if pld and r.pld else None)})
    book = LifetimeLedger("bench", epsilon_budget, delta, [dict(r.charge) for r in releases])
    composed = {
        "ledger_epsilon": book.epsilon_spent(),
        "dp_accounting_rdp_same_epsilon": _rdp_epsilon(np.sum(curves_same, axis=0),
                                                       RDP_ORDERS, delta),
        "dp_accounting_rdp_native_epsilon": _rdp_epsilon(np.sum(curves_native, axis=0),
                                                         RDP_ORDERS, delta),
        "sum_of_release_epsilons": math.fsum(row["ledger_epsilon"] for row in rows)}
    return {"lifetime": {"epsilon": epsilon_budget, "delta": delta},
            "orders": f"{len(RDP_ORDERS)} ({RDP_ORDERS[0]:g}..{RDP_ORDERS[-1]:g})",
            "releases": rows, "composed": composed}


def main() -> None:
    print(json.dumps(compare(), indent=2))


if __name__ == "__main__":
    main()
