"""Privacy rule 4 for CSV sources: the dialect is declared, never sniffed from the rows.

A record that does not parse (too many fields, a quote left open, a line break its dialect
does not allow) is dropped and counted in the noisy policy counts; it never stops a run after its
reservation, nor changes its exit code or message. Before, DuckDB's sniffer read a sample of
the rows to guess the delimiter, so one ragged line turned the header into one column and the
run stopped after reserving with "internal error: KeyError".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.csv_source import NOT_TEXT, UNPARSED_CELL, read_csv_text
from privfair.contracts.encoding import PolicyTally, iter_discretized_batches, policy_cells
from privfair.contracts.schema import DialectSpec, load_contract
from privfair.release.graph.kind import GRAPH
from privfair.release.model.train import MODEL
from privfair.release.protocol import run_release
from privfair.store.registry import registry_ledgers

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
