"""Single-record fuzzing (issue 32.4 and 32.5): a neighbour differs by one record as the
contract's dialect delimits it, and no record, however malformed, stops a release or shows
anywhere but in the noisy policy counts.

Three layers:

* the reader: a CSV file reads as the concatenation of its records read one by one (the
  records found by an independent splitter of the dialect's rule), whatever one record holds
  (line breaks of the wrong kind, quotes left open, bytes that are not UTF-8, a field too
  many, more than ``max_record_bytes``), for several dialects and block sizes;
* the reproducers of issue 32's findings 1-3, as releases: one record ending in ``\\r\\n`` in
  a ``\\n`` file, a bare ``\\r`` in a field, one ``\\n`` record in a ``\\r\\n`` file (DuckDB's
  sniffer failed after the reservation: a free membership test); a quote left open (it
  swallowed every later row: the noisy total fell from ~300 to ~100); a Parquet string that
  is not UTF-8 (the run stopped with the value in its message);
* every kind (``tests/kind_cases.py``) against every single-record mutation of a small CSV
  and Parquet file, on the in-process driver (slow): the release happens, and every
  published field that differs from the clean run's (same seed) is a noisy output
  (``test_manifest_diff.ALLOWED``): the manifest's keys, the ledger's entries and the list
  lengths are the clean run's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TOY_CONTRACT, make_toy_frame
from kind_cases import CASES, EDGE_LIST_CASES, edge_list_example
from test_manifest_diff import Published, differing, fields, not_allowed

from privfair.contracts.csv_source import CsvSource
from privfair.contracts.schema import DialectSpec
from privfair.release.protocol import run_release
from privfair.release.registry import KINDS
from privfair.store.registry import list_releases

ALL_CASES = {**CASES, **EDGE_LIST_CASES}
COVERED = [kind for kind in KINDS if kind.name in ALL_CASES]
TABLE = next(kind for kind in KINDS if kind.name == "table")
SEED = 11
#: The record every mutation changes (0-based, after the header).
AT = 40
#: A small bound on a record's bytes, so an over-long record is a small file.
LIMIT = 1024


# --- the reader: a file reads as its records, each alone ---------------------------------------


def reference_records(body: bytes, dialect: DialectSpec, header: bytes = b"",
                      tmp_path: Path | None = None) -> list[bytes]:
    """The records after the header, split by the dialect's rule as documented
    (:class:`~privfair.contracts.schema.DialectSpec`), in plain Python: each with its
    terminator byte when it has one. With ``multiline``, a line that leaves a quote open
    runs to the line that closes it when that comes within the limit and the lines read
    alone (after ``header``, in ``tmp_path``) as one row; else it is a record alone."""
    end = dialect.line_terminator.encode()[-1:]
    quote = dialect.quote.encode()
    limit = dialect.record_limit(header.count(dialect.delimiter.encode()) + 1)
    records, position = [], 0
    while position < len(body):
        first = body.find(end, position)
        cut = first
        while dialect.multiline and cut >= 0 and body.count(quote, position, cut) % 2:
            cut = body.find(end, cut + 1)
        stop = cut if cut >= 0 else len(body)
        if dialect.multiline and first >= 0 and stop > first:  # quoted lines run on
            span = body[position:stop + 1]
            if (body.count(quote, position, stop) % 2 or stop - position > limit
                    or not _one_row(header + span, dialect, tmp_path)):
                stop = first  # the opening line alone
        if stop >= len(body):
            records.append(body[position:])
            break
        records.append(body[position:stop + 1])
        position = stop + 1
    return records


def _one_row(data: bytes, dialect: DialectSpec, tmp_path: Path | None) -> bool:
    assert tmp_path is not None
    path = tmp_path / "span.csv"
    path.write_bytes(data)
    rows, unparsed = read(path, dialect)
    return len(rows) == 1 and unparsed == 0


def read(path: Path, dialect: DialectSpec, block_bytes: int = 1 << 20
         ) -> tuple[list[dict[str, Any]], int]:
    source = CsvSource.open(path, dialect)
    rows = [row for batch in source.batches(source.header, block_bytes=block_bytes)
            for row in batch.to_pylist()]
    return rows, source.unparsed


def random_record(rng: random.Random) -> bytes:
    fields_ = []
    for _ in range(3):
        value = b"".join(rng.choice([b"x", b"y", b"1", b" "]) for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.2:
            value = b'"' + value.replace(b'"', b'""') + b'"'
        fields_.append(value)
    return b",".join(fields_)


#: Bytes a mutation inserts: line breaks, delimiters, quotes, bytes that are not UTF-8 (alone,
#: a latin-1 e-acute, a truncated sequence, a surrogate), UTF-8, NUL.
NOISE = [b"\r", b"\n", b"\r\n", b",", b'"', b'""', b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80",
         b"\xc3\xa9", b"\x00", b" ", b"x"]


def mutate(record: bytes, rng: random.Random) -> bytes:
    data = bytearray(record)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(data))
        if rng.random() < 0.7 or not data:
            data[at:at] = rng.choice(NOISE)
        else:
            del data[min(at, len(data) - 1)]
    if rng.random() < 0.1:
        data = data * 40  # longer than the limit below
    return bytes(data)


DIALECTS = {
    "lf": DialectSpec(max_record_bytes=256),
    "crlf": DialectSpec(line_terminator="crlf", max_record_bytes=256),
    "cr": DialectSpec(line_terminator="cr", max_record_bytes=256),
    "multiline": DialectSpec(multiline=True, max_record_bytes=256),
    "semicolon-multiline-crlf": DialectSpec(delimiter=";", quote="'", multiline=True,
                                            line_terminator="crlf", max_record_bytes=256),
}


@pytest.mark.parametrize("name", DIALECTS)
def test_a_file_reads_as_its_records_each_alone(name, tmp_path):
    """Whatever one record holds, the file's rows and unparsed count are those of its
    records read one by one: no record changes how another reads (in whole blocks or in
    blocks of a few records, where a record straddles reads)."""
    dialect = DIALECTS[name]
    rng = random.Random(f"records-{name}")
    term = dialect.line_terminator.encode()
    swap = {b",": dialect.delimiter.encode(), b'"': dialect.quote.encode()}
    header = dialect.delimiter.join("abc").encode()
    checked = 0
    for trial in range(40):
        records = [random_record(rng) for _ in range(12)]
        for at in rng.sample(range(12), rng.randint(1, 3)):
            records[at] = mutate(records[at], rng)
        records = [bytes(b if bytes([b]) not in swap else swap[bytes([b])][0] for b in r)
                   for r in records]
        body = term.join(records) + (term if trial % 2 else b"")
        path = tmp_path / "whole.csv"
        path.write_bytes(header + term + body)
        whole = read(path, dialect)
        assert read(path, dialect, block_bytes=64) == whole
        rows, unparsed = [], 0
        for record in reference_records(body, dialect, header + term, tmp_path):
            alone = tmp_path / "alone.csv"
            alone.write_bytes(header + term + record)
            got, bad = read(alone, dialect)
            rows += got
            unparsed += bad
        assert whole == (rows, unparsed), (trial, body)
        checked += len(rows) + unparsed
    assert checked > 250  # the trials read records, most of them rows


def test_one_record_changes_one_row(tmp_path):
    """Each mutation of one record changes that record's row alone: the others read as in
    the clean file (checked for each mutation the release tests use)."""
    frame = make_toy_frame(120)
    for name, mutation in MUTATIONS.items():
        clean, dirty, dialect = mutation.files(frame)
        (tmp_path / "clean.csv").write_bytes(clean)
        (tmp_path / "dirty.csv").write_bytes(dirty)
        before, bad_before = read(tmp_path / "clean.csv", dialect)
        after, bad_after = read(tmp_path / "dirty.csv", dialect)
        assert bad_before == 0 and len(before) == len(frame), name
        kept = before[:AT] + before[AT + 1:]
        assert bad_after in (0, 1), name
        if bad_after or len(after) < len(before):  # dropped and counted, or no record
            assert after == kept, name
        else:  # it parsed, as other values
            assert after[:AT] + after[AT + 1:] == kept and after[AT] != before[AT], name


# --- mutations of one record of the toy CSV -----------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """A change of record ``AT`` of a CSV file: ``change`` maps the record's line, its
    terminator included, to the bytes written instead."""

    change: Callable[[bytes], bytes]
    terminator: str = "\n"

    @property
    def dialect(self) -> DialectSpec:
        name = {"\n": "lf", "\r\n": "crlf"}[self.terminator]
        return DialectSpec(line_terminator=name, max_record_bytes=LIMIT)

    def files(self, frame: pd.DataFrame) -> tuple[bytes, bytes, DialectSpec]:
        """The clean and the changed file, and the dialect both are read in."""
        lines = frame.to_csv(index=False, lineterminator="\n").encode().split(b"\n")[:-1]
        term = self.terminator.encode()
        lines = [line + term for line in lines]
        clean = b"".join(lines)
        lines[AT + 1] = self.change(lines[AT + 1])  # after the header
        return clean, b"".join(lines), self.dialect


def _in_record(change: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """``change`` of the record's bytes, its terminator kept."""
    def line(record: bytes) -> bytes:
        body = record.rstrip(b"\r\n")
        return change(body) + record[len(body):]
    return line


