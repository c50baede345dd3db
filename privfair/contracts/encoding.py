"""Raw values -> integer codes (and back), exactly as the data contract declares.

This module is long on purpose: encoding and decoding must stay mirror images of each other.

Nothing here looks at the private data to decide a domain: categories, aliases and bin edges
all come from the :class:`~privfair.contracts.schema.Contract`. Values the contract does not cover
get the column's ``out_of_domain`` policy, nulls its ``nulls`` policy. Errors name the column
and the policy, never a value or a count from the data.

Matching rules
--------------
* Categorical and text columns are matched on text. String columns are used as they are, or
  with leading/trailing whitespace removed under ``normalize: strip`` (:func:`normalize_text`,
  the one rule that CatHist's counts and the loader apply too; no case folding: declare an
  alias instead); integer columns by their decimal text
  (``1`` -> ``"1"``); float columns likewise when the value is whole (``1.0`` -> ``"1"``).
  Aliases are applied first.
* Numeric columns must hold numbers or numeric text; text that does not parse is out of
  domain. See :mod:`privfair.contracts.schema` for the bin convention.
* A null is ``None``, ``NaN``, ``NaT`` or ``pd.NA``; an empty string is a value, not a null.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.contracts.schema import ColumnSpec, Contract, OpenCategories
from privfair.core.errors import DomainError

__all__ = ["STRIP_CHARS", "as_text", "decode", "discretize", "hidden_index_columns",
           "iter_discretized_batches", "literal_file", "match_text", "normalize_text"]

#: What ``normalize: strip`` removes at both ends of a raw value: ASCII whitespace. The
#: loader's SQL (``trim(x, STRIP_CHARS)``) and :func:`normalize_text` use this same set.
STRIP_CHARS = " \t\n\r\f\v"


def normalize_text(values: np.ndarray, mode: str) -> np.ndarray:
    """Apply a column's text normalization to an object array of str/None (in place).

    ``"strip"`` removes :data:`STRIP_CHARS` at both ends; ``"none"`` leaves values as they
    are. CatHist counts, the staged input and category matching all go through this rule.
    """
    if mode == "strip":
        text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=len(values))
        values[text] = pd.Series(values[text], dtype=object).str.strip(STRIP_CHARS).to_numpy(
            dtype=object)
    elif mode != "none":
        raise ValueError(f"normalize: {mode!r}; expected 'none' or 'strip'")
    return values


@contextlib.contextmanager
def literal_file(path: str | Path) -> Iterator[str]:
    """A path to hand to DuckDB that names exactly ``path``, never a glob pattern.

    DuckDB expands ``*``, ``?``, ``[...]`` and ``{...}`` in file names, so ``part?.parquet``
    would read every matching file. The file is reached through a symbolic link with a plain
    name in a fresh private temporary folder.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data file {path} does not exist or is not a file")
    with tempfile.TemporaryDirectory(prefix="privfair-src-") as tmp:
        suffix = "".join(path.suffixes[-2:]) if path.name.lower().endswith(".csv.gz") \
            else path.suffix
        link = Path(tmp) / f"source{suffix.lower()}"
        os.symlink(path.resolve(), link)
        yield str(link)


def hidden_index_columns(path: str | Path) -> list[str]:
    """Columns that pandas stored for a DataFrame index in a Parquet file (not data).

    ``DataFrame.to_parquet`` keeps a non-default index as ``__index_level_0__`` (or the
    index's name) and lists it under ``index_columns`` in the file's pandas metadata.
    """
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).pandas_metadata or {}
    except (pa.ArrowException, OSError):
        return []  # not Parquet: the reader that follows reports it
    return [c for c in meta.get("index_columns", []) if isinstance(c, str)]

Frame = pd.DataFrame | pa.Table | pa.RecordBatch


