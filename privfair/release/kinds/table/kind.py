"""The ``table`` release kind (MST, PreFair, AIM, independent) and the ``gan`` kind.

Both read the private table the same way (load → DP domains → discretize under the
contract's policies → noisy counts of the rows the policies touched), both
publish a synthetic table with the same files, and they differ in the stages between: the
marginal methods measure, select and estimate; the GANs train on DP-SGD and sample their
generator. Each stage here is a thin adapter from the protocol's ``(context, state)`` to the
stage functions of :mod:`privfair.release.table.private`, :mod:`.post_noise`,
:mod:`privfair.release.gan.stages` and :mod:`privfair.release.ingest`, which take the run's
test seed and draw each stage's generator from its own spawn key
(:func:`privfair.release.seeds.stage_rng`). The stage functions are called by the names
imported here, so a test injects a fault into one stage by patching this module.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import FairnessViolationError
from privfair.generative import GAN_METHODS
from privfair.release.gan.stages import (
    curve_limit,
    declared_curve,
    sample_gan,
    train_gan,
)
from privfair.release.ingest import discretize_counted, load, read_policy_tally
from privfair.release.policy_counts import measure_policy_counts
from privfair.release.protocol import Cost, ReleaseKind, RunContext, Stage, State, Written
from privfair.release.seeds import stage_rng
from privfair.release.table.manifest import ledger_rows, summary_markdown
from privfair.release.table.partitioned import (
    discretize_dataset,
    ingest_dataset,
    part_client,
    sample_parts,
    validate_parts,
)
from privfair.release.table.plan import ReleaseParams, ReleasePlan, preflight, small_n_line
from privfair.release.table.post_noise import (
    estimate,
    fairness_transform,
    sample,
    tot_input_path,
    validate_output,
)
from privfair.release.table.private import measure_table, resolve_domains
from privfair.release.table.publish import PARITY_METHODS, write_table_release
from privfair.store.artefacts import load_ledger, save_ledger
from privfair.store.registry import settle_curve
from privfair.synth.synthesizer import AIM_METHODS, FAIR_METHODS


def current_plan(context: RunContext, state: State) -> ReleasePlan:
    """The run's plan; after the DP-domain stage, the one bound to the released domains."""
    return state.get("plan", context.plan)


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
    # (preflight) and values get the contract's policies in the discretize stage.
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
    codes, tally = discretize_counted(state["staged"], plan.contract, context.workspace.staging,
                                      batch_size=plan.batch_size)
    return {"codes": codes, "policy_tally": tally}


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
        from privfair.release.table.data_docs import validation_records

        output = {**output, **validation_records(
            state["synthetic"], plan.contract, store=plan.store,
            fingerprint=plan.contract_fingerprint, run_id=plan.run_id, n_rows=plan.n_rows)}
    return {"output_validation": output}


def _engine(plan: ReleasePlan) -> dict[str, Any]:
    return {"engine": plan.engine, "dask_address": plan.dask_address}


# --- marginal methods ----------------------------------------------------------------------


def measure_stage(context: RunContext, state: State) -> dict[str, Any]:
    """Every measurement of a marginal method, by the library's estimator
    (:meth:`privfair.synth.synthesizer.FairSynthesizer.measure`)."""
    plan = current_plan(context, state)
    aim = plan.method in AIM_METHODS
    low, high = (0.2, 0.7) if aim else (0.2, 0.35)
    return measure_table(
        state["codes"], plan.contract, state["ledger"], context.workspace.artefacts,
        method=plan.method, epsilon=plan.epsilon, delta=plan.delta,
        rho=plan.rho - plan.split["domains"] - plan.split["policies"], seed=context.seed,
        discrete=plan.discrete_noise,
        batch_size=plan.batch_size, max_time_s=plan.max_time_s,
        progress=lambda stage, fraction: context.progress(stage, low + (high - low) * fraction),
        **_engine(plan))


def estimate_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    fit_time = state.get("fit_time_s")
    low = 0.7 if state.get("warm_start") is not None else 0.35
    clock = time.monotonic()

    def fit_progress(iteration: int, loss: float) -> None:
        # iterations, or the time cap when there is one: whichever is further along
        done = iteration / plan.max_iters
        if fit_time:
            done = max(done, (time.monotonic() - clock) / fit_time)
        context.progress("estimate", low + (0.8 - low) * min(done, 1.0))

    model = estimate(state["one_way"], state["selected"], context.workspace.artefacts,
                     max_iters=plan.max_iters, callback=fit_progress,
                     warm_start=state.get("warm_start"), max_time_s=fit_time)
    return {"model": model}


