"""The fast cases of the round-four bad-input battery (benchmarks/bad_inputs_round4.py) that
found a fault: each is refused with one line naming the parameter, before anything is
reserved, and writes nothing."""

from __future__ import annotations

import pytest

from privfair.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


TOY = """\
name: toy4
version: "1.0.0"
columns:
  - name: sex
    type: categorical
    categories: [F, M]
  - name: grp
    type: categorical
    categories: [a, b, c]
  - name: age
    type: numeric
    integer: true
    bins: [0, 30, 60, 100]
    out_of_domain: clamp
  - name: y
    type: categorical
    categories: ["0", "1"]
roles:
  protected: [sex]
  admissible: [grp, age]
  outcome: [y]
  free: []
budget: {epsilon: 4.0, delta: 1.0e-6}
reviewed: true
"""


@pytest.fixture
def toy(tmp_path):
    contract = tmp_path / "toy4.yaml"
    contract.write_text(TOY)
    data = tmp_path / "toy4.csv"
    data.write_text("sex,grp,age,y\n" + "F,a,20,0\nM,b,40,1\nF,c,70,1\n" * 30)
    return contract, data


def assert_one_clear_line(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    lines = [s for s in err.splitlines() if s.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    line = lines[-1]
    assert line.startswith("privfair"), err
    assert any(w in line for w in words), line
    return line


def nothing_reserved(contract_name: str = "toy4") -> None:
    import os
    import sqlite3
    from pathlib import Path

    db = Path(os.environ["PRIVFAIR_REGISTRY"]) / "registry.sqlite"
    if not db.exists():
        return
    con = sqlite3.connect(db)
    try:
        kinds = [k for (k,) in con.execute("select kind from entries where dataset = ?",
                                           (contract_name,))]
    except sqlite3.OperationalError:
        kinds = []
    finally:
        con.close()
    assert "reserve" not in kinds, kinds


@pytest.mark.parametrize("value", ["1e308", "1e6"])
def test_audit_scale_is_bounded(capsys, value):
    """``audit --scale 1e308`` was an OverflowError (internal error) in the trial counts."""
    code, _, err = run_cli(capsys, "audit", "--noise-only", "--quick", "--mechanism",
                           "gaussian", "--scale", value)
    assert_one_clear_line(code, err, "--scale")


def test_release_batch_size_is_bounded_before_the_reservation(capsys, tmp_path, toy):
    """``release --batch-size 10**30`` was an OverflowError after the reservation."""
    contract, data = toy
    code, _, err = run_cli(capsys, "release", "--contract", contract, "--data", data,
                           "--epsilon", "0.3", "--delta", "1e-8", "--out", tmp_path / "rel",
                           "--work-dir", tmp_path / "w", "--no-prefect", "--batch-size",
                           str(10 ** 30))
    assert_one_clear_line(code, err, "batch_size", "batch-size")
    nothing_reserved()


@pytest.mark.parametrize("argv, words", [
    (["discretize", "--batch-size", str(10 ** 30)], ("--batch-size",)),
    (["contract", "draft", "--max-categories", str(10 ** 30)], ("--max-categories",)),
    (["contract", "draft", "--max-codes", str(10 ** 30)], ("--max-codes",)),
    (["contract", "check", "{contract}", "--data", "{data}", "--max-examples", str(10 ** 30)],
     ("--max-examples",)),
])
def test_huge_counts_are_refused(capsys, tmp_path, toy, argv, words):
    """Huge counts were OverflowErrors / DuckDB conversion errors (internal errors)."""
    contract, data = toy
    argv = [a.format(contract=contract, data=data) for a in argv]
    if argv[0] == "discretize":
        argv += ["--contract", str(contract), "--data", str(data), "--out",
                 str(tmp_path / "codes.parquet")]
    elif argv[1] == "draft":
        argv += ["--data", str(data), "--out", str(tmp_path / "draft.yaml")]
    code, _, err = run_cli(capsys, *argv)
    assert_one_clear_line(code, err, *words)
    assert not (tmp_path / "codes.parquet").exists() and not (tmp_path / "draft.yaml").exists()


def test_predict_names_a_data_file_that_does_not_read(capsys, tmp_path, toy):
    """``predict --data empty.csv`` said "No columns to parse from file", naming no file."""
    contract, data = toy
    store = tmp_path / "rel"
    code, _, err = run_cli(capsys, "train", "--contract", contract, "--data", data,
                           "--epsilon", "0.5", "--model", "pflr", "--out", store,
                           "--work-dir", tmp_path / "w", "--no-prefect")
    assert code == 0, err
    bad = tmp_path / "rows.csv"
    bad.write_bytes(b"")
    release = next((store / "toy4").glob("v*"))
    code, _, err = run_cli(capsys, "predict", "--release", release, "--data", bad)
    assert_one_clear_line(code, err, str(bad))


def test_prefect_home_that_is_a_file_is_named(tmp_path, toy):
    """Through Prefect, a ``PREFECT_HOME`` that is a file was "the temporary Prefect API
    server exited with code 3 (no output)", naming nothing."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    contract, data = toy
    home = tmp_path / "prefect-home"
    home.write_text("not a folder")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PYTHONPATH=str(root), DO_NOT_TRACK="1")
    done = subprocess.run([sys.executable, "-m", "privfair.cli", "release", "--contract",
                           str(contract), "--data", str(data), "--epsilon", "0.3", "--delta",
                           "1e-8", "--out", str(tmp_path / "rel"), "--work-dir",
                           str(tmp_path / "w")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert_one_clear_line(done.returncode, done.stderr, "PREFECT_HOME")
    nothing_reserved()
    assert not (tmp_path / "rel" / "toy4").exists()


def test_contract_pin_names_a_symlink_loop(capsys, tmp_path):
    """``contract pin loop.yaml`` (a symbolic link loop) was an internal RuntimeError."""
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.b")
    (tmp_path / "loop.b").symlink_to(tmp_path / "loop.yaml")
    code, _, err = run_cli(capsys, "contract", "pin", str(tmp_path / "loop.yaml"), "--out",
                           str(tmp_path / "pinned.yaml"))
    assert_one_clear_line(code, err, "loop.yaml")
    assert not (tmp_path / "pinned.yaml").exists()


@pytest.mark.slow
def test_two_temporary_servers_on_one_fresh_prefect_home_both_start(tmp_path, monkeypatch):
    """Two Prefect runs started at once on a fresh ``PREFECT_HOME``: the second server lost
    the race to create the database and exited with code 3 ("no output"); now it is started
    again and answers."""
    from flows import temporary_server

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(temporary_server, "configured_api_url", lambda: None)
    monkeypatch.delitem(__import__("sys").modules, "prefect", raising=False)
    servers = [temporary_server.start(), temporary_server.start()]
    try:
        for server in servers:
            assert server is not None
            server.wait(timeout=180)  # raises ServerStartError if it never answers
    finally:
        for server in servers:
            if server is not None:
                server.stop()


def test_ledger_raise_refuses_a_contract_that_pins_another_registry(capsys, tmp_path, toy):
    """``ledger raise`` with a contract pinned to another registry recorded a raise in this
    one; every reservation refuses such a contract, and so does the raise now."""
    import os
    import sqlite3
    from pathlib import Path

    contract, data = toy
    code, _, err = run_cli(capsys, "release", "--contract", contract, "--data", data,
                           "--epsilon", "0.3", "--delta", "1e-8", "--out", tmp_path / "rel",
                           "--work-dir", tmp_path / "w", "--no-prefect")
    assert code == 0, err
    pinned = tmp_path / "other.yaml"
    pinned.write_text(TOY + "registry_id: 0123456789abcdef0123456789abcdef\n")
    db = Path(os.environ["PRIVFAIR_REGISTRY"]) / "registry.sqlite"
    count = sqlite3.connect(db).execute("select count(*) from entries").fetchone()[0]
    code, _, err = run_cli(capsys, "ledger", "raise", "--contract", pinned, "--reason", "x")
    assert_one_clear_line(code, err, "registry")
    assert sqlite3.connect(db).execute("select count(*) from entries").fetchone()[0] == count
