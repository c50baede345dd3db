"""ε audits of release functions the first audit left out: the noisy policy counts every kind
publishes (``release.policy_counts``) and the model card's confusion counts
(``release.model.evaluation``).

Both are the Gaussian mechanism over a count vector. The audit calls the release function
itself on neighbours it builds, and takes the claim from the ledger that call wrote
(:func:`~privfair.evaluation.audit.core.claimed_epsilon`), never from its own parameters.
"""

from __future__ import annotations

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.evaluation.audit.core import (
    GDP_DELTA,
    HALF_NOISE,
    AuditResult,
    Draw,
    audit_mechanism,
    claimed_epsilon,
    fresh_ledger,
)
from privfair.evaluation.audit.tables import GAUSSIAN_RHO, looped

__all__ = ["audit_confusion_counts", "audit_policy_counts"]


def audit_policy_counts(*, trials: int, seed: int = 30, rho: float = GAUSSIAN_RHO,
                        delta: float = GDP_DELTA) -> AuditResult:
    """``measure_policy_counts`` on a 3-column contract (L2 sensitivity √3).

    D touches no row; D′ adds a row that each column's policy touches (an out-of-domain
    category mapped to ``other``, an out-of-range number clamped, an undeclared category
    dropped): one cell per column +1, the whole sensitivity. The log-likelihood ratio is
    increasing in the sum of those three noisy counts, read from the published record.
    Control: half the noise (the release function called with 4× the ρ).
    """
    import pandas as pd

    from privfair.contracts.encoding import PolicyTally, encode
    from privfair.evaluation.audit.noise import policy_contract
    from privfair.release.policy_counts import measure_policy_counts

    contract = policy_contract()
    row = pd.DataFrame({"c": ["zz"], "n": ["25"], "d": ["q"]})
    touched = encode(row, contract).tally  # the row as the encoder tallies it
    if len(touched.counts) != 3:
        raise RuntimeError(f"policy audit: the row touched {touched.counts}, not 3 cells")

    def release(neighbour: bool, rho_run: float, rng: np.random.Generator,
                ledger: PrivacyLedger) -> dict:
        return measure_policy_counts(touched if neighbour else PolicyTally(), contract,
                                     ledger, rho=rho_run, rng=rng)

    def make(noise: float) -> Draw:
        def trial(neighbour: bool, rng: np.random.Generator) -> float:
            record = release(neighbour, rho / noise**2, rng, fresh_ledger())
            return float(sum(cell["noisy_count"] for cell in record["touched_rows"]
                             if (cell["column"], cell["action"]) in touched.counts))

        return looped(trial)

    claim = claimed_epsilon(lambda ledger: release(True, rho, np.random.default_rng(0),
                                                   ledger), delta=delta)
    return audit_mechanism(
        make, mechanism="policy counts (release.policy_counts)", claimed_epsilon=claim,
        delta=delta, trials=trials, seed=seed,
        neighbours="3 columns; D' adds a row mapped, clamped and dropped (3 cells +1)",
        statistic="sum of the 3 noisy counts the row changes", fit="gdp")


def audit_confusion_counts(*, trials: int, seed: int = 31, rho: float = GAUSSIAN_RHO,
                           delta: float = GDP_DELTA) -> AuditResult:
    """``release_confusion`` (the model card's per-group confusion counts, sensitivity 1).

    D′ adds one held-out row (group 1, label 1, predicted 1); its cell is the statistic.
    The σ passed is the one a release's evaluation share gives for ``rho``; the claim is
    the ledger's. Control: half the noise.
    """
    from privfair.core.accounting import gaussian_sigma
    from privfair.release.kinds.model.evaluation import confusion_counts, release_confusion

    y = np.array([0, 1, 1, 0, 1, 0])
    pred = np.array([0, 1, 0, 0, 1, 1])
    groups = np.array([0, 0, 1, 1, 1, 0])
    base = confusion_counts(y, pred, groups, 2)
    extended = confusion_counts(np.append(y, 1), np.append(pred, 1), np.append(groups, 1), 2)
    sigma = gaussian_sigma(rho=rho, sensitivity=1.0)

    def make(noise: float) -> Draw:
        def trial(neighbour: bool, rng: np.random.Generator) -> float:
            noisy = release_confusion(extended if neighbour else base, sigma=sigma * noise,
                                      ledger=fresh_ledger(), rng=rng)
            return float(noisy[1, 1, 1])

        return looped(trial)

    claim = claimed_epsilon(lambda ledger: release_confusion(
        base, sigma=sigma, ledger=ledger, rng=np.random.default_rng(0)), delta=delta)
    return audit_mechanism(
        make, mechanism="model card confusion counts (release.model.evaluation)",
        claimed_epsilon=claim, delta=delta, trials=trials, seed=seed,
        neighbours="6 held-out rows in 2 groups; D' adds one (group 1, y 1, predicted 1)",
        statistic="its noisy cell", controls=(HALF_NOISE,), fit="gdp")
