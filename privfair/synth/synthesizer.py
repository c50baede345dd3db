"""Select–measure–generate synthesis: MST, Greedy-PreFair and Exponential-PreFair.

This module is long on purpose: the stage functions and the estimator class that chains them
belong together, so the library path and the pipeline path cannot drift apart.

The budget ρ is split in thirds as in MST: one-way marginals, structure selection, and the
selected 2-way marginals. Everything after the three measurements is post-processing.

Stage functions (:func:`measure_one_way`, :func:`fit_one_way`, :func:`select`,
:func:`measure_selected`, :func:`fit_model`, :func:`generate`) are what the Prefect tasks
wrap; :class:`FairSynthesizer` and :func:`synthesize` chain them for library users.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.core.accounting import PrivacyLedger, zcdp_rho
from privfair.core.domain import Clique, Domain, Roles, code_dtype
from privfair.core.errors import FairnessViolationError
from privfair.synth.aim import (
    all_two_way_workload,
    candidate_cliques,
    run_aim,
)
from privfair.synth.estimation import GraphicalModel, estimate, fit_independent
from privfair.synth.measure import (
    Compression,
    Measurement,
    all_pairs,
    combine_measurements,
    compress_domain,
    count_marginals,
    measure_marginals,
)
from privfair.synth.sampling import MODES, decompress, sample_model
from privfair.synth.structure import METHODS as TREE_METHODS
from privfair.synth.structure import (
    NOISE_TVD_LIMIT,
    PairQualification,
    SelectedStructure,
    all_qualify,
    allowed_edges,
    check_fairness,
    check_greedy_check,
    qualification_limit,
    qualify_pairs,
    select_structure,
    selection_rho,
)
from privfair.version import VERSION

AIM_METHODS = ("aim", "aim-fair")
#: The DP independence baseline: the whole budget on the one-way marginals, no 2-way ones.
INDEPENDENT = "independent"
METHODS = (*TREE_METHODS, *AIM_METHODS, INDEPENDENT)
FAIR_METHODS = ("prefair-greedy", "prefair-exact", "aim-fair")

Batches = Iterable[Mapping[str, np.ndarray]]
DataLike = pd.DataFrame | Mapping[str, np.ndarray] | Callable[[], Batches]
#: ``counter(cliques) -> {clique: true count table}``: how a fit counts the private rows.
Counter = Callable[[Sequence[Clique]], Mapping[Clique, np.ndarray]]
#: ``rngs(stage) -> generator``: one stream per measurement stage.
StageRngs = Callable[[str], np.random.Generator]

log = logging.getLogger(__name__)


def as_batches(data: DataLike) -> Callable[[], Batches]:
    """Normalise a frame, a dict of code arrays, or a batch factory into a batch factory."""
    if callable(data):
        return data
    if isinstance(data, pd.DataFrame):
        columns = {c: data[c].to_numpy() for c in data.columns}
    elif isinstance(data, Mapping):
        columns = dict(data)
    else:
        raise TypeError(
            "data must be a pandas DataFrame of codes, a mapping of column -> code array, "
            f"or a callable returning batches; got {type(data).__name__}"
        )
    return lambda: [columns]


@dataclass(frozen=True)
class BudgetSplit:
    """ρ for each of the three measurements (MST's thirds by default)."""

    one_way: float
    select: float
    measure: float

    @classmethod
    def thirds(cls, rho: float) -> BudgetSplit:
        return cls(rho / 3, rho / 3, rho / 3)

    @classmethod
    def for_method(cls, method: str, rho: float) -> BudgetSplit:
        """MST's thirds, or everything on the one-way marginals for ``independent``."""
        return cls(rho, 0.0, 0.0) if method == INDEPENDENT else cls.thirds(rho)


#: Ledger name of the fallback's second one-way measurement (later stages look for it).
FALLBACK_STEP = "one-way marginals (small-n independence fallback)"
#: Structure method recorded when a tree method fell back to independence.
FALLBACK_METHOD = "independent (small-n fallback)"
#: Ledger name of the one-way measurement that spends the ρ of the edges a forest lacks.
FOREST_STEP = "one-way marginals (rho of the pairs too noisy to measure)"
#: Ledger name of the one-way measurement that spends the measurement's ρ when a tree's
#: selection chose no pair (it stopped at once, or no noisy score beat its noise).
UNSELECTED_STEP = "one-way marginals (rho of a selection that chose no pair)"
#: Ledger name of the one-way measurement that spends the ρ of the edges a tree's selection
#: did not choose (and of its rounds not run), when it chose some.
UNCHOSEN_STEP = "one-way marginals (rho of the edges the selection did not choose)"
#: Ledger name of the one-way measurement that spends the selection's ρ beyond what it needs
#: at small n (:func:`~privfair.synth.structure.selection_rho`).
SELECTION_STEP = "one-way marginals (rho the selection does not need)"


#: AIM at small n (issue 34.1: the pairs that pass the per-pair rule do not span the
#: attributes; full Adult, whose widest pairs fail at ε = 1, keeps AIM's 16·d): its nominal
#: rounds after the rule are this many per edge of the qualifying pairs' spanning forest
#: instead of 16·d, so a round's σ is one a pair can carry (16·d rounds measured every pair
#: at σ ≈ 90 on 1,000 rows at ε = 1), and the one-way marginals get at least
#: :data:`AIM_ONE_WAY_SHARE` of ρ (AIM's initial one-way measurement is 0.9/16 of it).
#: With the ρ-dependent limit (:func:`~privfair.synth.structure.qualification_limit`),
#: 1,000 rows, 10 seeds, aim/aim-fair against independence's 2-way TVD: Adult at ε = 4
#: 0.90/0.95 -> 0.80/0.86, credit21 at ε = 2 0.99 -> 0.90, at ε = 4 0.73/0.75 -> 0.66, at
#: ε = 1 1.04/1.02 -> 1.02/1.02, COMPAS unchanged; full Adult, COMPAS (aim_seeds.py) and
#: the 300k × 41 table unchanged. At the limit 0.15 at every ε, 1 round per edge left
#: credit21 at ε = 1 at 1.12, 2 at 1.04, and a one-way share of 1/2 at 1.06 (5 seeds;
#: results/small_n_aim_final.json).
AIM_ROUNDS_PER_EDGE = 2.0
#: Least share of ρ AIM's one-way marginals get at small n (MST's thirds).
AIM_ONE_WAY_SHARE = 1 / 3


@dataclass(frozen=True)
class TreeSignal:
    """Whether a tree's 2-way marginals would carry signal at this noisy total (issue 15).

    The all-or-nothing rule of issue 23.3, kept for ``benchmarks/small_n.py --calibrate``
    (the data behind :data:`NOISE_TVD_LIMIT`); releases decide per pair
    (:func:`pair_qualification`).

    Post-processing only: computed from the noisy total, the declared domain sizes, the
    public noise scale of the one-way measurement and the ρ left for the tree, never from
    true counts (nor from which categories the noisy counts kept).
    """

    noise_tvd: float
    limit: float = NOISE_TVD_LIMIT

    @property
    def fallback(self) -> bool:
        return self.noise_tvd > self.limit

    def to_dict(self) -> dict[str, Any]:
        return {"rule": "independence fallback when the expected noise TVD of an average "
                        "measured pair (declared sizes capped by the categories the noisy "
                        "total can keep) exceeds the limit",
                "expected_pair_noise_tvd": self.noise_tvd, "limit": self.limit,
                "fallback": self.fallback}


def tree_signal(total: float, sizes: Sequence[int], *, rho_tree: float,
                one_way_sigma: float | None = None, threshold: float = 3.0,
                limit: float = NOISE_TVD_LIMIT) -> TreeSignal:
    """Expected TVD that measurement noise alone puts on an average pair of the tree.

    ``rho_tree`` is the ρ left for selection and measurement; the measurement gets half of it
    (MST's split), shared by the ``len(sizes) - 1`` edges. A pair with ``c`` cells measured
    with Gaussian noise σ has expected L1 noise ``σ·√(2/π)·c``, i.e. a TVD of that over
    ``2·total``; ``c`` is the mean over all pairs (the tree is not chosen yet).

    ``sizes`` are the declared (public) sizes. With ``one_way_sigma`` (the per-cell noise of
    the one-way measurement that compression thresholds at ``threshold·σ``) each size is
    capped by the categories a table of ``total`` rows can keep, ``total / (threshold·σ)``,
    plus the merged bucket: a bound from public quantities and the noisy total only, so the
    decision does not move with which categories the noise happened to keep.
    """
    if len(sizes) < 2 or rho_tree <= 0:
        return TreeSignal(0.0, limit)
    total = max(total, 1.0)
    if one_way_sigma:
        cap = int(total // (threshold * one_way_sigma)) + 1
        sizes = [min(s, cap) for s in sizes]
    sigma = math.sqrt((len(sizes) - 1) / (2 * (rho_tree / 2)))
    cells = float(np.mean([a * b for a, b in combinations(sizes, 2)]))
    return TreeSignal(sigma * math.sqrt(2 / math.pi) * cells / (2 * total), limit)


def small_n_signal(total: float, domain: Domain, *, rho: float,
                   threshold: float = 3.0) -> TreeSignal:
    """The small-n rule at a release's ρ: MST's thirds (one-way ρ/3, tree 2ρ/3), so every
    method (trees and AIM) decides the same way for the same noisy total, domain and ρ."""
    return tree_signal(total, domain.sizes, rho_tree=2 * rho / 3,
                       one_way_sigma=math.sqrt(len(domain) / (2 * rho / 3)),
                       threshold=threshold)


def pair_qualification(total: float, domain: Domain, roles: Roles, *, method: str,
                       rho: float, threshold: float = 3.0,
                       greedy_check: str = "edge-rule") -> PairQualification:
    """The per-pair small-n rule at a release's ρ (issue 34): MST's thirds (one-way ρ/3,
    structure 2ρ/3), so every method (trees and AIM) decides the same way for the same
    noisy total, domain and ρ. AIM's candidates are all pairs; a tree's the method's
    allowed edges. Public inputs and the noisy total only: fine to publish, and the plan
    evaluates it on a declared row count (``expected_rows``)."""
    candidates = (allowed_edges(domain, roles, method, greedy_check=greedy_check)
                  if method in TREE_METHODS
                  else list(combinations(domain.attributes, 2)))
    return qualify_pairs(domain, candidates, total=total, rho_tree=2 * rho / 3,
                         limit=qualification_limit(method, rho=rho),
                         one_way_sigma=math.sqrt(len(domain) / (2 * rho / 3)),
                         threshold=threshold)


def one_way_with_extra(
    tables: Mapping[Clique, np.ndarray], domain: Domain, noisy: Sequence[Measurement], *,
    rho_extra: float, name: str, rng: np.random.Generator, ledger: PrivacyLedger,
    discrete: bool = True,
) -> list[Measurement]:
    """Measure the one-way marginals again at ``rho_extra`` and combine by inverse variance.

    The two measurements (ρ₁ then ``rho_extra``) combine into one as accurate as a single
    one at ρ₁ + ``rho_extra``, so a fallback that decides after the first measurement is
    exactly ``--method independent`` at the whole ρ (issue 23.3).
    """
    extra = measure_marginals(tables, [(a,) for a in domain], rho=rho_extra, rng=rng,
                              ledger=ledger, name=name, discrete=discrete)
    return combine_measurements(noisy, extra)


def fell_back(ledger: PrivacyLedger) -> bool:
    """Whether this release's ledger holds the independence fallback's measurement."""
    return any(e.name == FALLBACK_STEP for e in ledger.entries)


def independent_structure(attributes: Sequence[str], roles: Roles, *,
                          method: str = INDEPENDENT) -> SelectedStructure:
    """The empty structure of the independence baseline (no data read, nothing charged)."""
    return SelectedStructure(method, (), check_fairness(attributes, [], roles))


def measure_one_way(
    tables: Mapping[Clique, np.ndarray], domain: Domain, *, rho: float,
    rng: np.random.Generator, ledger: PrivacyLedger, discrete: bool = True,
) -> list[Measurement]:
    """Noisy one-way marginals of every attribute (one Gaussian mechanism)."""
    return measure_marginals(tables, [(a,) for a in domain], rho=rho, rng=rng, ledger=ledger,
                             name="one-way marginals", discrete=discrete)


@dataclass(frozen=True)
class OneWayModel:
    """The independent model fitted to the (compressed) noisy one-way marginals."""

    compression: Compression
    measurements: tuple[Measurement, ...]
    total: float
    probabilities: dict[str, np.ndarray]


def fit_one_way(
    one_way: Sequence[Measurement], domain: Domain, *, compress: bool = True,
    threshold: float = 3.0, prior: Mapping[str, Sequence[float]] | None = None,
) -> OneWayModel:
    """Compress rare categories and fit the independent model (post-processing only).

    ``prior``: public weights per attribute (the contract's), kept to spread merged buckets.
    """
    if compress:
        compression, measured = compress_domain(one_way, domain, threshold=threshold,
                                                prior=prior)
    else:
        compression, measured = Compression.identity(domain), list(one_way)
    # The exact minimiser of estimate()'s loss for one-way cliques (one sort per attribute).
    probabilities, total = fit_independent(compression.compressed, measured)
    return OneWayModel(compression, tuple(measured), total, probabilities)


def select(
    tables: Mapping[Clique, np.ndarray], one_way: OneWayModel, roles: Roles, *, method: str,
    rho: float, rng: np.random.Generator, ledger: PrivacyLedger,
    max_search_nodes: int = 200_000, qualified: Sequence[tuple[str, str]] | None = None,
    rho_measure: float | None = None, greedy_check: str = "edge-rule",
) -> SelectedStructure:
    """Select the tree of 2-way marginals to measure (private: reads the pair tables).

    ``qualified``: the pairs that can carry signal (:func:`qualify_pairs`); the structure is
    then a spanning forest over those of the method's allowed edges. ``rho_measure``: score
    each pair net of its measurement noise and let the selection stop early
    (:func:`~privfair.synth.structure.select_structure`)."""
    compression = one_way.compression
    pairs = {c: compression.compress_table(c, tables[c]) for c in all_pairs(compression.original)}
    return select_structure(
        compression.compressed, roles, method=method, pair_tables=pairs,
        one_way=one_way.probabilities, total=one_way.total, rho=rho, rng=rng, ledger=ledger,
        max_search_nodes=max_search_nodes, qualified=qualified, rho_measure=rho_measure,
        greedy_check=greedy_check,
    )


def measure_selected(
    tables: Mapping[Clique, np.ndarray], one_way: OneWayModel, structure: SelectedStructure, *,
    rho: float, rng: np.random.Generator, ledger: PrivacyLedger, discrete: bool = True,
) -> list[Measurement]:
    """Noisy 2-way marginals of the selected edges, on the compressed domain."""
    compression = one_way.compression
    compressed = {c: compression.compress_table(c, tables[c]) for c in structure.cliques}
    return measure_marginals(compressed, structure.cliques, rho=rho, rng=rng, ledger=ledger,
                             name="selected 2-way marginals", discrete=discrete)


def fit_model(
    one_way: OneWayModel, selected: Sequence[Measurement], *, tol: float = 1e-6,
    max_iters: int = 10_000, callback: Callable[[int, float], None] | None = None,
    fallback: Mapping[Clique, np.ndarray] | None = None, max_time_s: float | None = None,
) -> GraphicalModel:
    """Estimate the model from all noisy measurements (post-processing only).

    Starts from the one-way model, or, given ``fallback`` (log-potentials of AIM's last
    round), from the uniform distribution, with ``fallback`` the answer instead should the
    fit end unconverged at a higher loss. AIM's last round is not a warm start, nor is the
    one-way model for AIM: cells they hold near zero revive only slowly. On the 300k x 41
    table (ε = 1) the final fit converged in 2,360 iterations from the last round, 2,260 from
    the one-way model and 1,120 from uniform, at the lowest loss (the first and the last in
    ``benchmarks/results/aim_wide_stop16_before.json`` and ``aim_wide_stop16.json``).
    """
    measurements = [*one_way.measurements, *selected]
    start: dict[Clique, np.ndarray] | None = None if fallback is not None else {
        (a,): np.log(np.maximum(p, 1e-12)) for a, p in one_way.probabilities.items()}
    return estimate(one_way.compression.compressed, measurements, tol=tol,
                    max_iters=max_iters, warm_start=start, fallback=fallback,
                    callback=callback, max_time_s=max_time_s)


def generate(
    model: GraphicalModel, compression: Compression, n_rows: int, *,
    rng: np.random.Generator, mode: str = "iid", narrow: bool = False,
) -> pd.DataFrame:
    """Sample rows and map them back to the declared domain.

    Columns are int64 codes, or with ``narrow`` each attribute's narrowest unsigned dtype
    (an eighth of the memory for most attributes; widen before doing arithmetic on them).
    """
    columns = generate_columns(model, compression, n_rows, rng=rng, mode=mode)
    return pd.DataFrame({a: columns[a] if narrow else columns[a].astype(np.int64)
                         for a in compression.original})


def generate_columns(
    model: GraphicalModel, compression: Compression, n_rows: int, *,
    rng: np.random.Generator, mode: str = "iid",
) -> dict[str, np.ndarray]:
    """:func:`generate`'s rows as ``{attribute: codes}`` in the declared order, each in its
    narrowest unsigned dtype (the same draws from ``rng``; no frame is built)."""
    columns = decompress(sample_model(model, n_rows, rng=rng, mode=mode), compression,
                         rng=rng)
    return {a: columns[a] for a in compression.original}


def stream_sample(
    model: GraphicalModel, compression: Compression, n_rows: int, folder: str | Path, *,
    rng: np.random.Generator, chunk_rows: int = 1_000_000,
    labels: Mapping[str, Sequence[str]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Draw ``n_rows`` i.i.d. rows in chunks, one Parquet part file per chunk (issue 15).

    Only one chunk is in memory at a time, so the row count is bounded by disk, not RAM.
    ``folder`` becomes a Parquet dataset (``part-00000.parquet``, ...; read it back with
    ``pyarrow.dataset`` or ``pandas.read_parquet(folder)``). Columns hold the smallest
    unsigned codes, or dictionary-encoded ``labels`` when given (no string is built per
    row). ``progress(rows_done, n_rows)`` is told after each part. Sampling is i.i.d.; the
    ``round`` mode needs the whole table at once and is not offered here.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(n_rows, int | np.integer) or n_rows < 0:
        raise ValueError(f"n_rows must be an integer >= 0, got {n_rows!r}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    domain = compression.original
    dtypes = {a: code_dtype(domain.size(a)) for a in domain}
    dictionaries = {a: pa.array(list(labels[a]), pa.string()) for a in domain} if labels else {}
    parts: list[Path] = []
    done = 0
    # One writer thread: Parquet encoding releases the GIL, so part k is compressed while
    # part k+1 is sampled; at most two parts are in memory.
    with ThreadPoolExecutor(max_workers=1) as writer:
        pending = None
        while done < n_rows or not parts:
            n = min(chunk_rows, n_rows - done)
            columns = decompress(sample_model(model, n, rng=rng), compression, rng=rng)
            arrays = {}
            for a in domain:
                codes = pa.array(columns[a].astype(dtypes[a]))
                arrays[a] = (pa.DictionaryArray.from_arrays(codes, dictionaries[a])
                             if a in dictionaries else codes)
            del columns
            if pending is not None:
                pending.result()
            path = folder / f"part-{len(parts):05d}.parquet"
            pending = writer.submit(pq.write_table, pa.table(arrays), path,
                                    compression="zstd")
            parts.append(path)
            done += n
            if progress:
                progress(done, n_rows)
        if pending is not None:  # always: the loop writes at least one part
            pending.result()
    return parts


def _check_settings(*, epsilon: float, delta: float, method: str, sample_mode: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    if sample_mode not in MODES:
        raise ValueError(f"sample_mode must be one of {list(MODES)}, got {sample_mode!r}")
    zcdp_rho(epsilon=epsilon, delta=delta)  # validates both, with named errors


def _check_prior(prior: Mapping[str, Sequence[float]] | None,
                 domain: Domain) -> dict[str, tuple[float, ...]] | None:
    if prior is None:
        return None
    out = {}
    for name, weights in prior.items():
        if name not in domain:
            raise ValueError(f"prior: attribute {name!r} is not in the declared domain")
        values = tuple(float(w) for w in weights)
        if len(values) != domain.size(name):
            raise ValueError(f"prior: {name!r} needs {domain.size(name)} weights (one per "
                             f"code), got {len(values)}")
        if not all(np.isfinite(w) and w >= 0 for w in values) or sum(values) <= 0:
            raise ValueError(f"prior: {name!r} weights must be finite, >= 0 and not all 0")
        out[name] = values
    return out


class FairSynthesizer:
    """Differentially private synthetic data with a justifiably fair model structure.

    Parameters
    ----------
    domain : Domain
        Declared domain of the integer-coded table.
    roles : Roles
        Protected, admissible and outcome attributes.
    epsilon, delta : float
        The (ε, δ)-DP guarantee of the fit; converted to a zCDP budget ρ.
    method : {"mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair", "independent"}
        Structure selector: MST-style trees, or AIM's adaptive Markov networks.
    compress : bool
        Merge categories whose noisy count is under ``compress_threshold``·σ (MST).
    discrete_noise : bool
        Use the exact discrete Gaussian (recommended for production releases).
    max_search_nodes : int
        Bound on the exact search of ``prefair-exact``; beyond it, fitting fails.
    tol, max_iters : float, int
        Estimation stopping rule.
    max_model_size_mb : float
        AIM's cap on the junction tree's maximal cliques.
    require_fair : bool
        Raise :class:`FairnessViolationError` if a fair method's structure fails the check.
    max_time_s : float, optional
        AIM methods: the operator's time budget. An alarm only (issue 41.5): a run past it
        logs a warning; the rounds, σ and every fit follow from public inputs and the noise,
        never from a clock, so the release is the same on a slow machine.
    small_n_fallback : bool
        The per-pair small-n rule (issue 34, :func:`~privfair.synth.structure.qualify_pairs`):
        only pairs whose 2-way marginal can carry signal at the noisy total are candidates,
        the structure is a forest over them, and the ρ of the edges it lacks goes to the
        one-way marginals (all of it when no pair qualifies). False: every pair is a
        candidate, as before issue 15. With the rule on, a tree method also selects with only
        the ρ it needs (:func:`~privfair.synth.structure.selection_rho`), scores each pair
        net of its measurement noise and may stop selecting early; the ρ it does not need,
        and that of the edges it does not choose, goes to the one-way marginals.
    greedy_check : {"edge-rule", "privci"}
        How ``prefair-greedy`` keeps its tree fair: Greedy-PreFair's fixed edge rule, or
        PrivCI's feasibility check inside each Kruskal round
        (:data:`~privfair.synth.structure.GREEDY_CHECKS`; benchmarks/privci_vs_greedy.py).
    prior : mapping of str to sequence of float, optional
        Public weights per attribute (one non-negative weight per code, as a contract's
        ``prior:``), used to spread a merged rare-category bucket when sampling instead of
        spreading it uniformly. Public knowledge only: never derive it from the data.

    Attributes
    ----------
    ledger_, one_way_, structure_, model_ : set by :meth:`fit`.
    """

    def __init__(
        self, *, domain: Domain, roles: Roles, epsilon: float, delta: float,
        method: str = "mst", compress: bool = True, compress_threshold: float = 3.0,
        discrete_noise: bool = True, max_search_nodes: int = 200_000, tol: float = 1e-6,
        max_iters: int = 10_000, require_fair: bool = True, max_model_size_mb: float = 80.0,
        small_n_fallback: bool = True, max_time_s: float | None = None,
        prior: Mapping[str, Sequence[float]] | None = None, greedy_check: str = "edge-rule",
    ) -> None:
        _check_settings(epsilon=epsilon, delta=delta, method=method, sample_mode="iid")
        self.prior = _check_prior(prior, domain)
        roles.check(domain, fair=method in FAIR_METHODS)
        self.domain, self.roles = domain, roles
        self.epsilon, self.delta, self.method = epsilon, delta, method
        self.compress, self.compress_threshold = compress, compress_threshold
        self.discrete_noise, self.max_search_nodes = discrete_noise, max_search_nodes
        self.tol, self.max_iters, self.require_fair = tol, max_iters, require_fair
        self.max_model_size_mb = max_model_size_mb
        self.small_n_fallback = small_n_fallback
        self.max_time_s = max_time_s
        self.greedy_check = check_greedy_check(greedy_check)

    def fit(self, data: DataLike, *, rng: np.random.Generator | StageRngs,
            ledger: PrivacyLedger | None = None,
            progress: Callable[[str, float], None] | None = None,
            rho: float | None = None) -> FairSynthesizer:
        """Measure the private data (:meth:`measure`) and fit the model to the measurements.

        ``ledger`` defaults to a fresh one holding exactly (ε, δ); pass a shared ledger to
        charge a larger budget. ``progress(stage, fraction)`` is called as work advances.
        ``rho`` overrides the ρ of (ε, δ), as in :meth:`measure`.
        """
        report = progress or (lambda stage, fraction: None)
        self.measure(data, rng=rng, ledger=ledger, progress=report, rho=rho)
        report("estimate", 0.4)
        self.model_ = fit_model(
            self.one_way_, self.selected_, tol=self.tol, max_iters=self.max_iters,
            fallback=None if self.warm_start_ is None else self.warm_start_.potentials,
            callback=lambda it, loss: report(
                "estimate", 0.4 + 0.5 * min(it / self.max_iters, 1.0)))
        report("done", 1.0)
        return self

    def measure(self, data: DataLike | None = None, *, rng: np.random.Generator | StageRngs,
                ledger: PrivacyLedger | None = None,
                progress: Callable[[str, float], None] | None = None,
                counter: Counter | None = None, rho: float | None = None) -> FairSynthesizer:
        """Every private read and every noise draw of a fit; the rest is post-processing.

        This is the one measurement chain of privfair's table releases: the table kind's
        private stage (:mod:`privfair.release.tabular.private`) calls it with ``counter``
        (counts from the staged codes, possibly on Dask) and ``rng`` as a function of the
        stage name (``"one-way"``, ``"select"``, ``"measure"``, ``"aim"``), so each stage
        has its own stream. ``rho`` overrides the ρ of (ε, δ) (a release that spent part of
        its budget on DP domains measures with the rest).

        Sets ``one_way_`` (the fitted one-way model), ``one_way_measurements_``,
        ``structure_``, ``selected_`` (the further measurements), ``warm_start_`` (AIM's
        last model, a warm start for the final fit; or None), ``ledger_``, ``split_`` and ``compression_``.
        """
        report = progress or (lambda stage, fraction: None)
        stage_rng = rng if callable(rng) else (lambda stage: rng)
        ledger = ledger or PrivacyLedger.from_epsilon_delta(epsilon=self.epsilon,
                                                            delta=self.delta)
        rho = zcdp_rho(epsilon=self.epsilon, delta=self.delta) if rho is None else rho
        split = BudgetSplit.for_method(self.method, rho)
        # Check the whole plan before touching the data.
        ledger.check(split.one_way + split.select + split.measure)
        if counter is None:
            if data is None:
                raise ValueError("fit needs data or a counter")
            batches = as_batches(data)

            def counter(cliques: Sequence[Clique]) -> Mapping[Clique, np.ndarray]:
                return count_marginals(self.domain, list(cliques), batches())

        report("count", 0.0)
        self.warm_start_: GraphicalModel | None = None
        self.split_ = split  # a tree's forest moves part of its ρ to the one-way marginals
        if self.method in AIM_METHODS:
            self._measure_aim(counter, rho=split.one_way + split.select + split.measure,
                              rng=stage_rng("aim"), ledger=ledger, report=report)
        else:
            self._measure_tree(counter, split=split, stage_rng=stage_rng, ledger=ledger,
                               report=report)
        self.ledger_ = ledger
        return self

    def _measure_tree(self, counter: Counter, *, split: BudgetSplit, stage_rng: StageRngs,
                      ledger: PrivacyLedger, report: Callable[[str, float], None]) -> None:
        independent = self.method == INDEPENDENT
        one_way_cliques = [(a,) for a in self.domain]
        # A tree counts its candidate pairs in the same pass as the one-way tables: one
        # read of the data instead of two (on 100M rows, 8 s of 94). Where the small-n rule
        # then drops the tree, no mechanism ever reads the pair tables.
        tables = counter(one_way_cliques if independent
                         else [*one_way_cliques, *all_pairs(self.domain)])
        report("measure one-way", 0.1)
        rng = stage_rng("one-way")
        one_way = measure_one_way(tables, self.domain, rho=split.one_way, rng=rng,
                                  ledger=ledger, discrete=self.discrete_noise)
        self.one_way_ = fit_one_way(one_way, self.domain, compress=self.compress,
                                    threshold=self.compress_threshold, prior=self.prior)
        self.one_way_measurements_ = list(one_way)
        if independent:  # no pair is read, nothing more charged
            self.compression_ = self.one_way_.compression
            self.structure_ = independent_structure(self.domain.attributes, self.roles)
            self.selected_: list[Measurement] = []
            return
        # The per-pair rule (issue 34) on the noisy total of the one-way measurement:
        # pairs that would be noise are dropped, and the ρ of the forest's missing edges
        # goes to the one-way marginals (all of it when no pair qualifies).
        sigma = float(np.max(one_way[0].stddev)) if self.compress and one_way else None
        rho_tree = split.select + split.measure
        candidates = allowed_edges(self.domain, self.roles, self.method,
                                   greedy_check=self.greedy_check)
        qualification = (
            qualify_pairs(self.domain, candidates, total=self.one_way_.total,
                          rho_tree=rho_tree, one_way_sigma=sigma,
                          threshold=self.compress_threshold,
                          limit=qualification_limit(self.method))
            if self.small_n_fallback
            else all_qualify(self.domain, candidates, total=self.one_way_.total))
        self.qualification_: PairQualification | None = qualification
        small_n = qualification.to_dict() if qualification.enabled else None
        share = qualification.share
        if share < 1.0:
            self._remeasure_one_way(tables, rho_extra=rho_tree * (1 - share),
                                    name=FALLBACK_STEP if share == 0 else FOREST_STEP,
                                    rng=rng, ledger=ledger)
            split = self.split_ = BudgetSplit(split.one_way + rho_tree * (1 - share),
                                              split.select * share, split.measure * share)
        self.compression_ = self.one_way_.compression
        if qualification.fallback:  # no pair is read by a mechanism
            fallback = independent_structure(self.domain.attributes, self.roles,
                                             method=FALLBACK_METHOD)
            self.structure_ = SelectedStructure(FALLBACK_METHOD, (), fallback.fairness,
                                                small_n=small_n)
            self.selected_ = []
            return
        selection: dict[str, float | int] = {}
        if self.small_n_fallback:
            # Issue 34.1: the selection gets only the ρ that tells pairs apart as finely as
            # the smallest candidate's measurement noise; the rest goes to the one-way
            # marginals (public: compressed sizes, candidates, method and ρ).
            need = selection_rho(self.one_way_.compression.compressed,
                                 qualification.kept, method=self.method,
                                 rho_measure=split.measure)
            moved = max(split.select - need, 0.0)
            if moved > 0:
                self._remeasure_one_way(tables, rho_extra=moved, name=SELECTION_STEP,
                                        rng=rng, ledger=ledger)
                split = self.split_ = BudgetSplit(split.one_way + moved, split.select - moved,
                                                  split.measure)
            selection["rho_select"], selection["rho_select_to_one_way"] = split.select, moved
        report("select structure", 0.2)
        pairs = {c: tables[c] for c in [*one_way_cliques, *all_pairs(self.domain)]}
        del tables
        structure = select(pairs, self.one_way_, self.roles, method=self.method,
                           rho=split.select, rng=stage_rng("select"), ledger=ledger,
                           max_search_nodes=self.max_search_nodes,
                           qualified=(qualification.kept
                                      if qualification.enabled else None),
                           rho_measure=split.measure if self.small_n_fallback else None,
                           greedy_check=self.greedy_check)
        chosen, full = len(structure.edges), structure.forest_edges or 1
        # At small n each chosen edge keeps the ρ it has in the full forest; the ρ of the
        # edges not chosen and of the rounds not run goes to the one-way marginals, whose
        # error reaches every pair (giving it to the few chosen pairs left independence
        # ahead at ε = 1: 1.00-1.04 of its 2-way TVD on Adult and credit21).
        to_one_way = (split.measure * (1 - chosen / full) + structure.rho_unspent
                      if self.small_n_fallback else 0.0)
        if selection:
            selection.update(edges_chosen=chosen, forest_edges=full,
                             rho_selection_unspent=structure.rho_unspent,
                             rho_unchosen_to_one_way=to_one_way)
        # A selection that chose no pair built the independence model, as the public rule's
        # fallback does: the release names it so (its small_n section says which way).
        built = structure.method if chosen else FALLBACK_METHOD
        self.structure_ = SelectedStructure(
            built, structure.edges, structure.fairness, structure.search_nodes,
            small_n=None if small_n is None else {**small_n, "selection": selection},
            rho_unspent=structure.rho_unspent, forest_edges=structure.forest_edges)
        self._check_fair()
        report("measure 2-way", 0.3)
        if to_one_way > 0:
            self._remeasure_one_way(pairs, rho_extra=to_one_way,
                                    name=UNCHOSEN_STEP if chosen else UNSELECTED_STEP,
                                    rng=rng, ledger=ledger)
            split = self.split_ = BudgetSplit(split.one_way + to_one_way,
                                              split.select - structure.rho_unspent,
                                              split.measure - (to_one_way
                                                               - structure.rho_unspent))
        if not chosen:
            self.selected_ = []
            return
        self.selected_ = measure_selected(pairs, self.one_way_, self.structure_,
                                          rho=split.measure, rng=stage_rng("measure"),
                                          ledger=ledger, discrete=self.discrete_noise)

    def _remeasure_one_way(self, tables: Mapping[Clique, np.ndarray], *, rho_extra: float,
                           name: str, rng: np.random.Generator,
                           ledger: PrivacyLedger) -> None:
        """Measure the one-way marginals again at ``rho_extra`` and refit the one-way model."""
        self.one_way_measurements_ = one_way_with_extra(
            tables, self.domain, self.one_way_measurements_, rho_extra=rho_extra,
            name=name, rng=rng, ledger=ledger, discrete=self.discrete_noise)
        self.one_way_ = fit_one_way(self.one_way_measurements_, self.domain,
                                    compress=self.compress, threshold=self.compress_threshold,
                                    prior=self.prior)
        self.compression_ = self.one_way_.compression

    def _measure_aim(self, counter: Counter, *, rho: float, rng: np.random.Generator,
                     ledger: PrivacyLedger, report: Callable[[str, float], None]) -> None:
        tables = counter(candidate_cliques(self.domain))
        # The time budget is an alarm, timed from the end of counting (counting time grows
        # with n); nothing the run computes reads the clock (issue 41.5).
        started = time.monotonic()
        report("AIM rounds", 0.1)
        decisions: list[tuple[PairQualification, float]] = []

        def qualifying_workload(initial: Sequence[Measurement], rho_left: float,
                                ) -> tuple[list[Clique], float, int | None]:
            # The trees' public per-pair rule at this (ρ, domain) on the noisy total of the
            # initial one-way marginals (issue 34): AIM's candidates are the pairs that
            # qualify, and none qualifying is the independence fallback. As for a tree, the
            # share of the rounds' ρ that a full tree's missing edges would have used goes to
            # the one-way marginals.
            total = fit_one_way(initial, self.domain, compress=False).total
            decision = pair_qualification(total, self.domain, self.roles,
                                          method=self.method, rho=rho,
                                          threshold=self.compress_threshold)
            decisions.append((decision, rho_left))
            keep = set(decision.kept)
            to_one_way = rho_left * (1 - decision.share)
            rounds: int | None = None
            if decision.share < 1:
                # Small n (the qualifying pairs do not span, issue 34.1; a full table whose
                # widest pairs fail keeps AIM's rounds): the one-way marginals get at least
                # MST's third of ρ, and the rounds are sized to the forest rather than 16·d,
                # so each measures at a σ a pair can carry (public: ρ, the decision).
                to_one_way = min(max(to_one_way, AIM_ONE_WAY_SHARE * rho - (rho - rho_left)),
                                 rho_left)
                rounds = max(1, math.ceil(AIM_ROUNDS_PER_EDGE * decision.forest_edges))
            workload: list[Clique] = [c for c in all_two_way_workload(self.domain)
                                      if c in keep]
            return workload, to_one_way, rounds

        result = run_aim(tables, self.domain, rho=rho, rng=rng, ledger=ledger,
                         roles=self.roles, fair=self.method == "aim-fair",
                         max_model_size_mb=self.max_model_size_mb, refit=False,
                         discrete=self.discrete_noise,
                         workload_after_initial=(qualifying_workload
                                                 if self.small_n_fallback else None),
                         progress=lambda fraction: report("AIM rounds", 0.1 + 0.3 * fraction))
        initial = result.measurements[:result.n_initial]
        self.qualification_, rho_left = decisions[-1] if decisions else (None, 0.0)
        small_n = None if self.qualification_ is None else self.qualification_.to_dict()
        self.aim_rounds_ = result.rounds
        elapsed = time.monotonic() - started
        if self.max_time_s is not None and elapsed > self.max_time_s:
            # An operator event (the log), never a field of the release: the output is the
            # one a fast machine would have published.
            log.warning("AIM's rounds took %.0f s, past the %g s time budget; the release is "
                        "unchanged (the budget is an alarm, issue 41.5)", elapsed,
                        self.max_time_s)
        if self.qualification_ is not None and not result.rounds:
            # No pair qualified: everything left on the one-way marginals, with the initial
            # ones exactly the distribution of --method independent's one measurement.
            self.one_way_measurements_ = one_way_with_extra(
                tables, self.domain, initial, rho_extra=rho_left, name=FALLBACK_STEP,
                rng=rng, ledger=ledger, discrete=self.discrete_noise)
            del tables
            self.one_way_ = fit_one_way(self.one_way_measurements_, self.domain,
                                        compress=self.compress,
                                        threshold=self.compress_threshold, prior=self.prior)
            self.compression_ = self.one_way_.compression
            self.selected_ = []
            fallback = independent_structure(self.domain.attributes, self.roles,
                                             method=FALLBACK_METHOD)
            self.structure_ = SelectedStructure(FALLBACK_METHOD, (), fallback.fairness,
                                                small_n=small_n)
            return
        del tables
        self.one_way_measurements_ = list(initial)
        self.one_way_ = fit_one_way(initial, self.domain, compress=False)
        self.selected_ = list(result.measurements[result.n_initial:])
        self.warm_start_ = result.model
        self.compression_ = Compression.identity(self.domain)
        self.structure_ = SelectedStructure(self.method, tuple(result.cliques), check_fairness(
            self.domain.attributes, [m.clique for m in result.measurements], self.roles),
            small_n=small_n)
        self._check_fair()

    def _check_fair(self) -> None:
        """A fair method's guarantee is checked on the structure it built, never assumed."""
        if (self.require_fair and self.method in FAIR_METHODS
                and not self.structure_.fairness.passed):
            protected, outcome, path = self.structure_.fairness.violations[0]
            raise FairnessViolationError(
                f"method {self.method!r} built a model graph that fails the fairness check: "
                f"{protected!r} reaches {outcome!r} through {' - '.join(path)} without an "
                "admissible attribute; nothing is published")

    def sample(self, n_rows: int | None = None, *, rng: np.random.Generator,
               mode: str = "iid") -> pd.DataFrame:
        """Draw synthetic rows of codes; ``n_rows`` defaults to the noisy estimated total."""
        if not hasattr(self, "model_"):
            raise RuntimeError("call fit() before sample()")
        n = round(self.model_.total) if n_rows is None else n_rows
        return generate(self.model_, self.compression_, n, rng=rng, mode=mode)

    def manifest(self) -> dict[str, Any]:
        """JSON-serialisable record of the guarantee, the ledger, the structure and settings."""
        ledger = self.ledger_
        report = self.model_.report
        return {
            "guarantee": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "rho": zcdp_rho(epsilon=self.epsilon, delta=self.delta),
                "spent": ledger.guarantee(),
            },
            "ledger": [vars(e).copy() for e in ledger.entries],
            "structure": self.structure_.to_dict(),
            "fairness_check": self.structure_.fairness.to_dict(),
            "method": {
                "name": self.method,
                "budget_split": vars(self.split_).copy(),
                "compress": self.compress,
                "compress_threshold": self.compress_threshold,
                "compression": self.compression_.to_dict(),
                "discrete_noise": self.discrete_noise,
                "max_search_nodes": self.max_search_nodes,
                "estimation": {
                    "tol": self.tol, "max_iters": self.max_iters,
                    "iterations": report.iterations if report else None,
                    "converged": report.converged if report else None,
                    "stopped_by": report.stopped_by if report else None,
                },
                "estimated_total": self.model_.total,
                "small_n": (self.structure_.small_n
                            or (qualification.to_dict()
                                if (qualification := getattr(self, "qualification_", None))
                                else None)),
                "max_model_size_mb": self.max_model_size_mb,
                "aim_rounds": [
                    {"round": r.round, "clique": list(r.clique), "sigma": r.sigma,
                     "epsilon": r.epsilon, "annealed": r.annealed,
                     "model_size_mb": r.model_size_mb}
                    for r in getattr(self, "aim_rounds_", [])
                ],
            },
            "domain": self.domain.to_dict(),
            "roles": self.roles.to_dict(),
            "privfair_version": VERSION,
        }


@dataclass(frozen=True)
class SynthesisResult:
    """Synthetic codes and the manifest that documents how they were made."""

    data: pd.DataFrame
    manifest: dict[str, Any]


def synthesize(
    data: DataLike, domain: Domain | Mapping[str, int], roles: Roles | Mapping[str, Any], *,
    epsilon: float, delta: float, method: str = "mst", seed: int | None,
    n_rows: int | None = None, sample_mode: str = "iid", **options: Any,
) -> SynthesisResult:
    """Fit and sample in one call.

    Parameters
    ----------
    data : DataFrame, mapping of arrays, or batch factory
        Integer codes of the private table, one column per domain attribute.
    domain : Domain or mapping
        Declared number of categories per attribute.
    roles : Roles or mapping
        ``{"protected": [...], "admissible": [...], "outcome": [...]}``.
    epsilon, delta : float
        Privacy guarantee.
    method : {"mst", "prefair-greedy", "prefair-exact"}
    seed : int or None
        Seed of the random generator; ``None`` takes fresh OS entropy. Whoever knows the seed
        of a release can remove its noise, so keep it secret in production.
    n_rows : int, optional
        Rows to sample; defaults to the noisy estimated total.
    sample_mode : {"iid", "round"}
    **options
        Passed to :class:`FairSynthesizer`.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"p": rng.integers(0, 2, 500), "a": rng.integers(0, 3, 500),
    ...                    "o": rng.integers(0, 2, 500)})
    >>> out = synthesize(df, {"p": 2, "a": 3, "o": 2},
    ...                  {"protected": ["p"], "admissible": ["a"], "outcome": ["o"]},
    ...                  epsilon=1.0, delta=1e-6, method="prefair-greedy", seed=0)
    >>> out.manifest["fairness_check"]["passed"]
    True
    """
    domain = domain if isinstance(domain, Domain) else Domain.from_dict(domain)
    roles = roles if isinstance(roles, Roles) else Roles.from_dict(roles)
    _check_settings(epsilon=epsilon, delta=delta, method=method, sample_mode=sample_mode)
    rng = np.random.default_rng(seed)
    fit_rng, sample_rng = rng.spawn(2)
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=epsilon, delta=delta,
                            method=method, **options)
    synth.fit(data, rng=fit_rng)
    frame = synth.sample(n_rows, rng=sample_rng, mode=sample_mode)
    manifest = synth.manifest()
    manifest["sampling"] = {"mode": sample_mode, "n_rows": len(frame),
                            "seed_policy": "user seed (not recorded)" if seed is not None
                            else "fresh OS entropy"}
    return SynthesisResult(frame, manifest)
