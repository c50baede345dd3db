"""The rows the contract's policies touched, released as one noisy count vector (issue 21.2).

A release never refuses, stops or speaks on a condition of the private values: values
outside the declared domain, nulls and values that are not numbers get the column's policy
(drop the row, clamp it, or map it to a declared category) in
:func:`privfair.contracts.encoding.discretize`, which tallies the rows each policy touched per
``(column, action)``. That tally is private. This module releases it once, with the Gaussian
mechanism charged to the run's ledger, from a small public share of the run's ρ
(:data:`POLICY_SHARE`, taken from the plan's budget split so the declared cost does not
change). Under add/remove one row, a row adds 1 to at most one cell per column, so the L2
sensitivity is sqrt(number of columns) (:func:`~privfair.contracts.encoding.policy_sensitivity`).

Every kind that encodes private rows with the contract calls :func:`measure_policy_counts` in
its first noise stage and publishes the returned record (``input_validation`` in a table
release's manifest); the record depends on the data only through the noisy counts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privfair.contracts.encoding import PolicyTally, policy_cells, policy_sensitivity
from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.mechanisms import gaussian_mechanism

__all__ = ["POLICY_SHARE", "LEDGER_NAME", "measure_policy_counts", "policy_record"]

#: Share of a run's ρ spent on the noisy counts of touched rows (public, fixed).
POLICY_SHARE = 0.02
#: The ledger entry's name.
LEDGER_NAME = "rows touched by the contract's policies"


def measure_policy_counts(tally: PolicyTally, contract: Contract, ledger: PrivacyLedger, *,
                          rho: float, rng: np.random.Generator, discrete: bool = True
                          ) -> dict[str, Any]:
    """Charge ``rho`` to ``ledger`` and release the tally's counts with Gaussian noise.

    Parameters
    ----------
    tally : PolicyTally
        The exact counts (private), from :func:`~privfair.contracts.encoding.discretize`.
    contract : Contract
        Declares the cells (:func:`~privfair.contracts.encoding.policy_cells`), public.
    ledger : PrivacyLedger
        The run's ledger; charged exactly ``rho`` before any noise is drawn.
    rho : float
        The zCDP budget of this measurement (> 0).
    rng : numpy.random.Generator
        The stage's generator.
    discrete : bool
        Exact discrete Gaussian noise.

    Returns
    -------
    dict
        The public record (:func:`policy_record`): the policies, the noisy count of each
        cell and its σ. The same keys and cells for every dataset under one contract.
    """
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be a finite number > 0, got {rho!r}")
    cells = policy_cells(contract)
    sensitivity = policy_sensitivity(contract)
    sigma = sensitivity / math.sqrt(2.0 * rho)
    exact = tally.vector(cells)
    noisy = (gaussian_mechanism(exact, sigma=sigma, sensitivity=sensitivity, rng=rng,
                                ledger=ledger, name=LEDGER_NAME, discrete=discrete)
             if cells else np.zeros(0))
    return policy_record(contract, cells, noisy, sigma=sigma, sensitivity=sensitivity,
                         rho=rho, discrete=discrete)


def policy_record(contract: Contract, cells: list[tuple[str, str]], noisy: np.ndarray, *,
                  sigma: float, sensitivity: float, rho: float, discrete: bool
                  ) -> dict[str, Any]:
    """The manifest's record of the policies and the noisy counts of the rows they touched."""
    return {
        "refused_on_values": False,
        "policies": {spec.name: {"out_of_domain": spec.out_of_domain_policy.kind
                                 if spec.out_of_domain_policy.category is None
                                 else f"{spec.out_of_domain_policy.kind}:"
                                      f"{spec.out_of_domain_policy.category}",
                                 "nulls": spec.null_policy.kind
                                 if spec.null_policy.category is None
                                 else f"{spec.null_policy.kind}:{spec.null_policy.category}"}
                     for spec in contract.columns},
        "touched_rows": [{"column": column, "action": action,
                          "noisy_count": round(float(value), 2)}
                         for (column, action), value in zip(cells, noisy, strict=True)],
        "noise": {"mechanism": "discrete-gaussian" if discrete else "gaussian",
                  "sigma": float(sigma), "l2_sensitivity": float(sensitivity),
                  "rho": float(rho), "ledger_entry": LEDGER_NAME},
        "note": ("values outside the declared domain, nulls and values that are not numbers "
                 "got the column's policy (drop the row, clamp, or map to a declared "
                 "category); each count is noisy (Gaussian, σ above) and may be negative"),
    }
