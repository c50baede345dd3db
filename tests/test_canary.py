"""Canaries (issue 32.5): a private value never leaves the private side, whatever the run did.

A unique string is written into the private data: as a value of a category column (out of
its domain), as a value of a numeric column (not a number), inside text that is not UTF-8,
and as a malformed record (a field short, a quote left open). After every kind's run on the
in-process driver (the CLI's ``--no-prefect``), published or failed after its reservation,
the string must be nowhere: not in the store (the release, the catalog), the work folder,
the privacy registry, the temporary folder, the logs (every level) or the command's output.
A Parquet file's text that is not UTF-8 used to stop the run with the value in its message
(issue 32 finding 3); through Prefect that message reached Prefect's database, which the one
flow test scans too.
"""

from __future__ import annotations

import gzip
import logging
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TOY_CONTRACT, make_toy_frame
from kind_cases import CASES, EDGE_LIST_CASES, edge_list_example

from privfair.cli import main
from privfair.release import protocol
from privfair.release.registry import KINDS, family

ROOT = Path(__file__).resolve().parents[1]
ALL_CASES = {**CASES, **EDGE_LIST_CASES}
COVERED = [kind for kind in KINDS if kind.name in ALL_CASES]
#: The canary: a string nothing but the private data holds.
CANARY = "CANARY-q7Zt0p-private"


# --- the data ----------------------------------------------------------------------------------


def _frame(kind) -> pd.DataFrame:
    return make_toy_frame(300) if kind.name in CASES else pd.read_parquet(
        edge_list_example()[1])


def _contract(kind, folder: Path) -> Path:
    if kind.name not in CASES:
        return edge_list_example()[0]
    path = folder / "toy.yaml"
    path.write_text(TOY_CONTRACT)
    return path


def canary_csv(kind, folder: Path) -> Path:
    """The kind's data as CSV with the canary in a category, a number (toy table), text
    that is not UTF-8, a record a field short and a record whose quote never closes."""
    frame = _frame(kind).astype(object)
    category, other = ("sex", "race") if kind.name in CASES else ("source", "target")
    frame.loc[10, category] = CANARY
    if kind.name in CASES:
        frame.loc[20, "hours"] = CANARY
    lines = frame.to_csv(index=False, lineterminator="\n").encode().split(b"\n")[:-1]
    broken = lines[31].split(b",")
    broken[list(frame.columns).index(other)] = CANARY.encode() + b"\xff\xfe"
    lines[31] = b",".join(broken)
    lines.insert(41, CANARY.encode() + b",a field short")
    lines.insert(51, b'"' + CANARY.encode() + b"," + b",".join(lines[51].split(b",")[1:]))
    path = folder / "canary.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def canary_parquet(kind, folder: Path) -> Path:
    """The kind's data as Parquet with the canary in a category (out of the domain) and,
    in another row, followed by bytes that are not UTF-8."""
    frame = _frame(kind)
    category = "sex" if kind.name in CASES else "source"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    values = [v.encode() for v in table[category].to_pylist()]
    values[10] = CANARY.encode()
    values[20] = CANARY.encode() + b"\xff"
    table = table.set_column(table.schema.get_field_index(category), category,
                             pa.array(values, pa.binary()).view(pa.string()))
    path = folder / "canary.parquet"
    pq.write_table(table, path)
    return path


# --- where it must not be ----------------------------------------------------------------------


def texts(path: Path) -> Iterator[bytes]:
    """A file's bytes and, for the formats that compress or encode text, its decoded
    content (Parquet values, DuckDB and SQLite tables, NumPy arrays, gzip)."""
    raw = path.read_bytes()
    yield raw
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            yield repr(pq.read_table(path).to_pylist()).encode()
        elif name.endswith(".duckdb"):
            import duckdb

            with duckdb.connect(str(path), read_only=True) as con:
                for (table,) in con.execute("SELECT table_name FROM information_schema.tables"
                                            ).fetchall():
                    yield repr(con.execute(f'SELECT * FROM "{table}"').fetchall()).encode()
        elif raw.startswith(b"SQLite format 3"):
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                yield "\n".join(con.iterdump()).encode()
            finally:
                con.close()
        elif name.endswith(".npz"):
            with np.load(path, allow_pickle=False) as arrays:
                for key in arrays.files:
                    yield repr(arrays[key].tolist()).encode()
        elif name.endswith(".gz"):
            yield gzip.decompress(raw)
    except Exception as exc:  # a file being written by a server, say: its bytes were read
        yield repr(exc).encode()


def leaks(*roots: Path) -> list[str]:
    """The files under ``roots`` that hold the canary."""
    found = []
    for root in roots:
        if not root.exists():
            continue
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            if path.is_file() and any(CANARY.encode() in text for text in texts(path)):
                found.append(str(path))
    return found


def argv(kind, contract: Path, data: Path, folder: Path) -> list[str]:
    """The CLI command line of the kind's case (``--no-prefect``)."""
    case = ALL_CASES[kind.name]
    model = family(case.command).params
    words = [case.command, "--no-prefect"]
    for name, value in case.params(contract, data, folder).items():
        info = model.model_fields[name]
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        flag = str(extra.get("cli") or "--" + name.replace("_", "-"))
        words += [flag] if value is True else [flag, str(value)]
    return words


def _run(kind, data_kind: str, tmp_path: Path, capsys, caplog,
         system_temp: Path, privacy_registry: Path) -> tuple[int, str]:
    """Run the kind's case on canary data; returns its exit code and the output."""
    caplog.set_level(logging.DEBUG)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    make = canary_csv if data_kind == "csv" else canary_parquet
    data = make(kind, inputs)
    code = main(argv(kind, _contract(kind, inputs), data, tmp_path))
    out, err = capsys.readouterr()
    return code, out + err


