"""CSV files read record by record, in the dialect the contract declares, never sniffed.

The unit of privacy of a CSV source is the record as the contract's dialect delimits it
(:class:`~privfair.contracts.schema.DialectSpec`; by default RFC 4180 with ``\\n`` line
ends): one line, or with ``multiline`` the lines from one that leaves a quote open to the
one that closes it, when they come within ``max_record_bytes`` and parse as one row
(:func:`_quote_records`). The first line is the header: the file's schema, a public fact
checked before a release reserves its budget (:func:`csv_header`). Every other record
stands alone: a record that does not parse as exactly one row of the header's fields is
dropped and counted in :data:`UNPARSED_CELL` of the policy tally, which a release
publishes only as a noisy count. A record does not parse when it has a field too many or
too few, a quote that is not around a whole field (RFC 4180: a field is quoted whole, a
quote inside it doubled), a quote left open, a line break that its dialect does not allow
(a ``\\r`` in a ``\\n`` file, say), or more than ``max_record_bytes`` bytes (by default
4096 per field of the header). So no record changes how another one reads (no shared
sniffing, no quote that swallows the rest of the file; the one multiline case is below),
and once the budget is reserved a malformed record never stops the run nor changes its
message (issue 21.2, privacy rule 4).

A ``multiline`` quote left open used to run to ``max_record_bytes`` (1 MiB then) and
swallow every line it reached into one dropped record: one line ``M,"A,HS,30,low`` took
half of a 400-row file with it (issue 41.4). Now a quote that does not close within the
bound, or whose lines do not parse as one row, costs its own line alone. What a multiline
dialect cannot rule out is an added line that leaves a quote open *and* joins the lines
after it into one well-formed row: that needs the next line with an odd number of quotes
to close a field (``...",x``), within ``max_record_bytes``; in a file whose quoted line
breaks are well formed, that next line opens a field instead (``x,"...``) and the join
does not parse. The default dialect has no such case: one line, one record.

Values are text; an empty field is a null. A value whose bytes are not UTF-8 reads as the
one value :data:`NOT_TEXT` (U+FFFD), which no declared category matches, so the column's
``out_of_domain`` policy decides (:func:`valid_text` does the same for Parquet text).

Speed: the bytes are read in blocks; the records of a block are split and checked with
numpy (line ends, quotes, lengths) and the well-formed ones parsed in bulk by pyarrow's CSV
reader, whose rows are checked to be exactly those records (a record that pyarrow would
read otherwise is parsed alone and dropped).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from privfair.contracts.schema import DEFAULT_DIALECT, DialectSpec
from privfair.core.errors import ReleaseInputError

__all__ = ["NOT_TEXT", "UNPARSED_CELL", "CsvSource", "csv_header", "is_csv",
           "read_csv_table", "read_csv_text", "valid_text", "valid_text_columns"]

#: The policy-tally cell of the records the dialect could not parse (each dropped).
UNPARSED_CELL = ("(unparsed record)", "dropped")

#: What a text value whose bytes are not UTF-8 reads as: one value, out of every declared
#: domain unless a contract declares it.
NOT_TEXT = "\ufffd"

#: The bound on the header line's bytes when the dialect declares none.
HEADER_BYTES = 1 << 20

#: Bytes read from the file at a time (a block's records are parsed together).
BLOCK_BYTES = 8 << 20

_UTF8_BOM = b"\xef\xbb\xbf"


def is_csv(path: str | Path) -> bool:
    """Whether ``path`` names a CSV file (``.csv`` or ``.csv.gz``), from its name alone."""
    return Path(path).name.lower().endswith((".csv", ".csv.gz"))


def _open(path: Path) -> BinaryIO:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


# --- text that is not UTF-8 -------------------------------------------------------------------


def valid_text(column: Any) -> Any:
    """``column`` (an Arrow array or chunked array) with every text value whose bytes are not
    UTF-8 replaced by :data:`NOT_TEXT`; columns of other types as they are.

    Arrow does not check the text of a Parquet file (nor of a CSV read here), and Python
    refuses it when a value becomes a ``str``: unchecked, one such value stops a run.
    """
    if isinstance(column, pa.ChunkedArray):
        chunks = [valid_text(chunk) for chunk in column.chunks]
        if all(new is old for new, old in zip(chunks, column.chunks, strict=True)):
            return column
        return pa.chunked_array(chunks, type=column.type)
    if pa.types.is_dictionary(column.type):
        dictionary = valid_text(column.dictionary)
        if dictionary is column.dictionary:
            return column
        return pa.DictionaryArray.from_arrays(column.indices, dictionary)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    try:
        column.validate(full=True)
        return column
    except pa.ArrowInvalid:
        pass
    raw = column.view(pa.large_binary() if pa.types.is_large_string(column.type)
                      else pa.binary())
    return pa.array([None if value is None else _decoded(value) for value in raw.to_pylist()],
                    type=column.type)


def _decoded(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_TEXT


def valid_text_columns(data: Any) -> Any:
    """An Arrow table or record batch with :func:`valid_text` applied to every column."""
    columns = [valid_text(column) for column in data.columns]
    if all(new is old for new, old in zip(columns, data.columns, strict=True)):
        return data
    kind = pa.Table if isinstance(data, pa.Table) else pa.RecordBatch
    return kind.from_arrays(columns, names=data.schema.names)


# --- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bytes:
    """The terminator byte, the other line-break byte and the quote, delimiter bytes."""

    end: int
    other: int
    crlf: bool
    quote: int
    delimiter: int

    @classmethod
    def of(cls, dialect: DialectSpec) -> _Bytes:
        end = ord(dialect.line_terminator[-1])
        return cls(end=end, other=ord("\r") if end == ord("\n") else ord("\n"),
                   crlf=dialect.line_terminator == "\r\n", quote=ord(dialect.quote),
                   delimiter=ord(dialect.delimiter))


@dataclass
class _Records:
    """The records of a buffer: ``[start, stop)`` each (``stop`` at its terminator byte or
    the buffer's end), where its content ends (before a CRLF's ``\\r``), and which are
    malformed."""

    start: np.ndarray
    stop: np.ndarray
    content: np.ndarray
    bad: np.ndarray

    @property
    def empty(self) -> np.ndarray:
        return (self.content == self.start) & ~self.bad


def _line_records(data: np.ndarray, ends: np.ndarray, b: _Bytes, final: bool) -> _Records:
    """One record per line: ``ends`` the terminator bytes' positions; with ``final`` the
    bytes after the last one are a record too."""
    stop = ends if not final or (ends.size and ends[-1] == data.size - 1) or not data.size \
        else np.append(ends, data.size)
    start = np.empty_like(stop)
    if stop.size:
        start[0] = 0
        start[1:] = stop[:-1] + 1
    content = stop.copy()
    bad = np.zeros(stop.size, dtype=bool)
    if b.crlf:
        ended = stop < data.size  # a record cut by the end of the file needs no "\r"
        before = np.maximum(stop - 1, 0)
        has_cr = (stop > start) & (data[before] == ord("\r"))
        content[has_cr] -= 1
        # "\n" without its "\r": a stray line break (the empty ones too)
        bad |= ended & ~has_cr
    return _Records(start, stop, content, bad)


def _quote_records(data: np.ndarray, b: _Bytes, final: bool, limit: int, *,
                   fields: int | None = None, check: bool = True) -> tuple[_Records, int]:
    """Records of a ``multiline`` dialect. A line whose quotes are balanced is a record. A
    line that leaves a quote open (an odd number of quotes) runs on to the first line that
    closes it; those lines are one record if the closing terminator comes within ``limit``
    bytes of the record's start and (with ``check``) they parse as one row of ``fields``
    fields (:func:`_check_records`). Otherwise the opening line alone is one record, marked
    malformed, and the next line starts the next record: a quote left open costs its own
    line, never the well-formed lines after it (issue 41.4). Only the lines that leave a
    quote open are visited in Python. Returns the records and the bytes they span (the rest
    waits for more input unless ``final``)."""
    stop = np.flatnonzero(data == b.end)
    if final and data.size and (not stop.size or stop[-1] != data.size - 1):
        stop = np.append(stop, data.size)  # the last line, cut by the end of the file
    start = np.zeros_like(stop)
    start[1:] = stop[:-1] + 1
    quotes = np.zeros(data.size + 1, dtype=np.int64)
    np.cumsum(data == b.quote, out=quotes[1:])
    odd = np.flatnonzero((quotes[stop] - quotes[start]) % 2)
    # closes[k]: the lines from odd line k to odd line k + 1 are one record
    first, last = start[odd[:-1]], stop[odd[1:]]
    closes = last - first <= limit
    if check:  # spans k and k + 2 are disjoint: each half is checked in one pass
        for half in (slice(0, None, 2), slice(1, None, 2)):
            closes[half] &= _spans_parse(data, first[half], last[half], b, limit=limit,
                                         fields=fields)
    opening, closing = odd.tolist(), closes.tolist()
    lines = stop.size
    joined = np.zeros(lines, dtype=bool)  # the line's record goes on to the next line
    cut = np.zeros(lines, dtype=bool)  # an opening line alone: its quote never closed
    k = 0
    while k < len(opening):
        line = opening[k]
        if k + 1 < len(opening):
            if closing[k]:
                joined[line:opening[k + 1]] = True
                k += 2
                continue
        elif not final and data.size - int(start[line]) <= limit:
            lines = line  # a terminator within the limit may come in the next read
            break
        cut[line] = True
        k += 1
    stops = stop[:lines][~joined[:lines]]
    used = int(min(stops[-1] + 1, data.size)) if stops.size else 0
    records = _line_records(data[:used], stops, b, final=False)
    records.bad |= cut[:lines][~joined[:lines]]
    return records, used


def _spans_parse(data: np.ndarray, first: np.ndarray, last: np.ndarray, b: _Bytes, *,
                 limit: int, fields: int | None) -> np.ndarray:
    """Whether each span of lines ``[first, last]`` of ``data`` (``first`` a line's start,
    ``last`` a terminator or the end of ``data``; disjoint, in order) is one well-formed
    record of a ``multiline`` dialect: checked as records that tile ``data`` with the lines
    between them (whose verdicts are not used)."""
    if not first.size:
        return np.zeros(0, dtype=bool)
    gap = first > np.concatenate(([0], last[:-1] + 1))  # lines before the span
    stops = np.empty(2 * first.size, dtype=np.int64)
    stops[0::2], stops[1::2] = first - 1, last
    kept = np.ones(stops.size, dtype=bool)
    kept[0::2] = gap
    end = min(int(last[-1]) + 1, data.size)
    records = _line_records(data[:end], stops[kept], b, final=False)
    _check_records(data[:end], records, b, multiline=True, limit=limit, fields=fields)
    return ~records.bad[(np.cumsum(kept) - 1)[1::2]]


def _check_records(data: np.ndarray, records: _Records, b: _Bytes, *, multiline: bool,
                   limit: int, fields: int | None) -> None:
    """Mark the malformed records of ``data`` (which they tile): too long, a line break
    that its dialect does not allow, a quote not around a whole field (RFC 4180) or left
    open, not ``fields`` fields. Byte masks, counted per record between its bounds."""
    start, content = records.start, records.content
    if not start.size:
        return
    records.bad |= (content - start) > limit

    bounds = np.empty(2 * start.size, dtype=np.int64)
    bounds[0::2], bounds[1::2] = start, content
    empty = content == start

    def count(flags: np.ndarray) -> np.ndarray:
        """How many of each record's content bytes are flagged."""
        sums = np.add.reduceat(np.append(flags, False), bounds, dtype=np.int32)[0::2]
        sums[empty] = 0  # reduceat gives an empty range its first element
        return sums

    quote = data == b.quote
    quoted = bool(quote.any())
    if quoted:
        # inside[p]: an odd number of quotes between p's record start and p
        before = np.zeros(data.size + 1, dtype=np.int32)
        np.cumsum(quote, out=before[1:])
        length = np.minimum(records.stop + 1, data.size) - start
        inside = ((before[:-1] & 1).astype(np.uint8)
                  ^ np.repeat((before[start] & 1).astype(np.uint8), length)).view(bool)
        records.bad |= (before[content] - before[start]) % 2 == 1  # left open
        # a quote outside quotes opens a field: at the record's start or after a delimiter
        # (or it is the second of a doubled quote); one inside closes it: before a delimiter
        # or the record's end (or it is the first of a doubled quote)
        mark = (data == b.delimiter) | quote
        after_mark = np.ones(data.size, dtype=bool)
        after_mark[1:] = mark[:-1]
        after_mark[start] = True
        before_mark = np.ones(data.size, dtype=bool)
        before_mark[:-1] = mark[1:]
        ends = content[content > start] - 1
        before_mark[ends] = True
        records.bad |= count(quote & np.where(inside, ~before_mark, ~after_mark)) > 0
    # line breaks in a record's content: only inside quotes, and only if multiline
    breaks = (data == b.other) | (data == b.end)
    if multiline and quoted:
        breaks &= ~inside
    records.bad |= count(breaks) > 0
    if fields is not None:  # the delimiters outside quotes: one fewer than the fields
        delimiters = data == b.delimiter
        if quoted:
            delimiters &= ~inside
        records.bad |= (count(delimiters) + 1 != fields) & (content > start)