def sample_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    if plan.output == "partitioned":  # parts of part_rows rows, one generator each
        with part_client(plan) as client:
            parts, checks = sample_parts(
                state["model"], state["one_way"], plan.contract, context.workspace.artefacts,
                n_rows=plan.n_rows, part_rows=plan.part_rows, seed=context.seed,
                client=client)
        return {"synthetic": parts, "part_checks": checks}
    return {"synthetic": sample(state["model"], state["one_way"], context.workspace.artefacts,
                                n_rows=plan.n_rows, mode=plan.sample_mode, seed=context.seed)}


# --- GAN methods ----------------------------------------------------------------------------


def train_gan_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    # The lifetime holds the run's declared Rényi curve: σ keeps the run's curve at or below
    # it at every order (then the publication records the run's own curve).
    charge = context.charge
    limit = curve_limit(charge.rdp) if charge.rdp is not None else None
    # ...or, once the noisy count fixed q, settles it to the run's own curve where that fits.
    settle = ((lambda curve: settle_curve(charge, curve)) if charge.rdp is not None else None)
    generator, ledger = train_gan(
        state["codes"], plan.contract, state["ledger"], context.workspace.artefacts,
        method=plan.method, causal_graph=plan.causal_graph, epochs=plan.gan_epochs,
        group_clipping=plan.group_clipping, seed=context.seed, batch_size=plan.batch_size,
        discrete=plan.discrete_noise, limit=limit, settle=settle,
        progress=lambda epoch, epochs: context.progress("train GAN (DP-SGD)",
                                                        0.2 + 0.6 * epoch / epochs))
    return {"generator": generator, "ledger": ledger}


def sample_gan_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    synthetic, generative = sample_gan(
        state["generator"], plan.contract, context.workspace.artefacts, n_rows=plan.n_rows,
        delta=plan.delta, seed=context.seed, release_classifier=plan.release_classifier)
    return {"synthetic": synthetic, "generative": generative}


def gan_fairness_stage(context: RunContext, state: State) -> dict[str, Any]:
    """A fair GAN's guarantee is checked on the table it generated, never assumed."""
    plan = current_plan(context, state)
    check = state["generative"]["fairness_check"]
    if plan.method in PARITY_METHODS and not check["passed"] and not plan.allow_unfair:
        fairness = check["data_fairness"]
        gaps = [f"{abs(float(fairness.get('rd'))):.3f} for {check.get('protected')}"] + [
            f"{abs(float(p['rd'])):.3f} for {a}" for a, p in
            (fairness.get("per_protected") or {}).items()
            if a != check.get("protected") and p.get("constrained")]
        raise FairnessViolationError(
            f"method {plan.method!r} generated a table that fails its own fairness check "
            f"(|RD(D)| = {', '.join(gaps)}; {check['criterion']}); nothing is published "
            "(--allow-unfair publishes it, recorded in the manifest)")
    return {}


# --- the kinds --------------------------------------------------------------------------------


