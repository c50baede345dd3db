"""The bad-input suite (issue 10.9, 10.10, 10.11): every case exits 2 with one line naming the
problem, writes nothing to the store and changes no lifetime ledger, on the ``--no-prefect``
path and (a handful of cases, one harness session) on the Prefect path."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_CONTRACT
from test_cli import release_argv, run_cli

from privfair.contracts.schema import load_contract
from privfair.store.registry import has_ledger, read_lifetime_ledger


def _contract(tmp_path: Path, text: str, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _data(tmp_path: Path, frame: pd.DataFrame, fmt: str, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def _with_inf(frame: pd.DataFrame, value: float) -> pd.DataFrame:
    frame = frame.astype({"hours": float})
    frame.loc[4, "hours"] = value
    return frame


def _duplicate_csv(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = _data(tmp_path, frame, "csv", "dup")
    text = path.read_text().replace("hours,", "age,", 1)
    path.write_text(text)
    return path


def _duplicate_parquet(tmp_path: Path, frame: pd.DataFrame) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.rename_columns(["age" if c == "hours" else c for c in table.column_names])
    path = tmp_path / "dup.parquet"
    pq.write_table(table, path)
    return path


def _wide_contract(tmp_path: Path) -> Path:
    many = ", ".join(f"c{i}" for i in range(400))
    text = TOY_CONTRACT.replace("categories: [HS, BA, MA, PhD]", f"categories: [HS, BA, MA, PhD, {many}]")
    text = text.replace("categories: [A, B, C]", f"categories: [A, B, C, {many}]")
    return _contract(tmp_path, text, "wide")


# (case id, builder(tmp_path, frame, parquet) -> (argv tweaks), words in the one line)
def _case(case: str, tmp_path: Path, frame: pd.DataFrame, good: Path, monkeypatch):
    contract = tmp_path / "toy.yaml"
    extra: list[str] = []
    data, out, work = good, tmp_path / "releases", tmp_path / "w"
    if case == "epsilon-1e300":
        extra, words = ["--epsilon", "1e300"], ["epsilon", "1e+300", "outside"]
    elif case == "epsilon-1e-300":
        extra, words = ["--epsilon", "1e-300"], ["epsilon", "outside"]
    elif case == "epsilon-nan":
        extra, words = ["--epsilon", "nan"], ["epsilon", "finite"]
    elif case == "epsilon-inf":
        extra, words = ["--epsilon", "inf"], ["epsilon", "finite"]
    elif case == "delta-5e-324":
        extra, words = ["--delta", "5e-324"], ["delta", "outside (1e-50, 1)"]
    elif case == "delta-zero":
        extra, words = ["--delta", "0"], ["delta", "outside (1e-50, 1)"]
    elif case == "eta-without-tot":
        extra, words = ["--eta", "0.05"], ["eta", "--fairness tot"]
    elif case == "n-rows-1e10":
        extra, words = ["--n-rows", "10000000000"], ["n_rows", "GiB", "fewer rows"]
    elif case == "huge-domain":
        contract = _wide_contract(tmp_path)
        monkeypatch.setenv("PRIVFAIR_MEMORY_GB", "0.001")
        words = ["clique", "(race, edu)", "GiB", "coarsen"]
    elif case == "out-with-question-mark":
        out, words = tmp_path / "rel?ases", ["--out", "wildcard"]
    elif case == "out-with-newline":
        out, words = tmp_path / "rel\nases", ["--out", "control character"]
    elif case == "contract-named-catalog":
        contract = _contract(tmp_path, TOY_CONTRACT.replace("name: toy", "name: catalog.duckdb"))
        words = ["'catalog.duckdb'", "reserved"]
    elif case == "dataset-folder-is-a-file":
        out.mkdir()
        (out / "toy").write_text("not a folder")
        words = ["dataset folder", "not a writable folder"]
    elif case == "work-dir-is-a-file":
        work.write_text("a file")
        words = ["--work-dir", "is a file"]
    elif case == "work-dir-parent-is-a-file":
        (tmp_path / "wfile").write_text("a file")
        work, words = tmp_path / "wfile" / "w", ["--work-dir", "parent", "is a file"]
    elif case == "duplicate-columns-csv":
        data, words = _duplicate_csv(tmp_path, frame), ["duplicate column name 'age'"]
    elif case == "duplicate-columns-parquet":
        data, words = _duplicate_parquet(tmp_path, frame), ["duplicate column name 'age'"]
    elif case == "missing-column":
        data = _data(tmp_path, frame.drop(columns=["sex"]), "parquet")
        words = ["missing column", "sex"]
    else:  # pragma: no cover
        raise AssertionError(case)
    # No test seed: production runs draw fresh entropy, and refusals come before any noise.
    argv = release_argv(contract, data, out, work, *extra)
    # (--insecure-seed without --seed is refused itself: issue 45.4)
    return [a for i, a in enumerate(argv) if "--seed" not in argv[max(i - 1, 0):i + 1]
            and a != "--insecure-seed"], words, out


NO_PREFECT_CASES = [
    "epsilon-1e300", "epsilon-1e-300", "epsilon-nan", "epsilon-inf", "delta-5e-324",
    "delta-zero", "eta-without-tot", "n-rows-1e10", "huge-domain", "out-with-question-mark",
    "out-with-newline", "contract-named-catalog", "dataset-folder-is-a-file",
    "work-dir-is-a-file", "work-dir-parent-is-a-file", "duplicate-columns-csv",
    "duplicate-columns-parquet", "missing-column",
]


@pytest.mark.parametrize(("value", "fmt"), [(np.inf, "parquet"), (np.inf, "csv"),
                                            (-np.inf, "csv")])
def test_infinities_are_released_under_the_policy(value, fmt, capsys, tmp_path, toy_contract,
                                                  toy_frame):
    """Issue 21.2: an infinity is a value, not a schema fact: ``hours`` drops the row (its
    out_of_domain policy) and the release publishes, charged."""
    data = _data(tmp_path, _with_inf(toy_frame, value), fmt)
    argv = release_argv(toy_contract, data, tmp_path / "releases", tmp_path / "w")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert _ledger_state(toy_contract)[1] == 1


def _ledger_state(contract_path: Path) -> tuple[float, int]:
    """(ρ charged, releases) of the toy dataset's lifetime ledger (zero when none)."""
    try:
        contract = load_contract(contract_path)
    except Exception:  # a contract the case made unparseable has no ledger either
        return 0.0, 0
    if not has_ledger(contract.name):
        return 0.0, 0
    book = read_lifetime_ledger(None, contract)
    return book.rho_spent, len(book.releases)