def _assert_clean(tmp_path: Path, output: str, caplog, *roots: Path) -> None:
    assert CANARY not in output
    assert CANARY not in caplog.text
    assert not [r for r in caplog.records if CANARY in str(r.args) or CANARY in str(r.msg)]
    assert leaks(tmp_path / "releases", tmp_path / "work", *roots) == []


@pytest.mark.parametrize("data_kind", ["csv", "parquet"])
@pytest.mark.parametrize("kind", COVERED, ids=lambda k: k.name)
def test_a_release_leaves_no_canary(kind, data_kind, tmp_path, capsys, caplog, system_temp,
                                    privacy_registry):
    code, output = _run(kind, data_kind, tmp_path, capsys, caplog, system_temp,
                        privacy_registry)
    _assert_clean(tmp_path, output, caplog, system_temp, privacy_registry)
    assert code == 0, output
    assert list((tmp_path / "releases").rglob("manifest.json"))  # it published


@pytest.mark.parametrize("kind", COVERED, ids=lambda k: k.name)
def test_a_run_failing_after_its_private_read_leaves_no_canary(
        kind, tmp_path, capsys, caplog, system_temp, privacy_registry, monkeypatch):
    """A run that read the data and then failed (injected in its first noise stage): its
    reservation, its cleanup and its one-line error hold no canary either."""
    run_stage = protocol.InProcess.run_stage

    def failing(self, stage, context, state):
        if stage.noise:
            raise RuntimeError(f"injected in stage {stage.name}")
        return run_stage(self, stage, context, state)

    monkeypatch.setattr(protocol.InProcess, "run_stage", failing)
    code, output = _run(kind, "csv", tmp_path, capsys, caplog, system_temp, privacy_registry)
    _assert_clean(tmp_path, output, caplog, system_temp, privacy_registry)
    assert code == 1 and "injected in stage" in output, output
    assert not list((tmp_path / "releases").rglob("manifest.json"))  # nothing published


def test_the_scan_finds_a_canary(tmp_path):
    """The scan reads through encodings: a canary in a zstd Parquet value, a DuckDB or
    SQLite table, a NumPy array (UTF-32: not in its bytes) is found."""
    pq.write_table(pa.table({"x": [CANARY * 3] * 50}), tmp_path / "a.parquet",
                   compression="zstd")
    np.savez(tmp_path / "b.npz", a=np.array([CANARY]))
    con = sqlite3.connect(tmp_path / "c.db")
    con.execute("CREATE TABLE t (v TEXT)")
    con.execute("INSERT INTO t VALUES (?)", (CANARY,))
    con.commit()
    con.close()
    import duckdb

    with duckdb.connect(str(tmp_path / "d.duckdb")) as con:
        con.execute("CREATE TABLE t AS SELECT ? || range::VARCHAR AS v FROM range(5000)",
                    [CANARY])
    assert sorted(Path(p).name for p in leaks(tmp_path)) == [
        "a.parquet", "b.npz", "c.db", "d.duckdb"]
    assert CANARY.encode() not in (tmp_path / "b.npz").read_bytes()  # found by decoding


# --- through Prefect ---------------------------------------------------------------------------


def _prefect_database() -> Path:
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    url = str(PREFECT_SERVER_DATABASE_CONNECTION_URL.value())
    return Path(url.split(":///", 1)[1])


@pytest.mark.slow
@pytest.mark.prefect
def test_prefect_runs_leave_no_canary_in_prefects_database(
        prefect_harness, tmp_path, caplog, capsys, monkeypatch, system_temp,
        privacy_registry):
    """The table kind through the Prefect driver: a release of the canary CSV, one of the
    canary Parquet (whose text that is not UTF-8 used to fail the run with the value in its
    message, stored by Prefect) and one failing after its private read. Then Prefect's
    database (every table), its home folder and the logs hold no canary."""
    import os
    import time

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from prefect.logging.handlers import APILogWorker

    from flows.kinds import run_local
    from privfair.release.tabular import stages as table_kind
    from privfair.release.tabular.plan import ReleaseParams

    caplog.set_level(logging.DEBUG)
    kind = next(k for k in COVERED if k.name == "table")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    contract = _contract(kind, inputs)
    runs: dict[str, Any] = {}

    def release(name: str, data: Path) -> None:
        params = {**CASES["table"].params(contract, data, tmp_path / name)}
        try:
            runs[name] = run_local(ReleaseParams(**params), command="release")
        except Exception as exc:  # kept: the scan first, then the outcome
            runs[name] = exc

    release("csv", canary_csv(kind, inputs))
    release("parquet", canary_parquet(kind, inputs))

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected after the private read")

    with monkeypatch.context() as m:
        m.setattr(table_kind, "discretize_counted", failing)
        release("failed", canary_csv(kind, inputs))
    APILogWorker.drain_all(timeout=10)
    time.sleep(2)  # the server writes what it was sent
    database = _prefect_database()
    scanned = list(database.parent.glob(database.name + "*"))
    assert database in scanned
    found = leaks(*scanned, Path(os.environ["PREFECT_HOME"]), system_temp, privacy_registry,
                  *(tmp_path / name for name in runs))
    assert found == []
    assert CANARY not in caplog.text and CANARY not in "".join(capsys.readouterr())
    assert not isinstance(runs["csv"], Exception), runs["csv"]
    assert not isinstance(runs["parquet"], Exception), runs["parquet"]
    assert isinstance(runs["failed"], RuntimeError)
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as con:
        (states,) = con.execute("SELECT count(*) FROM flow_run").fetchone()
    assert states >= 3  # the runs reached the database that was scanned
