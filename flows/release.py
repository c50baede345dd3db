"""The ``privfair-release`` Prefect flow: a DP, justifiably fair synthetic release of a table.

load -> validate input -> (DP domains: CatHist, DP quantile bins) -> discretize -> measure
1-way -> select fair structure -> measure selected (or, for AIM, the interleaved rounds)
-> estimate -> sample -> optional fairness transform (TOT) -> validate output -> publish

The flow only composes tasks (``tasks/``) around the stage modules of :mod:`privfair.release`
(``table.plan``, ``ingest``, ``table.private``, ``table.post_noise``, ``table.publish``) and
posts the UI artifacts: a markdown summary, the ledger as a table, a link to ``report.html``,
and progress (AIM rounds, estimation). The private staging folder is removed as soon as the
last private task ends, whatever happens.

Parameters are flat, so ``prefect deployment run privfair-release/ad-hoc --param
epsilon=0.5`` works and the UI form shows only what an operator chooses. Internal settings
(working folder, batch size, iteration cap) come from the environment (``PRIVFAIR_WORK_DIR``)
or, for in-process runs, from :func:`run_local`, which is also the only way to pass a test
seed: a deployed or scheduled run always draws fresh OS entropy, and the seed never becomes a
Prefect parameter. Run it with ``privfair release`` (ephemeral Prefect, no server) or through
the deployments in ``deployments/``.
"""

from __future__ import annotations

import contextvars
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