def _assert_refused(code, out, err, words, store, before):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privfair: error: "), lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert out == ""
    files = sorted(p.name for p in store.rglob("*")) if store.exists() else []
    assert files == before, files


@pytest.mark.parametrize("case", NO_PREFECT_CASES)
def test_bad_input_is_refused_without_prefect(case, capsys, tmp_path, toy_contract, toy_frame,
                                              toy_parquet, monkeypatch):
    argv, words, store = _case(case, tmp_path, toy_frame, toy_parquet, monkeypatch)
    before = sorted(p.name for p in store.rglob("*")) if store.exists() else []
    code, out, err = run_cli(capsys, *argv)
    _assert_refused(code, out, err, words, store, before)
    assert _ledger_state(Path(argv[argv.index("--contract") + 1])) == (0.0, 0)
    assert "SECRET" not in err


def test_catalog_held_by_another_process_is_refused(capsys, tmp_path, toy_contract,
                                                     toy_parquet):
    """Issue 10.9: a catalog another process holds open is refused in one line, in seconds."""
    store = tmp_path / "releases"
    store.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "c.execute('CREATE TABLE t (x INT)'); print('ready', flush=True); time.sleep(60)",
         str(store / "catalog.duckdb")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = sorted(p.name for p in store.rglob("*"))
        t0 = time.monotonic()
        code, out, err = run_cli(capsys, *release_argv(toy_contract, toy_parquet, store,
                                                       tmp_path / "w"))
        assert time.monotonic() - t0 < 8
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    _assert_refused(code, out, err, ["catalog", "held by another process"], store, before)
    assert _ledger_state(toy_contract) == (0.0, 0)


def test_all_null_column_under_an_as_policy_is_released(capsys, tmp_path, toy_contract,
                                                         toy_frame):
    """Issue 10.10: a column holding only nulls under ``nulls: "as:HS"`` is handled (at
    613a631 a Parquet file refused it for its NULL type)."""
    frame = toy_frame.copy()
    frame["edu"] = None
    data = _data(tmp_path, frame, "parquet", "allnull")
    argv = release_argv(toy_contract, data, tmp_path / "releases", tmp_path / "w")
    argv = [a for i, a in enumerate(argv) if "--seed" not in argv[max(i - 1, 0):i + 1]
            and a != "--insecure-seed"]  # fresh entropy: no test mode (issue 45.4)
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    synth = pd.read_parquet(Path(out.strip()) / "synthetic.parquet")
    assert set(synth.columns) >= {"edu"}


