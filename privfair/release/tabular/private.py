"""Private side, DP stages: every read of true counts here goes through a mechanism charged
to the release's ledger. Inputs and outputs are file references and post-noise artefacts.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from privfair.contracts.encoding import normalize_text
from privfair.contracts.schema import Contract
from privfair.core.domain import Clique, Domain
from privfair.core.errors import ReleaseInputError
from privfair.release.ingest import code_batches, iter_frames
from privfair.release.seeds import stage_rng
from privfair.release.tabular import dask_engine
from privfair.release.tabular.plan import ReleasePlan, open_columns
from privfair.store.artefacts import (
    load_ledger,
    save_ledger,
    save_measurements,
    save_model,
    save_one_way,
    save_structure,
)
from privfair.store.files import FileRef, write_artefact
from privfair.synth.measure import count_marginals, count_marginals_parquet
from privfair.synth.synthesizer import FairSynthesizer

log = logging.getLogger(__name__)


# --- private side: measurements -------------------------------------------------------------


def resolve_domains(staged: FileRef | list[FileRef], plan: ReleasePlan, ledger: FileRef,
                    artefacts: str | Path, *, seed: int | None, batch_size: int = 200_000
                    ) -> tuple[ReleasePlan, FileRef]:
    """Publish the domains the contract leaves to DP; returns the plan bound to them.

    Open-domain text columns get CatHist categories; ``dp_bins`` columns get DP quantile
    edges. The private values are read here and leave only through those mechanisms, which
    share ``plan.split["domains"]`` evenly. A resolved contract (a post-DP artefact) then
    replaces the declared one for every later stage; the manifest records both fingerprints.
    """
    from privfair.domains.cathist import cathist
    from privfair.domains.quantiles import dp_quantile_edges

    contract = plan.contract
    columns = contract.unresolved_columns
    rho = plan.split["domains"] / len(columns)
    book = load_ledger(ledger)
    book.check(plan.split["domains"])
    text = set(open_columns(contract))
    counts: dict[str, Counter[str]] = {name: Counter() for name in text}
    numbers: dict[str, list[np.ndarray]] = {name: [] for name in columns if name not in text}
    parts = staged if isinstance(staged, list) else [staged]  # a Parquet dataset's parts
    frames = (frame for part in parts
              for frame in iter_frames(part, batch_size=batch_size, columns=columns))
    for frame in frames:
        for name in text:
            # The column's normalization rule, the one the encoder applies to the same values.
            values = normalize_text(frame[name].dropna().astype(str).to_numpy(dtype=object),
                                    contract.normalization(name))
            tally = pd.Series(values, dtype=object).value_counts()
            counts[name].update({str(v): int(n) for v, n in tally.items()})
        for name, chunks in numbers.items():
            chunks.append(pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64))
    rng = stage_rng(seed, "domains")
    categories, edges = {}, {}
    for name in columns:
        spec = contract.column(name)
        if name in text:
            open_domain = spec.open_domain
            # the plan's check refuses an open-domain column without a universe
            if open_domain is None or open_domain.universe is None:  # pragma: no cover
                raise ValueError(f"open-domain column {name!r} declares no universe")
            result = cathist(counts.pop(name), universe=open_domain.universe.build(),
                             tolerance=open_domain.tolerance,
                             epsilon=math.sqrt(2 * rho),  # ε-DP is ε²/2-zCDP
                             rng=rng, ledger=book, name=f"CatHist categories of {name}")
            categories[name] = list(result.categories)
        else:
            # the contract refuses dp_bins without a finite lower and upper
            if spec.dp_bins is None or spec.lower is None or spec.upper is None:  # pragma: no cover
                raise ValueError(f"dp_bins column {name!r} declares no bins or no range")
            edges[name] = dp_quantile_edges(
                np.concatenate(numbers.pop(name)), bins=spec.dp_bins, lower=spec.lower,
                upper=spec.upper, integer=spec.integer, rho=rho, rng=rng, ledger=book,
                name=f"DP bins of {name}")
    resolved = contract.with_released_categories(categories).with_released_bins(edges)
    text_yaml = yaml.safe_dump(resolved.model_dump(by_alias=True, exclude_none=True,
                                                   mode="json"),
                               sort_keys=False, allow_unicode=True)
    ref = write_artefact(artefacts, "contract", text_yaml.encode("utf-8"), "yaml")
    plan = replace(plan, contract=resolved, contract_path=ref.path,
                   contract_fingerprint=resolved.fingerprint())
    return plan, save_ledger(book, artefacts)


def count_codes(domain: Domain, cliques: Sequence[Iterable[str]],
                codes: FileRef | Sequence[FileRef], *,
                batch_size: int = 200_000, engine: str = "local",
                dask_address: str | None = None,
                scratch: str | Path | None = None) -> dict[Clique, np.ndarray]:
    """Exact tables of the staged codes (private): streamed here, or per row group on Dask.

    With ``engine="dask"`` each row group of the codes file is counted by a Dask worker and
    the tables are summed here; the workers must see the private working folder (same
    machine or a shared file system). Noise is drawn afterwards, once, by the caller.
    ``codes`` may be the parts of a Parquet dataset (:mod:`.partitioned`): their tables are
    summed the same way.
    """
    parts = [codes] if isinstance(codes, FileRef) else list(codes)
    if engine == "local":
        return count_marginals(domain, cliques, (batch for part in parts for batch in
                                                 code_batches(part, batch_size=batch_size,
                                                              narrow=True)))
    with dask_client(dask_address, scratch=scratch) as client:
        # the workers that read the parts check them (in parallel), not the driver
        paths = client.gather(client.map(FileRef.open_checked, parts, pure=False))
        return count_marginals_parquet(domain, cliques, paths[0] if len(paths) == 1 else paths,
                                       engine=engine, client=client)


@contextmanager
def dask_client(address: str | None, *, scratch: str | Path | None = None) -> Iterator[Any]:
    """A client of the cluster at ``address`` (closed after use; TLS unless it is on this
    machine, checked again here); else the current client, else a LocalCluster started once
    per process and scratch folder, its ``local_directory`` the 0700 folder ``scratch``."""
    try:
        from distributed import Client, LocalCluster, default_client
    except ImportError:
        raise ReleaseInputError("engine 'dask' needs the dask extra: pip install "
                                "'privfair[dask]'") from None

    try:  # a task on a worker (a stage run by prefect-dask): its cluster, seceded
        from distributed import get_worker, worker_client

        get_worker()
    except (ImportError, ValueError):
        pass
    else:
        with worker_client() as client:
            yield client
        return
    if address:
        dask_engine.check_dask_address(address)
        with Client(address, security=dask_engine.security(address),
                    timeout=dask_engine.CONNECT_TIMEOUT_S * 5) as client:
            dask_engine.keep_scratch_private(client)
            yield client
        return
    try:
        client = default_client()
    except ValueError:
        folder = (dask_engine.scratch_dir(scratch) if scratch is not None
                  else Path(tempfile.mkdtemp(prefix="privfair-dask-")))  # 0700
        key = f"local:{folder}"
        if key not in _CLUSTERS:
            import dask

            # The scheduler's scratch follows 'temporary-directory', the workers' the argument.
            with dask.config.set({"temporary-directory": str(folder),
                                  "distributed.nanny.pre-spawn-environ":
                                      dask_engine.worker_environ()}):
                # no dashboard, and its metrics server on a free port: a second release on
                # this machine must not warn (or fail) for want of port 8787
                _CLUSTERS[key] = Client(LocalCluster(
                    processes=True, dashboard_address=None, local_directory=str(folder),
                    scheduler_kwargs={"dashboard_address": ":0"}))
                dask_engine.keep_scratch_private(_CLUSTERS[key])
        client = _CLUSTERS[key]
    yield client


_CLUSTERS: dict[str, Any] = {}


def measure_table(codes: FileRef, contract: Contract, ledger: FileRef,
                  artefacts: str | Path, *, method: str, epsilon: float, delta: float,
                  rho: float, seed: int | None, discrete: bool = True,
                  batch_size: int = 200_000, engine: str = "local",
                  dask_address: str | None = None, max_time_s: float | None = None,
                  progress: Callable[[str, float], None] | None = None,
                  ) -> dict[str, FileRef | float | None]:
    """Every measurement of a table release, through :meth:`FairSynthesizer.measure`.

    The library's estimator is the one chain: this stage gives it the staged codes (counted
    here, or per row group on Dask) and one generator per measurement stage, and saves what it
    measured as post-noise artefacts: ``one_way``, ``structure``, ``selected`` (the further
    measurements), ``ledger`` and, for AIM, ``warm_start`` (its last model). AIM's time
    budget is an alarm (logged when passed), never a cap on a fit (issue 41.5).
    """
    domain = contract.domain()
    book = load_ledger(ledger)
    synth = FairSynthesizer(domain=domain, roles=contract.roles(), epsilon=epsilon,
                            delta=delta, method=method, discrete_noise=discrete,
                            prior=contract.priors(), max_time_s=max_time_s)

    def counter(cliques: Sequence[Clique]) -> dict[Clique, np.ndarray]:
        return count_codes(domain, list(cliques), codes, batch_size=batch_size, engine=engine,
                           dask_address=dask_address, scratch=Path(artefacts).parent)

    synth.measure(rng=lambda stage: stage_rng(seed, stage), ledger=book, counter=counter,
                  rho=rho, progress=progress)
    warm = save_model(synth.warm_start_, artefacts) if synth.warm_start_ is not None else None
    return {"one_way": save_one_way(synth.one_way_, synth.one_way_measurements_, artefacts),
            "structure": save_structure(synth.structure_, artefacts),
            "selected": save_measurements(synth.selected_, artefacts),
            "ledger": save_ledger(book, artefacts), "warm_start": warm}
