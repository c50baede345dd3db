"""Public-side tasks: the preflight check and the atomic publication."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from privfair.core.errors import PrivfairError
from privfair.release.table import plan as lib
from privfair.release.table.plan import ReleaseParams, ReleasePlan
from privfair.release.table.publish import publish as publish_release
from privfair.store.artefacts import FileRef
from tasks._common import retry_on_io_error


@task(name="preflight", cache_policy=NO_CACHE, persist_result=False)
def preflight(params: ReleaseParams) -> ReleasePlan:
    """Refuse bad input and an exhausted lifetime budget before any private read.

    Nothing private has been read yet, so any ``ValueError`` here is bad input: it becomes a
    :class:`~privfair.release.table.plan.ReleaseInputError` (a refusal, logged as one line).
    """
    try:
        return lib.preflight(params)
    except PrivfairError:
        raise
    except ValueError as exc:
        raise lib.ReleaseInputError(lib.params_error_line(exc)) from None


@task(name="publish", retries=2, retry_delay_seconds=[1, 5],
      retry_condition_fn=retry_on_io_error, cache_policy=NO_CACHE, persist_result=False)
def publish(plan: ReleasePlan, ledger: FileRef, one_way: FileRef | None,
            structure: FileRef | None, model: FileRef | None, synthetic: FileRef,
            input_validation: dict[str, Any], output_validation: dict[str, Any],
            fairness_transform: dict[str, Any], orchestrator: dict[str, Any] | None = None,
            generative: dict[str, Any] | None = None) -> Path:
    """Atomic release folder + lifetime ledger charge + catalog row (+ the run's id/link)."""
    return publish_release(plan, ledger=ledger, one_way=one_way, structure=structure, model=model,
                       synthetic=synthetic, input_validation=input_validation,
                       output_validation=output_validation,
                       fairness_transform=fairness_transform, orchestrator=orchestrator,
                       generative=generative)
