"""One Prefect flow per release kind, generated from the kind's declaration.

Every flow has the same controls: a flat typed form generated from the kind's parameter
model (fields marked ``form: False``, such as the test seed, stay off it: Prefect stores
flow parameters, and whoever knows a seed can remove the noise), the per-dataset
concurrency slot, the flow timeout, the failure hooks that log a refusal as one line and emit
an alert event, and the driver of :mod:`tasks.stages` (each stage a task, artifacts, run ↔
release links). The work itself is :func:`privfair.release.protocol.run_release`, the same
function ``--no-prefect`` calls.

A test seed reaches an in-process run through :func:`run_local`, never through the API.
"""

from __future__ import annotations

import contextvars
import inspect
import os
from typing import Annotated, Any

from prefect import flow
from prefect.runtime import deployment
from prefect.states import Completed, State
from pydantic.fields import FieldInfo

from privfair.core.errors import ReleaseInputError
from privfair.release.options import ReleaseOptions, field_extra
from privfair.release.protocol import Planned, ReleaseKind, run_release
from privfair.release.registry import FLOW_KINDS, ReleaseFamily
from tasks import ops
from tasks.registry_blocks import team_registry
from tasks.stages import PrefectDriver

#: Every setting of an in-process run (run_local): internal fields and a test seed.
_LOCAL: contextvars.ContextVar[ReleaseOptions | None] = contextvars.ContextVar(
    "privfair_local_release_options", default=None)
#: The plan the CLI checked and priced for a run in this process (issue 33.2: one plan, one
#: run id); a flow run whose options differ from it plans again.
_PLANNED: contextvars.ContextVar[Planned | None] = contextvars.ContextVar(
    "privfair_local_release_plan", default=None)

ops.install_refusal_filter()


def form_fields(model: type[ReleaseOptions]) -> dict[str, FieldInfo]:
    """The fields of ``model`` that the Prefect form shows."""
    return {name: info for name, info in model.model_fields.items()
            if field_extra(info).get("form", True)}


def _annotation(info: FieldInfo) -> Any:
    if info.metadata:  # ge/gt/le/lt constraints: the form enforces them too
        return Annotated[info.annotation, *info.metadata]
    return info.annotation


#: The form's one field that is not a release parameter: ``--resume`` as a flow parameter.
RESUME = "resume_run"


def _signature(model: type[ReleaseOptions]) -> inspect.Signature:
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                default=info.get_default(call_default_factory=True),
                                annotation=_annotation(info))
              for name, info in form_fields(model).items()]
    params.append(inspect.Parameter(RESUME, inspect.Parameter.KEYWORD_ONLY, default=None,
                                    annotation=str | None))
    return inspect.Signature(params, return_annotation=str)


def _docstring(family: ReleaseFamily) -> str:
    lines = [f"{family.description[:1].upper()}{family.description[1:]}; returns the release "
             "folder.", "", "Args:"]
    for name, info in form_fields(family.params).items():
        lines.append(f"    {name}: {' '.join((info.description or name).split())}")
    lines.append(f"    {RESUME}: Re-run only the post-noise stages of this charged run (its id) "
                 "with the post-processing fields set here; no privacy cost.")
    return "\n".join(lines)


def options_for(family: ReleaseFamily, args: dict[str, Any]) -> ReleaseOptions:
    """The run's options: flow parameters over the local (or default) settings."""
    local = _LOCAL.get()
    fields = (local.model_dump() if local is not None
              else {"work_dir": os.environ.get("PRIVFAIR_WORK_DIR", ".privfair")})
    contract = args.get("contract")
    if contract is not None and "/" not in contract and not contract.endswith(
            (".yaml", ".yml")):
        from privfair.contracts.datasets import contract_path

        contract = str(contract_path(contract))
    try:
        options = family.params.model_validate({**fields, **args, "contract": contract})
    except ValueError as exc:
        from privfair.release.options import params_error_line

        raise ReleaseInputError(params_error_line(exc)) from None
    from privfair.release.options import refuse_idle_options

    # The form sends every field: those set away from their defaults are the ones given. A
    # deployment's own parameters (set once by the operator for every run, such as the AIM
    # time budget) are defaults too, not this run's choice.
    form = family.params.model_fields
    preset = dict(deployment.parameters or {})
    refuse_idle_options(options, [
        k for k, v in args.items()
        if k in form and v != form[k].get_default(call_default_factory=True)
        and not (k in preset and preset[k] == v)])
    return options


