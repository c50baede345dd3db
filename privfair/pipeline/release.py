"""The release pipeline, library side: parameters, the stages, publication and the runner.

File references and post-noise artefacts live in :mod:`privfair.pipeline.artefacts`; the lifetime
ledgers and the catalog in :mod:`privfair.pipeline.store`.

A release turns a private table into a published folder::

    releases/<dataset>/<version>/
        synthetic.parquet   declared labels (decoded), never codes
        manifest.json       guarantee, ledger, method, structure, fairness check, contract hash,
                            code version, seed policy (never the seed), timestamps
        report.html         self-contained, post-DP quantities only

Stages (each one is wrapped by a thin Prefect task in ``tasks/``; :func:`run_release` chains
them without Prefect for ``privfair release --no-prefect``):

=====================  ============  =====================================================
stage                  side          returns
=====================  ============  =====================================================
:func:`preflight`      public        :class:`ReleasePlan` (refuses bad input, budget)
:func:`load`           private       staged Parquet of the declared columns (path + sha256)
:func:`validate_input` private       ``{"passed": True}`` (GX details stay in staging)
:func:`discretize`     private       codes Parquet (path + sha256)
:func:`measure_one_way` private      noisy one-way measurements + ledger (JSON paths)
:func:`select`         private       DP-selected structure + ledger
:func:`measure_selected` private     noisy 2-way measurements + ledger
:func:`estimate`       post-noise    model (``.npz`` path)
:func:`sample`         post-noise    synthetic codes Parquet
:func:`fit_aim`        private       AIM: noisy one-way + round measurements, structure
:func:`fairness_transform` post-noise optional TOT transform of the synthetic codes
:func:`validate_output` post-noise   GX summary of the synthetic table
:func:`publish`        post-noise    the release folder
=====================  ============  =====================================================

Private-side stages read the private data or true counts; they take and return only file
references (:class:`FileRef`: path + sha256) or post-noise artefacts, so nothing private ever
crosses a stage boundary. True contingency tables live only inside one stage's memory.

Working folders (under ``work_dir``, default ``.privfair``, all mode 0700):

* ``staging/<run_id>/`` — private: the staged input and its codes; removed when the run ends,
  whether it succeeded or not.
* ``artefacts/`` — post-noise, content-addressed (``<kind>-<sha16>.<ext>``), so a re-run with
  the same noisy measurements reuses the cached estimate.
* ``prefect-results/`` — Prefect's result storage; only post-noise tasks persist there.

The lifetime ledger (``releases/<dataset>/lifetime_ledger.json``) composes every published
release in zCDP and is checked before any private read (:func:`preflight`) and again, under a
lock, at publication. It is charged only by a successful :func:`publish`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field

from privfair.core.accounting import PrivacyLedger, zcdp_rho
from privfair.core.errors import BudgetExceededError, ContractError, PrivfairError
from privfair.pipeline.artefacts import (
    FileRef,
    StoreError,
    Workspace,
    atomic_write,
    json_bytes,
    load_ledger,
    load_measurements,
    load_model,
    load_one_way,
    load_structure,
    model_meta,
    new_run_id,
    private_dir,
    save_ledger,
    save_measurements,
    save_model,
    save_one_way,
    save_structure,
    sha256_file,
    stage_file,
    utc_now,
    write_artefact,
)
from privfair.pipeline.contracts import Contract, load_contract
from privfair.pipeline.store import (
    CATALOG_COLUMNS,
    LifetimeLedger,
    catalog,
    code_version,
    ledger_path,
    locked,
    next_version,
    read_lifetime_ledger,
)
from privfair.synth.measure import all_pairs, count_marginals
from privfair.synth.structure import SelectedStructure, check_fairness
from privfair.synth.synthesizer import (
    AIM_METHODS,
    FAIR_METHODS,
    METHODS,
    BudgetSplit,
    OneWayModel,
    fit_model,
    fit_one_way,
    generate,
)
from privfair.synth.synthesizer import measure_one_way as _measure_one_way
from privfair.synth.synthesizer import measure_selected as _measure_selected
from privfair.synth.synthesizer import select as _select

log = logging.getLogger(__name__)

__all__ = [
    "FileRef",
    "InputValidationError",
    "OutputValidationError",
    "ReleaseInputError",
    "ReleaseParams",
    "ReleasePlan",
    "StoreError",
    "Workspace",
    "discretize",
    "estimate",
    "fairness_transform",
    "load",
    "measure_one_way",
    "measure_selected",
    "preflight",
    "publish",
    "read_lifetime_ledger",
    "run_release",
    "sample",
    "select",
    "validate_input",
    "validate_output",
]

FORMAT = "privfair-release/1"
Method = Literal["mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair"]
Progress = Callable[[str, float], None]


# --- errors ---------------------------------------------------------------------------------


class ReleaseInputError(PrivfairError, ValueError):
    """The private input cannot be released as given (unreadable, wrong columns, ...)."""


class InputValidationError(ReleaseInputError):
    """The input breaks its contract; the message names columns and checks, never values."""


class OutputValidationError(PrivfairError):
    """The synthetic table breaks the contract; nothing is published."""




# --- parameters -----------------------------------------------------------------------------


class ReleaseParams(BaseModel):
    """Everything a release needs; the Prefect UI renders this model as the run form.

    Validation here refuses ε ≤ 0, δ outside (0, 1), unknown methods and sample modes before
    anything is read.
    """

    model_config = ConfigDict(extra="forbid")

    contract: str | None = Field(
        None, description="Data contract YAML. Empty: the embedded Adult contract.")
    data: str | None = Field(
        None, description="Private table, CSV or Parquet. Empty: the embedded Adult data.")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False,
                           description="ε of this release's (ε, δ)-DP guarantee.")
    delta: float = Field(1e-9, gt=0, lt=1, description="δ of this release's guarantee.")
    method: Method = Field("prefair-greedy", description="Structure selector.")
    seed: int | None = Field(
        None, ge=0,
        description="For tests and demos only. Whoever knows the seed can remove the noise, "
                    "and Prefect stores flow parameters: leave empty in production (fresh OS "
                    "entropy). The manifest never records it.")
    n_rows: int | None = Field(
        None, ge=1, description="Synthetic rows. Empty: the noisy estimated total.")
    sample_mode: Literal["iid", "round"] = Field("iid", description="Sampling mode.")
    out: str = Field("releases", description="Release store folder.")
    discrete_noise: bool = Field(
        False, description="Exact discrete Gaussian noise (recommended for production).")
    fairness_transform: Literal["none", "tot"] = Field(
        "none", description="Post-processing fairness transform of the synthetic table: 'tot' "
                            "is Calmon et al.'s optimised pre-processing (SAFES); no privacy "
                            "cost.")
    eta: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="TOT discrimination bound η (required with fairness_transform='tot').")
    discrimination: Literal["additive", "ratio"] = Field(
        "additive", description="TOT discrimination control: |q(ŷ|g)−q(ŷ|g')| ≤ η or the "
                                "ratio form q(ŷ|g) ≤ (1+η)·q(ŷ|g').")
    distortion: str = Field(
        "safes-adult", description="TOT distortion function (registered name).")
    work_dir: str = Field(
        ".privfair", description="Project-local working folder (private staging, post-noise "
                                 "artefacts, Prefect result storage); created mode 0700.")
    batch_size: int = Field(200_000, ge=1, description="Rows per streamed batch.")
    max_iters: int = Field(10_000, ge=1, description="Estimation iteration cap.")


def params_error_line(exc: Exception) -> str:
    """One line naming the first problem of a pydantic ``ValidationError`` (or any error)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False, include_input=False)[0]
        except Exception:  # pragma: no cover - not a pydantic error after all
            return str(exc).splitlines()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "parameters"
        return f"invalid {where}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# --- contract helpers -----------------------------------------------------------------------


