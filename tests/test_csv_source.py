"""Privacy rule 4 for CSV sources: the dialect is declared, never sniffed from the rows.

A record that does not parse (too many fields, a quote left open, a line break its dialect
does not allow) is dropped and counted in the noisy policy counts; it never stops a run after its
reservation, nor changes its exit code or message. Before, DuckDB's sniffer read a sample of
the rows to guess the delimiter, so one ragged line turned the header into one column and the
run stopped after reserving with "internal error: KeyError".
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import TOY_CONTRACT, make_toy_frame

from privfair.cli import main
from privfair.contracts.csv_source import NOT_TEXT, UNPARSED_CELL, csv_header, read_csv_text
from privfair.contracts.encoding import PolicyTally, iter_discretized_batches, policy_cells
from privfair.contracts.schema import DialectSpec, load_contract, parse_contract
from privfair.core.errors import ContractError, ReleaseInputError
from privfair.release.kinds.causal_graph.kind import GRAPH
from privfair.release.kinds.model.train import MODEL
from privfair.release.protocol import run_release
from privfair.store.registry import registry_ledgers

#: The toy contract's fingerprint before contracts had a dialect (main at e3d9b57).
TOY_FINGERPRINT = "50a1e47c2ca96a733136bf9fc71e15bd0145e69af81195c729b9237236744e86"

EDGE_CASES = (b'a,b\n1,x\n\n2,"y,z"\n3,"q""r"\n4\n5,w,extra\n6,\xff\n'
              b'7,"multi\nline"\n')


def test_the_reader_follows_rfc_4180_and_counts_the_records_it_drops(tmp_path):
    path = tmp_path / "edge.csv"
    path.write_bytes(EDGE_CASES)
    frame, unparsed = read_csv_text(path, ["b", "a"])
    assert frame["a"].tolist() == ["1", "2", "3", "6"]
    # bytes that are not UTF-8: one value out of every declared domain
    assert frame["b"].tolist() == ["x", "y,z", 'q"r', NOT_TEXT]
    # "4" (a field short), "5,w,extra" (one too many), and the two lines of the quoted line
    # break, which the default dialect (multiline: false) does not allow: each line alone
    assert unparsed == 4
    frame, unparsed = read_csv_text(path, ["b", "a"], DialectSpec(multiline=True))
    assert frame["a"].tolist() == ["1", "2", "3", "6", "7"]
    assert frame["b"].tolist()[-1] == "multi\nline"
    assert unparsed == 2


def _ragged(toy_frame: pd.DataFrame, path: Path) -> Path:
    """The toy rows as CSV with two malformed lines: one ragged, one with a ';' delimiter,
    both of which made the sniffer read the file as one column."""
    lines = toy_frame.to_csv(index=False).splitlines()
    lines[40] += ",one,too,many"
    lines[41] = lines[41].replace(",", ";")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_discretized_batches_tally_the_unparsed_records(toy_contract, toy_frame, tmp_path):
    contract = load_contract(toy_contract)
    tally = PolicyTally()
    rows = sum(len(b["age"]) for b in iter_discretized_batches(
        _ragged(toy_frame, tmp_path / "ragged.csv"), contract, tally=tally))
    assert rows == len(toy_frame) - 2
    assert tally.counts[UNPARSED_CELL] == 2
    assert policy_cells(contract)[-1] == UNPARSED_CELL


def _release(contract: Path, data: Path, tmp_path: Path, capsys) -> tuple[int, str, dict]:
    code = main(["release", "--contract", str(contract), "--data", str(data), "--epsilon", "1",
                 "--delta", "1e-9", "--method", "mst", "--no-prefect", "--out",
                 str(tmp_path / "store"), "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    folders = sorted((tmp_path / "store").glob("*/v*"))
    manifest = json.loads((folders[-1] / "manifest.json").read_text()) if folders else {}
    return code, err, manifest


def _shape(message: str) -> str:
    """A message with its numbers, paths and verdicts blanked: what may not depend on the
    rows (a verdict on the released model is post-processing of its noise)."""
    message = re.sub(r"\b(PASS|FAIL)\b", "VERDICT", re.sub(r"/\S+", "PATH", message))
    return re.sub(r"\d+(\.\d+)?", "#", message)


def test_a_malformed_line_changes_neither_the_exit_nor_the_message(toy_contract, toy_frame,
                                                                   tmp_path, capsys):
    clean = tmp_path / "clean.csv"
    toy_frame.to_csv(clean, index=False)
    ragged = _ragged(toy_frame, tmp_path / "ragged.csv")
    clean_code, clean_err, _ = _release(toy_contract, clean, tmp_path / "a", capsys)
    ragged_code, ragged_err, manifest = _release(toy_contract, ragged, tmp_path / "b", capsys)
    assert clean_code == ragged_code == 0
    assert _shape(clean_err) == _shape(ragged_err)
    kinds = [e["kind"] for e in registry_ledgers("toy")[0]["entries"]]
    assert kinds.count("publish") == 2 and "cancel" not in kinds
    touched = {(r["column"], r["action"]): r for r in
               manifest["validation"]["input"]["touched_rows"]}
    assert UNPARSED_CELL in touched  # published only as a noisy count
    assert touched[UNPARSED_CELL]["noisy_count"] != 2


@pytest.mark.parametrize("kind", [MODEL, GRAPH], ids=["model", "graph"])
def test_other_kinds_drop_and_count_malformed_records(kind, toy_contract, toy_frame, tmp_path):
    data = _ragged(toy_frame, tmp_path / "ragged.csv")
    extra = {"model": "pflr"} if kind is MODEL else {"method": "privpc"}
    folder = run_release(kind, {
        "contract": str(toy_contract), "data": str(data), "epsilon": 1.0, "delta": 1e-6,
        "seed": 11, "insecure_seed": True, "out": str(tmp_path / "store"),
        "work_dir": str(tmp_path / "work"), **extra})
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    cells = {(r["column"], r["action"]) for r in
             manifest["validation"]["input"]["touched_rows"]}
    assert UNPARSED_CELL in cells


def test_the_header_is_refused_before_the_reservation_with_the_reason(toy_contract, toy_frame,
                                                                      tmp_path):
    """The header line is the file's schema (public): one that does not parse in the
    contract's dialect refuses the run before anything is reserved, saying what to declare."""
    data = tmp_path / "crlf.csv"
    toy_frame.to_csv(data, index=False, lineterminator="\r\n")
    params = {"contract": str(toy_contract), "data": str(data), "epsilon": 1.0,
              "delta": 1e-6, "model": "pflr", "out": str(tmp_path / "store"),
              "work_dir": str(tmp_path / "work")}
    with pytest.raises(ReleaseInputError, match=r"declare dialect: \{line_terminator: crlf\}"):
        run_release(MODEL, params)
    assert registry_ledgers("toy") == []  # nothing reserved
    crlf = tmp_path / "toy-crlf.yaml"
    crlf.write_text(toy_contract.read_text() + "dialect: {line_terminator: crlf}\n")
    folder = run_release(MODEL, {**params, "contract": str(crlf)})
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    touched = {(r["column"], r["action"]) for r in
               manifest["validation"]["input"]["touched_rows"]}
    assert UNPARSED_CELL in touched