@dataclass
class CsvSource:
    """A CSV file's records in a contract's dialect, read block by block.

    Attributes
    ----------
    path : Path
        The file (``.csv`` or ``.csv.gz``).
    dialect : DialectSpec
        The contract's dialect.
    header : list of str
        The column names on the header line (public; read by :func:`csv_header`).
    unparsed : int
        How many records did not parse so far (private: publish only a noisy count).
    """

    path: Path
    dialect: DialectSpec = DEFAULT_DIALECT
    header: list[str] = field(default_factory=list)
    unparsed: int = 0

    @classmethod
    def open(cls, path: str | Path, dialect: DialectSpec | None = None) -> CsvSource:
        """The file's source, its header read (:func:`csv_header`: refused if malformed)."""
        dialect = dialect or DEFAULT_DIALECT
        return cls(Path(path), dialect, csv_header(path, dialect))

    def batches(self, columns: Sequence[str], *, batch_rows: int = 200_000,
                block_bytes: int = BLOCK_BYTES) -> Iterator[pa.RecordBatch]:
        """The ``columns``' values of every record that parses, as text (nulls for empty
        fields), in file order; counts the others in :attr:`unparsed`.

        Raises
        ------
        ReleaseInputError
            A column is not on the header line, or twice (the file's schema: public).
        """
        columns = list(columns)
        for name in columns:
            if self.header.count(name) != 1:
                raise ReleaseInputError(
                    f"data file {self.path}: column {name!r} is "
                    f"{'not on' if name not in self.header else 'twice on'} the header line")
        b = _Bytes.of(self.dialect)
        schema = pa.schema([(name, pa.string()) for name in columns])
        for data in self._record_blocks(b, block_bytes):
            table = self._parse(data, b, columns)
            if table.num_rows:
                yield from table.select(columns).cast(schema).combine_chunks().to_batches(
                    batch_rows)

    def _record_blocks(self, b: _Bytes, block_bytes: int) -> Iterator[np.ndarray]:
        """Buffers of whole, well-formed records (each with its terminator), in order; the
        malformed records are counted in :attr:`unparsed`."""
        limit = self.dialect.record_limit(len(self.header))
        skipping = False  # in a record already counted as too long: skip to its end
        with _open(self.path) as fh:
            _, carry = _read_header(fh, self.dialect)
            while True:
                chunk = fh.read(max(block_bytes, 2 * limit + 4))
                final = not chunk
                data = np.frombuffer(carry + chunk, dtype=np.uint8)
                if skipping:
                    ends = np.flatnonzero(data == b.end)
                    if not ends.size:
                        carry = b""
                        if final:
                            return
                        continue
                    data, skipping = data[int(ends[0]) + 1:], False
                if self.dialect.multiline:
                    records, used = _quote_records(data, b, final, limit,
                                                   fields=len(self.header))
                else:
                    ends = np.flatnonzero(data == b.end)
                    used = data.size if final else (int(ends[-1]) + 1 if ends.size else 0)
                    records = _line_records(data[:used], ends, b, final)
                _check_records(data[:used], records, b, multiline=self.dialect.multiline,
                               limit=limit, fields=len(self.header))
                carry = data[used:].tobytes()
                if len(carry) > limit + 2:  # no record may end there: one too long
                    self.unparsed += 1
                    carry, skipping = b"", True
                self.unparsed += int(records.bad.sum())
                kept = ~records.bad & ~records.empty
                if kept.any():
                    yield _kept_bytes(data[:used], records, kept)
                if final:
                    return

    def _parse(self, data: np.ndarray, b: _Bytes, columns: list[str]) -> pa.Table:
        """Parse a buffer of well-formed records. Should pyarrow not read it as one row per
        record (it never should: the records were checked), each half is parsed again, down
        to single records, and a record that pyarrow does not read as one row is counted as
        unparsed."""
        raw = data.tobytes()
        table = self._pyarrow(raw, columns)
        expected = _count_records(data, b, self.dialect.multiline)
        if table is not None and table.num_rows == expected + 1:
            table = table.slice(0, expected)  # less the sentinel row
            try:  # text split at ASCII bytes stays UTF-8: most often nothing to check
                raw.decode("utf-8")
            except UnicodeDecodeError:
                table = valid_text_columns(table)
            return table
        if expected <= 1:
            self.unparsed += expected
            return _empty(columns)
        middle = _record_bounds(data, b, self.dialect.multiline)[expected // 2][0]
        return pa.concat_tables([self._parse(data[:middle], b, columns),
                                 self._parse(data[middle:], b, columns)])

    def _pyarrow(self, data: bytes, columns: list[str]) -> pa.Table | None:
        """pyarrow's rows of ``data`` and of a sentinel record after it (a quote left open
        would swallow it); None when pyarrow refuses them."""
        import pyarrow.csv as pcsv

        dialect = self.dialect
        terminator = dialect.line_terminator.encode()
        if data and not data.endswith(terminator[-1:]):
            data += terminator
        sentinel = dialect.delimiter.encode() * (len(self.header) - 1) or b"\x00"
        data += sentinel + terminator
        limit = dialect.record_limit(len(self.header))
        try:
            return pcsv.read_csv(
                # pyarrow-stubs type the input as a path or file object; pyarrow takes a Buffer
                pa.py_buffer(data),  # type: ignore[arg-type]
                read_options=pcsv.ReadOptions(
                    column_names=self.header, use_threads=True,
                    block_size=min(max(1 << 20, 2 * limit + 64), (1 << 31) - 1)),
                parse_options=pcsv.ParseOptions(
                    delimiter=dialect.delimiter, quote_char=dialect.quote, double_quote=True,
                    escape_char=False, newlines_in_values=dialect.multiline,
                    ignore_empty_lines=True),
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(columns, pa.string()), include_columns=columns,
                    check_utf8=False, null_values=[""], strings_can_be_null=True,
                    quoted_strings_can_be_null=True))
        except (pa.ArrowException, ValueError):  # checked records should never get here
            return None


