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
  Nothing waits forever (issue 45.3): the slot is held on a lease a server's repossessor
  takes back from a dead holder; the holder also leaves a record (pid, host) in the client's
  state folder, so a later release on the same machine frees the slot of a killed run at once
  and marks its flow run Crashed (a temporary server runs no repossessor and forgets its
  leases); a wait says (at WARNING, so on the terminal too) every
  :data:`SLOT_WAIT_STEP_S` what it waits for, and ends after :data:`SLOT_WAIT_S` with one line
  and the fix, before anything is reserved.
* :func:`orchestrator_record` is the flow run id, name and UI link, recorded in the manifest
  and the catalog.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeGuard

from privfair.core.errors import PrivfairError, ReleaseInputError
from privfair.store.check import pid_alive
from privfair.store.files import atomic_write
from privfair.store.gc import RUN_TIME_LIMIT_S
from privfair.store.witness import state_folder

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


#: Seconds of a holder's lease on its dataset's slot: the holder renews it while it runs,
#: and a server's repossessor takes back a dead holder's slot this long after its last
#: renewal (the server's minimum; Prefect's default, 300 s, kept a killed run's dataset
#: blocked for minutes).
SLOT_LEASE_S = 60.0
#: Seconds a release waits for its dataset's slot before it refuses, before any reservation
#: (``PRIVFAIR_SLOT_WAIT_S`` overrides it).
SLOT_WAIT_S = 900.0
#: A waiting release says every this many seconds that it still waits, and for what.
SLOT_WAIT_STEP_S = 15.0


def slot_wait_s() -> float:
    """The wait bound: ``PRIVFAIR_SLOT_WAIT_S`` when set to a positive number of seconds."""
    text = os.environ.get("PRIVFAIR_SLOT_WAIT_S", "").strip()
    try:
        value = float(text) if text else SLOT_WAIT_S
    except ValueError:
        raise ReleaseInputError(f"PRIVFAIR_SLOT_WAIT_S must be a number of seconds, got "
                                f"{text!r}") from None
    if not 0 < value < 1e7:
        raise ReleaseInputError(f"PRIVFAIR_SLOT_WAIT_S must be in (0, 1e7) seconds, got "
                                f"{text!r}")
    return value


def holder_path(name: str) -> Path:
    """Where this machine's holder of slot ``name`` records itself (pid, host, since)."""
    return state_folder() / "slots" / f"{name}.json"


def slot_holder(name: str) -> dict[str, Any] | None:
    """The recorded holder of slot ``name`` on this client, or None."""
    try:
        holder = json.loads(holder_path(name).read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def free_dead_slot(name: str, *, log: Callable[[str], None]) -> bool:
    """Give back slot ``name`` when its recorded holder ran here and no longer runs.

    Returns whether it was freed. A holder on another host, or none recorded, is left to the
    server's lease (:data:`SLOT_LEASE_S`).
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

    holder = slot_holder(name)
    if holder is None or pid_alive(holder.get("pid"), holder.get("host")):
        return False
    from prefect.states import Crashed

    crashed = ""
    with get_client(sync_client=True) as client:
        client.update_global_concurrency_limit(
            name, GlobalConcurrencyLimitUpdate(active_slots=0))
        run = holder.get("flow_run_id")
        if run:
            # the killed process can no longer end its flow run: it would show Running forever
            try:
                client.set_flow_run_state(run, Crashed(message=(
                    f"its process (pid {holder.get('pid')} on {holder.get('host')}) no longer "
                    "runs; a later release freed its concurrency slot")), force=True)
                crashed = f"; its flow run {run} is marked Crashed"
            except Exception:  # noqa: BLE001 - a run deleted from the server: the slot is freed
                crashed = f"; its flow run {run} could not be marked Crashed"
    with contextlib.suppress(OSError):
        holder_path(name).unlink()
    log(f"freed concurrency slot {name!r}: its holder (pid {holder.get('pid')} on "
        f"{holder.get('host')}, since {holder.get('since')}) no longer runs{crashed}")
    return True


def dead_slot_holders() -> list[tuple[str, dict[str, Any]]]:
    """(slot name, holder record) of every slot this client's records show held by a run
    that ran on this host and no longer runs (a killed release): ``store check`` reports
    them and ``--repair`` frees them (:func:`free_dead_slots`)."""
    folder = state_folder() / "slots"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        holder = slot_holder(path.stem)
        if holder is not None and not pid_alive(holder.get("pid"), holder.get("host")):
            out.append((path.stem, holder))
    return out


def free_dead_slots(*, log: Callable[[str], None]) -> list[str]:
    """Free every dead holder's slot (:func:`dead_slot_holders`) on the Prefect API this
    process uses; returns the slot names freed."""
    return [name for name, _ in dead_slot_holders() if free_dead_slot(name, log=log)]


class SlotWaitTimeoutFilter(logging.Filter):
    """Drops Prefect's ERROR record of a slot acquisition that timed out (``Service
    'ConcurrencySlotAcquisitionWithLeaseService' failed to process item ... TimeoutError``):
    :func:`dataset_slot` waits in steps that time out by design, and says what it waits for
    in its own line, so the terminal shows no ERROR while a release merely waits."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "Service %r failed to process item %r" and len(args) == 2
                    and str(args[0]).startswith("ConcurrencySlotAcquisition")
                    and "raised TimeoutError" in str(args[1]))