def _field(index: int, value: bytes) -> Callable[[bytes], bytes]:
    def change(record: bytes) -> bytes:
        parts = record.split(b",")
        parts[index % len(parts)] = value
        return b",".join(parts)
    return _in_record(change)


def _random_bytes(record: bytes) -> bytes:
    rng = random.Random(record)
    data = bytearray(record)
    for _ in range(6):  # any byte but a line end (that would make two records)
        data[rng.randrange(len(data) - 1)] = rng.choice([b for b in range(256) if b != 10])
    return bytes(data)


MUTATIONS: dict[str, Mutation] = {
    # finding 1: line ends of another kind in one record
    "crlf record in an lf file": Mutation(lambda line: line[:-1] + b"\r\n"),
    "bare cr in a field": Mutation(_field(1, b"M\rX")),
    "lf record in a crlf file": Mutation(lambda line: line[:-2] + b"\n", terminator="\r\n"),
    # finding 2: a quote left open (it swallowed every later row)
    "quote left open": Mutation(_field(1, b'"M')),
    "quote inside a field": Mutation(_field(1, b'O"Brien')),
    "a field too many": Mutation(_in_record(lambda r: r + b",extra")),
    "a field short": Mutation(_in_record(lambda r: r.rsplit(b",", 1)[0])),
    "only delimiters": Mutation(_in_record(lambda r: b"," * r.count(b","))),
    "empty line": Mutation(_in_record(lambda r: b"")),
    # bytes that are not UTF-8: one value out of the domain
    "invalid utf-8 in a category": Mutation(_field(1, b"F\xff")),
    "invalid utf-8 in a number": Mutation(_field(4, b"4\xc3")),
    "latin-1 text": Mutation(_field(3, "Bé".encode("latin-1"))),
    "utf-16 record": Mutation(_in_record(lambda r: r.decode().encode("utf-16-le"))),
    "nul bytes": Mutation(_field(2, b"A\x00B")),
    "over-long record": Mutation(_in_record(lambda r: r + b"x" * (LIMIT + 10))),
    "random bytes": Mutation(_random_bytes),
}