def _contract(path: str | Path, fingerprint: str | None = None) -> Contract:
    contract = load_contract(path)
    if fingerprint is not None and contract.fingerprint() != fingerprint:
        raise ContractError(
            f"contract {path}: it changed during the run (fingerprint mismatch); start again"
        )
    return contract


#: Share of a release's ρ spent on publishing domains (CatHist categories of open-domain
#: columns, DP quantile edges of ``dp_bins`` columns) when the contract has such columns.
DOMAIN_SHARE = 0.1


def _open_columns(contract: Contract) -> list[str]:
    return [c.name for c in contract.columns if c.type == "text"]


def _check_open_domains(contract: Contract) -> None:
    """Open-domain columns need an "other" bucket for the values CatHist does not release."""
    for name in _open_columns(contract):
        if contract.column(name).open_bucket() is None:
            raise ContractError(
                f"contract {contract.name!r}: open-domain column {name!r} needs "
                "out_of_domain: \"other:<label>\" for the values CatHist does not release")


# --- plan and preflight ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReleasePlan:
    """The public, checked settings of one run; never holds the seed or private values."""

    run_id: str
    dataset: str
    contract_path: str
    contract_fingerprint: str
    contract_version: str
    declared_contract_fingerprint: str
    data_path: str
    data_source: str
    store: str
    work_dir: str
    epsilon: float
    delta: float
    rho: float
    split: dict[str, float]
    method: str
    n_rows: int | None
    sample_mode: str
    discrete_noise: bool
    fairness_transform: str
    eta: float | None
    discrimination: str
    distortion: str
    batch_size: int
    max_iters: int
    seeded: bool
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ReleasePlan:
        return cls(**raw)

    @property
    def seed_policy(self) -> str:
        if self.seeded:
            return ("operator-supplied seed; the seed is not recorded (whoever knows it can "
                    "remove the noise)")
        return "fresh OS entropy for every noise draw and sample; no seed exists"


_DATASET_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def _check_store_writable(store: Path) -> None:
    """Refuse a store that cannot be created or written, without creating anything."""
    probe = store
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is" if probe == store else f"has a parent {probe} that is"
        raise StoreError(f"release store {store} {what} a file, not a folder; choose another --out")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"release store {store}: folder {probe} is not writable")


def _resolve_data(params: ReleaseParams, contract: Contract) -> tuple[Path, str]:
    if params.data is None:
        from privfair.pipeline.datasets import embedded_dataset_for

        embedded = embedded_dataset_for(contract.name)
        if embedded is None:
            raise ReleaseInputError(f"contract {contract.name!r} describes no embedded "
                                    "dataset; pass --data")
        return embedded, "embedded"
    path = Path(params.data).expanduser()
    if not path.exists():
        raise ReleaseInputError(f"data file {path} does not exist")
    if not path.is_file():
        raise ReleaseInputError(f"data path {path} is not a file")
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise ReleaseInputError(
            f"data file {path}: unsupported extension {path.suffix!r}; expected .csv or .parquet")
    return path.resolve(), "file"


def _resolve_contract(params: ReleaseParams) -> Path:
    if params.contract is None:
        from privfair.pipeline.datasets import default_contract_path

        return default_contract_path()
    return Path(params.contract).expanduser().resolve()