def _kept_bytes(data: np.ndarray, records: _Records, kept: np.ndarray) -> np.ndarray:
    """The bytes of the ``kept`` records (which tile ``data``), each with its terminator."""
    if kept.all():
        return data
    length = np.minimum(records.stop + 1, data.size) - records.start
    return data[np.repeat(kept, length)]


def _record_bounds(data: np.ndarray, b: _Bytes, multiline: bool) -> list[tuple[int, int]]:
    """``[start, stop)`` of each record in a buffer of well-formed records."""
    if multiline:
        records, _ = _quote_records(data, b, True, data.size + 1, check=False)
    else:
        records = _line_records(data, np.flatnonzero(data == b.end), b, True)
    return [(int(s), int(min(e + 1, data.size))) for s, e in
            zip(records.start, records.stop, strict=True)]


def _count_records(data: np.ndarray, b: _Bytes, multiline: bool) -> int:
    if multiline:
        return len(_record_bounds(data, b, multiline))
    ends = int(np.count_nonzero(data == b.end))
    return ends + int(data.size > 0 and data[-1] != b.end)


def _empty(columns: list[str]) -> pa.Table:
    return pa.table({name: pa.array([], pa.string()) for name in columns})


def _header_limit(dialect: DialectSpec) -> int:
    """The header's byte bound: the declared ``max_record_bytes``, else 1 MiB (its fields
    are not known before it is read)."""
    return dialect.max_record_bytes or HEADER_BYTES