def test_csv_header_reads_the_declared_dialect(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"\xef\xbb\xbf a ;'b;c';d\r\n1;2;3\r\n")
    semicolon = DialectSpec(delimiter=";", quote="'", line_terminator="crlf")
    assert csv_header(path, semicolon) == ["a", "b;c", "d"]  # no byte-order mark
    with pytest.raises(ReleaseInputError, match="declare dialect: {line_terminator: crlf}"):
        csv_header(path)
    path.write_bytes(b"a,\xffb\n1,2\n")
    with pytest.raises(ReleaseInputError, match="the header line is not UTF-8"):
        csv_header(path)
    path.write_bytes(b"a," + b"b" * 100 + b"\n")
    with pytest.raises(ReleaseInputError, match="longer than max_record_bytes = 64"):
        csv_header(path, DialectSpec(max_record_bytes=64))
    path.write_bytes(b"")
    assert csv_header(path) == []


def test_a_gzipped_csv_reads_as_the_plain_one(toy_frame, tmp_path):
    plain, packed = tmp_path / "t.csv", tmp_path / "t.csv.gz"
    toy_frame.to_csv(plain, index=False)
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    columns = ["age", "sex", "hours"]
    assert read_csv_text(packed, columns)[0].equals(read_csv_text(plain, columns)[0])


