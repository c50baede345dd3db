"""Operations around the release flow: refusals, alerts, concurrency, run links, stage logs.

* **Refusals** (every :class:`~privfair.core.errors.PrivfairError`: bad input, exhausted
  budget, broken contract) are expected outcomes, not crashes. The flow logs them as one
  ERROR line; :class:`RefusalTracebackFilter` drops the engine's own records that would repeat
  them with a ~50-line traceback (task engine, flow engine, ``prefect.engine`` in served and
  worker processes). Unexpected errors keep their tracebacks.
* :func:`on_release_failure` is the flow's ``on_failure`` hook: one ERROR line and a Prefect
  event (``privfair.release.refused`` or ``privfair.release.failed``) that an automation can
  turn into a notification (``deployments/alerts.py``).
* :func:`dataset_slot` holds the global concurrency limit ``privfair-release-<dataset>``
  (created with one slot if missing), so two runs for one dataset queue instead of racing.
* :func:`orchestrator_record` is the flow run id, name and UI link, recorded in the manifest
  and the catalog.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeGuard

from privfair.core.errors import PrivfairError
from privfair.store.gc import RUN_TIME_LIMIT_S

#: Loggers whose records repeat a refusal with its traceback.
ENGINE_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine",
                  "prefect.flow_engine", "prefect.task_engine")

#: Seconds a release may run before Prefect fails it (Adult with AIM takes minutes);
#: ``privfair store gc`` treats older staging folders as left by killed runs.
FLOW_TIMEOUT_S = RUN_TIME_LIMIT_S


def is_refusal(exc: BaseException | None) -> TypeGuard[PrivfairError]:
    return isinstance(exc, PrivfairError)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: The table release's flow; every publishing command has one (``privfair-<command>``).
RELEASE_FLOW = "privfair-release"


def release_flow_names() -> frozenset[str]:
    """The flows whose refusals the filter shortens: one per publishing command (other
    flows in one process, such as ``privfair-evaluate``, keep theirs)."""
    kinds = sys.modules.get("privfair.release.registry")  # loaded wherever a release flow runs
    return frozenset({RELEASE_FLOW, *(f.flow_name for f in getattr(kinds, "FAMILIES", ()))})


class RefusalTracebackFilter(logging.Filter):
    """Drop engine ERROR records that repeat a refusal; the failure hook logs one line.

    Only records of release runs: their ``flow_name`` is a publishing flow's, or unknown for
    the process-level records of a served or worker run (one flow run per process).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "privfair_refusal", False):
            return True
        flow_name = getattr(record, "flow_name", "<unknown>")
        if flow_name != "<unknown>" and flow_name not in release_flow_names():
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if is_refusal(exc):
            return False
        # "Task run failed with exception: ReleaseInputError(...)", "Finished in state
        # Failed('... ReleaseInputError: ...')": the same refusal again, without exc_info
        return not (record.levelno >= logging.ERROR
                    and any(n in record.getMessage() for n in _refusal_markers()))


def _refusal_markers() -> tuple[str, ...]:
    markers: set[str] = set()
    todo: list[type[PrivfairError]] = [PrivfairError]
    while todo:
        cls = todo.pop()
        markers.update((f"{cls.__name__}(", f"{cls.__name__}:"))
        todo.extend(cls.__subclasses__())
    return tuple(markers)


def install_refusal_filter() -> None:
    """Idempotent: attach :class:`RefusalTracebackFilter` to the engine loggers."""
    for name in ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RefusalTracebackFilter) for f in logger.filters):
            logger.addFilter(RefusalTracebackFilter())


def state_exception(state: Any) -> BaseException | None:
    data = getattr(state, "data", None)
    if isinstance(data, BaseException):
        return data
    with contextlib.suppress(Exception):
        from prefect.states import get_state_exception

        return get_state_exception(state)  # type: ignore[return-value]
    return None


def failure_event(flow_run: Any, state: Any) -> tuple[str, str]:
    """``(event name, one public line)`` for a failed release run."""
    exc = state_exception(state)
    if is_refusal(exc):
        return "privfair.release.refused", f"release refused: {one_line(exc)}"
    # Unexpected errors: the type only; a message could quote anything.
    what = type(exc).__name__ if exc is not None else (getattr(state, "name", None) or "Failed")
    return "privfair.release.failed", f"release failed unexpectedly ({what}); see the run logs"