def _read_header(fh: BinaryIO, dialect: DialectSpec) -> tuple[bytes, bytes]:
    """Read the header record off ``fh`` (public: the file's schema): its bytes (less its
    terminator and a UTF-8 byte-order mark) and the bytes read past it.

    Raises ``_HeaderError`` when it does not parse in the dialect."""
    b = _Bytes.of(dialect)
    limit = _header_limit(dialect)
    records = _Records(*(np.zeros(0, np.int64),) * 3, np.zeros(0, bool))
    chunk = fh.read(1 << 16)
    head = chunk.removeprefix(_UTF8_BOM)
    while True:
        final = not chunk
        data = np.frombuffer(head, dtype=np.uint8)
        if dialect.multiline:
            records, _ = _quote_records(data, b, final, limit)
        else:
            ends = np.flatnonzero(data == b.end)[:1]
            if final or ends.size:
                records = _line_records(data[:int(ends[0]) + 1] if ends.size else data,
                                        ends, b, final and not ends.size)
        if records.start.size:
            break
        if final:
            return b"", b""
        if len(head) > limit + 2:
            raise _HeaderError(head, dialect)
        chunk = fh.read(1 << 16)
        head += chunk
    first = _Records(records.start[:1], records.stop[:1], records.content[:1],
                     records.bad[:1])
    used = min(int(first.stop[0]) + 1, data.size)
    _check_records(data[:used], first, b, multiline=dialect.multiline, limit=limit,
                   fields=None)
    line = head[:int(first.content[0])]
    if first.bad[0]:
        raise _HeaderError(head[:int(first.stop[0])], dialect)
    return line, head[used:]


