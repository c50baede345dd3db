"""The fields every kind's ``manifest.json`` holds, built once (issue 33.1).

A kind's ``write`` builds only its body (method, guarantee, what it released) and returns
``manifest(plan, ..., body=...)``; the protocol adds the files' hashes. Only public settings
go in: the plan's (never the seed), the code version and the orchestrator's run record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privfair.core.accounting import PrivacyLedger, rdp_epsilon
from privfair.release.protocol import RequestPlan
from privfair.store.catalog import code_version
from privfair.store.files import utc_now
from privfair.store.ledger import LifetimeLedger

#: The manifest's words for where the private rows came from (never their path or hash).
DATA_SOURCES = {
    "embedded": "embedded default dataset",
    "dataset": "operator-supplied Parquet dataset (path and hashes not recorded)",
    "file": "operator-supplied file (path and hash not recorded)",
}


def manifest(plan: RequestPlan, *, kind: str, fmt: str, version: str,
             orchestrator: Mapping[str, Any] | None, body: Mapping[str, Any]) -> dict[str, Any]:
    """The common fields, then the kind's ``body``; a body may refine a common record (the
    table kinds' ``contract`` adds the fingerprint of the domains they released)."""
    return {
        "format": fmt,
        "kind": kind,
        "dataset": plan.dataset,
        "version": version,
        "run_id": plan.run_id,
        "started_at": plan.started_at,
        "published_at": utc_now(),
        "seed_policy": plan.seed_policy,
        "contract": {"name": plan.contract.name, "version": plan.contract.version,
                     "fingerprint": plan.contract.fingerprint()},
        "code_version": code_version(),
        # the run that produced the release (e.g. Prefect flow run id and UI link), if any
        "orchestrator": dict(orchestrator) if orchestrator else None,
        **body,
    }


def data_source(plan: RequestPlan) -> str:
    """Where the private rows came from, in the manifest's words."""
    return DATA_SOURCES[plan.data_source]


def spent_after(plan: RequestPlan, lifetime: LifetimeLedger) -> tuple[float, float]:
    """The lifetime's ρ and ε spent once this run is charged; the run's reservation is in the
    ledger already (issue 10.4), so it is counted once. ε composes every charge (curves
    included) at the lifetime δ."""
    reserved = lifetime.run_state(plan.run_id) is not None
    return (lifetime.rho_spent + (0.0 if reserved else plan.rho),
            lifetime.epsilon_spent() if reserved else lifetime.epsilon_spent(rho=plan.rho))


def accounting_fields(plan: RequestPlan, *, ledger: PrivacyLedger,
                      lifetime: LifetimeLedger) -> dict[str, Any]:
    """The run's ledger entries, the lifetime spent after it and where the rows came from,
    as the graph and embedding manifests record them (top-level fields)."""
    rho_after, epsilon_after = spent_after(plan, lifetime)
    return {"ledger": [dict(e.__dict__) for e in ledger.entries],
            "lifetime_rho_spent_after": rho_after,
            "lifetime_epsilon_spent_after": epsilon_after,
            "data_source": data_source(plan)}


def charged_guarantee(ledger: PrivacyLedger, *, rdp: Sequence[float] | None,
                      delta: float) -> dict[str, Any]:
    """``guarantee.spent`` of a release: what the lifetime ledger charged (issue 41.2).

    A release charged its declared Rényi curve ``rdp`` (a GAN, a DP-SGD model: issue 41.3)
    states that curve's ε and optimal order at ``delta``, not the run's own curve's: the
    own curve follows the noisy row count and sits at or below the declared one, so its
    smaller ε is neither what was charged nor a bound that holds whatever the count drew.
    Without a curve (a zCDP ρ) it is the run ledger's guarantee, which is the charge.
    """
    own = ledger.guarantee()
    if rdp is None:
        return own
    epsilon, order = rdp_epsilon(rdp=list(rdp), delta=delta,
                                 conversion=own.get("conversion", "balle2020"))
    out = {key: value for key, value in own.items() if key != "rho_unamplified_bound"}
    out.update(epsilon=epsilon, optimal_order=order, delta=delta,
               charged="the declared Renyi curve, reserved before any read and charged "
                       "to the lifetime ledger; the run's own curve is at or below it at "
                       "every order")
    return out
