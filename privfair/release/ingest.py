"""Private side, first stages: load the private table and discretize it.

Each stage reads the private data and returns only file references (path + sha256) to
private staged files; details stay in the private staging folder. After the reservation
nothing here refuses, stops or speaks on a condition of the private values (issue 21.2):
the file's schema is checked before (:func:`privfair.contracts.encoding.check_source_schema`,
called by the kind's ``check``), and values get the contract's policies in :func:`discretize`,
which stages the exact tally of touched rows for a noisy release (:mod:`.policy_counts`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.csv_source import (
    UNPARSED_CELL,
    CsvSource,
    is_csv,
    valid_text,
    valid_text_columns,
)
from privfair.contracts.encoding import (
    PolicyTally,
    check_source_schema,
    hidden_index_columns,
    literal_file,
    source_sql,
)
from privfair.contracts.schema import STRIP_CHARS, Contract
from privfair.core.domain import code_dtype
from privfair.core.errors import ReleaseInputError
from privfair.store.files import CODES_PARQUET, FileRef, json_bytes, stage_file

log = logging.getLogger(__name__)


# --- private side: load, validate, discretize -----------------------------------------------

NUMERIC_TYPES = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL.*)$")


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_INTEGER_TYPES = re.compile(r"^U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?$")
_FLOAT_TYPES = re.compile(r"^(FLOAT|DOUBLE|REAL|DECIMAL.*)$")


def text_expr(path: str | Path, name: str, kind: str, normalize: str = "none") -> str:
    """SQL giving the text that :mod:`privfair.contracts.encoding` matches categories against.

    Integers become their decimal text, whole floats too (``1.0`` -> ``"1"``), booleans
    ``"True"``/``"False"``; other types (dates, blobs, nested) are refused.
    """
    col = quote_identifier(name)
    if kind == '"NULL"' or kind == "NULL":  # an all-null column: its nulls policy decides
        return f"CAST({col} AS VARCHAR) AS {col}"
    if kind == "VARCHAR":
        if normalize == "strip":
            # The same rule as discretize.normalize_text, so CatHist, the GX input suite and
            # the encoder all see the stripped value.
            chars = "'" + STRIP_CHARS.replace("'", "''") + "'"
            return f"trim({col}, {chars}) AS {col}"
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


def load(data_path: str | Path, contract: Contract,
         staging: str | Path, *, batch_size: int = 200_000, in_place: bool = False) -> FileRef:
    """Stream the declared columns of a CSV/Parquet file into a staged Parquet (private).

    The source is read in batches (:func:`source_batches`: a CSV record by record in the
    contract's dialect, a record that does not parse dropped and counted; text that is not
    UTF-8 read as one value out of the domain) and DuckDB types and writes them in a
    streaming pipeline (memory stays bounded for inputs larger than RAM). The schema (names,
    Parquet types, a CSV's header line) is checked again here by
    :func:`~privfair.contracts.encoding.check_source_schema` (a kind calls it in ``check``,
    before its reservation, so this never fires there); no value is checked: an empty input,
    text in a numeric CSV column or an infinity are staged as they are and get the contract's
    policies in :func:`discretize`. A CSV's numeric columns are staged as text (trimmed, empty
    as null) so that text that is not a number stays distinguishable from a null. The file is
    read literally (a name such as ``part?.parquet`` is not a glob), and a pandas index stored
    in a Parquet file is not data.

    With ``in_place``, a Parquet file whose declared columns all have types that read as the
    staged values (numbers for numeric columns; text, or integers as their decimal text, for
    categorical ones: a decision on the schema alone) is not copied: the staged file is a
    reference to it (:data:`INPUT_REFERENCE`, with its sha256, checked at every read), and
    :func:`iter_batches` gives the values the copy would hold. It suits a release whose
    domains are all declared; a DP domain step reads the staged copy.
    """
    path = Path(data_path)
    check_source_schema(path, contract)
    if in_place and not is_csv(path):
        import pyarrow.parquet as pq

        readings = column_readings(pq.read_schema(path), contract)
        if readings is not None:
            return _stage_reference(path, readings, Path(staging))
    return _load(path, contract, Path(staging), batch_size=batch_size)


def source_batches(path: Path, contract: Contract, *, batch_size: int = 200_000
                   ) -> tuple[Any, Iterator[Any], CsvSource | None]:
    """The declared columns of a CSV or Parquet file as Arrow record batches (private).

    Returns the batches' schema, the batches and, for a CSV file, its
    :class:`~privfair.contracts.csv_source.CsvSource` (whose ``unparsed`` counts the records
    that did not parse, once the batches are read). Nothing here raises on a value: a CSV
    record that does not parse in the contract's dialect is dropped and counted, and text
    that is not UTF-8 reads as one value out of the domain
    (:func:`~privfair.contracts.csv_source.valid_text`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(contract.column_names)
    if is_csv(path):
        source = CsvSource.open(path, contract.csv_dialect)
        schema = pa.schema([(name, pa.string()) for name in columns])
        return schema, source.batches(columns, batch_rows=batch_size), source
    file_schema = pq.read_schema(path)
    schema = pa.schema([file_schema.field(name) for name in columns])

    def batches() -> Iterator[Any]:
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
                yield pa.RecordBatch.from_arrays(
                    [valid_text(column) for column in batch.columns], schema=schema)

    return schema, batches(), None


def _load(path: Path, contract: Contract, staging: Path, *, batch_size: int) -> FileRef:
    import duckdb

    if is_csv(path):
        return _load_csv(path, contract, staging, batch_size=batch_size)
    try:  # DuckDB reads the file: the quickest way, when all its text is UTF-8
        return _load_parquet(path, contract, staging, batch_size=batch_size, checked=False)
    except duckdb.Error:
        pass  # DuckDB refuses text that is not UTF-8: pyarrow reads it, each such value
        # one value out of the domain; the same rows, the same staged values otherwise
    try:
        return _load_parquet(path, contract, staging, batch_size=batch_size, checked=True)
    except duckdb.Error as exc:  # the file itself, not a value (DuckDB's words kept out)
        kind = str(exc).splitlines()[0].split(":")[0].strip() if str(exc) else "error"
        raise ReleaseInputError(f"data file {path} cannot be read as Parquet ({kind})"
                                ) from None


def _load_csv(path: Path, contract: Contract, staging: Path, *, batch_size: int) -> FileRef:
    """A CSV file's records, as :func:`load` stages them: text, numbers trimmed of
    whitespace and empty as null, ``normalize: strip`` applied."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = staging / "input.parquet"
    schema, batches, source = source_batches(path, contract, batch_size=batch_size)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh, pq.ParquetWriter(fh, schema, compression="zstd") as writer:
        for batch in batches:
            columns = []
            for spec, column in zip(contract.columns, batch.columns, strict=True):
                if spec.type == "numeric":
                    column = pc.utf8_trim_whitespace(column)
                    # pyarrow-stubs 20 rejects a Python scalar here; pyarrow takes it
                    empty = pc.equal(column, "")  # type: ignore[call-overload]
                    column = pc.if_else(empty, pa.scalar(None, pa.string()), column)
                elif contract.normalization(spec.name) == "strip":
                    column = pc.utf8_trim(column, characters=STRIP_CHARS)
                columns.append(column)
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema),
                               row_group_size=batch_size)
    assert source is not None
    _stage_unparsed(staging, source.unparsed)
    os.chmod(out, 0o600)
    return stage_file(out)


def loader_select(types: dict[str, str], contract: Contract, path: str | Path) -> str:
    """The loader's SELECT list over a relation whose DuckDB column types are ``types``:
    numbers as DOUBLE, text by :func:`text_expr` (the one-file loader and each Dask part)."""
    select = []
    for spec in contract.columns:
        col, kind = quote_identifier(spec.name), types[spec.name]
        if spec.type == "numeric":
            if not (NUMERIC_TYPES.match(kind) or kind in ('"NULL"', "NULL")):
                raise ReleaseInputError(  # pragma: no cover - the schema check refused it
                    f"data file {path}: column {spec.name!r} has type {kind} but contract "
                    f"{contract.name!r} declares it numeric")
            select.append(f"CAST({col} AS DOUBLE) AS {col}")
        else:
            select.append(text_expr(path, spec.name, kind, contract.normalization(spec.name)))
    return ", ".join(select)


def _load_parquet(path: Path, contract: Contract, staging: Path, *, batch_size: int,
                  checked: bool) -> FileRef:
    """A Parquet file's declared columns typed by DuckDB (:func:`text_expr`), read by DuckDB
    or, ``checked``, by pyarrow with text that is not UTF-8 made one value
    (:func:`source_batches`)."""
    import duckdb
    import pyarrow as pa

    out = staging / "input.parquet"
    con = duckdb.connect()
    try:
        # DuckDB's own scan of one file keeps its order; a stream must be kept in order
        con.execute(f"SET preserve_insertion_order = {str(checked).lower()}")
        with literal_file(path) as literal:
            if checked:
                schema, batches, _ = source_batches(path, contract, batch_size=batch_size)
                con.register("source", pa.RecordBatchReader.from_batches(schema, batches))
                relation = "source"
            else:
                relation = source_sql(Path(literal))
            hidden = set(hidden_index_columns(literal))
            described = con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
            types = {row[0]: str(row[1]) for row in described if row[0] not in hidden}
            target = "'" + str(out).replace("'", "''") + "'"
            con.execute(
                f"COPY (SELECT {loader_select(types, contract, path)} FROM {relation}) "
                f"TO {target} "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {int(batch_size)})")
    finally:
        con.close()
        # A raised error's traceback keeps this frame alive (Prefect holds failed states);
        # drop the connection so DuckDB's bindings are not reported as leaked at exit.
        del con
    _stage_unparsed(staging, 0)
    os.chmod(out, 0o600)
    return stage_file(out)


#: In the staging folder: a Parquet input read in place, as :func:`load` stages it with
#: ``in_place`` (its path, sha256 and how each declared column is read; no values).
INPUT_REFERENCE = "input-reference.json"


def column_readings(schema: Any, contract: Contract) -> dict[str, str] | None:
    """How each declared column of an Arrow ``schema`` reads without the loader's SQL
    (``number``, ``text``, ``stripped text``, ``integer text``), or None when one of them
    needs that SQL (booleans, floats as text, dates, all-null columns...).

    Decided on the schema alone (public): the one-file release reading its input in place
    and the Dask workers reading their parts both ask it, and :func:`read_columns` reads.
    """
    import pyarrow as pa

    readings = {}
    for spec in contract.columns:
        dtype = schema.field(spec.name).type
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        text = pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
        if spec.type == "numeric":
            if not (pa.types.is_integer(dtype) or pa.types.is_floating(dtype)):
                return None
            readings[spec.name] = "number"
        elif text:
            readings[spec.name] = ("stripped text" if contract.normalization(spec.name)
                                   == "strip" else "text")
        elif pa.types.is_integer(dtype):
            readings[spec.name] = "integer text"
        else:
            return None
    return readings


def _stage_reference(path: Path, readings: dict[str, str], staging: Path) -> FileRef:
    reference = {"path": str(path.resolve()), "sha256": FileRef.of(path).sha256,
                 "columns": [[name, reading] for name, reading in readings.items()]}
    _write_private(staging / INPUT_REFERENCE, json_bytes(reference))
    return stage_file(staging / INPUT_REFERENCE)


def read_columns(batch: Any, readings: dict[str, str], *, as_loaded: bool = True) -> Any:
    """A batch's declared columns as :func:`column_readings` says they read: numbers as
    float64, text as dictionary arrays (the file's own dictionary when it has one).

    Text that is not UTF-8 reads as :data:`~privfair.contracts.csv_source.NOT_TEXT`, as
    the loader reads it. With ``as_loaded`` (the one-file path, whose input validation reads
    these values) text
    is also trimmed as the loader trims it and whole numbers become text; without it (the
    Dask workers) the encoder applies both rules itself, once per distinct value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = {}
    for name, reading in readings.items():
        column = batch.column(name)
        if isinstance(column, pa.ChunkedArray):  # a table's column: one array per batch
            column = column.combine_chunks()
        if reading == "number":
            columns[name] = pc.cast(column, pa.float64(), safe=False)
            continue
        if reading == "integer text":
            if pa.types.is_dictionary(column.type):  # the values, not their indices
                column = pc.take(column.dictionary, column.indices)
            if not as_loaded:
                columns[name] = column
                continue
            column = pc.cast(column, pa.string())
        column = valid_text(column)  # text that is not UTF-8: one value, out of the domain
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        if as_loaded and column.type.value_type != pa.string():
            column = pa.DictionaryArray.from_arrays(column.indices,
                                                    column.dictionary.cast(pa.string()))
        if as_loaded and reading == "stripped text":  # the loader's trim, per distinct value
            stripped = pc.utf8_trim(column.dictionary, characters=STRIP_CHARS)
            distinct = pc.unique(stripped)  # " F" and "F" are one value once stripped
            column = pa.DictionaryArray.from_arrays(
                pc.take(pc.index_in(stripped, distinct), column.indices), distinct)
        columns[name] = column
    return pa.RecordBatch.from_pydict(columns)


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600, never readable by others even for an instant.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _stage_unparsed(staging: Path, records: int) -> None:
    _write_private(staging / UNPARSED_FILE, str(int(records)).encode())


#: Beside the staged input: how many records of a CSV source did not parse (private).
UNPARSED_FILE = "unparsed-records.txt"


def add_unparsed_records(staged: FileRef, tally: PolicyTally) -> PolicyTally:
    """Add to ``tally`` the records of the source that :func:`load` dropped because they do
    not parse in the declared CSV dialect (:mod:`privfair.contracts.csv_source`); returns
    ``tally``. The count is private: a release publishes it only among the noisy counts."""
    beside = Path(staged.path).parent / UNPARSED_FILE
    if beside.exists():
        tally.add(*UNPARSED_CELL, int(beside.read_text()))
    return tally


def iter_frames(ref: FileRef, *, batch_size: int = 200_000,
                columns: list[str] | None = None,
                categorical: bool = False) -> Iterator[pd.DataFrame]:
    """Stream a staged Parquet as pandas frames.

    With ``categorical``, text columns arrive as pandas categoricals, read straight from the
    file's dictionary pages: a column holds few distinct values, so checking and encoding
    them per distinct value, not per row, skips building one Python string per cell (the
    bulk of those stages' time on wide tables).
    """
    if categorical or Path(ref.path).name == INPUT_REFERENCE:
        for batch in iter_batches(ref, batch_size=batch_size, columns=columns):
            frame = batch.to_pandas()
            if not categorical:
                frame = frame.astype({c: object for c in frame.columns
                                      if isinstance(frame[c].dtype, pd.CategoricalDtype)})
            yield frame
        return
    import pyarrow.parquet as pq

    with pq.ParquetFile(ref.open_checked()) as pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield batch.to_pandas()


def iter_batches(ref: FileRef, *, batch_size: int = 200_000,
                 columns: list[str] | None = None) -> Iterator[Any]:
    """Stream a staged Parquet as Arrow record batches, text columns as dictionary arrays
    read straight from the file's dictionary pages."""
    import pyarrow.parquet as pq

    path = ref.open_checked()
    readings = None
    if path.name == INPUT_REFERENCE:  # the input itself, read in place (see load)
        reference = json.loads(path.read_text())
        path = FileRef(reference["path"], reference["sha256"]).open_checked()
        declared = dict(reference["columns"])  # in the contract's order
        readings = {name: declared[name] for name in (columns or declared)}
        columns = list(readings)
    with pq.ParquetFile(path, read_dictionary=text_columns(pq.read_schema(path))) as pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            # the staged copy's text is UTF-8 (the loader made it so): cheap to confirm on
            # the dictionaries, and a value can then never stop a later stage
            yield valid_text_columns(batch) if readings is None else read_columns(batch,
                                                                                  readings)


def text_columns(schema: Any) -> list[str]:
    """The text columns of an Arrow ``schema``: read them as dictionaries
    (``read_dictionary``), straight from the file's dictionary pages, so no row's string is
    built or hashed."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_string(f.type)
            or pa.types.is_large_string(f.type)]


def validate_input(staged: FileRef, contract: Contract,
                   staging: str | Path, *, batch_size: int = 200_000) -> dict[str, Any]:
    """Run the GX input suite on the staged input, for the private staging folder only.

    Not part of a release (issue 21.2): its verdict depends on the private values, so it
    never refuses and returns nothing that depends on them. The full results stay in
    ``input-validation.json`` in the private staging folder. The owner's tool is
    ``privfair contract check --data``.
    """
    from privfair.contracts.validation import validate_frames

    outcome = validate_frames(iter_frames(staged, batch_size=batch_size, categorical=True),
                              contract, side="input")
    report = Path(staging) / "input-validation.json"
    report.write_bytes(json_bytes(outcome.private_details))
    os.chmod(report, 0o600)
    return {"expectations": outcome.n_expectations}


def discretize(staged: FileRef, contract: Contract,
               staging: str | Path, *, batch_size: int = 200_000) -> FileRef:
    """Map the staged input onto the contract's codes, batch by batch (private).

    Every row is encoded or dropped by the contract's policies; nothing here raises on a
    value. The exact tally of touched rows is staged next to the codes
    (:func:`discretize_counted` returns its reference).
    """
    return discretize_counted(staged, contract, staging, batch_size=batch_size)[0]


def discretize_counted(staged: FileRef, contract: Contract, staging: str | Path, *,
                       batch_size: int = 200_000) -> tuple[FileRef, FileRef]:
    """:func:`discretize`, returning ``(codes, tally)``: the staged codes and the staged
    exact :class:`~privfair.contracts.encoding.PolicyTally` (private; a release publishes it
    only through :func:`privfair.release.policy_counts.measure_policy_counts`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts import encoding as disc

    domain = contract.domain()
    schema = pa.schema([(a, code_type(domain.size(a))) for a in domain])
    out = Path(staging) / "codes.parquet"
    tally = add_unparsed_records(staged, PolicyTally())
    writer = pq.ParquetWriter(out, schema, **CODES_PARQUET)
    try:
        # Arrow batches, text read as dictionaries: the encoder works on their buffers.
        for batch in iter_batches(staged, batch_size=batch_size):
            codes = disc.discretize(batch, contract, tally=tally)
            arrays = {a: np.asarray(codes[a]).astype(schema.field(a).type.to_pandas_dtype())
                      for a in domain}
            # pyarrow-stubs 20 rejects numpy columns; pyarrow takes them without a copy
            writer.write_table(pa.table(arrays, schema=schema))  # type: ignore[arg-type]
    finally:
        writer.close()
    os.chmod(out, 0o600)
    return stage_file(out), stage_policy_tally(tally, staging)


def stage_policy_tally(tally: PolicyTally, staging: str | Path) -> FileRef:
    """The exact tally of touched rows as a 0600 file in the private staging folder (read it
    back with :func:`read_policy_tally`; never published as is)."""
    counts = Path(staging) / "policy-counts.json"
    _write_private(counts, json_bytes(tally.to_dict()))
    return stage_file(counts)


def read_policy_tally(ref: FileRef) -> PolicyTally:
    """The staged exact tally of touched rows (private)."""
    return PolicyTally.from_dict(json.loads(ref.open_checked().read_text()))


def code_type(size: int) -> Any:
    import pyarrow as pa

    return pa.from_numpy_dtype(code_dtype(size))


def code_batches(codes: FileRef, *, batch_size: int = 200_000, narrow: bool = False
                 ) -> Iterator[dict[str, np.ndarray]]:
    """Stream a codes Parquet as ``{column: int64 codes}`` batches (with ``narrow``, the
    stored unsigned codes, without a copy)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(codes.open_checked()) as pf:
        for batch in pf.iter_batches(batch_size=batch_size):
            yield {name: (column if narrow else column.astype(np.int64))
                   for name, column in zip(batch.schema.names,
                                           (c.to_numpy() for c in batch.columns),
                                           strict=True)}
