"""The synthetic-table pipeline the ``table`` and ``gan`` kinds share (not a kind itself).

Both kinds read the private table the same way (load → DP domains → discretize under the
contract's policies → noisy counts of the rows the policies touched), both publish a
synthetic table with the same files and end with the same post-processing (TOT, output
validation); they differ in the stages between (:mod:`privfair.release.kinds.table.kind`:
measure, estimate, sample; :mod:`privfair.release.kinds.gan.kind`: DP-SGD, sample the
generator). Each stage here is a thin adapter from the protocol's ``(context, state)`` to the
stage functions of :mod:`privfair.release.tabular.private`, :mod:`.post_noise` and
:mod:`privfair.release.ingest`, which take the run's test seed and draw each stage's
generator from its own spawn key (:func:`privfair.release.seeds.stage_rng`). The stage
functions are called by the names imported here, so a test injects a fault into one stage by
patching this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.core.errors import ReleaseInputError
from privfair.release.ingest import discretize_counted, load, read_policy_tally
from privfair.release.policy_counts import measure_policy_counts
from privfair.release.protocol import ReleaseKind, RunContext, Stage, State, Written
from privfair.release.seeds import stage_rng
from privfair.release.tabular.manifest import ledger_rows, summary_markdown
from privfair.release.tabular.partitioned import (
    discretize_dataset,
    ingest_dataset,
    part_client,
    validate_parts,
)
from privfair.release.tabular.plan import ReleaseParams, ReleasePlan, check, small_n_line
from privfair.release.tabular.post_noise import (
    fairness_transform,
    tot_input_path,
    validate_output,
)
from privfair.release.tabular.private import resolve_domains
from privfair.release.tabular.publish import write_table_release
from privfair.store.artefacts import load_ledger, save_ledger
from privfair.synth.synthesizer import AIM_METHODS


def current_plan(context: RunContext, state: State) -> ReleasePlan:
    """The run's plan; after the DP-domain stage, the one bound to the released domains."""
    plan: ReleasePlan = state.get("plan", context.plan)
    return plan


# --- stages shared by both kinds ------------------------------------------------------------


def load_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = context.plan
    ledger = save_ledger(PrivacyLedger(rho_budget=plan.rho, delta=plan.delta),
                         context.workspace.artefacts)
    if plan.data_source == "dataset":  # one task per file; encoded at once when it can be
        with part_client(plan) as client:
            out = ingest_dataset(plan.data_path, plan.contract, context.workspace.staging,
                                 encode=not plan.split["domains"],
                                 batch_size=plan.batch_size, client=client)
        return {**out, "ledger": ledger}
    # No check of values here (issue 21.2): the schema was checked before the reservation
    # (check) and values get the contract's policies in the discretize stage.
    staged = load(plan.data_path, plan.contract, context.workspace.staging,
                  batch_size=plan.batch_size, in_place=not plan.split["domains"])
    return {"staged": staged, "ledger": ledger}


def domains_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan, ledger = resolve_domains(state["staged"], context.plan, state["ledger"],
                                   context.workspace.artefacts, seed=context.seed,
                                   batch_size=context.plan.batch_size)
    return {"plan": plan, "ledger": ledger}


def discretize_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    if "codes" in state:  # a Parquet dataset encoded as it was loaded
        return {}
    if isinstance(state["staged"], list):  # a Parquet dataset's staged parts
        with part_client(plan) as client:
            codes, tally = discretize_dataset(state["staged"], plan.contract,
                                              context.workspace.staging,
                                              batch_size=plan.batch_size, client=client)
        return {"codes": codes, "policy_tally": tally}
    code_file, tally = discretize_counted(state["staged"], plan.contract,
                                          context.workspace.staging, batch_size=plan.batch_size)
    return {"codes": code_file, "policy_tally": tally}


def policy_counts_stage(context: RunContext, state: State) -> dict[str, Any]:
    """The rows each policy touched, as noisy counts charged to the run (issue 21.2)."""
    plan = current_plan(context, state)
    book = load_ledger(state["ledger"])
    record = measure_policy_counts(
        read_policy_tally(state["policy_tally"]), plan.contract, book,
        rho=plan.split["policies"], rng=stage_rng(context.seed, "policies"),
        discrete=plan.discrete_noise)
    return {"input_validation": record,
            "ledger": save_ledger(book, context.workspace.artefacts)}