def on_release_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_failure`` hook: one ERROR line and an event for automations to notify on."""
    from prefect.events import emit_event
    from prefect.logging.loggers import flow_run_logger

    event, line = failure_event(flow_run, state)
    flow_run_logger(flow_run).error(line, extra={"privfair_refusal": True})
    params = getattr(flow_run, "parameters", None) or {}
    emit_event(event=event,
               resource={"prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                         "prefect.resource.name": str(flow_run.name)},
               related=[{"prefect.resource.id": f"privfair.contract.{params.get('contract')}",
                         "prefect.resource.role": "privfair-contract"}],
               payload={"message": line, "deployment_id": str(flow_run.deployment_id)})


def slot_name(dataset: str) -> str:
    return f"privfair-release-{dataset}"


def ensure_dataset_slot(dataset: str) -> Any:
    """The dataset's global concurrency limit, created with one slot if missing (deploying
    creates those of the known datasets; a run creates its own otherwise)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    name = slot_name(dataset)
    with get_client(sync_client=True) as client:
        try:
            return client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            # Created once with one slot; an operator may raise it in the UI afterwards.
            with contextlib.suppress(ObjectAlreadyExists):
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=name, limit=1))
        return client.read_global_concurrency_limit_by_name(name)


@contextlib.contextmanager
def dataset_slot(dataset: str, *, log: Any = None) -> Iterator[None]:
    """Hold the dataset's one-slot global concurrency limit for the ``with`` body.

    ``log(line)`` hears that the run waits when another run of the dataset holds the slot.
    """
    from prefect.concurrency.sync import concurrency

    name = slot_name(dataset)
    limit = ensure_dataset_slot(dataset)
    if log is not None and limit.active_slots >= limit.limit:
        log(f"waiting for concurrency slot {name!r}: another release of {dataset!r} holds it")
    with concurrency(name, occupy=1, strict=True):
        yield


def orchestrator_record() -> dict[str, Any] | None:
    """Flow run id, name, deployment and UI link of the current run (None outside a run)."""
    from prefect.context import FlowRunContext
    from prefect.settings import PREFECT_UI_URL

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return None
    run = ctx.flow_run
    ui = PREFECT_UI_URL.value()
    return {
        "name": "prefect",
        "flow_run_id": str(run.id),
        "flow_run_name": run.name,
        "deployment_id": str(run.deployment_id) if run.deployment_id else None,
        "ui_url": f"{ui.rstrip('/')}/runs/flow-run/{run.id}" if ui else None,
    }


def ledger_lines(entries: list[Mapping[str, Any]]) -> list[str]:
    """Public one-line summaries of new ledger entries (ρ charged, σ, query count)."""
    lines = []
    for e in entries:
        sigma = e.get("sigma")
        extra = f", σ = {fmt(sigma)}" if sigma is not None else ""
        lines.append(f"{e['name']}: {e['mechanism']} charged ρ = {fmt(e['rho'])}{extra} "
                     f"over {e['queries']} queries")
    return lines


def fmt(x: float | None, digits: int = 4) -> str:
    """A number to ``digits`` significant digits (``-`` for None)."""
    return "-" if x is None else f"{float(x):.{digits}g}"


def ledger_lines_of(ledger: Any, *, seen: Any = None) -> list[str]:
    """Public lines for the entries a stage added to the run's ledger file."""
    from privfair.store.artefacts import load_ledger

    before = len(load_ledger(seen).entries) if seen is not None else 0
    return ledger_lines([asdict(e) for e in load_ledger(ledger).entries[before:]])


def post_release_artifacts(folder: Any, manifest: Mapping[str, Any], *, markdown: str,
                           ledger: list[dict[str, Any]]) -> None:
    """The release's Prefect artifacts: its public summary, its ledger, a link to it."""
    from prefect.artifacts import (
        create_link_artifact,
        create_markdown_artifact,
        create_table_artifact,
    )

    folder = Path(folder)
    title = f"{manifest.get('dataset')} {manifest.get('version')}"
    create_markdown_artifact(key="privfair-release", markdown=markdown, description=title)
    if ledger:
        create_table_artifact(key="privfair-release-ledger", table=ledger,
                              description=f"privacy ledger of {title}")
    report = folder / "report.html"
    create_link_artifact(key="privfair-release-link",
                         link=(report if report.is_file() else folder).as_uri(),
                         link_text=f"{title} ({folder})",
                         description="the published release (public)")