#: The reproducers of issue 32's findings 1 and 2 (each fails on the DuckDB reader).
REPRODUCERS = ("crlf record in an lf file", "bare cr in a field", "lf record in a crlf file",
               "quote left open")


def _contract(kind, folder: Path, dialect: DialectSpec | None) -> Path:
    """The kind's contract (the toy one, or the edge list's) with ``dialect``."""
    text = TOY_CONTRACT if kind.name in CASES else edge_list_example()[0].read_text()
    if dialect is not None:
        terminator = {"\n": "lf", "\r\n": "crlf"}[dialect.line_terminator]
        keys = [f"line_terminator: {terminator}", f"multiline: {str(dialect.multiline).lower()}"]
        if dialect.max_record_bytes is not None:
            keys.append(f"max_record_bytes: {dialect.max_record_bytes}")
        text += f"dialect: {{{', '.join(keys)}}}\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "contract.yaml"
    path.write_text(text)
    return path


def _frame(kind) -> pd.DataFrame:
    return make_toy_frame(300) if kind.name in CASES else pd.read_parquet(
        edge_list_example()[1])


# --- releases -----------------------------------------------------------------------------------


def _publish(kind, root: Path, contract: Path, data: bytes, suffix: str,
             mp: pytest.MonkeyPatch) -> Published:
    """A release of ``data`` (written in ``root``, whose paths the fields normalise) in its
    own registry, with the test seed."""
    root.mkdir(parents=True)
    mp.setenv("PRIVFAIR_REGISTRY", str(root / "registry"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    mp.setenv("PRIVFAIR_STATE_HOME", str(root / "registry") + "-client")
    path = root / f"data{suffix}"
    path.write_bytes(data)
    params = ALL_CASES[kind.name].params(contract, path, root)
    folder = run_release(kind, {**params, "seed": SEED, "insecure_seed": True})
    (row,) = list_releases(Path(params["out"]))
    manifest = json.loads((folder / "manifest.json").read_text())
    return Published(folder=folder, root=root, catalog=row, manifest=manifest)


def _same_structure(kind, clean: Published, dirty: Published) -> None:
    """Every published field that differs is a noisy output of the kind (the manifest's
    keys, the ledger's entries, list lengths: the clean run's)."""
    assert dirty.files() == clean.files()
    fa, fb = fields(kind, clean), fields(kind, dirty)
    bad = not_allowed(kind.name, differing(clean, dirty, fa, fb))
    assert bad == [], {k: (fa.get(k), fb.get(k)) for k in bad}
    assert [e["name"] for e in dirty.manifest["ledger"]] == [
        e["name"] for e in clean.manifest["ledger"]] or kind.name == "graph"


def _cells(release: Published) -> dict[tuple[str, str], float]:
    return {(r["column"], r["action"]): r["noisy_count"]
            for r in release.manifest["validation"]["input"]["touched_rows"]}


def _check_mutation(kind, name: str, base: Path, mp: pytest.MonkeyPatch,
                    clean: dict[str, Published]) -> None:
    """Release the kind's data with mutation ``name`` and compare with the clean release
    (made once per line terminator, cached in ``clean``)."""
    mutation = MUTATIONS[name]
    clean_bytes, dirty_bytes, dialect = mutation.files(_frame(kind))
    terminator = {"\n": "lf", "\r\n": "crlf"}[mutation.terminator]
    contract = _contract(kind, base / f"contract-{terminator}", dialect)
    if terminator not in clean:
        clean[terminator] = _publish(kind, base / f"clean-{terminator}", contract,
                                     clean_bytes, ".csv", mp)
    dirty = _publish(kind, base / _slug(name), contract, dirty_bytes, ".csv", mp)
    _same_structure(kind, clean[terminator], dirty)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


@pytest.mark.parametrize("name", REPRODUCERS)
def test_reproducer_releases_with_the_clean_structure(name, tmp_path, monkeypatch):
    """Findings 1 and 2 on the table kind: the release happens, as the clean one does."""
    _check_mutation(TABLE, name, tmp_path, monkeypatch, {})


@pytest.mark.parametrize(("dialect", "record"), [
    (None, b'30,M,"lo,40,1'), (DialectSpec(multiline=True), b'M,"A,HS,30,low')],
    ids=["default", "multiline"])
def test_a_quote_left_open_is_one_record(dialect, record, tmp_path, monkeypatch):
    """Finding 2 (issue 32), and issue 41.4 in a multiline dialect: D and D plus a record
    whose quote never closes: the noisy total moves by about one row (same seed), not by
    the two thirds of the file the record used to swallow (multiline: 398 rows read as 196
    when ``max_record_bytes`` was 1 MiB); the record shows as one more unparsed record."""
    lines = make_toy_frame(300).to_csv(index=False, lineterminator="\n").encode().split(
        b"\n")[:-1]
    contract = _contract(TABLE, tmp_path / "contract", dialect)
    plus = lines[:101] + [record] + lines[101:]
    d = _publish(TABLE, tmp_path / "d", contract, b"\n".join(lines) + b"\n", ".csv",
                 monkeypatch)
    d_plus = _publish(TABLE, tmp_path / "d-plus", contract, b"\n".join(plus) + b"\n",
                      ".csv", monkeypatch)
    total, total_plus = (r.manifest["method"]["estimated_total"] for r in (d, d_plus))
    assert abs(total_plus - total) <= 2, (total, total_plus)
    unparsed = ("(unparsed record)", "dropped")
    assert _cells(d_plus)[unparsed] - _cells(d)[unparsed] == pytest.approx(1, abs=1e-6)
    _same_structure(TABLE, d, d_plus)


def _parquet_with(frame: pd.DataFrame, column: str, row: int, raw: bytes, path: Path) -> Path:
    """``frame`` as Parquet with one text value replaced by bytes that need not be UTF-8."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    values = [None if v is None else v.encode() for v in table[column].to_pylist()]
    values[row] = raw
    column_values = pa.array(values, pa.binary()).view(pa.string())
    table = table.set_column(table.schema.get_field_index(column), column, column_values)
    pq.write_table(table, path)
    return path


#: Parquet mutations: ``(column, bytes)`` of row ``AT`` (the toy table; the edge list uses
#: its ``source`` column for the declared ones).
PARQUET_MUTATIONS = {
    "invalid utf-8 in a category": ("sex", b"CANARY\xff"),
    "invalid utf-8 in a dropped column": ("secret_name", b"\xc3(\xff"),
    "a surrogate in a category": ("race", b"\xed\xa0\x80"),
}


def _check_parquet(kind, base: Path, mp: pytest.MonkeyPatch, names) -> None:
    """Release the kind's data as Parquet, clean and with each mutation of
    :data:`PARQUET_MUTATIONS`, and compare."""
    frame = _frame(kind)
    contract = _contract(kind, base / "contract", None)
    clean_path = base / "clean.parquet"
    frame.to_parquet(clean_path, index=False)
    clean = _publish(kind, base / "clean", contract, clean_path.read_bytes(), ".parquet", mp)
    for name in names:
        column, raw = PARQUET_MUTATIONS[name]
        if column not in frame.columns:
            if column == "secret_name":
                continue  # the edge list drops no column
            column = "source"
        dirty = _parquet_with(frame, column, AT, raw, base / f"{_slug(name)}.parquet")
        _same_structure(kind, clean, _publish(kind, base / _slug(name), contract,
                                              dirty.read_bytes(), ".parquet", mp))


def test_parquet_text_that_is_not_utf8_is_out_of_domain(tmp_path, monkeypatch):
    """Finding 3 on the table kind: a Parquet string that is not UTF-8 is one value out of
    the domain (the column's policy), never an error."""
    _check_parquet(TABLE, tmp_path, monkeypatch, list(PARQUET_MUTATIONS))


@pytest.mark.slow
@pytest.mark.parametrize("kind", COVERED, ids=lambda k: k.name)
def test_every_kind_releases_every_mutation_with_the_clean_structure(kind, tmp_path,
                                                                     monkeypatch):
    clean: dict[str, Published] = {}
    for name in MUTATIONS:
        _check_mutation(kind, name, tmp_path, monkeypatch, clean)
    _check_parquet(kind, tmp_path / "parquet", monkeypatch, list(PARQUET_MUTATIONS))