def preflight(params: ReleaseParams | Mapping[str, Any]) -> ReleasePlan:
    """Check everything that can be checked without reading private data.

    Refuses (one-line error, nothing written): invalid parameters, a bad contract, a missing
    data file, an unwritable store, and a release that would exceed the dataset's lifetime
    budget.
    """
    params = params if isinstance(params, ReleaseParams) else ReleaseParams.model_validate(
        params)
    contract_path = _resolve_contract(params)
    contract = _contract(contract_path)
    _check_open_domains(contract)
    if not _DATASET_NAME.fullmatch(contract.name):
        raise ContractError(
            f"contract {contract_path}: name {contract.name!r} cannot name a release folder; "
            "expected letters, digits, '.', '_' or '-' (not starting with '.')")
    # Open-domain and dp_bins columns get their domains from DP later; only names matter here.
    shape = contract.with_released_categories({c: [] for c in _open_columns(contract)})
    shape = shape.with_released_bins({c.name: [c.lower, c.upper] for c in shape.columns
                                      if c.dp_bins is not None})
    domain, roles = shape.domain(), contract.roles()
    if params.method not in METHODS:  # pragma: no cover - the Literal already refuses it
        raise ValueError(f"method must be one of {list(METHODS)}, got {params.method!r}")
    roles.check(domain, fair=params.method in FAIR_METHODS)
    if params.fairness_transform == "tot":
        from privfair.fair.tot import DISTORTIONS

        if params.eta is None:
            raise ReleaseInputError("fairness_transform 'tot' needs eta, the discrimination "
                                    "bound (e.g. --eta 0.05)")
        if params.distortion not in DISTORTIONS:
            raise ReleaseInputError(f"distortion {params.distortion!r} is not registered; "
                                    f"expected one of {sorted(DISTORTIONS)}")
        if not roles.protected or not roles.outcome:
            raise ReleaseInputError("fairness_transform 'tot' needs protected and outcome "
                                    "attributes in the contract's roles")
    data_path, source = _resolve_data(params, contract)
    store = Path(params.out).expanduser().resolve()
    _check_store_writable(store)
    rho = zcdp_rho(epsilon=params.epsilon, delta=params.delta)
    read_lifetime_ledger(store, contract).check(rho=rho)
    domains_rho = DOMAIN_SHARE * rho if contract.unresolved_columns else 0.0
    split = {"domains": domains_rho, **asdict(BudgetSplit.thirds(rho - domains_rho))}
    return ReleasePlan(
        run_id=new_run_id(), dataset=contract.name, contract_path=str(contract_path),
        contract_fingerprint=contract.fingerprint(), contract_version=contract.version,
        declared_contract_fingerprint=contract.fingerprint(),
        data_path=str(data_path), data_source=source, store=str(store),
        work_dir=str(Path(params.work_dir).resolve()), epsilon=params.epsilon,
        delta=params.delta, rho=rho, split=split, method=params.method,
        n_rows=params.n_rows, sample_mode=params.sample_mode,
        discrete_noise=params.discrete_noise, fairness_transform=params.fairness_transform,
        eta=params.eta, discrimination=params.discrimination, distortion=params.distortion,
        batch_size=params.batch_size, max_iters=params.max_iters,
        seeded=params.seed is not None, started_at=utc_now(),
    )


def initial_ledger(plan: ReleasePlan, artefacts: str | Path) -> FileRef:
    """The empty per-release ledger holding exactly this release's ρ (post-noise artefact)."""
    ledger = PrivacyLedger(rho_budget=plan.rho, delta=plan.delta)
    return save_ledger(ledger, artefacts)


# --- private side: load, validate, discretize -----------------------------------------------

_NUMERIC_TYPES = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL.*)$")


def _duckdb_error(path: Path, exc: Exception) -> ReleaseInputError:
    # DuckDB messages may quote raw values; keep only the first line of the kind of error.
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    kind = first.split(":")[0].strip() or type(exc).__name__
    return ReleaseInputError(f"data file {path} cannot be read as {_fmt(path)} ({kind})")


def _fmt(path: Path) -> str:
    return "CSV" if path.suffix.lower() == ".csv" else "Parquet"


def _source_sql(path: Path) -> str:
    literal = "'" + str(path).replace("'", "''") + "'"
    if path.suffix.lower() == ".csv":
        # Everything as text: types are decided by the contract, not sniffed from the data.
        return f"read_csv({literal}, header=true, all_varchar=true)"
    return f"read_parquet({literal})"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_INTEGER_TYPES = re.compile(r"^U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?$")
_FLOAT_TYPES = re.compile(r"^(FLOAT|DOUBLE|REAL|DECIMAL.*)$")


def _text_expr(path: Path, name: str, kind: str) -> str:
    """SQL giving the text that :mod:`privfair.pipeline.discretize` matches categories against.

    Integers become their decimal text, whole floats too (``1.0`` -> ``"1"``), booleans
    ``"True"``/``"False"``; other types (dates, blobs, nested) are refused.
    """
    col = _quote(name)
    if kind == "VARCHAR":
        return col
    if _INTEGER_TYPES.match(kind):
        return f"CAST({col} AS VARCHAR) AS {col}"
    if _FLOAT_TYPES.match(kind):
        return (f"CASE WHEN {col} = trunc({col}) AND abs({col}) < 9007199254740992 "
                f"THEN CAST(CAST({col} AS BIGINT) AS VARCHAR) ELSE CAST({col} AS VARCHAR) END "
                f"AS {col}")
    if kind == "BOOLEAN":
        return f"CASE WHEN {col} THEN 'True' WHEN NOT {col} THEN 'False' END AS {col}"
    raise ReleaseInputError(
        f"data file {path}: column {name!r} has type {kind}, which cannot hold the declared "
        "categories (expected text, integers or booleans)")