#: Every case again through the Prefect flow, in one harness session (each run costs ~1 s).
PREFECT_CASES = NO_PREFECT_CASES


@pytest.mark.prefect
def test_bad_input_is_refused_on_the_prefect_path(prefect_harness, capsys, tmp_path_factory,
                                                  toy_frame, monkeypatch):
    """The same refusals through the Prefect flow: one line, no traceback (issue 10.11)."""
    for case in PREFECT_CASES:
        tmp_path = tmp_path_factory.mktemp(case)
        contract = tmp_path / "toy.yaml"
        contract.write_text(TOY_CONTRACT)
        good = _data(tmp_path, toy_frame, "parquet", "toy")
        argv, words, store = _case(case, tmp_path, toy_frame, good, monkeypatch)
        argv = [a for a in argv if a != "--no-prefect"]
        before = sorted(p.name for p in store.rglob("*")) if store.exists() else []
        code, out, err = run_cli(capsys, *argv)
        _assert_refused(code, out, err, words, store, before)
        assert _ledger_state(contract) == (0.0, 0), case


# --- issue 36 and issue 32 item 8: every kind's public facts, before the reservation ---------

from kind_cases import CASES, EDGE_LIST_CASES, edge_list_example  # noqa: E402

from privfair.store.registry import read_chain  # noqa: E402


def _kind_argv(name: str, contract: Path, data: Path, tmp_path: Path, **over) -> list[str]:
    """The CLI request of a kind's test case, with ``over`` replacing its parameters."""
    case = {**CASES, **EDGE_LIST_CASES}[name]
    params = {**case.params(contract, data, tmp_path), **over}
    argv = [case.command, "--no-prefect"]
    for key, value in params.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def _entries(ident: str, kind: str) -> list[dict]:
    return [e for e in read_chain(ident) if e["kind"] == kind]


def _kind_inputs(name: str, tmp_path: Path, toy_contract: Path, toy_parquet: Path
                 ) -> tuple[Path, Path, str]:
    if name in EDGE_LIST_CASES:
        contract, data = edge_list_example()
        return contract, data, "example_graph"
    return toy_contract, toy_parquet, "toy"


def _spoiled_contract(contract: Path, tmp_path: Path, old: str, new: str) -> Path:
    text = contract.read_text()
    assert old in text, old
    path = tmp_path / "spoiled.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


#: Public facts every kind must refuse before it reserves: (id, parameter changes, words).
PUBLIC_FACTS = {
    "work-dir-inside-out": (lambda t: {"work_dir": str(t / "releases" / "w")},
                            ["--work-dir", "--out"]),
    "work-dir-is-out": (lambda t: {"work_dir": str(t / "releases")}, ["--work-dir", "--out"]),
    "out-cannot-be-created": (lambda t: {"out": "/proc/privfair-test/releases"},
                              ["--out", "cannot be created"]),
    "work-dir-cannot-be-created": (lambda t: {"work_dir": "/proc/privfair-test/w"},
                                   ["--work-dir", "cannot be created"]),
    "out-symlink-loop": (lambda t: {"out": str(_loop(t))}, ["--out", "symbolic link"]),
    "epsilon-with-underscore": (lambda t: {"epsilon": "1_0"}, ["--epsilon", "'1_0'"]),
    "epsilon-1e400": (lambda t: {"epsilon": "1e400"}, ["--epsilon", "finite"]),
}


def _loop(tmp_path: Path) -> Path:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    return loop


@pytest.mark.parametrize("fact", sorted(PUBLIC_FACTS))
@pytest.mark.parametrize("name", sorted({**CASES, **EDGE_LIST_CASES}))
def test_every_kind_refuses_public_facts_before_reserving(name, fact, capsys, tmp_path,
                                                           toy_contract, toy_parquet):
    """Issue 36: each kind refuses a folder it cannot write (found only after the noise at
    e3d9b57, the run staying charged), overlapping folders and a misread number, in one line,
    with no reservation and nothing created."""
    contract, data, ident = _kind_inputs(name, tmp_path, toy_contract, toy_parquet)
    over, words = PUBLIC_FACTS[fact]
    argv = _kind_argv(name, contract, data, tmp_path, **over(tmp_path))
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
    assert _entries(ident, "reserve") == []
    assert not (tmp_path / "releases").exists() and not (tmp_path / "work").exists()


