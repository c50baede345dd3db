"""Private side, DP stages: every read of true counts here goes through a mechanism charged
to the release's ledger. Inputs and outputs are file references and post-noise artefacts.
"""

from __future__ import annotations

import logging
import math
import tempfile
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
from privfair.release.ingest import code_batches, iter_frames
from privfair.release.seeds import stage_rng
from privfair.release.table.plan import ReleaseInputError, ReleasePlan, open_columns
from privfair.store.artefacts import (
    FileRef,
    load_ledger,
    load_one_way,
    load_structure,
    save_ledger,
    save_measurements,
    save_model,
    save_one_way,
    save_structure,
    write_artefact,
)
from privfair.synth.measure import all_pairs, count_marginals, count_marginals_parquet
from privfair.synth.structure import SelectedStructure, check_fairness
from privfair.synth.synthesizer import (
    FALLBACK_METHOD,
    INDEPENDENT,
    fell_back,
    fit_one_way,
    independent_structure,
    one_way_with_fallback,
)
from privfair.synth.synthesizer import measure_one_way as _measure_one_way
from privfair.synth.synthesizer import measure_selected as _measure_selected
from privfair.synth.synthesizer import select as _select

log = logging.getLogger(__name__)


# --- private side: measurements -------------------------------------------------------------


def refuse_unfair(structure: SelectedStructure) -> SelectedStructure:
    """A fair method's guarantee is checked on the structure it built, never assumed.

    Raises
    ------
    FairnessViolationError
        If ``structure.method`` is a fair method and its graph fails the check.
    """
    from privfair.core.errors import FairnessViolationError
    from privfair.synth.synthesizer import FAIR_METHODS

    if structure.method in FAIR_METHODS and not structure.fairness.passed:
        protected, outcome, path = structure.fairness.violations[0]
        raise FairnessViolationError(
            f"method {structure.method!r} built a model graph that fails the fairness check: "
            f"{protected!r} reaches {outcome!r} through {' - '.join(path)} without an "
            "admissible attribute; nothing is published")
    return structure


def resolve_domains(staged: FileRef, plan: ReleasePlan, ledger: FileRef,
                    artefacts: str | Path, *, seed: int | None, batch_size: int = 200_000
                    ) -> tuple[ReleasePlan, FileRef]:
    """Publish the domains the contract leaves to DP; returns the plan bound to them.

    Open-domain text columns get CatHist categories; ``dp_bins`` columns get DP quantile
    edges. The private values are read here and leave only through those mechanisms, which
    share ``plan.split["domains"]`` evenly. A resolved contract (a post-DP artefact) then
    replaces the declared one for every later stage; the manifest records both fingerprints.
    """
    from collections import Counter

    from privfair.domains.cathist import cathist
    from privfair.domains.quantiles import dp_quantile_edges

    contract = plan.contract
    columns = contract.unresolved_columns
    rho = plan.split["domains"] / len(columns)
    book = load_ledger(ledger)
    book.check(plan.split["domains"])
    text = set(open_columns(contract))
    counts: dict[str, Counter] = {name: Counter() for name in text}
    numbers: dict[str, list[np.ndarray]] = {name: [] for name in columns if name not in text}
    for frame in iter_frames(staged, batch_size=batch_size, columns=columns):
        for name in text:
            # The column's normalization rule, the one the encoder applies to the same values.
            values = normalize_text(frame[name].dropna().astype(str).to_numpy(dtype=object),
                                    contract.normalization(name))
            counts[name].update(pd.Series(values, dtype=object).value_counts().to_dict())
        for name, parts in numbers.items():
            parts.append(pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64))
    rng = stage_rng(seed, "domains")
    categories, edges = {}, {}
    for name in columns:
        spec = contract.column(name)
        if name in text:
            universe = spec.open_domain.universe
            if universe is None:  # pragma: no cover - preflight refuses it
                raise ValueError(f"open-domain column {name!r} declares no universe")
            result = cathist(counts.pop(name), universe=universe.build(),
                             tolerance=spec.open_domain.tolerance,
                             epsilon=math.sqrt(2 * rho),  # ε-DP is ε²/2-zCDP
                             rng=rng, ledger=book, name=f"CatHist categories of {name}")
            categories[name] = list(result.categories)
        else:
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