def load(data_path: str | Path, contract_path: str | Path, contract_fingerprint: str,
         staging: str | Path, *, batch_size: int = 200_000) -> FileRef:
    """Stream the declared columns of a CSV/Parquet file into a staged Parquet (private).

    DuckDB reads the source in a streaming pipeline (memory stays bounded for inputs larger
    than RAM). Refuses, naming the column: a missing declared column, an undeclared extra
    column (columns listed under ``drop`` are read past), a numeric column that holds
    non-numbers, and an empty input.
    """
    import duckdb

    path = Path(data_path)
    contract = _contract(contract_path, contract_fingerprint)
    out = Path(staging) / "input.parquet"
    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = false")
        try:
            described = con.execute(f"DESCRIBE SELECT * FROM {_source_sql(path)}").fetchall()
        except duckdb.Error as exc:
            raise _duckdb_error(path, exc) from None
        types = {row[0]: str(row[1]) for row in described}
        declared = list(contract.column_names)
        missing = [c for c in declared if c not in types]
        if missing:
            raise ReleaseInputError(
                f"data file {path}: missing column(s) {missing} declared by contract "
                f"{contract.name!r}")
        extra = [c for c in types if c not in declared and c not in contract.drop]
        if extra:
            raise ReleaseInputError(
                f"data file {path}: unexpected column(s) {extra} not declared by contract "
                f"{contract.name!r} (declare them or list them under 'drop')")
        select = []
        for spec in contract.columns:
            col, kind = _quote(spec.name), types[spec.name]
            if spec.type == "numeric":
                if path.suffix.lower() == ".csv":
                    select.append(f"TRY_CAST({col} AS DOUBLE) AS {col}")
                elif _NUMERIC_TYPES.match(kind):
                    select.append(f"CAST({col} AS DOUBLE) AS {col}")
                else:
                    raise ReleaseInputError(
                        f"data file {path}: column {spec.name!r} has type {kind} but contract "
                        f"{contract.name!r} declares it numeric")
            else:
                select.append(_text_expr(path, spec.name, kind))
        source = _source_sql(path)
        try:
            if path.suffix.lower() == ".csv":
                numeric = [_quote(c.name) for c in contract.columns if c.type == "numeric"]
                for col in numeric:
                    bad = con.execute(
                        f"SELECT 1 FROM {source} WHERE {col} IS NOT NULL AND trim({col}) <> '' "
                        f"AND TRY_CAST({col} AS DOUBLE) IS NULL LIMIT 1").fetchall()
                    if bad:
                        raise ReleaseInputError(
                            f"data file {path}: column {col.strip(chr(34))!r} holds non-numeric "
                            f"values but contract {contract.name!r} declares it numeric")
            if not con.execute(f"SELECT 1 FROM {source} LIMIT 1").fetchall():
                raise ReleaseInputError(f"data file {path} has no rows (empty input)")
            target = "'" + str(out).replace("'", "''") + "'"
            con.execute(
                f"COPY (SELECT {', '.join(select)} FROM {source}) TO {target} "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {int(batch_size)})")
        except duckdb.Error as exc:
            raise _duckdb_error(path, exc) from None
    finally:
        con.close()
        # A raised error's traceback keeps this frame alive (Prefect holds failed states);
        # drop the connection so DuckDB's bindings are not reported as leaked at exit.
        del con
    os.chmod(out, 0o600)
    return stage_file(out)


