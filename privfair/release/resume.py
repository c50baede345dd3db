"""``--resume``: the post-noise stages of a charged run again, at no privacy cost.

A run keeps a post-noise checkpoint (:mod:`privfair.release.checkpoint`) once its last private
stage has ended. :func:`resume_release` re-runs only the stages after it, with new
post-processing parameters (those the kind lists in ``post_noise_params``), and publishes by
the protocol's :func:`~privfair.release.protocol.publish` as a version of the same run: of a
run that published nothing, its publication; of a published run, a new version recorded as
post-processing of it (ρ 0 in the ledger). Nothing private is read and no noise is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from privfair.core.errors import ReleaseInputError
from privfair.release.checkpoint import check_run_id, load_checkpoint, restore_state
from privfair.release.protocol import (
    InProcess,
    Progress,
    ReleaseKind,
    RunContext,
    publish,
)
from privfair.release.registry import FAMILIES
from privfair.release.seeds import check_seed_policy, seed_fingerprint
from privfair.store.files import Workspace
from privfair.store.registry import (
    RunCharge,
    check_seed_unused,
    dataset_id,
    read_lifetime_ledger,
)


def resumed_kind(kinds: Sequence[ReleaseKind], run_id: str, *,
                 work_dir: str | Path) -> ReleaseKind:
    """The kind of run ``run_id`` among the command's ``kinds``: its id checked before any
    file is read, its checkpoint read, and refused when another command made it (``discover
    --resume`` of a table run must not publish a table: issue 36)."""
    raw = load_checkpoint(work_dir, check_run_id(run_id))
    kind = next((k for k in kinds if k.name == raw["kind"]), None)
    if kind is None:
        command = next((k.command for k in _all_kinds() if k.name == raw["kind"]), None)
        hint = f"; resume it with `privfair {command} --resume`" if command else ""
        raise ReleaseInputError(f"--resume {run_id}: the run is a {raw['kind']} release, not "
                                f"{' or '.join(k.name for k in kinds)}{hint}")
    return kind


def _all_kinds() -> list[ReleaseKind]:
    return [kind for family in FAMILIES for kind in family.kinds]


def resume_release(kind: ReleaseKind, run_id: str, changes: Mapping[str, Any], *,
                   work_dir: str | Path, driver: Any = None,
                   progress: Progress | None = None) -> Path:
    """Re-run the post-noise stages of a charged run with new post-processing parameters.

    Reads the run's checkpoint (:mod:`privfair.release.checkpoint`), refuses a change to
    anything but ``kind.post_noise_params``, and publishes a new version of the same run:
    no private read, no noise, no budget (the run's charge stays what it was).
    """
    driver = driver or InProcess()
    report = progress or getattr(driver, "progress", None) or (lambda stage, fraction: None)
    raw = load_checkpoint(work_dir, run_id)
    if raw["kind"] != kind.name:
        raise ReleaseInputError(f"resume: run {run_id!r} is a {raw['kind']} release, not "
                                f"{kind.name}")
    changed = {k: v for k, v in changes.items() if k not in ("seed", "insecure_seed")}
    frozen = sorted(k for k, v in changed.items()
                    if k not in kind.post_noise_params and raw["options"].get(k) != v)
    if frozen:
        raise ReleaseInputError(
            f"resume: {frozen} would change what run {run_id!r} measured; only "
            f"post-processing parameters {list(kind.post_noise_params)} may change")
    options = kind.parse({**raw["options"], **changes})
    check_seed_policy(options.seed, options.insecure_seed, error=ReleaseInputError)
    plan = replace(kind.check(options), run_id=run_id)
    if options.seed is not None:
        plan = replace(plan, seed_fingerprint=seed_fingerprint(
            options.seed, dataset=dataset_id(plan.contract)))
    lifetime = read_lifetime_ledger(plan.store, plan.contract)
    held = next((p for p in lifetime.pending if p["run_id"] == run_id
                 and p.get("state") == "spent, not published"), None)
    published = [r for r in lifetime.releases if r.get("run_id") == run_id
                 and not r.get("post_processing_of")]
    if held is None and not published:
        run_state = lifetime.run_state(run_id)
        raise ReleaseInputError(
            f"resume: run {run_id!r} is {run_state or 'not in the lifetime ledger'}; only a run "
            "that drew noise can be resumed")
    if held is None:  # a published run: the new version is post-processing of it
        held = {**published[0], "rdp": None}
    # The seed policy is the one of the run that drew the noise: a new test seed for the
    # post-noise stages must be unused too, and a release whose noise came from a fixed seed
    # says so whatever this command was given.
    check_seed_unused(lifetime, plan.seed_fingerprint, run_id)
    noise_fingerprint = held.get("seed_fingerprint")
    if noise_fingerprint:
        seeded = {"seeded": True} if "seeded" in {f.name for f in fields(plan)} else {}
        plan = replace(plan, seed_fingerprint=noise_fingerprint, **seeded)
    cost = kind.cost(plan)
    curve = tuple(held["rdp"]) if held.get("rdp") else cost.rdp
    charge = RunCharge(
        run_id=run_id, kind=kind.name, dataset=plan.dataset, contract=plan.contract,
        store=Path(plan.store), epsilon=float(held["epsilon"]), delta=float(held["delta"]),
        rho=None if curve is not None else float(held.get("rho") or 0.0), rdp=curve,
        method=plan.method, contract_fingerprint=plan.contract.fingerprint(),
        seed_fingerprint=plan.seed_fingerprint)
    driver.say(f"resume run {run_id}: post-noise stages only, no privacy cost "
               f"({', '.join(f'{k}={v}' for k, v in changed.items()) or 'no change'})")
    with driver.slot(plan.dataset):
        workspace = Workspace.open(plan.work_dir, f"{run_id}-resume")
        context = RunContext(kind=kind, plan=plan, seed=options.seed, workspace=workspace,
                             charge=charge, progress=report, say=driver.say,
                             orchestrator=driver.orchestrator,
                             resumed={"run_id": run_id, "changed": changed,
                                      "post_processing_of": (published[0]["version"]
                                                             if published else None),
                                      "privacy_cost": "none: post-processing of the run's "
                                                      "charged measurements"})
        state = restore_state(raw, plan)
        stages = kind.stages(plan)
        last_private = max((i for i, s in enumerate(stages) if s.private), default=-1)
        try:
            for stage in stages[last_private + 1:]:
                report(stage.name, stage.at)
                state.update(driver.run_stage(stage, context, state))
            report("publish", 0.95)
            folder, written = publish(context, state)
        finally:
            workspace.cleanup_private()
    driver.published(kind, folder, written)
    report("done", 1.0)
    return folder