# Prefect loads entrypoints by file path; make the repository root importable for `tasks`.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from prefect import flow, get_run_logger  # noqa: E402
from prefect.artifacts import (  # noqa: E402
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from pydantic import Field, ValidationError  # noqa: E402

from privfair.generative import GAN_METHODS  # noqa: E402
from privfair.release.table import manifest as lib  # noqa: E402
from privfair.release.table.plan import (  # noqa: E402
    Method,
    ReleaseInputError,
    ReleaseParams,
    initial_ledger,
    params_error_line,
)
from privfair.store.artefacts import (  # noqa: E402
    FileRef,
    Workspace,
    load_ledger,
    load_structure,
)
from privfair.store.registry import release_unspent, reserve_run  # noqa: E402
from privfair.synth.aim import MIN_FIT_SHARE  # noqa: E402
from privfair.synth.synthesizer import AIM_METHODS  # noqa: E402
from tasks import ops, post_noise, private, public  # noqa: E402
from tasks._common import report  # noqa: E402

#: The contracts packaged with privfair (the form offers them by name); any other value is a
#: path to a contract YAML.
PackagedContract = Literal["adult", "adult_pse_dr", "adult_safes", "compas", "example_open_domain"]

#: Flow parameters: the operator's choices. Everything else of ReleaseParams is internal.
PUBLIC_PARAMS = ("contract", "data", "epsilon", "delta", "method", "n_rows", "sample_mode",
                 "out", "discrete_noise", "fairness_transform", "eta", "discrimination",
                 "distortion", "causal_graph", "gan_epochs", "group_clipping",
                 "release_classifier", "max_time_s", "engine", "dask_address", "data_docs")

#: ReleaseParams of an in-process run (run_local): internal settings and a test seed.
_LOCAL_PARAMS: contextvars.ContextVar[ReleaseParams | None] = contextvars.ContextVar(
    "privfair_local_release_params", default=None)

ops.install_refusal_filter()


@flow(name=ops.RELEASE_FLOW, persist_result=False, timeout_seconds=ops.FLOW_TIMEOUT_S,
      on_failure=[ops.on_release_failure], on_crashed=[ops.on_release_failure])
def release(
    contract: PackagedContract | str = "adult",
    data: str | None = None,
    epsilon: Annotated[float, Field(gt=0)] = 1.0,
    delta: Annotated[float, Field(gt=0, lt=1)] = 1e-9,
    method: Method = "prefair-greedy",
    n_rows: Annotated[int, Field(ge=1)] | None = None,
    sample_mode: Literal["iid", "round"] = "iid",
    out: str = "releases",
    discrete_noise: bool = False,
    fairness_transform: Literal["none", "tot"] = "none",
    eta: Annotated[float, Field(gt=0)] | None = None,
    discrimination: Literal["additive", "ratio"] = "additive",
    distortion: str = "safes-adult",
    causal_graph: str | None = None,
    gan_epochs: Annotated[int, Field(ge=1)] | None = None,
    group_clipping: bool = False,
    release_classifier: bool = False,
    max_time_s: Annotated[float, Field(gt=0)] | None = None,
    engine: Literal["local", "dask"] = "local",
    dask_address: str | None = None,
    data_docs: bool = False,
) -> str:
    """Publish one DP synthetic release; returns the release folder.

    Args:
        contract: A packaged data contract by name, or the path of a contract YAML.
        data: Private table, CSV or Parquet. Empty: the contract's embedded data.
        epsilon: ε of this release's (ε, δ)-DP guarantee.
        delta: δ of this release's guarantee.
        method: Structure selector (fair: prefair-*, aim-fair).
        n_rows: Synthetic rows. Empty: the noisy estimated total.
        sample_mode: iid sampling, or deterministic rounding of the model's marginals.
        out: Release store folder (relative to the run's working directory).
        discrete_noise: Exact discrete Gaussian noise (recommended for production).
        fairness_transform: Post-processing fairness transform: 'tot' is Calmon et al.'s
            optimised pre-processing (SAFES); no privacy cost.
        eta: TOT discrimination bound η (required with fairness_transform 'tot').
        discrimination: TOT control: additive |q(ŷ|g)−q(ŷ|g')| ≤ η, or ratio.
        distortion: TOT distortion function (registered name, e.g. safes-adult).
        causal_graph: cfgan: YAML/JSON file declaring the causal DAG over the attributes.
        gan_epochs: GAN methods (dpgan, fairgan, fairgan-plus, cfgan): training epochs.
        group_clipping: GAN methods: DPSGD-F per-group clipping bounds for D1.
        release_classifier: fairgan-plus: also release the fair classifier η as a model.
        max_time_s: AIM methods: time budget of the rounds in seconds; when it has passed,
            one final round spends the rest of ρ, so the run still ends with a release.
            Empty: no limit but the flow timeout.
        engine: Where the measurement tasks count the private codes: here, or per row group
            on a Dask cluster (summed here; the noise is drawn here, once).
        dask_address: engine 'dask': the scheduler's address. Empty: a LocalCluster.
        data_docs: Also keep the contract's Great Expectations suites and Data Docs of the
            synthetic table in the store (imports GX, ~4 s); the contract checks run either
            way.
    """
    args = {name: value for name, value in locals().items() if name in PUBLIC_PARAMS}
    return _release(release_params(args))


def release_params(args: dict[str, Any]) -> ReleaseParams:
    """The run's ReleaseParams: flow parameters over the local (or default) settings."""
    local = _LOCAL_PARAMS.get()
    fields = (local.model_dump() if local is not None
              else {"work_dir": os.environ.get("PRIVFAIR_WORK_DIR", ".privfair")})
    contract = args.get("contract")
    if contract in PackagedContract.__args__:
        from privfair.contracts.datasets import contract_path

        contract = str(contract_path(contract))
    try:
        return ReleaseParams.model_validate({**fields, **args, "contract": contract})
    except ValidationError as exc:
        raise ReleaseInputError(params_error_line(exc)) from None


def run_local(params: ReleaseParams) -> str:
    """Run the flow in this process with every setting of ``params``, the seed included.

    Flow parameters (stored by Prefect) get only the public fields; the seed and the internal
    settings reach the run through a context variable, never through the API.
    """
    args = {name: getattr(params, name) for name in PUBLIC_PARAMS}
    if args["contract"] is None:
        args["contract"] = "adult"
    token = _LOCAL_PARAMS.set(params)
    try:
        return release(**args)
    finally:
        _LOCAL_PARAMS.reset(token)


def _release(params: ReleaseParams) -> str:
    report("preflight", 0.0)
    plan = public.preflight(params)
    # One run per dataset at a time; the store's file lock still guards publication.
    with ops.dataset_slot(plan.dataset):
        reserve_run(plan)  # the run's ρ is charged before the first private read
        try:
            return _run(plan, params.seed)
        except BaseException:
            release_unspent(plan)  # only a run that drew no noise gets its reservation back
            raise


def _run(plan: Any, seed: int | None) -> str:
    log = get_run_logger()
    charges = _ChargeLog(log)
    ws = Workspace.open(plan.work_dir, plan.run_id)
    bs = plan.batch_size
    # Counting on Dask: a client inside each measurement task (not a Dask task runner, which
    # would run whole tasks, noise included, on a worker and count each stage's codes in one
    # piece); the same library code as --no-prefect, so both paths release the same thing.
    engine = {"engine": plan.engine, "dask_address": plan.dask_address}
    staging, art = str(ws.staging), str(ws.artefacts)
    log.info("release of %r: ε = %s, δ = %s (ρ = %s), method %s", plan.dataset,
             plan.epsilon, plan.delta, ops.fmt(plan.rho), plan.method)
    try:
        report("load", 0.02)
        staged = private.load(plan.data_path, plan.contract, staging, bs)
        report("validate input", 0.08)
        checked = private.validate_input(staged, plan.contract, staging, bs)
        log.info("input validation: %s", "passed" if checked.get("passed") else "FAILED")
        ledger = initial_ledger(plan, art)
        if plan.split["domains"]:
            report("publish DP domains", 0.12)
            plan, ledger = private.resolve_domains(staged, plan, ledger, art, seed, bs)
            charges.log(ledger)
        c = plan.contract  # from here on, the resolved contract
        report("discretize", 0.15)
        codes = private.discretize(staged, c, staging, bs)
        generative = one_way = structure = model = warm = None
        if plan.method in GAN_METHODS:
            report("train GAN (DP-SGD)", 0.2)
            generator, ledger = private.train_gan(
                codes, c, ledger, art, plan.method, plan.causal_graph, plan.gan_epochs,
                plan.group_clipping, seed, bs, plan.discrete_noise)
            charges.log(ledger)
        elif plan.method in AIM_METHODS:
            report("AIM rounds", 0.2)
            aim_clock = time.monotonic()
            one_way, structure, selected, ledger, warm = private.fit_aim(
                codes, c, ledger, art, plan.method, plan.rho - plan.split["domains"],
                seed, plan.discrete_noise, bs, plan.max_time_s, **engine)
            charges.log(ledger)
        else:
            report("measure one-way", 0.2)
            one_way, ledger = private.measure_one_way(codes, c, ledger, art,
                                                      plan.split["one_way"], seed,
                                                      plan.discrete_noise, bs, **engine)
            charges.log(ledger)
            report("select structure", 0.25)
            structure, ledger = private.select(codes, c, one_way, ledger, art, plan.method,
                                               plan.split["select"], seed, bs, **engine)
            charges.log(ledger)
            report("measure selected", 0.3)
            selected, ledger = private.measure_selected(codes, c, one_way, structure, ledger,
                                                        art, plan.split["measure"], seed,
                                                        plan.discrete_noise, bs, **engine)
            charges.log(ledger)
    finally:
        ws.cleanup_private()  # nothing below reads private data
    if plan.method in GAN_METHODS:
        report("sample", 0.8)
        synthetic, generative = post_noise.sample_gan(generator, c, art, plan.n_rows,
                                                      plan.delta, seed,
                                                      plan.release_classifier)
    else:
        _log_structure(log, structure)
        # Cached post-noise tasks persist into this run's 0700 result folder.
        cached = {"result_storage": ws.results}
        report("estimate", 0.35)
        # AIM's time budget covers its final fit: whatever the rounds left of it.
        fit_time = (None if warm is None or plan.max_time_s is None else max(
            plan.max_time_s - (time.monotonic() - aim_clock), MIN_FIT_SHARE * plan.max_time_s))
        model = post_noise.estimate.with_options(**cached)(one_way, selected, art,
                                                           plan.max_iters, warm, fit_time)
        report("sample", 0.8)
        synthetic = post_noise.sample.with_options(**cached)(model, one_way, art, plan.n_rows,
                                                             plan.sample_mode, seed)
    synthetic, transform = post_noise.fairness_transform(
        synthetic, c, art, plan.fairness_transform, plan.eta, plan.discrimination,
        plan.distortion, seed)
    log.info("sampled %d synthetic rows (%s)", _rows(synthetic), plan.sample_mode)
    report("validate output", 0.85)
    output = post_noise.validate_output(synthetic, c, plan.n_rows)
    if plan.data_docs:  # opt-in: GX itself costs more than a small release
        output = {**output, **post_noise.validation_records(
            synthetic, c, plan.store, plan.contract_fingerprint, plan.run_id, plan.n_rows)}
    report("publish", 0.9)
    final = public.publish(plan, ledger, one_way, structure, model, synthetic, checked, output,
                           transform, ops.orchestrator_record(), generative)
    _post_artifacts(final)
    log.info("published %s (ρ spent %s of %s)", final,
             ops.fmt(load_ledger(ledger).spent), ops.fmt(plan.rho))
    report("done", 1.0)
    return str(final)


class _ChargeLog:
    """Logs each new ledger entry once, in public terms (ρ charged, σ, query count)."""

    def __init__(self, logger: Any) -> None:
        self.logger, self.seen = logger, 0

    def log(self, ledger: FileRef) -> None:
        entries = [asdict(e) for e in load_ledger(ledger).entries]
        for line in ops.ledger_lines(entries[self.seen:]):
            self.logger.info(line)
        self.seen = len(entries)


def _log_structure(log: Any, structure: FileRef) -> None:
    tree = load_structure(structure)
    cliques = ", ".join("–".join(e) for e in tree.edges) or "none"
    log.info("selected %d cliques (%s): %s; fairness check %s", len(tree.edges), tree.method,
             cliques, "passed" if tree.fairness.passed else "FAILED")


def _rows(synthetic: FileRef) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(synthetic.open_checked()).metadata.num_rows


def _post_artifacts(final: Path) -> None:
    manifest = lib.read_manifest(final)
    create_markdown_artifact(key="privfair-release", markdown=lib.summary_markdown(manifest, final),
                             description=f"{manifest['dataset']} {manifest['version']}")
    create_table_artifact(key="privfair-release-ledger", table=lib.ledger_rows(manifest),
                          description="privacy ledger of the release (zCDP ρ)")
    create_link_artifact(key="privfair-release-report", link=(final / "report.html").as_uri(),
                         link_text=f"report.html of {manifest['dataset']} "
                                   f"{manifest['version']}",
                         description="self-contained release report (public)")


if __name__ == "__main__":
    print(release())