def discretize(
    frame: Frame,
    contract: Contract,
    *,
    open_categories: OpenCategories | None = None,
) -> dict[str, np.ndarray]:
    """Encode every declared column of ``frame`` as int64 codes.

    Parameters
    ----------
    frame : pandas.DataFrame, pyarrow.Table or pyarrow.RecordBatch
        Raw data: the declared columns, optionally the contract's ``drop`` columns (ignored),
        nothing else.
    contract : Contract
        The declaration to apply.
    open_categories : mapping of str to sequence of str, optional
        Released categories of text columns (see :meth:`Contract.labels`).

    Returns
    -------
    dict of str to ndarray of int64
        One array of codes per declared column, in declared order; code ``i`` means
        ``contract.labels(column)[i]``.

    Raises
    ------
    DomainError
        If declared columns are missing, undeclared columns are present, or a value breaks a
        ``refuse`` policy.
    """
    _check_columns(_column_names(frame), contract)
    return {
        spec.name: _encode(
            spec, _series(frame, spec.name),
            contract.labels(spec.name, open_categories=open_categories),
            contract.normalization(spec.name),
        )
        for spec in contract.columns
    }


def decode(
    codes: pd.DataFrame | Mapping[str, np.ndarray],
    contract: Contract,
    *,
    open_categories: OpenCategories | None = None,
) -> pd.DataFrame:
    """Map codes back to the declared labels.

    Parameters
    ----------
    codes : pandas.DataFrame or mapping of str to ndarray
        Integer codes of some or all declared columns (e.g. synthetic data).
    contract : Contract
        The declaration the codes refer to.
    open_categories : mapping of str to sequence of str, optional
        Released categories of text columns.

    Returns
    -------
    pandas.DataFrame
        Same columns (and index, for a DataFrame); each column is categorical with the
        declared labels, in declared order, as its categories.
    """
    names = [str(c) for c in (codes.columns if isinstance(codes, pd.DataFrame) else codes)]
    if len(set(names)) != len(names):
        raise DomainError("decode: codes has duplicate column names; expected unique columns")
    out: dict[str, pd.Categorical] = {}
    for name in names:
        labels = contract.labels(name, open_categories=open_categories)
        values = np.asarray(codes[name])
        if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer):
            raise DomainError(
                f"column {name!r}: expected a 1-D array of integer codes, got dtype {values.dtype}"
            )
        if values.size and (values.min() < 0 or values.max() >= len(labels)):
            raise DomainError(
                f"column {name!r}: codes outside the declared domain 0..{len(labels) - 1}"
            )
        out[name] = pd.Categorical.from_codes(values, categories=pd.Index(labels, dtype=str))
    index = codes.index if isinstance(codes, pd.DataFrame) else None
    return pd.DataFrame(out, index=index)


