"""Fast cases of the fresh bad-input battery (benchmarks/bad_inputs_fresh.py, issue 45):
what its first run found, each refused in one line naming the option, and a sample of its
number cases classified by the battery's own rule. No Prefect, no release."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bad_inputs_fresh as battery
from privfair.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The battery's toy contract and data in an isolated home, as the current folder."""
    (tmp_path / "toy.yaml").write_text(battery.TOY_CONTRACT)
    (tmp_path / "toy.csv").write_text("grp,age,color,y\na,20,red,no\nb,40,blue,yes\n"
                                      "a,70,green,yes\nb,10,red,no\n")
    (tmp_path / "user.txt").write_text("a user's file\n")
    for name, value in battery.case_env(tmp_path).items():
        if name.startswith(("PRIVFAIR_", "XDG_", "PREFECT_HOME")):
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _one_line(code: int, err: str, *names: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "Traceback" not in err and all(n in err for n in names), err


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_ledger_export_never_overwrites_a_users_file(toy, capsys):
    for target in ("user.txt", "toy.yaml", "toy.csv"):
        before = _digest(toy / target)
        code, err = _cli(capsys, "ledger", "export", "--dataset", "toyfresh", "--out", target)
        _one_line(code, err, "--out", target, "exists")
        assert _digest(toy / target) == before


def test_discretize_never_overwrites_a_users_file(toy, capsys):
    before = _digest(toy / "user.txt")
    code, err = _cli(capsys, "discretize", "--contract", "toy.yaml", "--data", "toy.csv",
                     "--out", "user.txt")
    _one_line(code, err, "--out", "user.txt")
    assert _digest(toy / "user.txt") == before
    assert _cli(capsys, "discretize", "--contract", "toy.yaml", "--data", "toy.csv",
                "--out", "codes.parquet")[0] == 0  # a new file is written


def test_predict_out_must_be_a_new_file(toy):
    from privfair.store.outputs import OutputPathError, check_output

    with pytest.raises(OutputPathError, match="--out user.txt exists"):
        check_output("user.txt", flag="--out", new_file=True)
    assert check_output("new.csv", flag="--out", new_file=True) == toy / "new.csv"


def test_ledger_show_refuses_a_store_that_is_a_file_or_an_impossible_name(toy, capsys):
    code, err = _cli(capsys, "ledger", "show", "--out", "toy.csv")
    _one_line(code, err, "--out toy.csv", "not a release store folder")
    code, err = _cli(capsys, "ledger", "show", "--out", "x" * 300)
    _one_line(code, err, "--out", "File name too long")
    assert _cli(capsys, "ledger", "show", "--out", "not-there-yet")[0] == 0


@pytest.mark.parametrize("argv, option", [
    (["store", "gc", "--work-dir", "work", "--dry-run", "--older-than", "1e300"],
     "--older-than"),
    (["audit", "--noise-only", "--quick", "--mechanism", "gaussian", "--scale-noise",
      "1e300"], "--scale-noise"),
])
def test_huge_but_finite_numbers_are_refused(toy, capsys, argv, option):
    (toy / "work" / "artefacts").mkdir(parents=True)  # a working folder gc accepts
    code, err = _cli(capsys, *argv)
    _one_line(code, err, option)


@pytest.mark.parametrize("command", [["discretize", "--data", "toy.csv", "--out", "c.parquet"],
                                     ["ledger", "raise", "--reason", "x"]])
def test_a_contract_name_that_cannot_name_a_dataset_is_refused_by_every_command(
        toy, capsys, command):
    (toy / "bad.yaml").write_text(battery.TOY_CONTRACT.replace("name: toyfresh",
                                                               "name: ../../etc/evil"))
    code, err = _cli(capsys, *command, "--contract", "bad.yaml")
    _one_line(code, err, "bad.yaml", "../../etc/evil")
    assert not (toy / "c.parquet").exists()


def test_evaluate_refuses_a_fifo_as_data_without_waiting(toy):
    os.mkfifo(toy / "fifo")
    env = battery.case_env(toy)
    result = subprocess.run(
        [sys.executable, "-m", "privfair.cli", "evaluate", "--contract", "toy.yaml", "--data",
         "fifo", "--methods", "mst", "--epsilons", "1", "--seeds", "1", "--no-prefect",
         "--out", "ev"], cwd=toy, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--data fifo is not a regular file" in result.stderr
    assert not (toy / "ev").exists()


SAMPLE = [c for c in battery.number_cases()
          if c.command in ("contract check", "discretize", "store gc", "ledger raise")
          and c.argv[-1] in ("-1", "nan", "1e300", "0x10", "\u0663")]


def test_the_sample_is_not_empty():
    assert len(SAMPLE) >= 8


@pytest.mark.parametrize("case", SAMPLE, ids=[c.case_id for c in SAMPLE])
def test_battery_number_case(toy, capsys, case):
    (toy / "work").mkdir()
    code = main(case.argv)
    err = capsys.readouterr().err
    result, why = battery.classify(case, code, err, [], [], 0)
    assert result in ("clear", "acceptable"), (case.case_id, result, why, err)


def test_evaluate_on_a_table_without_rows_says_so(toy, capsys):
    (toy / "header.csv").write_text("grp,age,color,y\n")
    code, err = _cli(capsys, "evaluate", "--contract", "toy.yaml", "--data", "header.csv",
                     "--methods", "mst", "--epsilons", "1", "--seeds", "1", "--no-prefect",
                     "--out", "ev")
    _one_line(code, err, "header.csv", "no rows")


def test_predict_out_needs_a_csv_or_parquet_name(toy, capsys):
    (toy / "release").mkdir()
    code, err = _cli(capsys, "predict", "--release", "release", "--data", "toy.csv",
                     "--out", "scores.xlsx")
    _one_line(code, err, "--out scores.xlsx", ".csv or .parquet")
    assert not (toy / "scores.xlsx").exists()


def test_store_check_refuses_a_folder_that_is_not_a_store(toy, capsys):
    (toy / "work" / "artefacts").mkdir(parents=True)
    code, err = _cli(capsys, "store", "check", "--out", "work")
    _one_line(code, err, "--out work", "not a release store")
    (toy / "empty").mkdir()  # nothing published yet: consistent
    assert _cli(capsys, "store", "check", "--out", "empty")[0] == 0


def test_one_battery_runs_both_sets_of_cases(monkeypatch, capsys):
    """Issue 45.6: ``benchmarks/bad_inputs.py`` runs the fresh battery's cases after its own
    (same filters) and counts the failures of both in one figure."""
    import json

    from benchmarks import bad_inputs

    fresh_ids = [c.case_id for c in bad_inputs.fresh_cases()]
    assert len(fresh_ids) >= 490 and len(set(fresh_ids)) == len(fresh_ids)
    assert len(bad_inputs.CASES) >= 800
    calls = []

    def fake_run(**kw):
        calls.append(kw)
        return {"cases": 3, "totals": dict(zip(battery.CLASSES, [1, 0, 0, 0, 1, 1],
                                               strict=True)),
                "prefect_cases": 0, "wall_s": 0.1, "not_clear": ["x", "y"]}

    monkeypatch.setattr(battery, "run_battery", fake_run)
    assert bad_inputs.main(["--only", "no-case-has-this-name", "--no-prefect-cases"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert calls == [{"only": "no-case-has-this-name", "prefect": False, "jobs": 2,
                      "out": None, "every": 1}]
    assert printed["cases"] == 0 and printed["fresh"]["cases"] == 3
    assert printed["failures_both"] == 2  # the fresh set's wrongly accepted and crash
    calls.clear()
    bad_inputs.main(["--only", "no-case-has-this-name", "--no-fresh"])
    assert calls == [] and "fresh" not in json.loads(capsys.readouterr().out)
