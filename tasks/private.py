"""Private-side tasks: they read the private data or true counts.

Inputs and outputs are Parquet paths + sha256 fingerprints or post-noise artefacts only;
results are never persisted and never cached, so nothing private reaches Prefect's storage.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from privfair.contracts.schema import Contract
from privfair.release import ingest
from privfair.release.gan import stages as gan_stages
from privfair.release.table import private as private_stages
from privfair.release.table.plan import ReleasePlan
from privfair.store.artefacts import FileRef
from tasks._common import ProgressArtifact, retry_on_io_error

PRIVATE = {"persist_result": False, "cache_policy": NO_CACHE}

# Measurement tasks take ``engine`` ("local" or "dask") and ``dask_address``. With Dask, a
# client inside the task sends each row group of the staged codes to the cluster and sums
# the tables here; the noise is drawn here, once, by the same library code as --no-prefect
# (flows/release.py says why not a Dask task runner).


@task(name="load", retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=retry_on_io_error,
      **PRIVATE)
def load(data_path: str, contract: Contract, staging: str,
         batch_size: int) -> FileRef:
    """Stream the declared columns into a private staged Parquet (DuckDB)."""
    return ingest.load(data_path, contract, staging, batch_size=batch_size)


@task(name="validate-input", **PRIVATE)
def validate_input(staged: FileRef, contract: Contract, staging: str,
                   batch_size: int) -> dict[str, Any]:
    """GX suite from the contract; details stay in staging, only pass/fail comes back."""
    return ingest.validate_input(staged, contract, staging, batch_size=batch_size)


@task(name="discretize", **PRIVATE)
def discretize(staged: FileRef, contract: Contract, staging: str,
               batch_size: int) -> FileRef:
    """Codes Parquet in the private staging folder."""
    return ingest.discretize(staged, contract, staging, batch_size=batch_size)


@task(name="measure-one-way", **PRIVATE)
def measure_one_way(codes: FileRef, contract: Contract, ledger: FileRef,
                    artefacts: str, rho: float, seed: int | None, discrete: bool,
                    batch_size: int, engine: str = "local",
                    dask_address: str | None = None) -> tuple[FileRef, FileRef]:
    """Noisy one-way marginals + updated ledger (both post-noise JSON files)."""
    return private_stages.measure_one_way(codes, contract, ledger, artefacts, rho=rho,
                                          seed=seed, discrete=discrete, batch_size=batch_size,
                                          engine=engine, dask_address=dask_address)


@task(name="select-structure", **PRIVATE)
def select(codes: FileRef, contract: Contract, one_way: FileRef, ledger: FileRef,
           artefacts: str, method: str, rho: float, seed: int | None,
           batch_size: int, engine: str = "local",
           dask_address: str | None = None) -> tuple[FileRef, FileRef]:
    """DP-selected (fair) tree + updated ledger."""
    return private_stages.select(codes, contract, one_way, ledger, artefacts, method=method,
                                 rho=rho, seed=seed, batch_size=batch_size, engine=engine,
                                 dask_address=dask_address)


@task(name="measure-selected", **PRIVATE)
def measure_selected(codes: FileRef, contract: Contract, one_way: FileRef,
                     structure: FileRef, ledger: FileRef, artefacts: str, rho: float,
                     seed: int | None, discrete: bool, batch_size: int,
                     engine: str = "local", dask_address: str | None = None
                     ) -> tuple[FileRef, FileRef]:
    """Noisy 2-way marginals of the selected edges + updated ledger."""
    return private_stages.measure_selected(codes, contract, one_way, structure, ledger,
                                           artefacts, rho=rho, seed=seed, discrete=discrete,
                                           batch_size=batch_size, engine=engine,
                                           dask_address=dask_address)


@task(name="fit-aim", **PRIVATE)
def fit_aim(codes: FileRef, contract: Contract, ledger: FileRef, artefacts: str,
            method: str, rho: float, seed: int | None, discrete: bool,
            batch_size: int, max_time_s: float | None = None, engine: str = "local",
            dask_address: str | None = None) -> tuple[FileRef, ...]:
    """AIM rounds: (one-way, structure, round measurements, ledger, last round's model), all
    post-noise files; the model warm-starts the final fit.

    A progress artifact follows the rounds (share of the AIM budget spent, updated per round).
    """
    progress = ProgressArtifact("AIM rounds", total=1000, span=(0.2, 0.35),
                                description="AIM rounds (share of the budget spent)")
    out = private_stages.fit_aim(codes, contract, ledger, artefacts, method=method, rho=rho,
                                 seed=seed, discrete=discrete, batch_size=batch_size,
                                 progress=lambda spent: progress.update(round(1000 * spent)),
                                 max_time_s=max_time_s, engine=engine,
                                 dask_address=dask_address, return_model=True)
    progress.finish()
    return out


@task(name="resolve-domains", **PRIVATE)
def resolve_domains(staged: FileRef, plan: ReleasePlan, ledger: FileRef, artefacts: str,
                    seed: int | None, batch_size: int) -> tuple[ReleasePlan, FileRef]:
    """DP domains (CatHist categories, DP quantile bins); the plan then uses them."""
    return private_stages.resolve_domains(staged, plan, ledger, artefacts, seed=seed,
                               batch_size=batch_size)


@task(name="train-gan", **PRIVATE)
def train_gan(codes: FileRef, contract: Contract, ledger: FileRef, artefacts: str,
              method: str, causal_graph: dict[str, Any] | None, epochs: int | None,
              group_clipping: bool, seed: int | None,
              batch_size: int, discrete: bool = False) -> tuple[FileRef, FileRef]:
    """DP-SGD on the GAN's D1: (trained generator, ledger), both post-noise files.

    A progress artifact follows the epochs.
    """
    progress = ProgressArtifact("train GAN", total=1000, span=(0.2, 0.8),
                                description="GAN training (epochs, DP-SGD on D1)")
    out = gan_stages.train_gan(codes, contract, ledger, artefacts, method=method,
                               causal_graph=causal_graph, epochs=epochs,
                               group_clipping=group_clipping, seed=seed,
                               batch_size=batch_size, discrete=discrete,
                               progress=lambda e, n: progress.update(round(1000 * e / n)))
    progress.finish()
    return out