def planned_request(kind: ReleaseKind, options: ReleaseOptions) -> ReleaseKind | Planned:
    """The plan :func:`run_local` was handed, when it is this run's (same kind, same
    options); else ``kind``, which the run plans itself.

    Module-level, not in the flow's closure: a flow on a Dask task runner is pickled by value,
    and a context variable cannot be."""
    planned = _PLANNED.get()
    if planned is not None and planned.kind is kind and planned.params == options:
        return planned
    return kind


def make_flow(family: ReleaseFamily) -> Any:
    """The Prefect flow of one release family (its form generated from its parameters)."""

    # The body returns its final state; calling the flow returns the state's data (the folder).
    def body(**args: Any) -> State[str]:
        # The team's registry block, when saved, before the first registry access.
        with team_registry():
            return _body(**args)

    def _body(**args: Any) -> State[str]:
        run_id = args.pop(RESUME, None)
        if run_id is not None:
            folder = _resume(family, run_id, args)
            return Completed(message=f"published {folder} (resumed {run_id})", data=folder)
        options = options_for(family, args)
        address = (getattr(options, "dask_address", None)
                   if getattr(options, "engine", "local") == "dask" else None)
        driver = PrefectDriver(dask_address=address)
        request = planned_request(family.kind_for(options), options)
        with driver.task_runner():  # prefect-dask's DaskTaskRunner given an address
            folder = str(run_release(request, options, driver=driver))
        # The run's final state names the release (`prefect deployment run --watch` prints it).
        return Completed(message=f"published {folder}", data=folder)

    # Named as the module global it is bound to below: deployments (serve, prefect.yaml)
    # load a flow by its function's name, `flows.kinds:<command>`.
    body.__name__ = family.command
    body.__qualname__ = body.__name__
    body.__doc__ = _docstring(family)
    body.__signature__ = _signature(family.params)  # type: ignore[attr-defined]
    return flow(name=family.flow_name, persist_result=False,
                timeout_seconds=ops.FLOW_TIMEOUT_S, on_failure=[ops.on_release_failure],
                on_crashed=[ops.on_release_failure])(body)


def _resume(family: ReleaseFamily, run_id: str, args: dict[str, Any]) -> str:
    """``resume_run``: the run's post-noise stages with the post-processing fields the form
    sets away from their defaults (the others keep the run's values)."""
    from privfair.release.resume import resume_release, resumed_kind

    local = _LOCAL.get()
    work_dir = (local.work_dir if local is not None
                else os.environ.get("PRIVFAIR_WORK_DIR", ".privfair"))
    kind = resumed_kind(family.kinds, run_id, work_dir=work_dir)
    fields = family.params.model_fields
    changes = {k: args[k] for k in kind.post_noise_params
               if k in args and args[k] != fields[k].get_default(call_default_factory=True)}
    return str(resume_release(kind, run_id, changes, work_dir=work_dir,
                              driver=PrefectDriver()))


FLOWS = {family.command: make_flow(family) for family in FLOW_KINDS}


def run_local(options: ReleaseOptions, *, command: str, planned: Planned | None = None) -> str:
    """Run ``command``'s flow in this process with every setting of ``options``.

    Flow parameters (stored by Prefect) get only the form's fields; the seed and the internal
    settings reach the run through a context variable, never through the API. ``planned``:
    what :func:`~privfair.release.protocol.plan_release` returned for ``options`` (the CLI's
    priced plan), which the flow runs instead of planning again.
    """
    family = next(f for f in FLOW_KINDS if f.command == command)
    args = {name: getattr(options, name) for name in form_fields(family.params)}
    tokens = _LOCAL.set(options), _PLANNED.set(planned)
    try:
        return FLOWS[command](**args)
    finally:
        _LOCAL.reset(tokens[0])
        _PLANNED.reset(tokens[1])


# Entrypoints for deployments: `flows.kinds:release`, `flows.kinds:train`, ...
globals().update(FLOWS)