class _HeaderError(ValueError):
    def __init__(self, line: bytes, dialect: DialectSpec) -> None:
        hint = ""
        if len(line) > _header_limit(dialect):
            hint = f" (longer than max_record_bytes = {_header_limit(dialect)})"
        elif dialect.line_terminator == "\n" and line.endswith(b"\r"):
            hint = " (it ends in \\r\\n: declare dialect: {line_terminator: crlf})"
        elif dialect.line_terminator == "\r\n" and not line.endswith(b"\r"):
            hint = " (it does not end in \\r\\n: declare dialect: {line_terminator: lf})"
        super().__init__(f"the header line does not parse in the contract's CSV dialect{hint}")


def csv_header(path: str | Path, dialect: DialectSpec | None = None) -> list[str]:
    """The column names on the header line of a CSV file, stripped of surrounding spaces.

    The header is the file's schema (public): a header that does not parse in ``dialect``
    is refused, naming the problem (never a record's).

    Raises
    ------
    ReleaseInputError
        The file cannot be read, or its header line does not parse in the dialect.
    """
    dialect = dialect or DEFAULT_DIALECT
    path = Path(path)
    try:
        with _open(path) as fh:
            line, _ = _read_header(fh, dialect)
        text = line.decode("utf-8")
    except _HeaderError as exc:
        raise ReleaseInputError(f"data file {path}: {exc}") from None
    except UnicodeDecodeError:
        raise ReleaseInputError(f"data file {path}: the header line is not UTF-8") from None
    except (OSError, EOFError) as exc:
        raise ReleaseInputError(f"data file {path} cannot be read as CSV "
                                f"({type(exc).__name__})") from None
    if not text:
        return []
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=dialect.delimiter,
                           quotechar=dialect.quote, doublequote=True, strict=True))
    return [name.strip() for name in rows[0]] if rows else []


def read_csv_table(path: str | Path, columns: Sequence[str],
                   dialect: DialectSpec | None = None) -> tuple[pa.Table, int]:
    """The ``columns`` of a CSV file's records as an Arrow table of text, and how many
    records did not parse (private, for the policy tally)."""
    source = CsvSource.open(path, dialect)
    batches = list(source.batches(columns))
    schema = pa.schema([(name, pa.string()) for name in columns])
    return pa.Table.from_batches(batches, schema=schema), source.unparsed


def read_csv_text(path: str | Path, columns: Sequence[str],
                  dialect: DialectSpec | None = None) -> tuple[Any, int]:
    """:func:`read_csv_table` as a pandas frame of text (nulls for empty fields)."""
    table, unparsed = read_csv_table(path, columns, dialect)
    return table.to_pandas(), unparsed
