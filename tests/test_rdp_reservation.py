"""A cost declared as a Rényi curve is checked as a curve under the registry's lock, and
reserved as that curve (no ρ: issue 32.9).

``rho_reservation`` (removed) returned "everything remaining" for a curve that did not fit,
which the ρ check then accepted: two concurrent model runs could each pass a check made
before the lock.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privfair.contracts.schema import load_contract
from privfair.core.accounting import RDP_ORDERS
from privfair.core.errors import BudgetExceededError
from privfair.store.registry import RunCharge, read_lifetime_ledger, reserve_run


def charge(contract, store: Path, run_id: str, scale: float) -> RunCharge:
    return RunCharge(run_id=run_id, kind="model", dataset=contract.name, contract=contract,
                     store=store, epsilon=1.0, delta=1e-6, rho=None, method="model:test",
                     contract_fingerprint=contract.fingerprint(),
                     rdp=tuple(scale * np.asarray(RDP_ORDERS, dtype=float)))


def test_a_curve_that_does_not_fit_is_refused_under_the_lock(toy_contract, tmp_path):
    contract = load_contract(toy_contract)  # lifetime epsilon 3, delta 1e-6
    store = tmp_path / "releases"
    small = reserve_run(charge(contract, store, "run-a", 0.02))
    assert small.rho is None
    (pending,) = read_lifetime_ledger(None, contract).pending
    assert "rho" not in pending and len(pending["rdp"]) == len(RDP_ORDERS)
    with pytest.raises(BudgetExceededError, match="would bring the composed spend to epsilon="):
        reserve_run(charge(contract, store, "run-b", 5.0))
    book = read_lifetime_ledger(None, contract)
    assert [p["run_id"] for p in book.pending] == ["run-a"]
