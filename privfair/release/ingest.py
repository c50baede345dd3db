"""Private side, first stages: load the private table, validate it, discretize it.

Each stage reads the private data and returns only file references (path + sha256) to
private staged files, or a pass/fail summary; details stay in the private staging folder.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.encoding import (
    STRIP_CHARS,
    hidden_index_columns,
    literal_file,
    source_sql,
)
from privfair.contracts.schema import Contract
from privfair.core.domain import code_dtype
from privfair.release.table.plan import InputValidationError, ReleaseInputError
from privfair.store.artefacts import (
    FileRef,
    json_bytes,
    private_dir,
    stage_file,
)

log = logging.getLogger(__name__)


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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_INTEGER_TYPES = re.compile(r"^U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?$")
_FLOAT_TYPES = re.compile(r"^(FLOAT|DOUBLE|REAL|DECIMAL.*)$")


def _text_expr(path: Path, name: str, kind: str, normalize: str = "none") -> str:
    """SQL giving the text that :mod:`privfair.contracts.encoding` matches categories against.

    Integers become their decimal text, whole floats too (``1.0`` -> ``"1"``), booleans
    ``"True"``/``"False"``; other types (dates, blobs, nested) are refused.
    """
    col = _quote(name)
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


def _refuse_duplicate_names(path: Path, literal: Path) -> None:
    """Two columns with one name are refused by that name (DuckDB would rename one)."""
    if literal.suffix == ".csv":
        import csv

        with open(literal, newline="", encoding="utf-8", errors="replace") as fh:
            header = next(csv.reader(fh), [])
    else:
        import pyarrow.parquet as pq

        header = list(pq.read_schema(literal).names)
    seen: set[str] = set()
    for name in (h.strip() for h in header):
        if name in seen:
            raise ReleaseInputError(f"data file {path}: duplicate column name {name!r}; "
                                    "expected each column once")
        seen.add(name)


def load(data_path: str | Path, contract: Contract,
         staging: str | Path, *, batch_size: int = 200_000) -> FileRef:
    """Stream the declared columns of a CSV/Parquet file into a staged Parquet (private).

    DuckDB reads the source in a streaming pipeline (memory stays bounded for inputs larger
    than RAM). Refuses, naming the column: a missing declared column, an undeclared extra
    column (columns listed under ``drop`` are read past), a numeric column that holds
    non-numbers, and an empty input. The file is read literally (a name such as
    ``part?.parquet`` is not a glob), and a pandas index stored in a Parquet file is not data.
    """
    path = Path(data_path)
    with literal_file(path) as literal:
        return _load(path, Path(literal), contract, Path(staging), batch_size=batch_size)


def _load(path: Path, literal: Path, contract: Contract, staging: Path, *,
          batch_size: int) -> FileRef:
    import duckdb

    out = staging / "input.parquet"
    hidden = set() if literal.suffix == ".csv" else set(hidden_index_columns(literal))
    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = false")
        try:
            described = con.execute(f"DESCRIBE SELECT * FROM {source_sql(literal)}"
                                    ).fetchall()
        except duckdb.Error as exc:
            raise _duckdb_error(path, exc) from None
        _refuse_duplicate_names(path, literal)
        types = {row[0]: str(row[1]) for row in described if row[0] not in hidden}
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
                elif _NUMERIC_TYPES.match(kind) or kind in ('"NULL"', "NULL"):
                    select.append(f"CAST({col} AS DOUBLE) AS {col}")
                else:
                    raise ReleaseInputError(
                        f"data file {path}: column {spec.name!r} has type {kind} but contract "
                        f"{contract.name!r} declares it numeric")
            else:
                select.append(_text_expr(path, spec.name, kind,
                                         contract.normalization(spec.name)))
        source = source_sql(literal)
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
            for spec in contract.columns:
                if spec.type != "numeric":
                    continue
                col = _quote(spec.name)
                if con.execute(f"SELECT 1 FROM {source} WHERE isinf(TRY_CAST({col} AS DOUBLE)) "
                               "LIMIT 1").fetchall():
                    raise ReleaseInputError(
                        f"data file {path}: column {spec.name!r} holds infinite values; "
                        "expected finite numbers (or nulls, under its nulls policy)")
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
                columns: list[str] | None = None,
                categorical: bool = False) -> Iterator[pd.DataFrame]:
    """Stream a staged Parquet as pandas frames.

    With ``categorical``, text columns arrive as pandas categoricals, read straight from the
    file's dictionary pages: a column holds few distinct values, so checking and encoding
    them per distinct value, not per row, skips building one Python string per cell (the
    bulk of those stages' time on wide tables).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = ref.open_checked()
    text = None
    if categorical:
        schema = pq.read_schema(path)
        text = [f.name for f in schema if pa.types.is_string(f.type)
                or pa.types.is_large_string(f.type)]
    with pq.ParquetFile(path, read_dictionary=text) as pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield batch.to_pandas()


def validate_input(staged: FileRef, contract: Contract,
                   staging: str | Path, *, batch_size: int = 200_000) -> dict[str, Any]:
    """Check the staged input against the GX suite generated from the contract.

    The full GX results (they hold counts of the private data) are written to the private
    staging folder only; the return value and the error name columns and checks, nothing else.
    """
    from privfair.contracts.validation import validate_frames

    outcome = validate_frames(iter_frames(staged, batch_size=batch_size, categorical=True),
                              contract, side="input")
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


def discretize(staged: FileRef, contract: Contract,
               staging: str | Path, *, batch_size: int = 200_000) -> FileRef:
    """Map the staged input onto the contract's codes, batch by batch (private)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts import encoding as disc

    domain = contract.domain()
    schema = pa.schema([(a, code_type(domain.size(a))) for a in domain])
    out = Path(staging) / "codes.parquet"
    writer = pq.ParquetWriter(out, schema, compression="zstd")
    try:
        for frame in iter_frames(staged, batch_size=batch_size, categorical=True):
            codes = disc.discretize(frame, contract)
            writer.write_table(pa.table(
                {a: np.asarray(codes[a]).astype(schema.field(a).type.to_pandas_dtype())
                 for a in domain}, schema=schema))
    finally:
        writer.close()
    os.chmod(out, 0o600)
    return stage_file(out)


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