class TableKind(ReleaseKind):
    """A DP synthetic table from noisy marginals (``privfair release --method mst|...``)."""

    name = "table"
    command = "release"
    params = ReleaseParams
    post_noise_params = ("n_rows", "sample_mode", "fairness_transform", "eta",
                         "discrimination", "distortion", "allow_unfair", "max_iters",
                         "data_docs", "output", "part_rows")
    description = "publish a DP synthetic table (MST, PreFair, AIM, independent)"

    def check(self, params: ReleaseParams) -> ReleasePlan:
        return preflight(params)


    def summary(self, plan: ReleasePlan) -> str:
        budget = (f", time budget {plan.max_time_s:g} s" if plan.method in AIM_METHODS
                  and plan.max_time_s else "")
        rule = small_n_line(plan)
        return (f"release of {plan.dataset!r}: ε = {plan.epsilon:g}, δ = {plan.delta:g} "
                f"(ρ = {plan.rho:.4g}), method {plan.method}{budget}"
                + ("" if rule is None else f"\n{rule}"))

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        """What was built (the method and, when it differs, what it fell back to), how many
        rows, and every check's result."""
        method = manifest["method"]["name"]
        built = manifest["structure"].get("method", method)
        edges = len(manifest["structure"].get("edges", []))
        what = method if built == method else f"{method} -> {built}"
        checks = []
        model_graph = (manifest.get("fairness") or {}).get("model_graph")
        if model_graph is not None:
            claimed = method in FAIR_METHODS
            checks.append(f"model-graph fairness {'PASS' if model_graph['passed'] else 'FAIL'}"
                          + ("" if claimed else " (not claimed by this method)"))
        transform = manifest.get("fairness_transform") or {}
        if transform.get("applied"):
            eta = (transform.get("parameters") or {}).get("eta")
            achieved = transform.get("achieved_discrimination")
            checks.append(f"TOT eta={eta} applied" + (
                f" (discrimination {float(achieved):.3f})"
                if isinstance(achieved, int | float) else ""))
        if manifest["parameters"].get("allow_unfair"):
            checks.append("--allow-unfair")
        validation = (manifest.get("validation") or {}).get("output") or {}
        if "passed" in validation:
            checks.append(f"output contract {'PASS' if validation['passed'] else 'FAIL'}")
        small_n = manifest["structure"].get("small_n")
        if small_n and small_n.get("enabled", True):
            checks.insert(0, f"small-n rule: {small_n['qualifying_pairs']} of "
                             f"{small_n['candidate_pairs']} pairs qualify")
        stop = fit_stop(manifest["method"])
        if stop:
            checks.insert(0, stop)
        rows = (manifest.get("sampling") or {}).get("n_rows")
        return (f"built {what}: {edges} edges, {rows} rows; " + "; ".join(checks)).rstrip("; ")

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

    def stages(self, plan: ReleasePlan) -> list[Stage]:
        measure = "AIM rounds" if plan.method in AIM_METHODS else "measure marginals"
        return [*self.reading_stages(plan),
                Stage(measure, measure_stage, private=True, noise=True, at=0.2),
                Stage("estimate", estimate_stage, cache=True, at=0.35),
                Stage("sample", sample_stage, cache=True, at=0.8),
                Stage("fairness transform", fairness_stage, at=0.82),
                Stage("validate output", validate_stage, at=0.85)]

    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        return write_table_release(folder, current_plan(context, state), state,
                                   version=version, lifetime=lifetime,
                                   orchestrator=context.orchestrator)


class GanKind(TableKind):
    """A DP synthetic table from a GAN trained with DP-SGD (``--method dpgan|fairgan|...``)."""

    name = "gan"

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        check = manifest["fairness_check"]
        rd = (check.get("data_fairness") or {}).get("rd")
        rows = (manifest.get("sampling") or {}).get("n_rows")
        claim = ("" if manifest["method"]["name"] in PARITY_METHODS
                 else " (not claimed by this method)")
        unfair = "; --allow-unfair" if manifest["parameters"].get("allow_unfair") else ""
        return (f"built {manifest['method']['name']}: {rows} rows; statistical parity "
                f"|RD(D)| = {abs(float(rd)):.3f} {'PASS' if check['passed'] else 'FAIL'}"
                f"{claim}{unfair}")
    description = "publish a DP synthetic table from a GAN (dpgan, FairGAN, FairGAN+, CFGAN)"

    def cost(self, plan: ReleasePlan) -> Cost:
        """The GAN's declared Rényi curve (:func:`~privfair.release.gan.stages.declared_curve`)."""
        return Cost(epsilon=plan.epsilon, delta=plan.delta, rdp=declared_curve(plan))

    def stages(self, plan: ReleasePlan) -> list[Stage]:
        return [*self.reading_stages(plan),
                Stage("train GAN (DP-SGD)", train_gan_stage, private=True, noise=True, at=0.2),
                Stage("sample", sample_gan_stage, at=0.8),
                Stage("fairness check", gan_fairness_stage, at=0.81),
                Stage("fairness transform", fairness_stage, at=0.82),
                Stage("validate output", validate_stage, at=0.85)]


TABLE = TableKind()
GAN = GanKind()


def fit_stop(method: Mapping[str, Any]) -> str | None:
    """``converged: no`` and why, when the estimation did not converge (issue 34)."""
    estimation = method.get("estimation") or {}
    if estimation.get("converged") is not False:
        return None
    why = estimation.get("stopped_by")
    budget = method.get("time_budget_s")
    if why == "time budget":
        reason = (f"stopped by the {budget:g} s time budget" if budget
                  else "stopped by the time budget")
    elif why == "iteration cap":
        reason = f"stopped at max_iters = {estimation.get('max_iters')}"
    else:
        reason = "stopped before the tolerance was met"
    return (f"converged: no ({reason}, {estimation.get('iterations')} iterations; the model "
            "is the best iterate so far)")


def table_kind_for(method: str) -> TableKind:
    """The kind ``privfair release --method`` runs."""
    return GAN if method in GAN_METHODS else TABLE