#: Contracts a kind cannot serve (labels, roles, sizes): (kind, model, old, new, words).
UNSERVABLE = [
    ("model", "privlr", "categories: [F, M]", "categories: [F, M, X, Y, Z]",
     ["privlr", "'sex'", "5 labels"]),
    ("model", "pflr", "categories: [F, M]", "categories: [F, M, X, Y, Z]",
     ["pflr", "'sex'", "5 labels"]),
    ("model", "pflr-star", "categories: [F, M]", "categories: [F, M, X, Y, Z]",
     ["pflr-star", "'sex'"]),
    ("model", "dpsgd-f", "categories: [F, M]", "categories: [F]", ["'sex'", "1 label"]),
    ("table", None, "name: toy", "name: catalog.duckdb", ["'catalog.duckdb'", "reserved"]),
    ("gan", None, "name: toy", "name: releases", ["'releases'", "reserved"]),
    ("graph", None, "name: toy", "name: ledger.json", ["'ledger.json'", "reserved"]),
    ("graph", None, "budget: {epsilon: 3.0", "budget: {epsilon: 1e300",
     ["budget.epsilon", "100"]),
    ("table", None, "budget: {epsilon: 3.0", "budget: {epsilon: 1_0", ["'1_0'", "line"]),
    ("gan", None, "roles:", "causal_graph:\n  edges: [[sex, edu], [edu, income], "
     "[income, sex]]\nroles:", ["causal_graph", "cycle"]),
]


@pytest.mark.parametrize(("name", "model", "old", "new", "words"), UNSERVABLE,
                         ids=[f"{u[0]}-{u[1] or ''}-{u[3][:24]}" for u in UNSERVABLE])
def test_unservable_contracts_are_refused_before_reserving(name, model, old, new, words, capsys,
                                                            tmp_path, toy_contract,
                                                            toy_parquet):
    """Issue 32 finding 6: ``train --model privlr`` on a five-label protected column drew
    noise, then stopped, charging 9-12 % of the lifetime budget; each kind now refuses what
    it cannot serve before the reservation (ledger untouched)."""
    contract = _spoiled_contract(toy_contract, tmp_path, old, new)
    over = {"model": model} if model else {}
    argv = _kind_argv(name, contract, toy_parquet, tmp_path, **over)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
    for ident in ("toy", "catalog.duckdb", "releases", "ledger.json"):
        assert _entries(ident, "reserve") == []


@pytest.mark.parametrize(("argv_over", "words"), [
    ({"distortion": "bogus"}, ["--distortion", "--fairness tot"]),
    ({"dask_address": "tcp://127.0.0.1:1"}, ["--dask-address", "--engine dask"]),
    ({"gan_epochs": "2"}, ["--gan-epochs", "GAN"]),
    ({"max_time": "5"}, ["--max-time", "AIM"]),
])
def test_options_that_do_nothing_are_refused(argv_over, words, capsys, tmp_path, toy_contract,
                                             toy_parquet):
    """Issue 36: ``--distortion bogus`` or ``--dask-address`` without ``--engine dask`` was
    ignored; a run with them is not the run asked for."""
    argv = _kind_argv("table", toy_contract, toy_parquet, tmp_path, **argv_over)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and all(w in err for w in words), err
    assert _entries("toy", "reserve") == []


def test_dry_run_probes_the_folders(capsys, tmp_path, toy_contract, toy_parquet):
    """Issue 36: ``--dry-run`` passed an ``--out`` the real run then failed on; it probes the
    folders and leaves nothing behind."""
    (tmp_path / "afile").write_text("x")
    bad = _kind_argv("table", toy_contract, toy_parquet, tmp_path,
                     out=str(tmp_path / "afile" / "releases")) + ["--dry-run"]
    code, out, err = run_cli(capsys, *bad)
    assert code == 2 and "--out" in err and "is a file" in err, err
    good = _kind_argv("table", toy_contract, toy_parquet, tmp_path,
                      out=str(tmp_path / "new" / "releases")) + ["--dry-run"]
    code, out, err = run_cli(capsys, *good)
    assert code == 0, err
    assert not (tmp_path / "new").exists() and not (tmp_path / "work").exists()


