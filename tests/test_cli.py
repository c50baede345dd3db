"""The ``privfair`` command line: bad input is refused in one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_CONTRACT

from privfair.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def release_argv(contract, data, store, work, *extra) -> list[str]:
    argv = ["release", "--contract", contract, "--epsilon", "1", "--delta", "1e-9",
            "--method", "prefair-greedy", "--seed", "3", "--insecure-seed", "--out", store, "--work-dir", work,
            "--no-prefect"]
    if data is not None:
        argv[3:3] = ["--data", data]
    return [str(a) for a in [*argv, *extra]]


# --- bad input: one case per problem --------------------------------------------------------


def _frame_variant(kind: str, frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    if kind == "missing-column":
        return frame.drop(columns=["race"])
    if kind == "extra-column":
        frame["zip_code"] = "12345"
        return frame
    if kind == "out-of-domain":
        frame.loc[10, "race"] = "Martian"
        return frame
    if kind == "numeric-out-of-range":
        frame.loc[5, "age"] = 130
        return frame
    if kind == "nan-not-allowed":
        frame["hours"] = frame["hours"].astype(float)
        frame.loc[7, "hours"] = np.nan
        return frame
    if kind == "null-category":
        frame.loc[8, "sex"] = None
        return frame
    raise AssertionError(kind)


BAD_DATA = [
    # (variant, file format, words the one-line error must contain): public facts of the
    # file's schema, refused before the reservation
    ("missing-column", "csv", ["missing column", "race"]),
    ("extra-column", "parquet", ["unexpected column", "zip_code"]),
]

#: Values breaking a policy that used to refuse (issue 21.2: a free membership test): the
#: release publishes, the policy (drop) applied, and the ledger shows the run's charge.
BAD_VALUES = [("out-of-domain", "parquet"), ("numeric-out-of-range", "csv"),
              ("nan-not-allowed", "parquet"), ("null-category", "parquet")]


def _bad_data_file(kind: str, fmt: str, frame: pd.DataFrame, folder: Path) -> Path:
    data = folder / f"bad.{fmt}"
    bad = _frame_variant(kind, frame)
    if fmt == "csv":
        bad.to_csv(data, index=False)
    else:
        bad.to_parquet(data, index=False)
    return data


@pytest.mark.parametrize(("kind", "fmt", "words"), BAD_DATA, ids=[b[0] for b in BAD_DATA])
def test_bad_data_is_refused(kind, fmt, words, capsys, tmp_path, toy_contract, toy_frame,
                             store_snapshot):
    data = _bad_data_file(kind, fmt, toy_frame, tmp_path)
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert_refused(code, out, err, words, store, store_snapshot)
    assert "Martian" not in err  # errors name columns, never private values


@pytest.mark.parametrize(("kind", "fmt"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_values_are_released_under_the_policies(kind, fmt, capsys, tmp_path, toy_contract,
                                                    toy_frame):
    from privfair.contracts.schema import load_contract
    from privfair.store.registry import registry_ledgers

    data = _bad_data_file(kind, fmt, toy_frame, tmp_path)
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert code == 0, err
    assert "Martian" not in err + out
    (ledger,) = registry_ledgers(load_contract(toy_contract).name)
    assert [e["kind"] for e in ledger["entries"]] == ["open", "reserve", "spend", "publish"]
    manifest = json.loads((Path(out.strip()) / "manifest.json").read_text())
    assert manifest["validation"]["input"]["refused_on_values"] is False


def assert_refused(code, out, err, words, store, store_snapshot, before=None):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privfair: error: ")
    for w in words:
        assert w in lines[0], lines[0]
    assert out == ""
    assert store_snapshot(store) == (before or {})
    if before is None:
        assert not store.exists()


def _write_contract(tmp_path, text, name) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _contract_cases(tmp_path):
    return {
        "yaml-syntax-error": (_write_contract(tmp_path, TOY_CONTRACT.replace(
            "categories: [F, M]", "categories: [F, M"), "syntax"), ["YAML syntax error", "line"]),
        "roles-overlap": (_write_contract(tmp_path, TOY_CONTRACT.replace(
            "admissible: [edu, hours]", "admissible: [edu, hours, sex]"), "overlap"),
            ["roles", "'sex'", "overlap"]),
        "no-admissible-next-to-outcome": (_write_contract(tmp_path, TOY_CONTRACT.replace(
            "admissible: [edu, hours]", "admissible: []").replace(
            "free: [age]", "free: [age, edu, hours]"), "no-admissible"), ["no admissible attribute"]),
        "contract-missing": (tmp_path / "nope.yaml", ["cannot read the file"]),
    }


@pytest.mark.parametrize("case", ["yaml-syntax-error", "roles-overlap",
                                  "no-admissible-next-to-outcome", "contract-missing"])
def test_bad_contract_is_refused(case, capsys, tmp_path, toy_parquet, store_snapshot):
    contract, words = _contract_cases(tmp_path)[case]
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(contract, toy_parquet, store, tmp_path / "w"))
    assert_refused(code, out, err, words, store, store_snapshot)


BAD_ARGS = [
    ("epsilon-zero", ["--epsilon", "0"], ["epsilon", "outside [1e-06, 100]"]),
    ("epsilon-negative", ["--epsilon", "-1"], ["epsilon", "outside [1e-06, 100]"]),
    ("delta-one", ["--delta", "1"], ["delta", "outside (1e-50, 1)"]),
    ("delta-two", ["--delta", "2.5"], ["delta", "outside (1e-50, 1)"]),
    ("unknown-method", ["--method", "magic"], ["--method", "invalid choice", "magic"]),
    ("n-rows-zero", ["--n-rows", "0"], ["n_rows"]),
    ("epsilon-not-a-number", ["--epsilon", "lots"], ["--epsilon", "not a finite decimal number"]),
]


@pytest.mark.parametrize(("case", "extra", "words"), BAD_ARGS, ids=[b[0] for b in BAD_ARGS])
def test_bad_arguments_are_refused(case, extra, words, capsys, tmp_path, toy_contract,
                                   toy_parquet, store_snapshot):
    store = tmp_path / "releases"
    argv = release_argv(toy_contract, toy_parquet, store, tmp_path / "w", *extra)
    code, out, err = run_cli(capsys, *argv)
    assert_refused(code, out, err, words, store, store_snapshot)
    assert not (tmp_path / "w").exists()  # refused before even the work folder is made


@pytest.mark.prefect
def test_bad_input_is_refused_on_the_prefect_path_too(prefect_harness, capsys, tmp_path,
                                                      toy_contract, toy_frame, toy_parquet,
                                                      store_snapshot):
    """The data, contract and argument cases above, through the Prefect flow: one line,
    exit 2, nothing written (issue 10.11). One harness session serves them all."""

    def prefect_argv(contract, data, folder, *extra):
        argv = release_argv(contract, data, folder / "releases", folder / "w", *extra)
        # production-like: no flag for the in-process path, no test seed
        drop = {"--no-prefect", "--insecure-seed", "--seed", "3"}
        return [a for a in argv if a not in drop]

    for kind, fmt, words in BAD_DATA:
        folder = tmp_path / f"data-{kind}"
        folder.mkdir()
        data = _bad_data_file(kind, fmt, toy_frame, folder)
        code, out, err = run_cli(capsys, *prefect_argv(toy_contract, data, folder))
        assert_refused(code, out, err, words, folder / "releases", store_snapshot)
    for case, (contract, words) in _contract_cases(tmp_path).items():
        folder = tmp_path / f"contract-{case}"
        folder.mkdir()
        code, out, err = run_cli(capsys, *prefect_argv(contract, toy_parquet, folder))
        assert_refused(code, out, err, words, folder / "releases", store_snapshot)
    for case, extra, words in BAD_ARGS:
        folder = tmp_path / f"args-{case}"
        folder.mkdir()
        code, out, err = run_cli(capsys, *prefect_argv(toy_contract, toy_parquet, folder,
                                                       *extra))
        assert_refused(code, out, err, words, folder / "releases", store_snapshot)
    files = tmp_path / "files"
    files.mkdir()
    raw = toy_parquet.read_bytes()
    (files / "corrupt.parquet").write_bytes(raw[: len(raw) // 2] + b"garbage" * 10)
    typed = toy_frame.astype({"age": str})
    typed.loc[3, "age"] = "forty"
    typed.to_parquet(files / "typed.parquet", index=False)
    for name, words in (("corrupt.parquet", ["cannot be read as Parquet"]),
                        ("typed.parquet", ["'age'", "type text", "numeric"]),
                        ("nope.csv", ["does not exist"])):
        folder = tmp_path / f"file-{name}"
        folder.mkdir()
        code, out, err = run_cli(capsys, *prefect_argv(toy_contract, files / name, folder))
        assert_refused(code, out, err, words, folder / "releases", store_snapshot)
        assert "forty" not in err


def test_empty_input_is_released_from_noise(capsys, tmp_path, toy_contract, toy_frame):
    """Issue 21.2: an empty input is not refused (n is never revealed)."""
    data = tmp_path / "empty.csv"
    data.write_text(",".join(toy_frame.columns) + "\n")
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert code == 0, err
    assert (Path(out.strip()) / "synthetic.parquet").is_file()


def test_corrupt_parquet_is_refused(capsys, tmp_path, toy_contract, toy_parquet,
                                    store_snapshot):
    data = tmp_path / "corrupt.parquet"
    raw = toy_parquet.read_bytes()
    data.write_bytes(raw[: len(raw) // 2] + b"garbage" * 10)
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert_refused(code, out, err, ["cannot be read as Parquet"], store, store_snapshot)


def test_wrong_type_is_refused(capsys, tmp_path, toy_contract, toy_frame, store_snapshot):
    """A Parquet column's type is a public fact of the schema: refused before the
    reservation. A CSV has no types: text in a numeric column is a value, which its
    out_of_domain policy handles (issue 21.2)."""
    frame = toy_frame.astype({"age": str})
    frame.loc[3, "age"] = "forty"
    store = tmp_path / "releases"
    data = tmp_path / "typed.parquet"
    frame.to_parquet(data, index=False)
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert_refused(code, out, err, ["'age'", "type text", "numeric"], store, store_snapshot)
    assert "forty" not in err
    data = tmp_path / "typed.csv"
    frame.to_csv(data, index=False)
    code, out, err = run_cli(capsys, *release_argv(toy_contract, data, store, tmp_path / "w"))
    assert code == 0, err


def test_missing_data_file_is_refused(capsys, tmp_path, toy_contract, store_snapshot):
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, tmp_path / "nope.csv", store,
                                                   tmp_path / "w"))
    assert_refused(code, out, err, ["does not exist"], store, store_snapshot)


def test_unwritable_output_folder_is_refused(capsys, tmp_path, toy_contract, toy_parquet,
                                             store_snapshot):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    store = blocker / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, toy_parquet, store,
                                                   tmp_path / "w"))
    assert code == 2
    assert err.strip().splitlines() == [
        f"privfair: error: release store {store} has a parent {blocker} that is a file, not a "
        "folder; choose another --out"]
    assert blocker.read_text() == "not a folder"


def test_lifetime_budget_exceeded_is_refused(capsys, tmp_path, toy_contract, toy_parquet,
                                             store_snapshot):
    store = tmp_path / "releases"
    # over the contract's lifetime epsilon (3) in one go: refused with an empty store
    argv = release_argv(toy_contract, toy_parquet, store, tmp_path / "w")
    argv[argv.index("--epsilon") + 1] = "5"
    code, out, err = run_cli(capsys, *argv)
    assert_refused(code, out, err, ["lifetime budget", "'toy'", "exceeded"], store,
                   store_snapshot)
    # after a release of 3/4 of it, a second one is refused and the store is unchanged
    argv[argv.index("--epsilon") + 1] = "2.25"
    argv[argv.index("--delta") + 1] = "1e-6"
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    before = store_snapshot(store)
    code, out, err = run_cli(capsys, *argv)
    assert_refused(code, out, err, ["lifetime budget", "exceeded"], store, store_snapshot,
                   before=before)


# --- commands that work -----------------------------------------------------------------------


def test_release_no_prefect_then_list_and_ledger(capsys, tmp_path, toy_contract, toy_csv):
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(toy_contract, toy_csv, store, tmp_path / "w",
                                                   "--sample-mode", "round"))
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert Path(last) == store / "toy" / "v1"
    assert (Path(last) / "manifest.json").is_file()

    code, out, _ = run_cli(capsys, "releases", "list", "--store", store, "--json")
    rows = json.loads(out)
    assert code == 0 and [(r["dataset"], r["version"]) for r in rows] == [("toy", "v1")]
    code, out, _ = run_cli(capsys, "releases", "list", "--store", store)
    assert code == 0 and "toy" in out and "v1" in out
    code, out, _ = run_cli(capsys, "ledger", "show", "--store", store, "--dataset", "toy",
                           "--json")
    ledgers = json.loads(out)
    assert code == 0 and ledgers[0]["dataset"] == "toy"
    assert [r["version"] for r in ledgers[0]["releases"]] == ["v1"]
    code, out, _ = run_cli(capsys, "ledger", "show", "--store", store)
    assert code == 0 and "toy" in out
    # Issue 25.6: a store that does not exist is one line and exit 2, never "no releases".
    code, out, err = run_cli(capsys, "releases", "list", "--store", tmp_path / "empty")
    assert code == 2 and "no such folder" in err and not (tmp_path / "empty").exists()


def test_discretize_writes_codes(capsys, tmp_path, toy_contract, toy_parquet, toy_frame):
    out_file = tmp_path / "codes.parquet"
    code, out, err = run_cli(capsys, "discretize", "--contract", toy_contract, "--data",
                             toy_parquet, "--out", out_file)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == str(out_file)
    codes = pd.read_parquet(out_file)
    assert list(codes.columns) == ["age", "sex", "race", "edu", "hours", "income"]
    assert len(codes) == len(toy_frame)
    assert set(codes["sex"]) <= {0, 1}


def test_discretize_drops_rows_under_the_policies(capsys, tmp_path, toy_contract, toy_frame):
    data = tmp_path / "bad.parquet"
    _frame_variant("out-of-domain", toy_frame).to_parquet(data, index=False)
    out_file = tmp_path / "codes.parquet"
    code, out, err = run_cli(capsys, "discretize", "--contract", toy_contract, "--data", data,
                             "--out", out_file)
    assert code == 0, err
    assert len(pd.read_parquet(out_file)) == len(toy_frame) - 1  # the Martian row dropped
    assert "Martian" not in err + out


def test_contract_check(capsys, tmp_path, toy_contract):
    code, out, err = run_cli(capsys, "contract", "check", toy_contract)
    label, _, fingerprint = out.strip().partition(": ")
    assert code == 0 and "OK" in err and label == "contract fingerprint"
    assert len(fingerprint) == 64 and int(fingerprint, 16) >= 0
    bad = _contract_cases(tmp_path)["roles-overlap"][0]
    code, out, err = run_cli(capsys, "contract", "check", bad)
    assert code == 2 and err.count("\n") == 1 and "overlap" in err


@pytest.mark.parametrize("command", ["release", "train", "discover", "embed", "evaluate"])
def test_help_shows_no_undefined_default(command, capsys):
    # issue 35: required options printed "(default: PydanticUndefined)"
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "(default:" in out and "Undefined" not in out


def test_dry_run_cost_line_names_the_dataset_once(capsys, tmp_path, toy_contract, toy_parquet):
    # issue 35: the plan's cost line read "of dataset 'toy''s lifetime epsilon"
    argv = release_argv(toy_contract, toy_parquet, tmp_path / "s", tmp_path / "w", "--dry-run")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    (cost,) = [line for line in out.splitlines() if line.startswith("cost:")]
    assert "''" not in out and "of dataset 'toy')" in cost


def test_help_is_fast_and_light():
    code = ("import sys, time; t = time.perf_counter(); import privfair.cli; "
            "heavy = {'duckdb', 'prefect', 'great_expectations', 'matplotlib'}; "
            "assert not heavy & set(sys.modules), heavy & set(sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "privfair.cli", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    assert time.perf_counter() - start < 5
    assert "release" in proc.stdout and "ledger" in proc.stdout