def iter_discretized_batches(
    path: str | Path,
    contract: Contract,
    *,
    batch_size: int = 1_000_000,
    open_categories: OpenCategories | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """Stream a Parquet or CSV file and yield its codes batch by batch.

    Only one batch is held in memory at a time, so a file larger than memory works. Parquet
    is read with pyarrow; CSV with DuckDB, every field read as text (so type sniffing never
    fails on a private value) and then encoded by the contract.

    Parameters
    ----------
    path : str or Path
        A ``.parquet``/``.pq`` or ``.csv``/``.csv.gz`` file with a header.
    contract : Contract
        The declaration to apply.
    batch_size : int
        Maximum rows per yielded batch.
    open_categories : mapping of str to sequence of str, optional
        Released categories of text columns.

    Yields
    ------
    dict of str to ndarray of int64
        As :func:`discretize`, for each batch.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        yield from _parquet_batches(path, contract, batch_size, open_categories)
    elif name.endswith((".csv", ".csv.gz")):
        yield from _csv_batches(path, contract, batch_size, open_categories)
    else:
        raise ValueError(f"path {path.name!r}: expected a .parquet, .pq, .csv or .csv.gz file")


# --- readers -------------------------------------------------------------------------------


def _parquet_batches(path: Path, contract: Contract, batch_size: int,
                     open_categories: OpenCategories | None) -> Iterator[dict[str, np.ndarray]]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as reader:
        hidden = set(hidden_index_columns(path))
        _check_columns([n for n in reader.schema_arrow.names if n not in hidden], contract)
        for batch in reader.iter_batches(batch_size=batch_size,
                                         columns=list(contract.column_names)):
            yield discretize(batch, contract, open_categories=open_categories)


def _csv_batches(path: Path, contract: Contract, batch_size: int,
                 open_categories: OpenCategories | None) -> Iterator[dict[str, np.ndarray]]:
    import duckdb

    source = "read_csv($path, header = true, all_varchar = true)"
    con = duckdb.connect()
    try:
        with literal_file(path) as literal:
            header = con.sql(f"SELECT * FROM {source} LIMIT 0", params={"path": literal}).columns
            _check_columns(header, contract)
            selected = ", ".join('"' + c.replace('"', '""') + '"' for c in contract.column_names)
            relation = con.sql(f"SELECT {selected} FROM {source}", params={"path": literal})
            for batch in relation.to_arrow_reader(batch_size):
                yield discretize(batch, contract, open_categories=open_categories)
    finally:
        con.close()


# --- helpers -------------------------------------------------------------------------------


def _column_names(frame: Frame) -> list[str]:
    if isinstance(frame, pd.DataFrame):
        return [str(c) for c in frame.columns]
    if isinstance(frame, pa.Table | pa.RecordBatch):
        return list(frame.schema.names)
    raise TypeError(
        f"frame: expected a pandas DataFrame, pyarrow Table or RecordBatch, got "
        f"{type(frame).__name__}"
    )


def _check_columns(names: Sequence[str], contract: Contract) -> None:
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        raise DomainError(f"columns {dupes} appear more than once; expected unique column names")
    present = set(names)
    missing = [c for c in contract.column_names if c not in present]
    if missing:
        raise DomainError(
            f"missing columns {missing}; contract {contract.name!r} declares "
            f"{list(contract.column_names)}"
        )
    known = set(contract.column_names) | set(contract.drop)
    extra = [c for c in names if c not in known]
    if extra:
        raise DomainError(
            f"unexpected columns {extra}; declare them in contract {contract.name!r} or list "
            "them under drop"
        )


def _series(frame: Frame, name: str) -> pd.Series:
    if isinstance(frame, pd.DataFrame):
        return frame[name]
    return frame.column(name).to_pandas()


def _encode(spec: ColumnSpec, raw: pd.Series, labels: list[str], normalize: str
            ) -> np.ndarray:
    null = raw.isna().to_numpy(dtype=bool)
    if spec.type == "numeric":
        codes, outside, unparsable = _bin(spec, raw)
    else:
        codes = _match(spec, raw, labels, normalize)
        outside, unparsable = codes < 0, None
    outside &= ~null
    _apply_out_of_domain(spec, codes, outside, unparsable, labels)
    _apply_nulls(spec, codes, null, labels)
    return codes


def match_text(contract: Contract, column: str, raw: pd.Series) -> np.ndarray:
    """Codes of raw text values of a categorical column, ``-1`` where no category or alias
    matches (the encoder's rule, before any ``out_of_domain``/``nulls`` policy)."""
    spec = contract.column(column)
    return _match(spec, raw, contract.labels(column), contract.normalization(column))


def as_text(raw: pd.Series) -> np.ndarray:
    """The text the encoder matches for each raw value (``None`` for nulls)."""
    return _as_text(raw)


def _match(spec: ColumnSpec, raw: pd.Series, labels: list[str], normalize: str = "none"
           ) -> np.ndarray:
    """Codes of text values against labels and aliases; -1 where nothing matches."""
    keys = list(labels) + list(spec.aliases)
    targets = np.array([*range(len(labels)), *(labels.index(t) for t in spec.aliases.values())],
                       dtype=np.int64)
    # Match each distinct raw value once (a column holds few), then spread to the rows.
    inverse, uniques = pd.factorize(raw, use_na_sentinel=True)
    text = normalize_text(_as_text(pd.Series(uniques)), normalize)
    index = pd.Index(keys, dtype=object).get_indexer(text)
    per_unique = np.where(index >= 0, targets[np.maximum(index, 0)], -1).astype(np.int64)
    if not per_unique.size:  # an all-null column: its nulls policy decides (issue 10.10)
        return np.full(len(raw), -1, dtype=np.int64)
    return np.where(inverse >= 0, per_unique[np.maximum(inverse, 0)], -1).astype(np.int64)


def _as_text(raw: pd.Series) -> np.ndarray:
    """Canonical text of each value (see the module docstring); nulls become None."""
    null = raw.isna().to_numpy(dtype=bool)
    dtype = raw.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype):
        text = raw.astype(object).astype(str).to_numpy(dtype=object, copy=True)
    elif pd.api.types.is_float_dtype(dtype):
        values = raw.to_numpy(dtype=np.float64, na_value=np.nan)
        text = values.astype(str).astype(object)
        # Whole floats are matched as integers, so a 0/1 column that gained a NaN (and hence
        # a float dtype) still matches categories "0" and "1".
        whole = np.isfinite(values) & (values == np.trunc(values)) & (np.abs(values) < 2**53)
        text[whole] = values[whole].astype(np.int64).astype(str).astype(object)
    else:
        text = raw.astype(object).to_numpy(dtype=object, copy=True)
        if not isinstance(dtype, pd.StringDtype):
            # object or categorical columns may hold ints or other scalars next to strings.
            not_str = np.fromiter((not isinstance(v, str) for v in text), dtype=bool,
                                  count=text.size)
            if not_str.any():
                text[not_str] = [str(v) for v in text[not_str]]
    text[null] = None
    return text


def _bin(spec: ColumnSpec, raw: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin codes of a numeric column, the out-of-range mask and the not-a-number mask."""
    if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        values = raw.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    unparsable = np.isnan(values) & ~raw.isna().to_numpy(dtype=bool)
    lower, upper = spec.bounds
    with np.errstate(invalid="ignore"):
        inside = (values >= lower) & (values <= upper)
        if spec.integer:
            inside &= values == np.trunc(values)
    codes = _bin_codes(spec.edges, np.clip(values, lower, upper))
    return codes, ~inside, unparsable


def _bin_codes(edges: Sequence[float], values: np.ndarray) -> np.ndarray:
    # Bins are [e_i, e_{i+1}) with the last one closed; side="right" finds the last edge <= x,
    # and the top edge itself is folded into the last bin. NaN sorts past the end; it is
    # masked by the caller.
    k = len(edges) - 1
    codes = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right") - 1
    return np.clip(codes, 0, k - 1).astype(np.int64)


def _apply_out_of_domain(spec: ColumnSpec, codes: np.ndarray, outside: np.ndarray,
                         unparsable: np.ndarray | None, labels: list[str]) -> None:
    if not outside.any():
        return
    policy = spec.out_of_domain_policy
    if policy.kind == "other":
        codes[outside] = labels.index(str(policy.category))
        return
    if policy.kind == "clamp":
        # Numbers were clipped to [lower, upper] before binning, so their code is already the
        # nearest bin; only text that is not a number has no nearest bin.
        if unparsable is not None and unparsable.any():
            raise DomainError(
                f"column {spec.name!r}: holds values that are not numbers, which "
                "out_of_domain: clamp cannot place; expected numbers or numeric text"
            )
        return
    if spec.type == "numeric":
        what = _range_text(spec)
    elif spec.type == "text":
        what = "the released categories"
    else:
        what = "the declared categories (or aliases)"
    raise DomainError(
        f"column {spec.name!r}: holds values outside {what} and its out_of_domain policy is "
        "refuse; declare them, or use other:<category>"
        + (" or clamp" if spec.type == "numeric" else "")
    )


def _range_text(spec: ColumnSpec) -> str:
    lower, upper = spec.bounds
    kind = "whole numbers" if spec.integer else "numbers"
    return f"the declared range ({kind} in [{lower:g}, {upper:g}])"


def _apply_nulls(spec: ColumnSpec, codes: np.ndarray, null: np.ndarray,
                 labels: list[str]) -> None:
    if not null.any():
        return
    policy = spec.null_policy
    if policy.kind == "refuse":
        raise DomainError(
            f"column {spec.name!r}: holds nulls and its nulls policy is refuse; expected no "
            "nulls, or nulls: as:<category>"
        )
    codes[null] = labels.index(str(policy.category))


def source_sql(path: Path) -> str:
    """DuckDB's reader of a CSV (every column as text) or Parquet file."""
    literal = "'" + str(path).replace("'", "''") + "'"
    if path.suffix.lower() == ".csv":
        # Everything as text: types are decided by the contract, not sniffed from the data.
        return f"read_csv({literal}, header=true, all_varchar=true)"
    return f"read_parquet({literal})"
