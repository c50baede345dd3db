"""Raw values -> integer codes (and back), exactly as the data contract declares.

This module is long on purpose: encoding and decoding must stay mirror images of each other.

Nothing here looks at the private data to decide a domain: categories, aliases and bin edges
all come from the :class:`~privfair.contracts.schema.Contract`. Values the contract does not cover
get the column's ``out_of_domain`` policy, nulls its ``nulls`` policy, and no value ever raises
(issue 21.2): every row is encoded (in the domain, clamped, or mapped to the declared
``other``/null category) or dropped. What the policies did is tallied per column and action
(:class:`PolicyTally`, private: a release publishes it only through a noisy count, see
:func:`policy_cells`). Errors name columns (missing, extra, wrong type: public facts of the
file's schema), never a value or a count from the data.

Matching rules
--------------
* Categorical and text columns are matched on text. String columns are used as they are, or
  with leading/trailing whitespace removed under ``normalize: strip`` (:func:`normalize_text`,
  the one rule that CatHist's counts and the loader apply too; no case folding: declare an
  alias instead); integer columns by their decimal text
  (``1`` -> ``"1"``); float columns likewise when the value is whole (``1.0`` -> ``"1"``).
  Aliases are applied first.
* Numeric columns must hold numbers or numeric text; text that does not parse, infinities
  and fractions in an ``integer`` column are out of domain (``clamp`` moves numbers to the
  nearest bin and drops text that is not a number). See :mod:`privfair.contracts.schema` for the bin convention.
* A null is ``None``, ``NaN``, ``NaT`` or ``pd.NA``; an empty string is a value, not a null.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privfair.contracts.csv_source import (
    UNPARSED_CELL,
    CsvSource,
    csv_header,
    valid_text_columns,
)
from privfair.contracts.schema import STRIP_CHARS, ColumnSpec, Contract, OpenCategories, nfc
from privfair.core.errors import DomainError, ReleaseInputError

__all__ = ["ACTIONS", "Encoded", "PolicyTally", "as_text", "check_source_schema",
           "decode", "discretize", "encode", "hidden_index_columns", "iter_discretized_batches",
           "literal_file", "match_text", "normalize_text", "policy_cells",
           "policy_sensitivity"]

#: What a column's policy can do to a row: drop it, clamp its number to the nearest bin, or
#: map its value to a declared category (``other:<category>``, ``as:<category>``).
ACTIONS = ("dropped", "clamped", "mapped")
_ACTION = {"drop": "dropped", "clamp": "clamped", "other": "mapped", "as": "mapped"}


def policy_cells(contract: Contract) -> list[tuple[str, str]]:
    """The ``(column, action)`` cells a row can fall into, from the contract alone (public).

    A numeric column under ``clamp`` can also drop a row (text that is not a number). The
    last cell, :data:`~privfair.contracts.csv_source.UNPARSED_CELL`, counts the records a CSV
    reader dropped because they do not parse (always 0 for Parquet).
    """
    cells: list[tuple[str, str]] = []
    for spec in contract.columns:
        actions = {_ACTION[spec.out_of_domain_policy.kind], _ACTION[spec.null_policy.kind]}
        if spec.type == "numeric" and spec.out_of_domain_policy.kind == "clamp":
            actions.add("dropped")
        cells += [(spec.name, a) for a in ACTIONS if a in actions]
    return [*cells, UNPARSED_CELL]


def policy_sensitivity(contract: Contract) -> float:
    """L2 sensitivity of the vector of :func:`policy_cells` counts under add/remove one row.

    In each column a row is in the domain, null or out of the domain, so it adds 1 to at most
    one cell per column; a record that does not parse adds 1 to the unparsed cell alone. So
    sqrt(number of columns with a cell), and at least 1.
    """
    columns = {column for column, _ in policy_cells(contract)} - {UNPARSED_CELL[0]}
    return math.sqrt(max(1, len(columns)))


@dataclass
class PolicyTally:
    """Exact numbers of rows each column's policy touched: private, never published as is.

    ``counts[(column, action)]``, ``action`` in :data:`ACTIONS`. A row counts in every column
    that touched it, dropped or not.
    """

    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, column: str, action: str, rows: int) -> None:
        if rows:
            key = (column, action)
            self.counts[key] = self.counts.get(key, 0) + int(rows)

    def update(self, other: PolicyTally) -> None:
        for (column, action), rows in other.counts.items():
            self.add(column, action, rows)

    def vector(self, cells: Sequence[tuple[str, str]]) -> np.ndarray:
        """The counts in the order of ``cells`` (:func:`policy_cells`), as int64."""
        unknown = set(self.counts) - set(cells)
        if unknown:  # pragma: no cover - the encoder only counts declared cells
            raise ValueError(f"policy counts outside the declared cells: {sorted(unknown)}")
        return np.array([self.counts.get(c, 0) for c in cells], dtype=np.int64)

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (column, action), rows in self.counts.items():
            out.setdefault(column, {})[action] = rows
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> PolicyTally:
        tally = cls()
        for column, actions in data.items():
            for action, rows in actions.items():
                tally.add(column, action, int(rows))
        return tally


@dataclass
class Encoded:
    """Codes of the kept rows, which input rows were kept, and the (private) tally."""

    codes: dict[str, np.ndarray]
    keep: np.ndarray
    tally: PolicyTally

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
    # The owner's pid in the name: `store check` removes the folders of dead processes.
    with tempfile.TemporaryDirectory(prefix=f"privfair-src-{os.getpid()}-") as tmp:
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
    tally: PolicyTally | None = None,
) -> dict[str, np.ndarray]:
    """Encode every declared column of ``frame`` as int64 codes, applying the policies.

    Rows a policy drops are left out, so the arrays may be shorter than ``frame``; callers
    that encode several column subsets of one frame and align them row by row must filter
    the frame once first with :func:`encode` (``frame[encode(frame, contract).keep]``).

    Parameters
    ----------
    frame : pandas.DataFrame, pyarrow.Table or pyarrow.RecordBatch
        Raw data: the declared columns, optionally the contract's ``drop`` columns (ignored),
        nothing else.
    contract : Contract
        The declaration to apply.
    open_categories : mapping of str to sequence of str, optional
        Released categories of text columns (see :meth:`Contract.labels`).
    tally : PolicyTally, optional
        Receives the numbers of rows each policy touched (private).

    Returns
    -------
    dict of str to ndarray of int64
        One array of codes per declared column, in declared order, for the rows kept; code
        ``i`` means ``contract.labels(column)[i]``.

    Raises
    ------
    DomainError
        If declared columns are missing or undeclared columns are present (never for a
        value: values get their column's policy).
    """
    encoded = encode(frame, contract, open_categories=open_categories)
    if tally is not None:
        tally.update(encoded.tally)
    return encoded.codes


def encode(
    frame: Frame,
    contract: Contract,
    *,
    open_categories: OpenCategories | None = None,
) -> Encoded:
    """:func:`discretize` with the mask of kept rows and the tally of touched rows."""
    _check_columns(_column_names(frame), contract)
    n = len(frame) if isinstance(frame, pd.DataFrame) else frame.num_rows
    keep = np.ones(n, dtype=bool)
    tally = PolicyTally()
    codes: dict[str, np.ndarray] = {}
    for spec in contract.columns:
        labels = contract.labels(spec.name, open_categories=open_categories)
        column = None if isinstance(frame, pd.DataFrame) else frame.column(spec.name)
        if column is not None and _arrow_direct(spec, column.type):
            codes[spec.name], touched = _encode_arrow(spec, column, labels,
                                                      contract.normalization(spec.name))
        else:
            codes[spec.name], touched = _encode(spec, _series(frame, spec.name), labels,
                                                contract.normalization(spec.name))
        for action, mask in touched.items():
            tally.add(spec.name, action, int(mask.sum()))
        keep &= ~touched["dropped"]
    if not keep.all():
        codes = {name: column[keep] for name, column in codes.items()}
    return Encoded(codes, keep, tally)


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
    out: dict[str, pd.Categorical[str]] = {}
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
    tally: PolicyTally | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """Stream a Parquet or CSV file and yield its codes batch by batch.

    Only one batch is held in memory at a time, so a file larger than memory works. Parquet
    is read with pyarrow (text that is not UTF-8 read as one value out of the domain); CSV
    record by record in the contract's dialect (:mod:`privfair.contracts.csv_source`), every
    field read as text and then encoded by the contract; a record that does not parse is
    counted in the tally's unparsed cell.

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
    tally : PolicyTally, optional
        Receives the numbers of rows each policy touched (private).

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
        yield from _parquet_batches(path, contract, batch_size, open_categories, tally)
    elif name.endswith((".csv", ".csv.gz")):
        yield from _csv_batches(path, contract, batch_size, open_categories, tally)
    else:
        raise ValueError(f"path {path.name!r}: expected a .parquet, .pq, .csv or .csv.gz file")


# --- readers -------------------------------------------------------------------------------


def _parquet_batches(path: Path, contract: Contract, batch_size: int,
                     open_categories: OpenCategories | None, tally: PolicyTally | None
                     ) -> Iterator[dict[str, np.ndarray]]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as reader:
        hidden = set(hidden_index_columns(path))
        _check_columns([n for n in reader.schema_arrow.names if n not in hidden], contract)
        for batch in reader.iter_batches(batch_size=batch_size,
                                         columns=list(contract.column_names)):
            yield discretize(valid_text_columns(batch), contract,
                             open_categories=open_categories, tally=tally)


def _csv_batches(path: Path, contract: Contract, batch_size: int,
                 open_categories: OpenCategories | None, tally: PolicyTally | None
                 ) -> Iterator[dict[str, np.ndarray]]:
    source = CsvSource.open(path, contract.csv_dialect)
    _check_columns(source.header, contract)
    text = [spec.type != "numeric" for spec in contract.columns]
    for batch in source.batches(contract.column_names, batch_rows=batch_size):
        # text as dictionaries: the encoder matches each distinct value once
        batch = pa.RecordBatch.from_arrays(
            [pc.dictionary_encode(column) if is_text else column
             for column, is_text in zip(batch.columns, text, strict=True)],
            names=batch.schema.names)
        yield discretize(batch, contract, open_categories=open_categories, tally=tally)
    if tally is not None:
        tally.add(*UNPARSED_CELL, source.unparsed)


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
            ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Codes of one column and the rows its policies dropped, clamped and mapped."""
    null = raw.isna().to_numpy(dtype=bool)
    if spec.type == "numeric":
        codes, outside, unparsable = _bin(spec, raw)
    else:
        codes = _match(spec, raw, labels, normalize)
        outside, unparsable = codes < 0, np.zeros(len(codes), dtype=bool)
    return _apply_policies(spec, labels, codes, outside, unparsable, null)


def _arrow_direct(spec: ColumnSpec, dtype: pa.DataType) -> bool:
    """Whether :func:`_encode_arrow` reads this Arrow column (else it goes through pandas)."""
    if spec.type == "numeric":
        return pa.types.is_floating(dtype)
    return pa.types.is_dictionary(dtype) and (pa.types.is_string(dtype.value_type)
                                              or pa.types.is_large_string(dtype.value_type))


def _encode_arrow(spec: ColumnSpec, column: pa.ChunkedArray | pa.Array, labels: list[str],
                  normalize: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """:func:`_encode` of a float or dictionary-of-text Arrow column, on its buffers: one
    ``searchsorted`` for numbers; text matched once per dictionary entry and spread to the
    rows through the indices (the same codes, masks and policies as the pandas path)."""
    if isinstance(column, pa.ChunkedArray):
        column = (column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
    if spec.type == "numeric":
        values = column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        null = np.isnan(values)  # null or NaN: both missing, as pandas reads them
        codes, outside = _bin_values(spec, values)
        return _apply_policies(spec, labels, codes, outside, np.zeros(len(codes), dtype=bool),
                               null)
    if isinstance(column, pa.ChunkedArray):  # an empty column: no chunk to combine
        column = pa.array([], pa.dictionary(pa.int32(), pa.string()))
    if not isinstance(column, pa.DictionaryArray):  # _arrow_direct: a dictionary of text
        raise TypeError(f"column {spec.name!r}: expected a dictionary-encoded text column")
    entries = pd.Series(column.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    per_entry = _match(spec, entries, labels, normalize)
    null = column.is_null().to_numpy(zero_copy_only=False)
    indices = column.indices.fill_null(0).to_numpy(zero_copy_only=False)
    codes = (per_entry[indices] if per_entry.size else np.full(len(indices), -1, np.int64))
    codes = np.where(null, -1, codes).astype(np.int64)
    return _apply_policies(spec, labels, codes, codes < 0, np.zeros(len(codes), dtype=bool),
                           null)


def _apply_policies(spec: ColumnSpec, labels: list[str], codes: np.ndarray,
                    outside: np.ndarray, unparsable: np.ndarray, null: np.ndarray
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The column's ``out_of_domain`` and ``nulls`` policies on its raw codes and masks."""
    outside &= ~null
    unparsable &= outside
    touched = {action: np.zeros(len(codes), dtype=bool) for action in ACTIONS}
    ood, nulls = spec.out_of_domain_policy, spec.null_policy
    if ood.kind == "other":
        codes[outside] = labels.index(str(ood.category))
        touched["mapped"] |= outside
    elif ood.kind == "clamp":
        # Numbers were clipped to [lower, upper] before binning, so their code is already the
        # nearest bin; text that is not a number has no nearest bin and is dropped.
        touched["clamped"] |= outside & ~unparsable
        touched["dropped"] |= unparsable
    else:
        touched["dropped"] |= outside
    if nulls.kind == "as":
        codes[null] = labels.index(str(nulls.category))
        touched["mapped"] |= null
    else:
        touched["dropped"] |= null
    codes[touched["dropped"]] = 0  # left out by the caller
    return codes, touched


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
    """Codes of text values against labels and aliases; -1 where nothing matches. Labels,
    aliases and values are compared in Unicode normal form C (issue 45.4: ``"é"`` written
    composed or decomposed is one category)."""
    code_of: dict[str, int] = {}
    for code, label in enumerate(labels):
        code_of.setdefault(nfc(label), code)
    for alias, target in spec.aliases.items():
        code_of.setdefault(nfc(alias), code_of[nfc(target)])
    keys = list(code_of)
    targets = np.fromiter(code_of.values(), dtype=np.int64, count=len(code_of))
    # Match each distinct raw value once (a column holds few), then spread to the rows.
    inverse, uniques = pd.factorize(raw, use_na_sentinel=True)
    text = normalize_text(_as_text(pd.Series(uniques)), normalize)
    text = np.array([nfc(v) if isinstance(v, str) and not v.isascii() else v for v in text],
                    dtype=object)
    index = pd.Index(keys, dtype=object).get_indexer(pd.Index(text))
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
    else:  # text (a CSV's numbers, staged as read), categorical text, booleans, objects
        values = pd.to_numeric(raw.astype(object), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan)
    unparsable = np.isnan(values) & ~raw.isna().to_numpy(dtype=bool)
    codes, outside = _bin_values(spec, values)
    return codes, outside, unparsable


def _bin_values(spec: ColumnSpec, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin codes of float64 values (clipped to the bounds) and the out-of-range mask."""
    lower, upper = spec.bounds
    with np.errstate(invalid="ignore"):
        inside = (values >= lower) & (values <= upper)
        if spec.integer:
            inside &= values == np.trunc(values)
    edges = spec.edges
    if len(edges) <= _COUNTED_EDGES and lower <= upper:
        return _counted_bin_codes(edges, lower, upper, values), ~inside
    return _bin_codes(edges, np.clip(values, lower, upper)), ~inside


def _bin_codes(edges: Sequence[float], values: np.ndarray) -> np.ndarray:
    # Bins are [e_i, e_{i+1}) with the last one closed; side="right" finds the last edge <= x,
    # and the top edge itself is folded into the last bin. NaN sorts past the end; it is
    # masked by the caller.
    k = len(edges) - 1
    codes = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right") - 1
    return np.clip(codes, 0, k - 1).astype(np.int64)


#: Up to this many edges, :func:`_bin_values` counts the edges at or below each value (one
#: vectorised comparison per edge) instead of a binary search per value: the same codes,
#: about ten times faster for a handful of edges (a binary search mispredicts its branches
#: on unsorted values).
_COUNTED_EDGES = 32


def _counted_bin_codes(edges: Sequence[float], lower: float, upper: float,
                       values: np.ndarray) -> np.ndarray:
    """``_bin_codes(edges, np.clip(values, lower, upper))`` (``lower <= upper``), without
    the clip or the binary search.

    With ``f(x)`` the number of edges ``<= x`` (``searchsorted(..., side="right")``), which
    never decreases in ``x``, ``f(clip(x, lower, upper)) = clip(f(x), f(lower), f(upper))``
    for every value that is not NaN; NaN (which the binary search sorts past every edge)
    gets the last bin, as there.
    """
    k = len(edges) - 1
    edge_values = np.asarray(edges, dtype=np.float64)
    count: npt.NDArray[np.integer] = np.zeros(
        len(values), dtype=np.uint8 if len(edges) < 255 else np.int64)
    with np.errstate(invalid="ignore"):
        for edge in edge_values:
            count += values >= edge  # NaN compares False: counted 0, fixed below
    # codes + 1 = clip(clip(count, f(lower), f(upper)), 1, k): one clip to the intersection,
    # or to the end the two intervals meet at when they do not overlap
    low = min(max(int(np.count_nonzero(edge_values <= lower)), 1), k)
    high = max(min(int(np.count_nonzero(edge_values <= upper)), k), 1)
    codes = np.clip(count, low, high).astype(np.int64)
    codes -= 1
    nan = np.isnan(values)
    if nan.any():
        codes[nan] = k - 1
    return codes


def source_sql(path: Path) -> str:
    """DuckDB's reader of a Parquet file (a CSV file is read by
    :class:`~privfair.contracts.csv_source.CsvSource`, never by DuckDB's sniffer)."""
    literal = "'" + str(path).replace("'", "''") + "'"
    return f"read_parquet({literal})"


# --- the file's schema: public facts, checked before a release reserves its budget ----------

_TEXT_KINDS = "text, integers, floats or booleans"


def _arrow_kind_ok(spec: ColumnSpec, dtype: pa.DataType) -> bool:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_null(dtype):  # an all-null column: its nulls policy decides
        return True
    if spec.type == "numeric":
        return (pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
                or pa.types.is_decimal(dtype))
    return (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
            or getattr(pa.types, "is_string_view", lambda _: False)(dtype)
            or pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
            or pa.types.is_boolean(dtype))


def _type_name(dtype: pa.DataType) -> str:
    """A Parquet column type as people read it: ``text (large_string)``, ``date32[day]``."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return f"text ({dtype})"
    return str(dtype)


def check_source_schema(path: str | Path, contract: Contract) -> dict[str, str]:
    """Refuse a data file whose schema does not fit the contract, from public facts only.

    Reads the column names (a CSV's header line; a Parquet file's schema, without its
    pandas index columns) and, for Parquet, the column types; never a row. Refuses, naming
    the column: a name listed twice, a missing declared column, an undeclared column (not
    under ``drop``), a Parquet type that cannot hold the column (a numeric column needs
    numbers; a categorical or text column text, integers, floats or booleans), and a CSV
    header line that does not parse in the contract's dialect (it ends in ``\\r\\n`` where
    the dialect says ``\\n``, say). A release calls this before it reserves its budget;
    values and records are then the policies' business.

    Returns
    -------
    dict of str to str
        The type of each declared column (``"text"`` for every CSV column).

    Raises
    ------
    ReleaseInputError
        One line naming the column and the problem.
    """
    path = Path(path)
    csv_file = path.name.lower().endswith((".csv", ".csv.gz"))
    if csv_file:
        # the header line in the contract's dialect: refused, naming why, if it does not parse
        names = csv_header(path, contract.csv_dialect)
        types: Mapping[str, pa.DataType | None] = dict.fromkeys(names)
    else:
        names, types = _parquet_columns(path, f"data file {path}")
    return _check_schema(f"data file {path}", names, types, contract)


def _parquet_columns(path: Path, where: str) -> tuple[list[str], dict[str, pa.DataType]]:
    """A Parquet file's column names and types from its footer, without pandas' index."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise ReleaseInputError(f"{where} cannot be read as Parquet "
                                f"({type(exc).__name__})") from None
    hidden = set(hidden_index_columns(path))
    return ([n for n in schema.names if n not in hidden],
            {f.name: f.type for f in schema if f.name not in hidden})