@pytest.mark.parametrize(("declared", "message"), [
    ("{line_terminator: x}", "expected one of lf, crlf, cr"),
    ("{delimiter: ab}", "expected one ASCII character"),
    ("{delimiter: '\"'}", "delimiter and quote must differ"),
    ("{max_record_bytes: 3}", "greater than or equal to 64"),
    ("{separator: ';'}", "unknown key 'separator'"),
])
def test_a_dialect_is_checked_when_the_contract_is_read(declared, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        parse_contract(TOY_CONTRACT + f"dialect: {declared}\n")


def test_a_contract_without_a_dialect_keeps_its_fingerprint():
    """The dialect is a later key: absent, the contract's fingerprint (and so the ledger its
    releases are recorded against) is what it was; declared, it is part of it."""
    plain = parse_contract(TOY_CONTRACT)
    assert plain.dialect is None and plain.csv_dialect == DialectSpec()
    assert plain.fingerprint() == TOY_FINGERPRINT
    declared = parse_contract(TOY_CONTRACT + "dialect: {line_terminator: \"\\r\\n\"}\n")
    assert declared.csv_dialect.line_terminator == "\r\n"
    assert declared.fingerprint() != plain.fingerprint()


#: Issue 41.4's record: its quote never closes.
UNCLOSED = 'M,"A,HS,30,low'


@pytest.mark.parametrize("declared", [DialectSpec(multiline=True),
                                      DialectSpec(multiline=True, max_record_bytes=1 << 20)],
                         ids=["default-limit", "1-MiB-limit"])
def test_a_multiline_quote_left_open_costs_its_own_line(declared, tmp_path):
    """Issue 41.4: in a multiline dialect one record whose quote never closes used to
    swallow every later line up to ``max_record_bytes`` (400 rows read as 199). Now its
    opening line alone is one unparsed record and every other line reads as in the clean
    file, whatever the limit; so do two such records apart, and a well-formed quoted line
    break after one."""
    lines = make_toy_frame(400).to_csv(index=False).splitlines()
    columns = lines[0].split(",")
    clean, dirty = tmp_path / "clean.csv", tmp_path / "dirty.csv"
    clean.write_text("\n".join(lines) + "\n")
    before, unparsed = read_csv_text(clean, columns, declared)
    assert (len(before), unparsed) == (400, 0)

    def read_with(changes: dict[int, str]) -> tuple[pd.DataFrame, int]:
        changed = list(lines)
        for at, line in changes.items():
            changed[at + 1] = line  # after the header
        dirty.write_text("\n".join(changed) + "\n")
        return read_csv_text(dirty, columns, declared)

    after, unparsed = read_with({199: UNCLOSED})
    assert unparsed == 1
    pd.testing.assert_frame_equal(after, before.drop(index=199).reset_index(drop=True))
    after, unparsed = read_with({99: UNCLOSED, 299: 'F,"B,BA,41,high'})
    assert unparsed == 2
    pd.testing.assert_frame_equal(
        after, before.drop(index=[99, 299]).reset_index(drop=True))
    # a quoted line break that parses, after the open quote: it reads as one row
    split = lines[251].split(",")
    after, unparsed = read_with({199: UNCLOSED, 250: ",".join(
        [*split[:6], f'"first\nsecond {split[6]}"'])})
    assert unparsed == 1 and len(after) == 399
    assert after["secret_name"].iloc[249] == f"first\nsecond {split[6]}"


def test_the_default_record_limit_is_sized_to_the_header(tmp_path):
    """Issue 41.4: left out, ``max_record_bytes`` is 4096 bytes per field of the header
    (the file's schema, public), not 1 MiB: a record longer than that is one unparsed
    record, the lines after it read."""
    assert DialectSpec().record_limit(7) == 7 * 4096
    assert DialectSpec(max_record_bytes=100).record_limit(7) == 100
    path = tmp_path / "long.csv"
    path.write_text("a,b\n1,x\n2," + "y" * (2 * 4096) + "\n3,z\n")
    for dialect in (DialectSpec(), DialectSpec(multiline=True)):
        frame, unparsed = read_csv_text(path, ["a", "b"], dialect)
        assert frame["a"].tolist() == ["1", "3"] and unparsed == 1
        frame, unparsed = read_csv_text(path, ["a", "b"], DialectSpec(
            multiline=dialect.multiline, max_record_bytes=1 << 20))
        assert frame["a"].tolist() == ["1", "2", "3"] and unparsed == 0