def count_codes(domain: Domain, cliques: Sequence[Iterable[str]], codes: FileRef, *,
                batch_size: int = 200_000, engine: str = "local",
                dask_address: str | None = None,
                scratch: str | Path | None = None) -> dict[Clique, np.ndarray]:
    """Exact tables of the staged codes (private): streamed here, or per row group on Dask.

    With ``engine="dask"`` each row group of the codes file is counted by a Dask worker and
    the tables are summed here; the workers must see the private working folder (same
    machine or a shared file system). Noise is drawn afterwards, once, by the caller.
    """
    if engine == "local":
        return count_marginals(domain, cliques, code_batches(codes, batch_size=batch_size,
                                                             narrow=True))
    with dask_client(dask_address, scratch=scratch) as client:
        return count_marginals_parquet(domain, cliques, codes.open_checked(), engine=engine,
                                       client=client)


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
    from privfair.release.table import dask_engine

    if address:
        dask_engine.check_dask_address(address)
        with Client(address, security=dask_engine.security(address),
                    timeout=dask_engine.CONNECT_TIMEOUT_S * 5) as client:
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
            with dask.config.set({"temporary-directory": str(folder)}):
                _CLUSTERS[key] = Client(LocalCluster(processes=True, dashboard_address=None,
                                                     local_directory=str(folder)))
        client = _CLUSTERS[key]
    yield client


_CLUSTERS: dict[str, Any] = {}


def measure_one_way(codes: FileRef, contract: Contract,
                    ledger: FileRef, artefacts: str | Path, *, rho: float, seed: int | None,
                    discrete: bool = False, batch_size: int = 200_000,
                    engine: str = "local", dask_address: str | None = None
                    ) -> tuple[FileRef, FileRef]:
    """Count and measure every one-way marginal; returns (one-way artefact, ledger).

    The ρ this release keeps for the tree (the ledger's remainder) goes to the one-way
    marginals too when the noisy total is too small for 2-way marginals to carry signal
    (:func:`privfair.synth.synthesizer.tree_signal`); :func:`select` then sees the fallback in
    the ledger and selects no pair.
    """
    domain = contract.domain()
    book = load_ledger(ledger)
    book.check(rho)
    rest = max(book.remaining - rho, 0.0)
    tables = count_codes(domain, [(a,) for a in domain], codes, batch_size=batch_size,
                         engine=engine, dask_address=dask_address,
                         scratch=Path(artefacts).parent)
    rng = stage_rng(seed, "one-way")
    noisy = _measure_one_way(tables, domain, rho=rho, rng=rng, ledger=book, discrete=discrete)
    model, noisy, _ = one_way_with_fallback(tables, domain, noisy, rho_tree=rest, rng=rng,
                                            ledger=book, discrete=discrete,
                                            prior=contract.priors())
    del tables
    return save_one_way(model, noisy, artefacts), save_ledger(book, artefacts)


def select(codes: FileRef, contract: Contract,
           one_way: FileRef, ledger: FileRef, artefacts: str | Path, *, method: str,
           rho: float, seed: int | None, max_search_nodes: int = 200_000,
           batch_size: int = 200_000, engine: str = "local",
           dask_address: str | None = None) -> tuple[FileRef, FileRef]:
    """DP structure selection over all pairs; returns (structure, ledger)."""
    domain, roles = contract.domain(), contract.roles()
    book = load_ledger(ledger)
    if method == INDEPENDENT or fell_back(book):  # no pair is read, nothing charged
        return save_structure(independent_structure(
            domain.attributes, roles, method=INDEPENDENT if method == INDEPENDENT
            else FALLBACK_METHOD), artefacts), ledger
    book.check(rho)
    model = load_one_way(one_way)
    tables = count_codes(domain, all_pairs(domain), codes, batch_size=batch_size,
                         engine=engine, dask_address=dask_address,
                         scratch=Path(artefacts).parent)
    structure = refuse_unfair(_select(tables, model, roles, method=method, rho=rho,
                                      rng=stage_rng(seed, "select"), ledger=book,
                                      max_search_nodes=max_search_nodes))
    del tables
    return save_structure(structure, artefacts), save_ledger(book, artefacts)