def test_resume_checks_the_id_and_the_kind(capsys, tmp_path, toy_contract, toy_parquet,
                                           monkeypatch):
    """Issue 36: ``--resume ../../evil`` read outside the work folder before refusing;
    ``discover --resume <a table run>`` resumed and published a table; ``--resume ''`` ran
    a fresh, charged release."""
    import privfair.release.checkpoint as checkpoint

    opened = []
    real = Path.read_text
    # a context, not monkeypatch.undo(): undo would also drop conftest's per-test registry
    # and send the rest of the test to the user's default one
    with monkeypatch.context() as patch:
        patch.setattr(Path, "read_text", lambda self, *a, **k: (opened.append(self),
                                                                 real(self, *a, **k))[1])
        for rid in ("../../evil", "", "a/b"):
            argv = _kind_argv("table", toy_contract, toy_parquet, tmp_path) + ["--resume", rid]
            code, out, err = run_cli(capsys, *argv)
            assert code == 2 and "--resume" in err, err
    assert not [p for p in opened if "checkpoints" in str(p)]
    assert _entries("toy", "reserve") == []
    code, out, err = run_cli(capsys, *_kind_argv("table", toy_contract, toy_parquet, tmp_path))
    assert code == 0, err
    (run_id,) = [p.stem for p in (tmp_path / "work" / checkpoint.FOLDER).glob("*.json")]
    argv = _kind_argv("graph", toy_contract, toy_parquet, tmp_path) + ["--resume", run_id]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "table release, not graph" in err, err
    (tmp_path / "work" / checkpoint.FOLDER / f"{run_id}.json").write_text("not json {")
    argv = _kind_argv("table", toy_contract, toy_parquet, tmp_path) + ["--resume", run_id]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "checkpoint" in err and run_id in err, err


@pytest.mark.parametrize(("argv", "words"), [
    (["contract", "draft", "--name", "../x"], ["--name", "'../x'"]),
    (["releases", "list", "--out", ""], ["--out", "empty"]),
    (["store", "check", "--out", ""], ["--out", "empty"]),
    (["evaluate", "--epsilons", "1e300", "--no-prefect"], ["epsilons", "outside"]),
    (["store", "gc", "--older-than", "1_0"], ["--older-than", "'1_0'"]),
])
def test_other_commands_refuse_what_release_refuses(argv, words, capsys, tmp_path, toy_csv):
    if argv[:2] == ["contract", "draft"]:
        argv = [*argv, "--data", str(toy_csv)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err


def test_contract_check_refuses_what_release_refuses(capsys, tmp_path, toy_contract):
    """Issue 36: ``contract check`` passed a cyclic causal_graph and a reserved name."""
    for old, new, word in (("name: toy", "name: catalog.duckdb", "reserved"),
                           ("roles:", "causal_graph:\n  edges: [[sex, edu], [edu, sex]]\n"
                                      "roles:", "cycle")):
        path = _spoiled_contract(toy_contract, tmp_path, old, new)
        code, out, err = run_cli(capsys, "contract", "check", str(path))
        assert code == 2 and word in err, err


def test_corrupt_catalog_is_named_at_once(capsys, tmp_path, toy_contract, toy_parquet):
    """Issue 36: a damaged catalog.duckdb read as "held by another process" after 12.5 s."""
    store = tmp_path / "releases"
    store.mkdir()
    (store / "catalog.duckdb").write_bytes(b"not a database" * 50)
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, *_kind_argv("model", toy_contract, toy_parquet, tmp_path))
    assert time.monotonic() - t0 < 5
    assert code == 2 and "not a DuckDB database" in err, err
    code, out, err = run_cli(capsys, "releases", "list", "--out", str(store))
    assert code == 2 and "not a DuckDB database" in err, err


def test_own_data_summary_carries_no_failed_count():
    """Issue 32 item 10: the own-data artifact carried the count of failed cells."""
    from privfair.evaluation.grid import summary_markdown

    results = pd.DataFrame({"error": [None, "ValueError: x", None], "dataset": ["own"] * 3})
    own = summary_markdown(results, "/x", own_data=True)
    assert "cells: **3**" in own and "failed" not in own and "2 ok" not in own
