"""Commands that agree (issue 25.6): one name per option, one line for a missing path, a
non-zero exit when nothing was done, and `contract check` refusing what `release` refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from privfair.cli import main
from privfair.release.run import release_table


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


@pytest.mark.parametrize("command", [["releases", "list"], ["store", "check"]])
def test_a_missing_or_wrong_store_is_one_line(command, tmp_path, capsys):
    code, out, err = run(capsys, *command, "--out", tmp_path / "nope")
    assert code == 2 and len(err) == 1 and "--out" in err[0] and "no such folder" in err[0]
    afile = tmp_path / "file"
    afile.write_text("x")
    code, out, err = run(capsys, *command, "--out", afile)
    assert code == 2 and len(err) == 1 and "is a file" in err[0]


def test_releases_list_takes_out_like_release(toy_contract, toy_parquet, tmp_path, capsys):
    release_table({"contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 1.0,
                   "delta": 1e-9, "method": "mst", "out": str(tmp_path / "releases"),
                   "work_dir": str(tmp_path / "work"), "max_iters": 50})
    code, out, _ = run(capsys, "releases", "list", "--out", tmp_path / "releases", "--json")
    assert code == 0 and '"version": "v1"' in out


def test_predict_names_a_missing_data_file(tmp_path, capsys):
    (tmp_path / "rel").mkdir()
    code, _, err = run(capsys, "predict", "--release", tmp_path / "rel", "--data",
                       tmp_path / "nope.parquet")
    assert code == 2 and err == [f"privfair: error: --data {tmp_path / 'nope.parquet'}: "
                                 "no such file"]


def test_an_empty_out_is_refused(toy_contract, toy_parquet, tmp_path, capsys):
    code, _, err = run(capsys, "release", "--contract", toy_contract, "--data", toy_parquet,
                       "--epsilon", "1", "--delta", "1e-9", "--out", "", "--no-prefect")
    assert code == 2 and len(err) == 1 and "--out is empty" in err[0]
    assert not list(Path.cwd().glob("catalog.duckdb"))


def test_contract_check_refuses_first_what_release_refuses(toy_contract, tmp_path, capsys):
    no_universe = tmp_path / "open.yaml"
    from privfair.contracts.datasets import contract_path

    no_universe.write_text(contract_path("example_open_domain").read_text().replace(
        'out_of_domain: "other:(other)"\n    nulls: "as:(other)"', "out_of_domain: drop"))
    code, _, err = run(capsys, "contract", "check", no_universe)
    assert code == 2 and len(err) == 1 and "open-domain column" in err[0]
    text = toy_contract.read_text()
    no_roles = tmp_path / "no_roles.yaml"
    no_roles.write_text(text.replace("  protected: [sex, race]\n", "  protected: []\n"))
    code, _, err = run(capsys, "contract", "check", no_roles)
    assert code == 0 and err[0].startswith("WARNING: release with the fair methods")
    assert "OK for mst, aim and independent only" in err[1]
    # and release does refuse it, for a fair method
    code, _, err = run(capsys, "release", "--contract", no_roles, "--epsilon", "1",
                       "--delta", "1e-9", "--method", "prefair-greedy", "--data",
                       tmp_path / "x.parquet", "--no-prefect", "--dry-run")
    assert code == 2


def test_evaluate_a_release_without_its_contract(toy_contract, toy_parquet, tmp_path, capsys):
    folder = release_table({"contract": str(toy_contract), "data": str(toy_parquet),
                            "epsilon": 1.0, "delta": 1e-9, "method": "mst",
                            "out": str(tmp_path / "releases"),
                            "work_dir": str(tmp_path / "work"), "max_iters": 50})
    assert (folder / "contract.yaml").is_file()
    code, out, err = run(capsys, "evaluate", "--release", folder, "--data", toy_parquet,
                         "--out", tmp_path / "evals", "--privileged", "race=A")
    assert code == 0, err
