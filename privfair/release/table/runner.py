"""The stage runner without Prefect (``privfair release --no-prefect``).

It chains the same stage functions that ``flows/release.py`` wraps in Prefect tasks, in the
same order, so both paths release the same thing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from privfair.generative import GAN_METHODS
from privfair.release.gan.stages import sample_gan, train_gan
from privfair.release.ingest import discretize, load, validate_input
from privfair.release.table.plan import ReleaseParams, initial_ledger, preflight
from privfair.release.table.post_noise import estimate, fairness_transform, sample, validate_output
from privfair.release.table.private import (
    fit_aim,
    measure_one_way,
    measure_selected,
    resolve_domains,
    select,
)
from privfair.release.table.publish import publish
from privfair.store.artefacts import Workspace
from privfair.store.registry import release_unspent, reserve_run
from privfair.synth.aim import MIN_FIT_SHARE
from privfair.synth.synthesizer import AIM_METHODS

#: ``progress(stage, fraction)``: told as each stage starts.
Progress = Callable[[str, float], None]


def run_release(params: ReleaseParams | Mapping[str, Any], *,
                progress: Progress | None = None) -> Path:
    """Run every stage in this process; returns the release folder.

    ``progress(stage, fraction)`` is called as stages start. The private staging folder is
    removed whatever happens.
    """
    report = progress or (lambda stage, fraction: None)
    params = params if isinstance(params, ReleaseParams) else ReleaseParams.model_validate(
        params)
    report("preflight", 0.0)
    plan = preflight(params)
    ws = Workspace.open(plan.work_dir, plan.run_id)
    reserve_run(plan)  # the run's ρ is charged before the first private read
    bs, seed = plan.batch_size, params.seed
    engine = {"engine": plan.engine, "dask_address": plan.dask_address}
    try:
        report("load", 0.02)
        staged = load(plan.data_path, plan.contract, ws.staging, batch_size=bs)
        report("validate input", 0.08)
        checked = validate_input(staged, plan.contract, ws.staging, batch_size=bs)
        ledger = initial_ledger(plan, ws.artefacts)
        if plan.split["domains"]:
            report("publish DP domains", 0.12)
            plan, ledger = resolve_domains(staged, plan, ledger, ws.artefacts, seed=seed,
                                           batch_size=bs)
        contract = plan.contract  # from here on, the resolved contract
        report("discretize", 0.15)
        codes = discretize(staged, contract, ws.staging, batch_size=bs)
        generative = one_way = structure = model = warm = None
        if plan.method in GAN_METHODS:
            report("train GAN (DP-SGD)", 0.2)
            generator, ledger = train_gan(
                codes, contract, ledger, ws.artefacts, method=plan.method,
                causal_graph=plan.causal_graph, epochs=plan.gan_epochs,
                group_clipping=plan.group_clipping, seed=seed, batch_size=bs,
                discrete=plan.discrete_noise,
                progress=lambda epoch, epochs: report("train GAN (DP-SGD)",
                                                      0.2 + 0.6 * epoch / epochs))
        elif plan.method in AIM_METHODS:
            report("AIM rounds", 0.2)
            aim_clock = time.monotonic()
            one_way, structure, selected, ledger, warm = fit_aim(
                codes, contract, ledger, ws.artefacts, method=plan.method,
                rho=plan.rho - plan.split["domains"],
                seed=seed, discrete=plan.discrete_noise, batch_size=bs,
                max_time_s=plan.max_time_s, return_model=True,
                progress=lambda fraction: report("AIM rounds", 0.2 + 0.5 * fraction),
                **engine)
        else:
            report("measure one-way", 0.2)
            one_way, ledger = measure_one_way(codes, contract, ledger, ws.artefacts,
                                              rho=plan.split["one_way"], seed=seed,
                                              discrete=plan.discrete_noise, batch_size=bs,
                                              **engine)
            report("select structure", 0.25)
            structure, ledger = select(codes, contract, one_way, ledger, ws.artefacts,
                                       method=plan.method, rho=plan.split["select"],
                                       seed=seed, batch_size=bs, **engine)
            report("measure selected", 0.3)
            selected, ledger = measure_selected(codes, contract, one_way, structure, ledger,
                                                ws.artefacts, rho=plan.split["measure"],
                                                seed=seed, discrete=plan.discrete_noise,
                                                batch_size=bs, **engine)
        ws.cleanup_private()  # nothing after this point reads private data
        if plan.method in GAN_METHODS:
            report("sample", 0.8)
            synthetic, generative = sample_gan(generator, contract, ws.artefacts,
                                               n_rows=plan.n_rows, delta=plan.delta,
                                               seed=seed,
                                               release_classifier=plan.release_classifier)
        else:
            # AIM's time budget covers its final fit: whatever the rounds left of it.
            fit_time = (None if warm is None or plan.max_time_s is None else max(
                plan.max_time_s - (time.monotonic() - aim_clock),
                MIN_FIT_SHARE * plan.max_time_s))
            low = 0.7 if warm is not None else 0.35
            report("estimate", low)
            fit_clock = time.monotonic()

            def fit_progress(iteration: int, loss: float) -> None:
                # iterations, or the time cap when there is one: whichever is further along
                done = iteration / plan.max_iters
                if fit_time:
                    done = max(done, (time.monotonic() - fit_clock) / fit_time)
                report("estimate", low + (0.8 - low) * min(done, 1.0))

            model = estimate(one_way, selected, ws.artefacts, max_iters=plan.max_iters,
                             callback=fit_progress, warm_start=warm, max_time_s=fit_time)
            report("sample", 0.8)
            synthetic = sample(model, one_way, ws.artefacts, n_rows=plan.n_rows,
                               mode=plan.sample_mode, seed=seed)
        synthetic, transform = fairness_transform(
            synthetic, contract, ws.artefacts, transform=plan.fairness_transform, eta=plan.eta,
            discrimination=plan.discrimination, distortion=plan.distortion, seed=seed)
        report("validate output", 0.85)
        output = validate_output(synthetic, contract, n_rows=plan.n_rows)
        if plan.data_docs:  # opt-in: GX itself costs more than a small release
            from privfair.contracts.data_docs import validation_records

            output = {**output, **validation_records(
                synthetic, contract, store=plan.store, fingerprint=plan.contract_fingerprint,
                run_id=plan.run_id, n_rows=plan.n_rows)}
        report("publish", 0.9)
        final = publish(plan, ledger=ledger, one_way=one_way, structure=structure, model=model,
                        synthetic=synthetic, input_validation=checked,
                        output_validation=output, fairness_transform=transform,
                        generative=generative)
        report("done", 1.0)
        return final
    except BaseException:
        release_unspent(plan)  # only a run that drew no noise gets its reservation back
        raise
    finally:
        ws.cleanup_private()