#: Prefect's logger of its concurrency services (slot acquisition among them).
CONCURRENCY_SERVICE_LOGGER = "prefect._internal.concurrency"


@contextlib.contextmanager
def _quiet_slot_timeouts() -> Iterator[None]:
    quiet = SlotWaitTimeoutFilter()
    logger = logging.getLogger(CONCURRENCY_SERVICE_LOGGER)
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


@contextlib.contextmanager
def _recorded_holder(name: str) -> Iterator[None]:
    path = holder_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    atomic_write(path, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                   "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   "flow_run_id": str(run.id) if run else None}).encode())
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


@contextlib.contextmanager
def dataset_slot(dataset: str, *, log: Any = None) -> Iterator[None]:
    """Hold the dataset's one-slot global concurrency limit for the ``with`` body.

    ``log(line)`` hears that the run waits when another run of the dataset holds the slot,
    every :data:`SLOT_WAIT_STEP_S` while it does, and that a dead holder's slot was freed.
    A wait longer than :func:`slot_wait_s` refuses with one line naming the holder and the
    fix (nothing is reserved yet).
    """
    from prefect.concurrency.sync import concurrency

    say: Callable[[str], None] = log if log is not None else (lambda line: None)
    name = slot_name(dataset)
    wait_s = slot_wait_s()
    limit = ensure_dataset_slot(dataset)
    if limit.active_slots >= limit.limit and free_dead_slot(name, log=say):
        limit = ensure_dataset_slot(dataset)
    if limit.active_slots >= limit.limit:
        say(f"waiting for concurrency slot {name!r}: another release of {dataset!r} holds it"
            f"{_held_by(name)}; waiting up to {wait_s:g} s")
    started = time.monotonic()
    with _quiet_slot_timeouts():
        acquired = False
        while True:
            left = wait_s - (time.monotonic() - started)
            try:
                with concurrency(name, occupy=1, strict=True, lease_duration=SLOT_LEASE_S,
                                 timeout_seconds=max(1.0, min(SLOT_WAIT_STEP_S, left))):
                    acquired = True
                    with _recorded_holder(name):
                        yield
                return
            except TimeoutError:
                if acquired:
                    raise  # the body's own timeout, not the wait's
            if free_dead_slot(name, log=say):
                continue
            waited = time.monotonic() - started
            if waited >= wait_s:
                raise ReleaseInputError(
                    f"waited {waited:.0f} s for concurrency slot {name!r}{_held_by(name)}; if "
                    "that run is dead, reset the limit's active slots to 0 in the Prefect UI "
                    "(Concurrency) and run again")
            say(f"still waiting for concurrency slot {name!r} ({waited:.0f} s of {wait_s:g} s)")


def _held_by(name: str) -> str:
    holder = slot_holder(name)
    if holder is None:
        return ""
    return f" (held by pid {holder.get('pid')} on {holder.get('host')} since " \
           f"{holder.get('since')})"


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