def fairness_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    # a resume that changes no sampling parameter fits TOT on the table the run's infeasible
    # TOT kept, the one whose smallest feasible eta its message named
    resampled = {"n_rows", "sample_mode"} & set((context.resumed or {}).get("changed", ()))
    synthetic, transform = fairness_transform(
        state["synthetic"], plan.contract, context.workspace.artefacts,
        transform=plan.fairness_transform, eta=plan.eta, discrimination=plan.discrimination,
        distortion=plan.distortion, seed=context.seed,
        kept=tot_input_path(plan.work_dir, plan.run_id),
        reuse_kept=context.resumed is not None and not resampled)
    return {"synthetic": synthetic, "fairness_transform": transform}


def validate_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    if isinstance(state["synthetic"], list):  # per part on the cluster, combined here
        with part_client(plan) as client:
            return {"output_validation": validate_parts(
                state["synthetic"], plan.contract, n_rows=plan.n_rows,
                checked=state.get("part_checks", ()), client=client)}
    output = validate_output(state["synthetic"], plan.contract, n_rows=plan.n_rows)
    if plan.data_docs:  # opt-in: GX itself costs more than a small release
        from privfair.release.tabular.data_docs import validation_records

        output = {**output, **validation_records(
            state["synthetic"], plan.contract, store=plan.store,
            fingerprint=plan.contract_fingerprint, run_id=plan.run_id, n_rows=plan.n_rows)}
    return {"output_validation": output}


class SyntheticTableKind(ReleaseKind):
    """What the ``table`` and ``gan`` kinds share: the ``release`` command's parameters and
    data-free check, the reading stages, the post-processing and the published files. A
    subclass names itself and adds the stages between reading and post-processing."""

    command = "release"
    params = ReleaseParams
    post_noise_params = ("n_rows", "sample_mode", "fairness_transform", "eta",
                         "discrimination", "distortion", "allow_unfair", "max_iters",
                         "data_docs", "output", "part_rows")

    #: The ``--method`` values this kind runs.
    methods: tuple[str, ...] = ()

    def runs(self, options: ReleaseParams) -> bool:
        return options.method in self.methods

    def method_check(self, params: ReleaseParams, contract: Contract,
                     domain: Domain) -> Mapping[str, Any]:
        """The kind's own data-free checks of its method; returns extra plan fields."""
        return {}

    def check(self, params: ReleaseParams) -> ReleasePlan:
        if params.method not in self.methods:  # the registry picks the kind by the method
            raise ReleaseInputError(f"method {params.method!r} is not a {self.name} method; "
                                    f"expected one of {list(self.methods)}")
        return check(params, method_check=self.method_check)

    def summary(self, plan: ReleasePlan) -> str:
        budget = (f", time budget {plan.max_time_s:g} s" if plan.method in AIM_METHODS
                  and plan.max_time_s else "")
        rule = small_n_line(plan)
        return (f"release of {plan.dataset!r}: ε = {plan.epsilon:g}, δ = {plan.delta:g} "
                f"(ρ = {plan.rho:.4g}), method {plan.method}{budget}"
                + ("" if rule is None else f"\n{rule}"))

    def markdown(self, folder: Path, manifest: Mapping[str, Any]) -> str:
        return summary_markdown(manifest, folder)

    def ledger_table(self, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        return ledger_rows(manifest)

    def reading_stages(self, plan: ReleasePlan) -> list[Stage]:
        stages = [Stage("load", load_stage, private=True, at=0.02)]
        if plan.split["domains"]:
            stages.append(Stage("publish DP domains", domains_stage, private=True, noise=True,
                                at=0.12))
        stages.append(Stage("discretize", discretize_stage, private=True, at=0.15))
        stages.append(Stage("count policy rows", policy_counts_stage, private=True, noise=True,
                            at=0.17))
        return stages

    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        return write_table_release(folder, current_plan(context, state), state,
                                   version=version, lifetime=lifetime,
                                   orchestrator=context.orchestrator, kind=self.name,
                                   charged_rdp=context.charge.rdp)
