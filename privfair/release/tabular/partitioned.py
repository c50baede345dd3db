"""A release over a partitioned Parquet dataset, part by part, on Dask or here (issue 23.1).

``--data`` may name a folder of Parquet files (optionally hive-partitioned:
``state=CA/part-0.parquet``). Its schema (every file's footer and the folder names) is
checked before the reservation (:func:`privfair.contracts.encoding.check_dataset_schema`).
Then, with ``engine="dask"``, each file is one task on the cluster; with the local engine the
same functions run here, one file after the other:

* **load** (private): a worker reads its file batch by batch, adds the file's partition
  values as columns, applies the loader's SQL (the same type rules as
  :func:`privfair.release.ingest.load`, through DuckDB) and, when no DP domain is pending,
  encodes the batch under the contract's policies at once; it writes its codes part
  (``staging/<run>/codes/part-NNNNN.parquet``, 0600 in the run's 0700 staging) and returns
  the part's reference and its exact :class:`~privfair.contracts.encoding.PolicyTally`,
  which the driver sums (private; published only through a noisy count). With a DP domain
  pending, the worker stages its input part instead and encodes it in the discretize stage.
* **count** (private): :func:`privfair.release.tabular.private.count_codes` counts every codes
  part's row groups on the workers and sums the tables on the driver; noise is drawn once,
  on the summed tables, by the measure stage (:meth:`FairSynthesizer.measure`).
* **sample** (post-processing): ``output="partitioned"`` splits the rows into parts of
  ``part_rows``; part ``k`` is drawn by its own generator, the ``k``-th child spawned from
  the run's sample generator (:meth:`numpy.random.Generator.spawn`), so the table does not
  depend on which worker drew which part. A part is written once, as published (labels as
  dictionary arrays over the codes, released column names): output validation reads it per
  part and is combined, and publication copies it into the release folder as
  ``synthetic/part-NNNNN.parquet``, each hashed in the manifest.

The workers must see the private working folder and the store (this machine, or a shared
file system): exact per-part tables and tallies travel back to the driver as messages, TLS
for a remote scheduler (:mod:`.dask_engine`).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from privfair.contracts.csv_source import valid_text_columns
from privfair.contracts.encoding import PolicyTally, dataset_files, hidden_index_columns
from privfair.contracts.schema import Contract
from privfair.release.seeds import stage_rng
from privfair.store.files import CODES_PARQUET, FileRef, json_bytes, private_dir, write_artefact

#: Rows of synthetic data the release report reads (a prefix of i.i.d. parts: a sample).
REPORT_ROWS = 200_000


# --- where the parts run ---------------------------------------------------------------------


@contextmanager
def part_client(plan: Any) -> Iterator[Any]:
    """The Dask client of a plan with ``engine="dask"`` (the cluster of
    :func:`privfair.release.tabular.private.dask_client`), else None: parts run here."""
    if plan.engine != "dask":
        yield None
        return
    from privfair.release.tabular.private import dask_client

    with dask_client(plan.dask_address, scratch=plan.work_dir) as client:
        yield client


def map_parts(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
              client: Any = None) -> list[Any]:
    """``[fn(*call) for call in calls]``, as tasks of ``client`` when there is one; each
    result is dropped from the cluster as soon as it is back (private results included)."""
    if client is None:
        return [fn(*call) for call in calls]
    from distributed import as_completed

    futures = [client.submit(fn, *call, pure=False) for call in calls]
    order = {future.key: i for i, future in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    pending = as_completed(futures)
    del futures
    for future in pending:
        results[order[future.key]] = future.result()
        future.release()
        del future
    return results


# --- private: load and encode per part ---------------------------------------------------------


def _staged_schema(contract: Contract) -> Any:
    import pyarrow as pa

    return pa.schema([(c.name, pa.float64() if c.type == "numeric" else pa.string())
                      for c in contract.columns])


def _code_schema(contract: Contract) -> Any:
    import pyarrow as pa

    from privfair.release.ingest import code_type

    domain = contract.domain()
    return pa.schema([(a, code_type(domain.size(a))) for a in domain])


def _encode_batch(frame: Any, contract: Contract, schema: Any, tally: PolicyTally) -> Any:
    import pyarrow as pa

    from privfair.contracts import encoding as disc

    codes = disc.discretize(frame, contract, tally=tally)
    return pa.table({a: np.asarray(codes[a]).astype(schema.field(a).type.to_pandas_dtype())
                     for a in schema.names}, schema=schema)


def _as_frame(table: Any) -> Any:
    """A pandas frame whose text columns are categoricals (encoded per distinct value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = [pc.dictionary_encode(c) if pa.types.is_string(c.type)
               or pa.types.is_large_string(c.type) else c for c in table.columns]
    return pa.table(columns, names=table.column_names).to_pandas()


def ingest_part(path: str, keys: dict[str, str | None], partition_types: dict[str, Any],
                contract: Contract, out_dir: str, index: int, batch_size: int,
                encode: bool) -> tuple[FileRef, dict[str, dict[str, int]] | None]:
    """Load one file of the dataset (a task; private): its codes part and exact tally, or
    (``encode`` False) its staged input part."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.release.ingest import (
        column_readings,
        loader_select,
        read_columns,
        text_columns,
    )

    source = Path(path)
    target = Path(out_dir) / f"part-{index:05d}.parquet"
    declared = set(contract.column_names)
    hidden = set(hidden_index_columns(source))
    schema = _code_schema(contract) if encode else _staged_schema(contract)
    tally = PolicyTally()
    con = None  # DuckDB only for a column type the direct path does not read
    writer = pq.ParquetWriter(target, schema, **(CODES_PARQUET if encode
                                                 else {"compression": "zstd"}))
    os.chmod(target, 0o600)
    try:
        text = text_columns(pq.read_schema(source)) if encode else None
        with pq.ParquetFile(source, read_dictionary=text) as pf:
            columns = [n for n in pf.schema_arrow.names if n in declared and n not in hidden]
            select = None
            readings: dict[str, str] | None = None  # decided on the first batch's schema
            for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
                table = pa.Table.from_batches([batch])
                for key, value in keys.items():
                    if key in declared:
                        kind = partition_types[key]
                        table = table.append_column(
                            key, pa.array([value] * table.num_rows, pa.string()).cast(kind))
                if encode and readings is None and select is None:
                    readings = column_readings(table.schema, contract)
                if readings is not None:  # no SQL, no copy of the text: the fast path
                    direct = read_columns(table, readings, as_loaded=False)
                    writer.write_table(_encode_batch(direct, contract, schema, tally))
                    continue
                if con is None:
                    import duckdb

                    con = duckdb.connect()
                # text that is not UTF-8: one value out of the domain, never DuckDB's error
                con.register("part", valid_text_columns(table))
                if select is None:
                    described = con.execute("DESCRIBE SELECT * FROM part").fetchall()
                    select = loader_select({r[0]: str(r[1]) for r in described}, contract,
                                            source)
                loaded = con.sql(f"SELECT {select} FROM part").to_arrow_table()
                con.unregister("part")
                if encode:
                    writer.write_table(_encode_batch(_as_frame(loaded), contract, schema,
                                                     tally))
                else:
                    writer.write_table(loaded.cast(schema))
                del table, loaded
    finally:
        writer.close()
        if con is not None:
            con.close()
    os.chmod(target, 0o600)
    return FileRef.of(target), (tally.to_dict() if encode else None)


def discretize_part(staged: FileRef, contract: Contract, out_dir: str, index: int,
                    batch_size: int) -> tuple[FileRef, dict[str, dict[str, int]]]:
    """Encode one staged input part under the (resolved) contract (a task; private)."""
    import pyarrow.parquet as pq

    from privfair.release.ingest import iter_frames

    schema = _code_schema(contract)
    target = Path(out_dir) / f"part-{index:05d}.parquet"
    tally = PolicyTally()
    writer = pq.ParquetWriter(target, schema, **CODES_PARQUET)
    os.chmod(target, 0o600)
    try:
        for frame in iter_frames(staged, batch_size=batch_size, categorical=True):
            writer.write_table(_encode_batch(frame, contract, schema, tally))
    finally:
        writer.close()
    return FileRef.of(target), tally.to_dict()


def _stage_tally(tallies: Sequence[dict[str, dict[str, int]]], staging: str | Path) -> FileRef:
    from privfair.release.ingest import stage_policy_tally

    total = PolicyTally()
    for part in tallies:
        total.update(PolicyTally.from_dict(part))
    return stage_policy_tally(total, staging)


def ingest_dataset(folder: str | Path, contract: Contract, staging: str | Path, *,
                   encode: bool, batch_size: int = 200_000, client: Any = None
                   ) -> dict[str, Any]:
    """Load (and with ``encode``, encode) every file of a Parquet dataset as one task each.

    Returns the stage's state: ``staged`` (the input parts, or None), and with ``encode``
    ``codes`` (the codes parts) and ``policy_tally`` (the summed exact tally, staged 0600).
    """
    files, partitions = dataset_files(folder)
    kinds = {f.name: f.type for f in partitions}
    out = private_dir(Path(staging) / ("codes" if encode else "input"))
    calls = [(str(path), keys, kinds, contract, str(out), i, batch_size, encode)
             for i, (path, keys) in enumerate(files)]
    results = map_parts(ingest_part, calls, client=client)
    parts = [ref for ref, _ in results]
    if not encode:
        return {"staged": parts}
    return {"staged": None, "codes": parts,
            "policy_tally": _stage_tally([t for _, t in results], staging)}


def discretize_dataset(staged: Sequence[FileRef], contract: Contract, staging: str | Path, *,
                       batch_size: int = 200_000, client: Any = None
                       ) -> tuple[list[FileRef], FileRef]:
    """Encode staged input parts (after the DP domains); ``(codes parts, staged tally)``."""
    out = private_dir(Path(staging) / "codes")
    results = map_parts(discretize_part, [(ref, contract, str(out), i, batch_size)
                                          for i, ref in enumerate(staged)], client=client)
    return [ref for ref, _ in results], _stage_tally([t for _, t in results], staging)


# --- post-noise: sample, validate, write per part ---------------------------------------------


def part_sizes(n_rows: int, part_rows: int) -> list[int]:
    """Rows of each part: ``part_rows`` each, the last one the rest (one empty part for 0)."""
    full, rest = divmod(int(n_rows), int(part_rows))
    return [int(part_rows)] * full + ([rest] if rest or not full else [])


def sample_part(model: FileRef, one_way: FileRef, contract: Contract, artefacts: str,
                index: int, n_rows: int, rng: np.random.Generator,
                ) -> tuple[FileRef, dict[str, Any]]:
    """Draw one part of the synthetic table with its own generator (a task), written as the
    part the release publishes: labels as dictionary arrays over the codes, released column
    names (so the stages after it read it and copy it, and never decode it again).

    The output suite runs here, on the table this task built, before it is written: the
    validation stage takes these checks by the part's sha256 instead of reading every part
    back (on 100M rows, 10 s of a 94 s release). Returns the part and its checks
    (:func:`part_checks`).
    """
    import pyarrow.parquet as pq

    from privfair.store.artefacts import load_model, load_one_way
    from privfair.synth.synthesizer import generate_columns

    columns = generate_columns(load_model(model), load_one_way(one_way).compression, n_rows,
                               rng=rng, mode="iid")
    table = labelled_columns(columns, contract, released=True)
    buffer = io.BytesIO()
    # i.i.d. rows: every row group spans the whole domain, so min/max statistics would
    # prune nothing for a reader, and they cost a quarter of the write
    pq.write_table(table, buffer, compression="zstd", write_statistics=False)
    ref = write_artefact(artefacts, f"synthetic-part{index:05d}", buffer.getvalue(), "parquet")
    return ref, part_checks(ref, _declared_frame(table, contract), contract)


def sample_parts(model: FileRef, one_way: FileRef, contract: Contract, artefacts: str | Path,
                 *, n_rows: int | None, part_rows: int, seed: int | None,
                 client: Any = None) -> tuple[list[FileRef], list[dict[str, Any]]]:
    """Draw the synthetic table as parts of ``part_rows`` rows (post-processing); ``n_rows``
    defaults to the noisy total. Part ``k`` uses the ``k``-th generator spawned from the
    run's sample generator. Returns the parts and each part's output checks."""
    from privfair.store.artefacts import load_model

    n = round(load_model(model).total) if n_rows is None else int(n_rows)
    sizes = part_sizes(n, part_rows)
    generators = stage_rng(seed, "sample").spawn(len(sizes))
    calls = [(model, one_way, contract, str(artefacts), i, size, rng)
             for i, (size, rng) in enumerate(zip(sizes, generators, strict=True))]
    results = map_parts(sample_part, calls, client=client)
    return [ref for ref, _ in results], [checks for _, checks in results]


def _declared_frame(table: Any, contract: Contract) -> Any:
    """A part's Arrow table as a pandas frame of categoricals under the declared names."""
    declared = {v: k for k, v in contract.released_names().items()}
    return table.rename_columns([declared[n] for n in table.column_names]).to_pandas()


def read_part(part: FileRef, contract: Contract) -> Any:
    """A synthetic part (as :func:`sample_part` wrote it) as a pandas frame of categoricals
    under the declared column names (what :func:`privfair.contracts.encoding.decode`
    gives)."""
    import pyarrow.parquet as pq

    return _declared_frame(pq.read_table(part.open_checked()), contract)


def part_checks(part: FileRef, frame: Any, contract: Contract) -> dict[str, Any]:
    """The output suite's verdicts on one part's decoded ``frame`` (public: synthetic rows),
    keyed by the sha256 of the part they were computed for."""
    from privfair.contracts.validation import validate_frames

    outcome = validate_frames([frame], contract, side="output", n_rows=len(frame))
    return {"sha256": part.sha256, "rows": len(frame), "suite": outcome.suite,
            "checks": outcome.checks, "batches": outcome.batches}


def validate_part(part: FileRef, contract: Contract) -> dict[str, Any]:
    """The output suite on one synthetic part, read back (a task): :func:`part_checks`."""
    return part_checks(part, read_part(part, contract), contract)


def validate_parts(parts: Sequence[FileRef], contract: Contract, *, n_rows: int | None,
                   checked: Sequence[dict[str, Any]] = (), client: Any = None,
                   ) -> dict[str, Any]:
    """GX checks of the decoded synthetic parts, combined: an expectation passes if it held
    on every part, and the row count is the parts' total (public).

    ``checked`` are the checks :func:`sample_part` ran on the tables it wrote; a part whose
    sha256 has none is read back and checked on a worker.
    """
    from privfair.contracts.validation import ValidationOutcome
    from privfair.release.tabular.plan import OutputValidationError

    by_hash = {c["sha256"]: c for c in checked}
    unchecked = [ref for ref in parts if ref.sha256 not in by_hash]
    # the workers read and check the parts; the driver never reads a synthetic row here
    by_hash.update((c["sha256"], c) for c in map_parts(
        validate_part, [(ref, contract) for ref in unchecked], client=client))
    results = [by_hash[ref.sha256] for ref in parts]
    total = sum(r["rows"] for r in results)
    combined = []
    for i, check in enumerate(results[0]["checks"]):
        success = all(r["checks"][i]["success"] for r in results)
        if check["expectation"].startswith("expect_table_row_count"):
            success = total == n_rows if n_rows is not None else total >= 1
        combined.append({**check, "success": bool(success)})
    outcome = ValidationOutcome(side="output", suite=results[0]["suite"],
                                passed=all(c["success"] for c in combined), checks=combined,
                                batches=sum(r["batches"] for r in results))
    if not outcome.passed:
        raise OutputValidationError(
            f"synthetic table breaks contract {contract.name!r}: {outcome.problem_line()}")
    return outcome.public_summary()


def labelled_columns(columns: dict[str, np.ndarray], contract: Contract, *,
                     released: bool = False) -> Any:
    """Synthetic codes as labels (:func:`privfair.contracts.encoding.decode`'s values): each
    column a dictionary array whose indices are the codes and whose dictionary is the
    declared labels, so no string is built per row. With ``released``, the columns carry
    their released names (``rename:``)."""
    import pyarrow as pa

    names = contract.released_names() if released else {}
    arrays = {}
    for name, codes in columns.items():
        labels = contract.labels(name)
        # pandas' categorical code width, so a reader gets what decode() would have written
        index = pa.int8() if len(labels) < 2**7 else (
            pa.int16() if len(labels) < 2**15 else pa.int32())
        indices = pa.array(np.asarray(codes)).cast(index)
        arrays[names.get(name, name)] = pa.DictionaryArray.from_arrays(
            indices, pa.array(labels, pa.string()), safe=True)  # codes outside: refused
    return pa.table(arrays)


def write_part(part: FileRef, folder: str, index: int) -> tuple[str, int, str]:
    """Copy one synthetic part, checked against its fingerprint, into the release folder (a
    task); it was written as published by :func:`sample_part`. Returns its name, rows and
    sha256 (its bytes are read once, here, not again by the driver)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = part.read_checked()
    name = f"part-{index:05d}.parquet"
    (Path(folder) / name).write_bytes(data)
    return name, int(pq.read_metadata(pa.BufferReader(data)).num_rows), part.sha256


def write_parts(parts: Sequence[FileRef], contract: Contract, folder: Path, *,
                client: Any = None) -> tuple[dict[str, str], int, Any]:
    """Write ``synthetic/part-*.parquet`` into the staged release ``folder``; returns the
    files (relative to ``folder``) with their sha256, the total rows, and a sample of
    labelled rows (the first parts, :data:`REPORT_ROWS` at most) for the report."""
    import pandas as pd

    out = folder / "synthetic"
    out.mkdir()
    written = map_parts(write_part, [(ref, str(out), i) for i, ref in enumerate(parts)],
                        client=client)
    frames, rows = [], 0
    for ref in parts:
        if rows >= REPORT_ROWS:
            break
        frame = read_part(ref, contract).head(REPORT_ROWS - rows)
        frames.append(frame)
        rows += len(frame)
    sample = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return ({f"synthetic/{name}": digest for name, _, digest in written},
            sum(n for _, n, _ in written), sample)


def manifest_record(parts: Sequence[str], part_rows: int) -> dict[str, Any]:
    """The manifest's ``sampling`` additions of a partitioned output (public)."""
    record: dict[str, Any] = json.loads(json_bytes({
        "output": "partitioned", "parts": len(parts), "part_rows": int(part_rows),
        "generators": "one per part, spawned from the run's sample generator",
        "folder": "synthetic/"}))
    return record
