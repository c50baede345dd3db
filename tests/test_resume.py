"""``--resume``: post-processing again at no privacy cost (issue 25.2).

On COMPAS, TOT was infeasible at every η a publisher tried, and each try was a new charged
run although its DP part had succeeded. A charged run that published nothing now keeps its
post-noise checkpoint, and ``privfair release --resume RUN`` re-runs only the post-noise
stages with new post-processing parameters, publishing a version of the same charged run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.core.errors import PrivfairError, ReleaseInputError
from privfair.release.checkpoint import checkpoint_path
from privfair.release.kinds.table import kind as table_kind
from privfair.release.resume import resume_release
from privfair.release.run import release_table
from privfair.release.tabular import stages as shared_stages
from privfair.store.registry import read_lifetime_ledger, registry_ledgers


def _request(contract, data, tmp_path, **kw):
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "mst", "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work"), "max_iters": 50, **kw}


@pytest.fixture
def failed_run(toy_contract, toy_parquet, tmp_path, monkeypatch):
    """A run whose post-noise stage failed: charged, nothing published."""
    def infeasible(*args, **kwargs):
        raise PrivfairError("TOT infeasible: no map meets the discrimination constraint")

    with monkeypatch.context() as m:
        m.setattr(shared_stages, "fairness_transform", infeasible)
        with pytest.raises(PrivfairError, match="infeasible") as caught:
            release_table(_request(toy_contract, toy_parquet, tmp_path))
    assert any("stays charged" in n for n in caught.value.__notes__)
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    (pending,) = book.pending
    assert pending["state"] == "spent, not published"
    return pending["run_id"], book.rho_spent


def test_resume_publishes_the_charged_run_at_no_cost(failed_run, toy_contract, tmp_path):
    run_id, spent = failed_run
    path = checkpoint_path(tmp_path / "work", run_id)
    assert path.stat().st_mode & 0o777 == 0o600
    assert "seed" not in json.loads(path.read_text())["options"]
    folder = resume_release(table_kind.TABLE, run_id, {"n_rows": 77},
                            work_dir=tmp_path / "work")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["resume"]["run_id"] == run_id and manifest["resume"]["changed"] == {
        "n_rows": 77}
    assert manifest["sampling"]["n_rows"] == 77
    book = read_lifetime_ledger(tmp_path / "releases", load_contract(toy_contract))
    assert book.rho_spent == pytest.approx(spent) and book.pending == []
    kinds = [e["kind"] for e in registry_ledgers("toy")[0]["entries"]]
    assert kinds == ["open", "reserve", "spend", "publish"]  # no second reserve or spend


def test_resume_through_the_cli(failed_run, tmp_path, capsys):
    run_id, _ = failed_run
    code = main(["release", "--resume", run_id, "--sample-mode", "round",
                 "--work-dir", str(tmp_path / "work"), "--no-prefect"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    folder = Path(captured.out.strip())
    assert json.loads((folder / "manifest.json").read_text())["sampling"]["mode"] == "round"


@pytest.mark.parametrize("change", [{"epsilon": 2.0}, {"method": "prefair-greedy"},
                                    {"data": os.devnull}])
def test_resume_refuses_to_change_what_was_measured(failed_run, tmp_path, change):
    run_id, _ = failed_run
    with pytest.raises(ReleaseInputError, match="would change what run"):
        resume_release(table_kind.TABLE, run_id, change, work_dir=tmp_path / "work")


def test_a_published_run_gets_a_new_version_at_no_cost(failed_run, toy_contract, tmp_path):
    """"Or whose result the publisher wants to change": a published run resumed again
    publishes a new version that records what it post-processes and costs nothing."""
    run_id, spent = failed_run
    first = resume_release(table_kind.TABLE, run_id, {}, work_dir=tmp_path / "work")
    second = resume_release(table_kind.TABLE, run_id, {"n_rows": 55},
                            work_dir=tmp_path / "work")
    assert (first.name, second.name) == ("v1", "v2")
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["resume"]["post_processing_of"] == "v1"
    assert manifest["sampling"]["n_rows"] == 55
    book = read_lifetime_ledger(tmp_path / "releases", load_contract(toy_contract))
    assert book.rho_spent == pytest.approx(spent)
    assert [(r["version"], r["rho"] > 0, r.get("post_processing_of")) for r in book.releases
            ] == [("v1", True, None), ("v2", False, "v1")]
    kinds = [e["kind"] for e in registry_ledgers("toy")[0]["entries"]]
    assert kinds == ["open", "reserve", "spend", "publish", "publish"]


def test_resume_refuses_an_unknown_run(failed_run, tmp_path):
    with pytest.raises(ReleaseInputError, match="no post-noise checkpoint"):
        resume_release(table_kind.TABLE, "nope", {}, work_dir=tmp_path / "work")


@pytest.mark.prefect
def test_resume_through_the_flow(prefect_harness, failed_run, tmp_path, monkeypatch):
    """The flow's equivalent: the form's resume_run runs the post-noise stages as tasks."""
    from flows.kinds import FLOWS

    run_id, spent = failed_run
    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    folder = Path(FLOWS["release"](resume_run=run_id, n_rows=66, out=str(tmp_path / "releases")))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["resume"]["run_id"] == run_id and manifest["sampling"]["n_rows"] == 66
    assert manifest["orchestrator"]["name"] == "prefect"
    kinds = [e["kind"] for e in registry_ledgers("toy")[0]["entries"]]
    assert kinds == ["open", "reserve", "spend", "publish"]


# --- issue 35: a failed run names itself and the --resume that finishes it -------------------


def _cli_release(contract, data, tmp_path):
    return ["release", "--contract", str(contract), "--data", str(data), "--epsilon", "1",
            "--delta", "1e-9", "--method", "mst", "--max-iters", "50", "--out",
            str(tmp_path / "releases"), "--work-dir", str(tmp_path / "my work"), "--no-prefect"]


def _fail(*args, **kwargs):
    raise PrivfairError("injected failure")


def test_a_failed_run_prints_the_resume_command_that_finishes_it(toy_contract, toy_parquet,
                                                                 tmp_path, capsys, monkeypatch):
    """After the checkpoint: the last line names the run and the exact command, which then
    publishes it at no cost (the work folder with a space in its name, quoted)."""
    import shlex

    with monkeypatch.context() as m:
        m.setattr(shared_stages, "fairness_transform", _fail)
        assert main(_cli_release(toy_contract, toy_parquet, tmp_path)) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    (pending,) = read_lifetime_ledger(None, load_contract(toy_contract)).pending
    run_id = pending["run_id"]
    assert last.startswith("privfair: error: injected failure") and "stays charged" in last
    command = last.split("`")[1]
    assert command == (f"privfair release --resume {run_id} --work-dir "
                       f"'{tmp_path / 'my work'}'")
    changeable = last.split("`")[2]  # what a resume may change, as the CLI spells it
    assert "--sample-mode" in changeable and "--fairness," in changeable
    assert "--fairness-transform" not in changeable
    argv = shlex.split(command)[1:] + ["--no-prefect"]
    assert main(argv) == 0, capsys.readouterr().err
    assert read_lifetime_ledger(None, load_contract(toy_contract)).pending == []


@pytest.mark.parametrize("where, says", [
    ("measure_table", "is charged and cannot be resumed (it failed before its post-noise "
                      "checkpoint)"),
    ("discretize_counted", "is cancelled (not charged) and cannot be resumed: nothing to "
                           "finish")])
def test_a_failed_run_that_cannot_be_resumed_says_so(where, says, toy_contract, toy_parquet,
                                                     tmp_path, capsys, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(table_kind if hasattr(table_kind, where) else shared_stages, where, _fail)
        assert main(_cli_release(toy_contract, toy_parquet, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--resume" not in err
    run_ids = [e.get("run_id") for e in registry_ledgers("toy")[0]["entries"]
               if e["kind"] == "reserve"]
    assert err.strip().endswith(f"run {run_ids[-1]} {says}")


@pytest.mark.prefect
def test_a_failed_flow_run_prints_the_resume_command(prefect_harness, toy_contract, toy_parquet,
                                                     tmp_path, capsys, monkeypatch):
    """The same last line through Prefect (the default driver)."""
    with monkeypatch.context() as m:
        m.setattr(shared_stages, "fairness_transform", _fail)
        argv = _cli_release(toy_contract, toy_parquet, tmp_path)
        assert main(argv[:-1]) == 2  # without --no-prefect
    last = capsys.readouterr().err.strip().splitlines()[-1]
    (pending,) = read_lifetime_ledger(None, load_contract(toy_contract)).pending
    assert f"`privfair release --resume {pending['run_id']} --work-dir " in last


def test_a_failed_runs_sentence_and_its_notes_read_as_one_line(toy_contract, toy_parquet,
                                                               tmp_path, capsys, monkeypatch):
    """Issue 35's walk: an error that ends with a full stop (TOT infeasible's does) joined
    its notes as '.; the run drew noise'."""
    def fail(*args, **kwargs):
        raise PrivfairError("TOT infeasible: move more columns (tot.features).")

    with monkeypatch.context() as m:
        m.setattr(shared_stages, "fairness_transform", fail)
        assert main(_cli_release(toy_contract, toy_parquet, tmp_path)) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert ".;" not in last
    assert "(tot.features); the run drew noise" in last