def iter_frames(ref: FileRef, *, batch_size: int = 200_000,
                columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
    """Stream a staged Parquet as pandas frames."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(ref.open_checked()) as pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield batch.to_pandas()


def validate_input(staged: FileRef, contract_path: str | Path, contract_fingerprint: str,
                   staging: str | Path, *, batch_size: int = 200_000) -> dict[str, Any]:
    """Check the staged input against the GX suite generated from the contract.

    The full GX results (they hold counts of the private data) are written to the private
    staging folder only; the return value and the error name columns and checks, nothing else.
    """
    from privfair.pipeline.validation import validate_frames

    contract = _contract(contract_path, contract_fingerprint)
    outcome = validate_frames(iter_frames(staged, batch_size=batch_size), contract,
                              side="input")
    report = Path(staging) / "input-validation.json"
    report.write_bytes(json_bytes(outcome.private_details))
    os.chmod(report, 0o600)
    if not outcome.passed:
        # Keep the private details for the data owner, outside the staging folder (which is
        # removed) and outside anything published or handed to Prefect.
        keep = private_dir(Path(staging).parents[1] / "private-reports")
        kept = keep / f"{Path(staging).name}-input-validation.json"
        shutil.copyfile(report, kept)
        os.chmod(kept, 0o600)
        raise InputValidationError(
            f"input breaks contract {contract.name!r}: {outcome.problem_line()} "
            f"(private details: {kept})")
    return {"passed": True, "expectations": outcome.n_expectations}


def discretize(staged: FileRef, contract_path: str | Path, contract_fingerprint: str,
               staging: str | Path, *, batch_size: int = 200_000) -> FileRef:
    """Map the staged input onto the contract's codes, batch by batch (private)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.pipeline import discretize as disc

    contract = _contract(contract_path, contract_fingerprint)
    domain = contract.domain()
    schema = pa.schema([(a, _code_type(domain.size(a))) for a in domain])
    out = Path(staging) / "codes.parquet"
    writer = pq.ParquetWriter(out, schema, compression="zstd")
    try:
        for frame in iter_frames(staged, batch_size=batch_size):
            codes = disc.discretize(frame, contract)
            writer.write_table(pa.table(
                {a: np.asarray(codes[a]).astype(schema.field(a).type.to_pandas_dtype())
                 for a in domain}, schema=schema))
    finally:
        writer.close()
    os.chmod(out, 0o600)
    return stage_file(out)


def _code_type(size: int) -> Any:
    import pyarrow as pa

    return pa.uint8() if size <= 255 else pa.uint16() if size <= 65535 else pa.uint32()


def code_batches(codes: FileRef, *, batch_size: int = 200_000
                 ) -> Iterator[dict[str, np.ndarray]]:
    """Stream a codes Parquet as ``{column: int64 codes}`` batches."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(codes.open_checked()) as pf:
        for batch in pf.iter_batches(batch_size=batch_size):
            yield {name: batch.column(i).to_numpy().astype(np.int64)
                   for i, name in enumerate(batch.schema.names)}


# --- randomness -----------------------------------------------------------------------------

_STAGE_KEYS = {"one-way": 1, "select": 2, "measure": 3, "sample": 4, "aim": 5, "tot": 6,
               "domains": 7}


def stage_rng(seed: int | None, stage: str) -> np.random.Generator:
    """An independent generator per stage: seeded streams for tests, OS entropy otherwise."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_STAGE_KEYS[stage],)))


# --- private side: measurements -------------------------------------------------------------


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

    from privfair.pipeline.cathist import cathist, random_word_sampler
    from privfair.pipeline.quantiles import dp_quantile_edges

    contract = _contract(plan.contract_path, plan.contract_fingerprint)
    columns = contract.unresolved_columns
    rho = plan.split["domains"] / len(columns)
    book = load_ledger(ledger)
    book.check(plan.split["domains"])
    text = set(_open_columns(contract))
    counts: dict[str, Counter] = {name: Counter() for name in text}
    numbers: dict[str, list[np.ndarray]] = {name: [] for name in columns if name not in text}
    for frame in iter_frames(staged, batch_size=batch_size, columns=columns):
        for name in text:
            counts[name].update(frame[name].dropna().astype(str).str.strip().value_counts()
                                .to_dict())
        for name, parts in numbers.items():
            parts.append(pd.to_numeric(frame[name], errors="coerce").to_numpy(np.float64))
    rng = stage_rng(seed, "domains")
    categories, edges = {}, {}
    for name in columns:
        spec = contract.column(name)
        if name in text:
            result = cathist(counts.pop(name), domain_size=spec.open_domain.size,
                             tolerance=spec.open_domain.tolerance,
                             epsilon=math.sqrt(2 * rho),  # ε-DP is ε²/2-zCDP
                             rng=rng, ledger=book, universe_sampler=random_word_sampler(),
                             name=f"CatHist categories of {name}")
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
    plan = replace(plan, contract_path=ref.path, contract_fingerprint=resolved.fingerprint())
    return plan, save_ledger(book, artefacts)


def measure_one_way(codes: FileRef, contract_path: str | Path, contract_fingerprint: str,
                    ledger: FileRef, artefacts: str | Path, *, rho: float, seed: int | None,
                    discrete: bool = False, batch_size: int = 200_000
                    ) -> tuple[FileRef, FileRef]:
    """Count and measure every one-way marginal; returns (one-way artefact, ledger)."""
    domain = _contract(contract_path, contract_fingerprint).domain()
    book = load_ledger(ledger)
    book.check(rho)
    tables = count_marginals(domain, [(a,) for a in domain],
                             code_batches(codes, batch_size=batch_size))
    noisy = _measure_one_way(tables, domain, rho=rho, rng=stage_rng(seed, "one-way"),
                             ledger=book, discrete=discrete)
    del tables
    model = fit_one_way(noisy, domain)
    return save_one_way(model, noisy, artefacts), save_ledger(book, artefacts)


def select(codes: FileRef, contract_path: str | Path, contract_fingerprint: str,
           one_way: FileRef, ledger: FileRef, artefacts: str | Path, *, method: str,
           rho: float, seed: int | None, max_search_nodes: int = 200_000,
           batch_size: int = 200_000) -> tuple[FileRef, FileRef]:
    """DP structure selection over all pairs; returns (structure, ledger)."""
    contract = _contract(contract_path, contract_fingerprint)
    domain, roles = contract.domain(), contract.roles()
    book = load_ledger(ledger)
    book.check(rho)
    model = load_one_way(one_way)
    tables = count_marginals(domain, all_pairs(domain),
                             code_batches(codes, batch_size=batch_size))
    structure = _select(tables, model, roles, method=method, rho=rho,
                        rng=stage_rng(seed, "select"), ledger=book,
                        max_search_nodes=max_search_nodes)
    del tables
    return save_structure(structure, artefacts), save_ledger(book, artefacts)


def measure_selected(codes: FileRef, contract_path: str | Path, contract_fingerprint: str,
                     one_way: FileRef, structure: FileRef, ledger: FileRef,
                     artefacts: str | Path, *, rho: float, seed: int | None,
                     discrete: bool = False, batch_size: int = 200_000
                     ) -> tuple[FileRef, FileRef]:
    """Measure the selected 2-way marginals; returns (measurements, ledger)."""
    domain = _contract(contract_path, contract_fingerprint).domain()
    book = load_ledger(ledger)
    book.check(rho)
    model, tree = load_one_way(one_way), load_structure(structure)
    tables = count_marginals(domain, tree.cliques, code_batches(codes, batch_size=batch_size))
    noisy = _measure_selected(tables, model, tree, rho=rho, rng=stage_rng(seed, "measure"),
                              ledger=book, discrete=discrete)
    del tables
    return save_measurements(noisy, artefacts), save_ledger(book, artefacts)


def fit_aim(codes: FileRef, contract_path: str | Path, contract_fingerprint: str,
            ledger: FileRef, artefacts: str | Path, *, method: str, rho: float,
            seed: int | None, discrete: bool = False, max_model_size_mb: float = 80.0,
            batch_size: int = 200_000) -> tuple[FileRef, FileRef, FileRef, FileRef]:
    """AIM (or fair AIM) with the whole budget: selection and measurement interleave.

    Returns the same artefacts as the tree path, so estimation and sampling are shared:
    (initial one-way measurements, structure, round measurements, ledger).
    """
    from privfair.synth.aim import candidate_cliques, run_aim

    contract = _contract(contract_path, contract_fingerprint)
    domain, roles = contract.domain(), contract.roles()
    book = load_ledger(ledger)
    book.check(rho)
    tables = count_marginals(domain, candidate_cliques(domain),
                             code_batches(codes, batch_size=batch_size))
    result = run_aim(tables, domain, rho=rho, rng=stage_rng(seed, "aim"), ledger=book,
                     roles=roles, fair=method == "aim-fair", max_model_size_mb=max_model_size_mb,
                     refit=False, discrete=discrete)
    del tables
    initial = result.measurements[:result.n_initial]
    rounds = result.measurements[result.n_initial:]
    one_way = fit_one_way(initial, domain, compress=False)
    structure = SelectedStructure(method, tuple(result.cliques), check_fairness(
        domain.attributes, [m.clique for m in result.measurements], roles))
    return (save_one_way(one_way, initial, artefacts), save_structure(structure, artefacts),
            save_measurements(rounds, artefacts), save_ledger(book, artefacts))


# --- post-noise side ------------------------------------------------------------------------


def estimate(one_way: FileRef, selected: FileRef, artefacts: str | Path, *,
             max_iters: int = 10_000, tol: float = 1e-6,
             callback: Callable[[int, float], None] | None = None) -> FileRef:
    """Fit the graphical model to the noisy measurements (post-processing only)."""
    model = fit_model(load_one_way(one_way), load_measurements(selected), tol=tol,
                      max_iters=max_iters, callback=callback)
    return save_model(model, artefacts)


def sample(model: FileRef, one_way: FileRef, artefacts: str | Path, *, n_rows: int | None,
           mode: str = "iid", seed: int | None = None) -> FileRef:
    """Draw synthetic codes (post-processing); ``n_rows`` defaults to the noisy total."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fitted = load_model(model)
    compression = load_one_way(one_way).compression
    n = round(fitted.total) if n_rows is None else int(n_rows)
    frame = generate(fitted, compression, n, rng=stage_rng(seed, "sample"), mode=mode)
    table = pa.table({a: frame[a].to_numpy().astype(np.int64) for a in frame.columns})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return write_artefact(artefacts, "synthetic-codes", buffer.getvalue(), "parquet")


def fairness_transform(synthetic: FileRef, contract_path: str | Path,
                       contract_fingerprint: str, artefacts: str | Path, *, transform: str,
                       eta: float | None = None, discrimination: str = "additive",
                       distortion: str = "safes-adult", seed: int | None = None
                       ) -> tuple[FileRef, dict[str, Any]]:
    """Optional fairness transform of the synthetic table (post-processing, no privacy cost).

    ``"tot"`` fits Calmon et al.'s optimised pre-processing on the synthetic codes — D the
    contract's protected attributes, Y its outcome, X every other attribute — and applies it
    to them. Returns the (possibly new) synthetic codes and the manifest record.
    """
    if transform == "none":
        return synthetic, {"name": "none", "applied": False}
    if transform != "tot":
        raise ValueError(f"fairness_transform must be 'none' or 'tot', got {transform!r}")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.fair.tot import TOTransform

    contract = _contract(contract_path, contract_fingerprint)
    domain, roles = contract.domain(), contract.roles()
    outcome = roles.outcome[0]
    features = [a for a in domain if a not in roles.protected and a != outcome]
    tot = TOTransform(d_cols=list(roles.protected), x_cols=features, y_col=outcome,
                      domain=domain, eta=eta, discrimination=discrimination,
                      distortion=distortion)
    codes = read_codes(synthetic)
    moved = tot.fit(codes).transform(codes, rng=stage_rng(seed, "tot"))
    table = pa.table({a: moved[a].to_numpy().astype(np.int64) for a in domain})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    ref = write_artefact(artefacts, "synthetic-codes", buffer.getvalue(), "parquet")
    record = {"name": "tot", "applied": True, "post_processing": True,
              "additional_privacy_cost": 0.0, **tot.to_manifest()}
    return ref, json.loads(json_bytes(record))


def read_codes(ref: FileRef) -> pd.DataFrame:
    import pyarrow.parquet as pq

    return pq.read_table(ref.open_checked()).to_pandas()


def decode_codes(codes: pd.DataFrame, contract: Contract) -> pd.DataFrame:
    """Synthetic codes -> declared labels."""
    from privfair.pipeline import discretize as disc

    return disc.decode(codes, contract)


def validate_output(synthetic: FileRef, contract_path: str | Path, contract_fingerprint: str,
                    *, n_rows: int | None = None) -> dict[str, Any]:
    """GX checks of the decoded synthetic table (public, so the summary can be detailed)."""
    from privfair.pipeline.validation import validate_frames

    contract = _contract(contract_path, contract_fingerprint)
    labelled = decode_codes(read_codes(synthetic), contract)
    outcome = validate_frames([labelled], contract, side="output", n_rows=n_rows)
    if not outcome.passed:
        raise OutputValidationError(
            f"synthetic table breaks contract {contract.name!r}: {outcome.problem_line()}")
    return outcome.public_summary()


def build_manifest(plan: ReleasePlan, *, version: str, ledger: PrivacyLedger,
                   one_way: OneWayModel, structure: SelectedStructure,
                   model: Mapping[str, Any], contract: Contract, n_rows: int,
                   input_validation: Mapping[str, Any], output_validation: Mapping[str, Any],
                   lifetime: LifetimeLedger, fairness_transform: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
    """The release manifest: only public settings and post-DP quantities."""
    report = model.get("report") or {}
    return {
        "format": FORMAT,
        "dataset": plan.dataset,
        "version": version,
        "started_at": plan.started_at,
        "published_at": utc_now(),
        "guarantee": {
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "rho": plan.rho,
            "spent": ledger.guarantee(),
        },
        "ledger": [asdict(e) for e in ledger.entries],
        "lifetime": {
            "epsilon_budget": lifetime.epsilon_budget,
            "delta_budget": lifetime.delta_budget,
            "rho_budget": lifetime.rho_budget,
            "rho_spent_after": lifetime.rho_spent + plan.rho,
        },
        "method": {
            "name": plan.method,
            "budget_split": dict(plan.split),
            "compress": plan.method not in AIM_METHODS,
            "compression": one_way.compression.to_dict(),
            "discrete_noise": plan.discrete_noise,
            "estimation": {"max_iters": plan.max_iters, **report},
            "estimated_total": float(model["total"]),
        },
        "parameters": {
            "epsilon": plan.epsilon, "delta": plan.delta, "method": plan.method,
            "n_rows": plan.n_rows, "sample_mode": plan.sample_mode,
            "discrete_noise": plan.discrete_noise,
            "fairness_transform": plan.fairness_transform,
            "data_source": ("embedded default dataset" if plan.data_source == "embedded"
                            else "operator-supplied file (path and hash not recorded)"),
        },
        "structure": structure.to_dict(),
        "fairness_check": structure.fairness.to_dict(),
        "fairness_transform": dict(fairness_transform or {"name": "none", "applied": False}),
        "sampling": {"mode": plan.sample_mode, "n_rows": n_rows},
        "seed_policy": plan.seed_policy,
        "validation": {"input": dict(input_validation), "output": dict(output_validation)},
        "contract": {"name": contract.name, "version": contract.version,
                     "fingerprint": plan.declared_contract_fingerprint,
                     # differs when the release published DP domains (see the ledger)
                     "resolved_fingerprint": plan.contract_fingerprint},
        "domain": {"attributes": list(contract.column_names),
                   "sizes": contract.domain().to_dict(),
                   "labels": {c: contract.labels(c) for c in contract.column_names}},
        "roles": contract.roles().to_dict(),
        "code_version": code_version(),
    }


def publish(plan: ReleasePlan | Mapping[str, Any], *, ledger: FileRef, one_way: FileRef,
            structure: FileRef, model: FileRef, synthetic: FileRef,
            input_validation: Mapping[str, Any], output_validation: Mapping[str, Any],
            fairness_transform: Mapping[str, Any] | None = None) -> Path:
    """Write the release folder atomically and charge the lifetime ledger.

    Under a per-dataset lock: re-check the lifetime budget, build everything in a temporary
    folder next to the target, write the charged lifetime ledger, add the catalog row, then
    ``os.rename`` the folder into place. Any exception undoes the ledger and the catalog row
    and removes the temporary folder, so a failed publication leaves no trace. (A hard crash
    between the ledger write and the rename can only over-count the budget, never under-count.)
    """
    from privfair.pipeline.report import build_report

    plan = plan if isinstance(plan, ReleasePlan) else ReleasePlan.from_dict(plan)
    contract = _contract(plan.contract_path, plan.contract_fingerprint)
    book = load_ledger(ledger)
    if book.spent > plan.rho * (1 + 1e-9):  # pragma: no cover - the ledger refuses this itself
        raise BudgetExceededError("the release ledger spent more than the release's budget")
    one_way_model, tree, meta = load_one_way(one_way), load_structure(structure), model_meta(
        model)
    labelled = decode_codes(read_codes(synthetic), contract)

    store = Path(plan.store)
    folder = store / plan.dataset
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        lifetime = read_lifetime_ledger(store, contract)
        lifetime.check(rho=plan.rho)
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        lifetime_file = ledger_path(store, plan.dataset)
        old_ledger = lifetime_file.read_bytes() if lifetime_file.is_file() else None
        catalog_added = False
        try:
            tmp.mkdir()
            labelled.to_parquet(tmp / "synthetic.parquet", index=False)
            manifest = build_manifest(
                plan, version=version, ledger=book, one_way=one_way_model, structure=tree,
                model=meta, contract=contract, n_rows=len(labelled),
                input_validation=input_validation, output_validation=output_validation,
                lifetime=lifetime, fairness_transform=fairness_transform)
            labels = {c: contract.labels(c) for c in contract.column_names}
            (tmp / "report.html").write_text(build_report(manifest, labelled, labels=labels),
                                             encoding="utf-8")
            manifest["files"] = {name: sha256_file(tmp / name)
                                 for name in ("synthetic.parquet", "report.html")}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))

            lifetime.releases.append({
                "version": version, "published_at": manifest["published_at"],
                "epsilon": plan.epsilon, "delta": plan.delta, "rho": plan.rho,
                "method": plan.method, "contract_fingerprint": plan.contract_fingerprint,
            })
            atomic_write(lifetime_file, json_bytes(lifetime.to_dict()))
            with catalog(store) as con:
                con.execute(
                    f"INSERT INTO releases ({', '.join(CATALOG_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(CATALOG_COLUMNS))})",
                    [plan.dataset, version, str(final.relative_to(store)),
                     manifest["published_at"], plan.epsilon, plan.delta, plan.rho,
                     plan.method, len(labelled), plan.contract_fingerprint,
                     bool(tree.fairness.passed)])
            catalog_added = True
            os.rename(tmp, final)  # the commit point
        except BaseException:
            if catalog_added:
                with contextlib.suppress(Exception), catalog(store) as con:
                    con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?",
                                [plan.dataset, version])
            if old_ledger is None:
                with contextlib.suppress(FileNotFoundError):
                    lifetime_file.unlink()
            else:
                atomic_write(lifetime_file, old_ledger)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.info("published %s", final)
    return final


# --- summaries for the orchestrator (Prefect artifacts) and the CLI -----------------------


def read_manifest(release_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(release_dir) / "manifest.json").read_text())


def ledger_rows(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The release's ledger as table rows, with a total row (post-DP accounting only)."""
    rows = [{"step": e["name"], "mechanism": e["mechanism"], "rho": e["rho"],
             "sigma": e.get("sigma"), "epsilon": e.get("epsilon"), "queries": e["queries"]}
            for e in manifest["ledger"]]
    spent = manifest["guarantee"]["spent"]
    rows.append({"step": "total", "mechanism": "zCDP composition", "rho": spent["rho"],
                 "sigma": None, "epsilon": spent.get("epsilon"), "queries": sum(
                     int(e["queries"]) for e in manifest["ledger"])})
    return rows


def summary_markdown(manifest: Mapping[str, Any], release_dir: str | Path) -> str:
    """Markdown summary of a release: guarantee, method, structure, fairness, validation."""
    g, m = manifest["guarantee"], manifest["method"]
    fairness, validation = manifest["fairness_check"], manifest["validation"]
    edges = ", ".join(f"`{a}`–`{b}`" for a, b in manifest["structure"]["edges"]) or "none"
    life = manifest["lifetime"]
    verdict = "passed" if fairness["passed"] else "FAILED"
    lines = [
        f"# privfair release `{manifest['dataset']}` {manifest['version']}",
        "",
        f"Folder: `{release_dir}`",
        "",
        "| | |",
        "|---|---|",
        f"| Guarantee | ({g['epsilon']:g}, {g['delta']:.3g})-DP, ρ = {g['rho']:.6g} zCDP "
        f"(add/remove one row) |",
        f"| ρ spent | {g['spent']['rho']:.6g} |",
        f"| Lifetime ρ after this release | {life['rho_spent_after']:.6g} of "
        f"{life['rho_budget']:.6g} (ε = {life['epsilon_budget']:g}, "
        f"δ = {life['delta_budget']:g}) |",
        f"| Method | {m['name']} (discrete noise: {m['discrete_noise']}) |",
        f"| Structure | {edges} |",
        f"| Fairness check | {verdict}: {fairness['criterion']} |",
        f"| Fairness transform | {_transform_line(manifest['fairness_transform'])} |",
        f"| Input validation | {'passed' if validation['input'].get('passed') else 'FAILED'} |",
        f"| Output validation | {'passed' if validation['output'].get('passed') else 'FAILED'} |",
        f"| Rows | {manifest['sampling']['n_rows']} ({manifest['sampling']['mode']}) |",
        f"| Contract | {manifest['contract']['name']} {manifest['contract']['version']} "
        f"(`{manifest['contract']['fingerprint'][:16]}`) |",
        f"| Seed policy | {manifest['seed_policy']} |",
        "",
        "Every value above is public accounting or post-DP output; no private count appears.",
    ]
    return "\n".join(lines)


# --- the stage runner (no Prefect) ----------------------------------------------------------


def _transform_line(record: Mapping[str, Any]) -> str:
    if not record.get("applied"):
        return "none"
    parameters = record.get("parameters", {})
    return (f"{record['name']} (η = {parameters.get('eta')}, "
            f"{parameters.get('discrimination')}; post-processing, no privacy cost)")


def run_release(params: ReleaseParams | Mapping[str, Any], *,
                progress: Progress | None = None) -> Path:
    """Run every stage in this process, without Prefect (``privfair release --no-prefect``).

    ``progress(stage, fraction)`` is called as stages start. Returns the release folder.
    The private staging folder is removed whatever happens.
    """
    report = progress or (lambda stage, fraction: None)
    params = params if isinstance(params, ReleaseParams) else ReleaseParams.model_validate(
        params)
    report("preflight", 0.0)
    plan = preflight(params)
    ws = Workspace.open(plan.work_dir, plan.run_id)
    c, f, bs, seed = plan.contract_path, plan.contract_fingerprint, plan.batch_size, params.seed
    try:
        report("load", 0.02)
        staged = load(plan.data_path, c, f, ws.staging, batch_size=bs)
        report("validate input", 0.08)
        checked = validate_input(staged, c, f, ws.staging, batch_size=bs)
        ledger = initial_ledger(plan, ws.artefacts)
        if plan.split["domains"]:
            report("publish DP domains", 0.12)
            plan, ledger = resolve_domains(staged, plan, ledger, ws.artefacts, seed=seed,
                                           batch_size=bs)
            c, f = plan.contract_path, plan.contract_fingerprint
        report("discretize", 0.15)
        codes = discretize(staged, c, f, ws.staging, batch_size=bs)
        if plan.method in AIM_METHODS:
            report("AIM rounds", 0.2)
            one_way, structure, selected, ledger = fit_aim(
                codes, c, f, ledger, ws.artefacts, method=plan.method,
                rho=plan.rho - plan.split["domains"],
                seed=seed, discrete=plan.discrete_noise, batch_size=bs)
        else:
            report("measure one-way", 0.2)
            one_way, ledger = measure_one_way(codes, c, f, ledger, ws.artefacts,
                                              rho=plan.split["one_way"], seed=seed,
                                              discrete=plan.discrete_noise, batch_size=bs)
            report("select structure", 0.25)
            structure, ledger = select(codes, c, f, one_way, ledger, ws.artefacts,
                                       method=plan.method, rho=plan.split["select"],
                                       seed=seed, batch_size=bs)
            report("measure selected", 0.3)
            selected, ledger = measure_selected(codes, c, f, one_way, structure, ledger,
                                                ws.artefacts, rho=plan.split["measure"],
                                                seed=seed, discrete=plan.discrete_noise,
                                                batch_size=bs)
        ws.cleanup_private()  # nothing after this point reads private data
        report("estimate", 0.35)
        model = estimate(one_way, selected, ws.artefacts, max_iters=plan.max_iters,
                         callback=lambda it, loss: report(
                             "estimate", 0.35 + 0.45 * min(it / plan.max_iters, 1.0)))
        report("sample", 0.8)
        synthetic = sample(model, one_way, ws.artefacts, n_rows=plan.n_rows,
                           mode=plan.sample_mode, seed=seed)
        synthetic, transform = fairness_transform(
            synthetic, c, f, ws.artefacts, transform=plan.fairness_transform, eta=plan.eta,
            discrimination=plan.discrimination, distortion=plan.distortion, seed=seed)
        report("validate output", 0.85)
        output = validate_output(synthetic, c, f, n_rows=plan.n_rows)
        report("publish", 0.9)
        final = publish(plan, ledger=ledger, one_way=one_way, structure=structure, model=model,
                        synthetic=synthetic, input_validation=checked,
                        output_validation=output, fairness_transform=transform)
        report("done", 1.0)
        return final
    finally:
        ws.cleanup_private()