def _check_schema(where: str, names: Sequence[str], types: Mapping[str, pa.DataType | None],
                  contract: Contract) -> dict[str, str]:
    """:func:`check_source_schema`'s refusals over column ``names`` and their Arrow
    ``types`` (None: a CSV column, text)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ReleaseInputError(f"{where}: duplicate column name {name!r}; "
                                    "expected each column once")
        seen.add(name)
    declared = list(contract.column_names)
    missing = [c for c in declared if c not in seen]
    if missing:
        raise ReleaseInputError(f"{where}: missing column(s) {missing} declared by "
                                f"contract {contract.name!r}")
    extra = [c for c in names if c not in declared and c not in contract.drop]
    if extra:
        raise ReleaseInputError(
            f"{where}: unexpected column(s) {extra} not declared by contract "
            f"{contract.name!r} (declare them or list them under 'drop')")
    if all(types[name] is None for name in declared):  # a CSV file: every column is text
        return dict.fromkeys(declared, "text")
    for spec in contract.columns:
        dtype = types[spec.name]
        if dtype is None:  # a CSV column (text) among Parquet ones: never, both are whole files
            continue
        if not _arrow_kind_ok(spec, dtype):
            expected = "numbers" if spec.type == "numeric" else _TEXT_KINDS
            raise ReleaseInputError(
                f"{where}: column {spec.name!r} has type {_type_name(dtype)} but "
                f"contract "
                f"{contract.name!r} declares it {spec.type} (expected {expected})")
    return {name: str(types[name]) for name in declared}


def dataset_files(folder: str | Path) -> tuple[list[tuple[Path, dict[str, str | None]]],
                                                 pa.Schema]:
    """The files of a Parquet dataset (a folder, optionally hive-partitioned:
    ``year=2024/part-0.parquet``), in path order, each with its partition values as written
    in the folder names (``None`` for Hive's default partition), and the partition columns'
    Arrow types as ``pyarrow.dataset`` infers them from the folder names (public facts: file
    names and footers, never a row)."""
    import pyarrow.dataset as ds

    folder = Path(folder).resolve()
    try:
        dataset = ds.dataset(folder, format="parquet", partitioning="hive")
    except (pa.ArrowException, OSError) as exc:
        raise ReleaseInputError(f"data folder {folder} cannot be read as a Parquet dataset "
                                f"({type(exc).__name__})") from None
    files = []
    for name in sorted(dataset.files):
        keys: dict[str, str | None] = {}
        for piece in Path(name).relative_to(folder).parts[:-1]:
            key, sep, value = piece.partition("=")
            if sep:
                value = unquote(value)
                keys[key] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
        files.append((Path(name), keys))
    if not files:
        raise ReleaseInputError(f"data folder {folder} holds no Parquet files")
    # Only the keys of the folder names: a flat folder's partitioning reports its files'
    # columns as its schema.
    named = {key for _, keys in files for key in keys}
    inferred = dataset.partitioning.schema if dataset.partitioning is not None else None
    schema = pa.schema([inferred.field(k) if inferred is not None and k in inferred.names
                        else pa.field(k, pa.string()) for k in sorted(named)])
    return files, schema


def check_dataset_schema(folder: str | Path, contract: Contract) -> dict[str, str]:
    """:func:`check_source_schema` for a Parquet dataset: every file's schema (its footer)
    plus the partition columns of its folder names must fit the contract."""
    folder = Path(folder).resolve()
    files, partitions = dataset_files(folder)
    types: dict[str, str] = {}
    for path, _ in files:
        where = f"data folder {folder} (file {path.relative_to(folder)})"
        names, kinds = _parquet_columns(path, where)
        kinds.update({f.name: f.type for f in partitions})
        types = _check_schema(where, [*names, *partitions.names], kinds, contract)
    return types