def measure_selected(codes: FileRef, contract: Contract,
                     one_way: FileRef, structure: FileRef, ledger: FileRef,
                     artefacts: str | Path, *, rho: float, seed: int | None,
                     discrete: bool = False, batch_size: int = 200_000,
                     engine: str = "local", dask_address: str | None = None
                     ) -> tuple[FileRef, FileRef]:
    """Measure the selected 2-way marginals; returns (measurements, ledger)."""
    domain = contract.domain()
    tree = load_structure(structure)
    if not tree.cliques:  # the independence baseline: no pair to measure, nothing charged
        return save_measurements([], artefacts), ledger
    book = load_ledger(ledger)
    book.check(rho)
    model = load_one_way(one_way)
    tables = count_codes(domain, tree.cliques, codes, batch_size=batch_size, engine=engine,
                         dask_address=dask_address, scratch=Path(artefacts).parent)
    noisy = _measure_selected(tables, model, tree, rho=rho, rng=stage_rng(seed, "measure"),
                              ledger=book, discrete=discrete)
    del tables
    return save_measurements(noisy, artefacts), save_ledger(book, artefacts)


def fit_aim(codes: FileRef, contract: Contract,
            ledger: FileRef, artefacts: str | Path, *, method: str, rho: float,
            seed: int | None, discrete: bool = False, max_model_size_mb: float = 80.0,
            batch_size: int = 200_000, progress: Callable[[float], None] | None = None,
            max_time_s: float | None = None, engine: str = "local",
            dask_address: str | None = None, return_model: bool = False,
            ) -> tuple[FileRef, ...]:
    """AIM (or fair AIM) with the whole budget: selection and measurement interleave.

    Returns the same artefacts as the tree path, so estimation and sampling are shared:
    (initial one-way measurements, structure, round measurements, ledger); with
    ``return_model`` also the last round's model (post-noise), a warm start that spares the
    final fit most of its iterations. ``max_time_s`` bounds the rounds and leaves
    :data:`privfair.synth.aim.FINAL_FIT_SHARE` of it to that final fit.
    """
    from privfair.synth.aim import candidate_cliques, run_aim

    domain, roles = contract.domain(), contract.roles()
    book = load_ledger(ledger)
    book.check(rho)
    tables = count_codes(domain, candidate_cliques(domain), codes, batch_size=batch_size,
                         engine=engine, dask_address=dask_address,
                         scratch=Path(artefacts).parent)
    result = run_aim(tables, domain, rho=rho, rng=stage_rng(seed, "aim"), ledger=book,
                     roles=roles, fair=method == "aim-fair", max_model_size_mb=max_model_size_mb,
                     refit=False, discrete=discrete, progress=progress,
                     max_time_s=max_time_s)
    del tables
    initial = result.measurements[:result.n_initial]
    rounds = result.measurements[result.n_initial:]
    one_way = fit_one_way(initial, domain, compress=False)
    structure = refuse_unfair(SelectedStructure(method, tuple(result.cliques), check_fairness(
        domain.attributes, [m.clique for m in result.measurements], roles)))
    refs = (save_one_way(one_way, initial, artefacts), save_structure(structure, artefacts),
            save_measurements(rounds, artefacts), save_ledger(book, artefacts))
    return (*refs, save_model(result.model, artefacts)) if return_model else refs
