"""Post-noise tasks: everything here is post-processing of DP measurements.

``estimate`` and ``sample`` cache on ``INPUTS + TASK_SOURCE``; their inputs are
content-addressed artefact files, so a re-run with the same noisy measurements reuses them.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from privfair.contracts.schema import Contract
from privfair.release.gan import stages as gan_stages
from privfair.release.table import post_noise as lib
from privfair.store.artefacts import FileRef
from tasks._common import RESULTS_DIR, ProgressArtifact

CACHED = {"cache_policy": INPUTS + TASK_SOURCE, "persist_result": True,
          "result_storage": RESULTS_DIR}


@task(name="estimate", **CACHED)
def estimate(one_way: FileRef, selected: FileRef, artefacts: str, max_iters: int,
             warm_start: FileRef | None = None, max_time_s: float | None = None) -> FileRef:
    """Fit the graphical model; a progress artifact follows the iterations.

    AIM passes its last round's model (``warm_start``) and the time its budget has left.
    """
    progress = ProgressArtifact("estimate", total=max_iters, span=(0.35, 0.8),
                                description="estimation (accelerated mirror descent)")
    model = lib.estimate(one_way, selected, artefacts, max_iters=max_iters,
                         callback=lambda iteration, loss: progress.update(iteration),
                         warm_start=warm_start, max_time_s=max_time_s)
    progress.finish()
    return model


@task(name="sample", **{**CACHED, "cache_policy": (INPUTS - "seed") + TASK_SOURCE})
def sample(model: FileRef, one_way: FileRef, artefacts: str, n_rows: int | None, mode: str,
           seed: int | None) -> FileRef:
    """Synthetic codes (content-addressed Parquet)."""
    return lib.sample(model, one_way, artefacts, n_rows=n_rows, mode=mode, seed=seed)


@task(name="sample-gan", cache_policy=NO_CACHE, persist_result=False)
def sample_gan(generator: FileRef, contract: Contract, artefacts: str, n_rows: int | None,
               delta: float, seed: int | None,
               release_classifier: bool = False) -> tuple[FileRef, dict[str, Any]]:
    """Synthetic codes from the trained GAN and its manifest record (data fairness)."""
    return gan_stages.sample_gan(generator, contract, artefacts, n_rows=n_rows, delta=delta,
                                 seed=seed, release_classifier=release_classifier)


@task(name="fairness-transform", cache_policy=NO_CACHE, persist_result=False)
def fairness_transform(synthetic: FileRef, contract: Contract, artefacts: str,
                       transform: str, eta: float | None, discrimination: str, distortion: str,
                       seed: int | None) -> tuple[FileRef, dict[str, Any]]:
    """Optional TOT transform of the synthetic codes (post-processing, no privacy cost)."""
    return lib.fairness_transform(synthetic, contract, artefacts,
                                  transform=transform, eta=eta, discrimination=discrimination,
                                  distortion=distortion, seed=seed)


@task(name="validate-output", cache_policy=NO_CACHE, persist_result=False)
def validate_output(synthetic: FileRef, contract: Contract,
                    n_rows: int | None) -> dict[str, Any]:
    """GX checks of the decoded synthetic table (public summary)."""
    return lib.validate_output(synthetic, contract, n_rows=n_rows)


@task(name="validation-records", cache_policy=NO_CACHE, persist_result=False)
def validation_records(synthetic: FileRef, contract: Contract, store: str, fingerprint: str,
                       run_id: str, n_rows: int | None) -> dict[str, Any]:
    """Opt-in (``data_docs``): the contract's GX suites and this run's output Data Docs."""
    from privfair.contracts.data_docs import validation_records as records

    return records(synthetic, contract, store=store, fingerprint=fingerprint, run_id=run_id,
                   n_rows=n_rows)
