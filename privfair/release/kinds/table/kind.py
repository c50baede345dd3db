"""The ``table`` release kind: a DP synthetic table from noisy marginals (MST, PreFair, AIM,
independent; ``privfair release --method mst|...``).

Reading, post-processing and publication are the synthetic-table pipeline it shares with the
gan kind (:mod:`privfair.release.tabular.stages`); this module adds the marginal methods'
stages: measure, estimate, sample. The stage functions are called by the names imported
here, so a test injects a fault into one stage by patching this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privfair.release.protocol import RunContext, Stage, State
from privfair.release.tabular.partitioned import part_client, sample_parts
from privfair.release.tabular.plan import ReleasePlan
from privfair.release.tabular.post_noise import estimate, sample
from privfair.release.tabular.private import measure_table
from privfair.release.tabular.stages import (
    SyntheticTableKind,
    current_plan,
    fairness_stage,
    validate_stage,
)
from privfair.synth.synthesizer import AIM_METHODS, FAIR_METHODS, METHODS


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
    low = 0.7 if state.get("warm_start") is not None else 0.35

    def fit_progress(iteration: int, loss: float) -> None:
        done = iteration / plan.max_iters
        context.progress("estimate", low + (0.8 - low) * min(done, 1.0))

    # Capped by iterations only: a time cap would let the machine's speed change the model
    # that is published (issue 41.5).
    model = estimate(state["one_way"], state["selected"], context.workspace.artefacts,
                     max_iters=plan.max_iters, callback=fit_progress,
                     warm_start=state.get("warm_start"))
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


class TableKind(SyntheticTableKind):
    """A DP synthetic table from noisy marginals (``privfair release --method mst|...``)."""

    name = "table"
    methods = METHODS
    description = "publish a DP synthetic table (MST, PreFair, AIM, independent)"

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        """What was built (the method and, when it differs, what it fell back to), how many
        rows, and every check's result."""
        method = manifest["method"]["name"]
        built = manifest["structure"].get("method", method)
        edges = len(manifest["structure"].get("edges", []))
        what = method if built == method else f"{method} -> {built}"
        checks = []
        model_graph = (manifest.get("fairness") or {}).get("model_graph")
        transform = manifest.get("fairness_transform") or {}
        if model_graph is not None and transform.get("applied"):
            # TOT's bound is the release's one verdict (as in report.html, issue 42.6): the
            # model graph's check before the transform is said, in lower case, not as a second
            checks.append("model-graph check before TOT: "
                          + ("pass" if model_graph["passed"] else "fail"))
        elif model_graph is not None:
            claimed = method in FAIR_METHODS
            checks.append(f"model-graph fairness {'PASS' if model_graph['passed'] else 'FAIL'}"
                          + ("" if claimed else " (not claimed by this method)"))
        if transform.get("applied"):
            eta = (transform.get("parameters") or {}).get("eta")
            check = transform.get("fairness_check") or {}
            achieved = check.get("achieved", transform.get("achieved_discrimination"))
            verdict = ("" if check.get("passed") is None
                       else " PASS" if check["passed"] else " FAIL")
            checks.append(f"TOT eta={eta} applied{verdict}" + (
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

    def stages(self, plan: ReleasePlan) -> list[Stage]:
        measure = "AIM rounds" if plan.method in AIM_METHODS else "measure marginals"
        return [*self.reading_stages(plan),
                Stage(measure, measure_stage, private=True, noise=True, at=0.2),
                Stage("estimate", estimate_stage, cache=True, at=0.35),
                Stage("sample", sample_stage, cache=True, at=0.8),
                Stage("fairness transform", fairness_stage, at=0.82),
                Stage("validate output", validate_stage, at=0.85)]


TABLE = TableKind()


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
