"""The ``privfair-release`` Prefect flow: a DP, justifiably fair synthetic release of a table.

load -> validate input -> (DP domains: CatHist, DP quantile bins) -> discretize -> measure
1-way -> select fair structure -> measure selected (or, for AIM, the interleaved rounds)
-> estimate -> sample -> optional fairness transform (TOT) -> validate output -> publish

The flow only composes tasks (``tasks/``) around the stage modules of :mod:`privfair.pipeline`
(``plan``, ``ingest``, ``private_stages``, ``post_noise``, ``publish``) and posts the UI
artifacts: a markdown summary, the ledger as a table, and estimation progress (from the
``estimate`` task). The private staging folder is removed as soon as the last private task
ends, whatever happens. Run it with ``privfair release`` (ephemeral Prefect, no server) or
through the deployments in ``deployments/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Prefect loads entrypoints by file path; make the repository root importable for `tasks`.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from prefect import flow, get_run_logger  # noqa: E402
from prefect.artifacts import create_markdown_artifact, create_table_artifact  # noqa: E402

from privfair.pipeline import manifest as lib  # noqa: E402
from privfair.pipeline.artefacts import Workspace  # noqa: E402
from privfair.pipeline.plan import ReleaseParams, initial_ledger  # noqa: E402
from privfair.synth.synthesizer import AIM_METHODS  # noqa: E402
from tasks import post_noise, private, public  # noqa: E402
from tasks._common import report  # noqa: E402


@flow(name="privfair-release", persist_result=False)
def release(params: ReleaseParams = ReleaseParams()) -> str:  # noqa: B008 - pydantic default
    """Publish one DP synthetic release; returns the release folder."""
    log = get_run_logger()
    report("preflight", 0.0)
    plan = public.preflight(params)
    ws = Workspace.open(plan.work_dir, plan.run_id)
    bs, seed = plan.batch_size, params.seed
    staging, art = str(ws.staging), str(ws.artefacts)
    try:
        report("load", 0.02)
        staged = private.load(plan.data_path, plan.contract, staging, bs)
        report("validate input", 0.08)
        checked = private.validate_input(staged, plan.contract, staging, bs)
        ledger = initial_ledger(plan, art)
        if plan.split["domains"]:
            report("publish DP domains", 0.12)
            plan, ledger = private.resolve_domains(staged, plan, ledger, art, seed, bs)
        c = plan.contract  # from here on, the resolved contract
        report("discretize", 0.15)
        codes = private.discretize(staged, c, staging, bs)
        if plan.method in AIM_METHODS:
            report("AIM rounds", 0.2)
            one_way, structure, selected, ledger = private.fit_aim(
                codes, c, ledger, art, plan.method, plan.rho - plan.split["domains"],
                seed, plan.discrete_noise, bs)
        else:
            report("measure one-way", 0.2)
            one_way, ledger = private.measure_one_way(codes, c, ledger, art,
                                                      plan.split["one_way"], seed,
                                                      plan.discrete_noise, bs)
            report("select structure", 0.25)
            structure, ledger = private.select(codes, c, one_way, ledger, art, plan.method,
                                               plan.split["select"], seed, bs)
            report("measure selected", 0.3)
            selected, ledger = private.measure_selected(codes, c, one_way, structure, ledger,
                                                        art, plan.split["measure"], seed,
                                                        plan.discrete_noise, bs)
    finally:
        ws.cleanup_private()  # nothing below reads private data
    # Cached post-noise tasks persist into this run's 0700 result folder.
    cached = {"result_storage": ws.results}
    report("estimate", 0.35)
    model = post_noise.estimate.with_options(**cached)(one_way, selected, art, plan.max_iters)
    report("sample", 0.8)
    synthetic = post_noise.sample.with_options(**cached)(model, one_way, art, plan.n_rows,
                                                         plan.sample_mode, seed)
    synthetic, transform = post_noise.fairness_transform(
        synthetic, c, art, plan.fairness_transform, plan.eta, plan.discrimination,
        plan.distortion, seed)
    report("validate output", 0.85)
    output = post_noise.validate_output(synthetic, c, plan.n_rows)
    report("publish", 0.9)
    final = public.publish(plan, ledger, one_way, structure, model, synthetic, checked, output,
                           transform)
    manifest = lib.read_manifest(final)
    create_markdown_artifact(key="privfair-release", markdown=lib.summary_markdown(manifest, final),
                             description=f"{manifest['dataset']} {manifest['version']}")
    create_table_artifact(key="privfair-release-ledger", table=lib.ledger_rows(manifest),
                          description="privacy ledger of the release (zCDP rho)")
    log.info("published %s", final)
    report("done", 1.0)
    return str(final)


if __name__ == "__main__":
    print(release())
