"""One client of the privacy registry, for the race test and the load benchmark.

A process reserves a run's ρ, marks its noise drawn and publishes, through the registry
functions themselves (no release: on 2 cores a release per process would be too slow). Kept
out of the test module so that spawned processes import only this and privfair.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from privfair.contracts.schema import load_contract
from privfair.core.errors import BudgetExceededError
from privfair.store.registry import (
    RunCharge,
    mark_noise_drawn,
    record_published,
    reserve_run,
)


def fake_charge(contract_path: str, store: str, run_id: str, rho: float) -> RunCharge:
    """A run's charge with a fixed ρ and a fake method (public facts only)."""
    contract = load_contract(contract_path)
    return RunCharge(run_id=run_id, kind="table", dataset=contract.name, contract=contract,
                     store=Path(store), epsilon=1.0, delta=1e-9, rho=rho, method="fake",
                     contract_fingerprint="fake")


def reserve_and_publish(charge: RunCharge) -> str:
    """``published`` or ``refused`` (the lifetime budget had no room for the run)."""
    try:
        reserve_run(charge)
    except BudgetExceededError:
        return "refused"
    mark_noise_drawn(charge)
    budget = (float(charge.contract.budget.epsilon), float(charge.contract.budget.delta))
    record_published(ident=charge.dataset, name=charge.contract.name, budget=budget,
                     store=charge.store, releases=[{"run_id": charge.run_id,
                                                    "version": f"v-{charge.run_id}"}])
    return "published"


def race_worker(job: tuple[dict[str, str], str, str, str, float]) -> str:
    """Entry point of a spawned process: its environment, then one reserve + publish."""
    env, contract_path, store, run_id, rho = job
    for name in ("PRIVFAIR_REGISTRY", "PRIVFAIR_REGISTRY_HOME", "PRIVFAIR_REGISTRY_KEY_FILE",
                 "XDG_DATA_HOME"):
        os.environ.pop(name, None)
    os.environ.update(env)
    return reserve_and_publish(fake_charge(contract_path, store, run_id, rho))


def load_worker(job: tuple[dict[str, str], str, str, str, int, float], barrier: Any,
                results: Any) -> None:
    """Benchmark client: open the registry, wait for every client, then ``n`` reserve +
    publish cycles; puts (start, end, per-cycle seconds) on ``results``."""
    env, contract_path, store, prefix, n, rho = job
    os.environ.update(env)
    from privfair.store import registry_sql

    registry_sql.datasets()  # connect and check the key before the clock starts
    charges = [fake_charge(contract_path, store, f"{prefix}-{i}", rho) for i in range(n)]
    barrier.wait()
    start, cycles = time.time(), []
    for charge in charges:
        t0 = time.perf_counter()
        if reserve_and_publish(charge) != "published":
            raise RuntimeError("the benchmark budget ran out")
        cycles.append(time.perf_counter() - t0)
    results.put((start, time.time(), cycles))
