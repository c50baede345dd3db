"""`privfair evaluate` on a publisher's own contract and data, and scoring a published release."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from test_tot_contract import CREDIT, TOT_BLOCK, credit_frame

from privfair.cli import main
from privfair.evaluation.evaluate import NOT_PRIVATE
from privfair.release.run import release_table as run_release
from privfair.release.tabular.plan import ReleaseParams


@pytest.fixture
def credit(tmp_path):
    data = tmp_path / "credit.csv"
    credit_frame().to_csv(data, index=False)
    contract = tmp_path / "credit.yaml"
    contract.write_text(CREDIT + TOT_BLOCK)
    return contract, data


def test_evaluate_grid_on_own_contract_and_data(credit, tmp_path, capsys):
    contract, data = credit
    code = main(["evaluate", "--contract", str(contract), "--data", str(data), "--methods", "mst",
                 "--epsilons", "2", "--seeds", "1", "--etas", "0.05", "--classifiers",
                 "logistic", "--test-fraction", "0.3", "--out", str(tmp_path / "evals"),
                 "--no-prefect"])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = tmp_path / "evals" / out.strip().splitlines()[-1].split("/")[-1]
    results = pd.read_parquet(folder / "results.parquet")
    assert results["dataset"].tolist() == ["credit", "credit"]
    assert results["error"].isna().all()
    assert results["eta"].isna().sum() == 1 and (results["eta"] == 0.05).sum() == 1
    assert (results["logistic_n_test"] == 300).all()  # --test-fraction 0.3 of 1,000 rows
    assert (folder / "NOT_PRIVACY_PROTECTED.txt").read_text().strip() == NOT_PRIVATE
    # issue 35: params.json recorded the unused embedded default ["compas"]
    recorded = json.loads((folder / "params.json").read_text())
    assert recorded["datasets"] == ["credit"] and recorded["contract"] == str(contract)


@pytest.mark.parametrize("argv, message", [
    (["--contract", "{contract}"], "contract and data go together"),
    (["--contract", "{contract}", "--data", "{data}", "--datasets", "compas"], "drop --datasets"),
    (["--release", "{tmp}"], "--release needs --data"),
    # (a folder beside --out: an --out inside its --release is refused for that: issue 45.1)
    (["--release", "{tmp}/plain", "--data", "{data}"], "expected a release folder"),
])
def test_evaluate_own_data_refusals_are_one_line(credit, tmp_path, capsys, argv, message):
    contract, data = credit
    (tmp_path / "plain").mkdir()
    argv = [a.format(contract=contract, data=data, tmp=tmp_path) for a in argv]
    assert main(["evaluate", *argv, "--out", str(tmp_path / "evals"), "--no-prefect"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_data_that_breaks_the_contract_is_refused_before_the_grid(credit, tmp_path, capsys):
    contract, data = credit
    frame = credit_frame()
    frame.loc[3, "purpose"] = "yacht"
    frame.to_csv(data, index=False)
    assert main(["evaluate", "--contract", str(contract), "--data", str(data), "--out",
                 str(tmp_path / "evals"), "--no-prefect"]) == 2
    err = capsys.readouterr().err
    assert "'purpose'" in err and "cells" not in err and not (tmp_path / "evals").exists()


def test_score_a_published_release_against_the_real_table(credit, tmp_path, capsys):
    contract, data = credit
    store = tmp_path / "releases"
    final = run_release(ReleaseParams(contract=str(contract), data=str(data), epsilon=2.0,
                                      delta=1e-6, method="mst", seed=1, insecure_seed=True,
                                      out=str(store),
                                      work_dir=str(tmp_path / "work")))
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in final.iterdir()}
    assert main(["evaluate", "--release", str(final), "--data", str(data), "--contract",
                 str(contract), "--out", str(store / "scores")]) == 2  # not inside the store
    capsys.readouterr()
    assert main(["evaluate", "--release", str(final), "--data", str(data), "--contract",
                 str(contract), "--out", str(tmp_path / "evals")]) == 0
    out, err = capsys.readouterr()
    folder = tmp_path / "evals" / out.strip().splitlines()[-1].split("/")[-1]
    score = json.loads((folder / "score.json").read_text())
    assert score["dataset"] == "credit" and score["version"] == "v1"
    # issue 35.6: a report a person reads, beside score.json, with the same figures
    page = (folder / "report.html").read_text()
    assert "Not privacy-protected" in page and f"{score['tvd2']:.4g}"[:5] in page
    assert 0 <= score["tvd1"] <= score["tvd2"] <= 1
    assert 0.4 < score["logistic_accuracy"] <= 1  # trained on synthetic, tested on real
    assert "NOT privacy-protected" in err and (folder / "NOT_PRIVACY_PROTECTED.txt").exists()
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in final.iterdir()} == before  # the release is untouched
    from privfair.evaluation.score_release import score_release

    small = score_release(final, data, contract_path=contract, max_train_rows=300)
    assert small["classifier_train_rows"] == small["logistic_n_train"] == 300
    assert small["logistic_n_test"] == 1000 and small["tvd1"] == score["tvd1"]
    other = tmp_path / "other.yaml"
    other.write_text((CREDIT + TOT_BLOCK).replace('version: "1"', 'version: "2"'))
    assert main(["evaluate", "--release", str(final), "--data", str(data), "--contract",
                 str(other), "--out", str(tmp_path / "evals")]) == 2
    assert "fingerprints differ" in capsys.readouterr().err


def test_privileged_group_of_a_non_binary_protected_column(credit, tmp_path, capsys):
    from privfair.contracts.schema import parse_contract
    from privfair.evaluation.evaluate import privileged_codes

    contract, data = credit
    text = CREDIT.replace("protected: [sex]", "protected: [sex, checking]").replace(
        "admissible: [checking, amount]", "admissible: [amount]")
    three = tmp_path / "three.yaml"
    three.write_text(text)
    assert main(["evaluate", "--contract", str(three), "--data", str(data), "--out",
                 str(tmp_path / "evals"), "--no-prefect"]) == 2
    err = capsys.readouterr().err
    assert "['checking'] are not binary" in err and "--privileged checking=A11" in err
    parsed = parse_contract(text)
    assert privileged_codes(parsed, {"checking": "A13"}) == {"checking": 2}
    with pytest.raises(ValueError, match="'A19' is not a label"):
        privileged_codes(parsed, {"checking": "A19"})
    assert main(["evaluate", "--contract", str(three), "--data", str(data), "--privileged",
                 "checking"]) == 2
    assert "expected COLUMN=LABEL" in capsys.readouterr().err


def test_evaluate_synthetic_orders_and_training_sample():
    import numpy as np

    from privfair.core.domain import Domain, Roles
    from privfair.evaluation.evaluate import evaluate_synthetic

    rng = np.random.default_rng(0)
    domain = Domain(("g", "a", "y"), (2, 3, 2))
    table = pd.DataFrame({"g": rng.integers(0, 2, 400), "a": rng.integers(0, 3, 400),
                          "y": rng.integers(0, 2, 400)})
    record = evaluate_synthetic(table.iloc[:300], real_train=table, real_test=table,
                                domain=domain, roles=Roles(("g",), ("a",), ("y",)),
                                classifiers=("logistic",), max_train_rows=120,
                                tvd_orders=(1, 2))
    assert "tvd2" in record and "tvd3" not in record
    assert record["logistic_n_train"] == 120 and record["logistic_n_test"] == 400


def test_gan_methods_join_the_grid_on_the_same_split(toy_contract, toy_parquet):
    """Issue 12 (head to head on one budget): a GAN cell trains on the grid's train split
    with the cell's (ε, δ) and is scored like a table method; CFGAN takes the contract's
    causal_graph and is refused without one."""
    pytest.importorskip("torch")
    from privfair.evaluation.evaluate import evaluate_cell, load_own

    data = load_own(toy_contract, toy_parquet, privileged={"race": "A"})
    record = evaluate_cell(data, method="fairgan", epsilon=5.0, seed=0,
                           classifiers=("logistic",))
    assert record["method"] == "fairgan" and record["fit_s"] > 0
    assert 0 <= record["tvd2"] <= 1 and 0 <= record["logistic_accuracy"] <= 1
    assert any(k.startswith("data_sex_") for k in record), sorted(record)
    with pytest.raises(ValueError, match="declares no causal_graph"):
        evaluate_cell(data, method="cfgan", epsilon=5.0, seed=0, classifiers=("logistic",))
    graph = toy_contract.parent / "graph.yaml"
    graph.write_text(toy_contract.read_text() + "causal_graph:\n  edges: [[sex, edu], "
                     "[edu, income], [hours, income], [age, income]]\n")
    data = load_own(graph, toy_parquet, privileged={"race": "A"})
    record = evaluate_cell(data, method="cfgan", epsilon=5.0, seed=0,
                           classifiers=("logistic",))
    assert 0 <= record["tvd1"] <= 1


def test_evaluate_keeps_prefect_info_lines_off_the_console(tmp_path, monkeypatch):
    """Issue 35: Prefect's INFO lines (task and flow run states) broke into the progress bar.
    While the grid runs the console handlers pass WARNING and above only, Dask workers are
    told so, and both are restored afterwards."""
    import io
    import logging
    import os

    import flows.evaluate

    console = io.StringIO()
    handler = logging.StreamHandler(console)  # a console handler, as Prefect's
    prefect_logger = logging.getLogger("prefect")
    # on "prefect", not propagating: the real handlers (pytest's, earlier tests' streams) stay
    # out of this test
    monkeypatch.setattr(prefect_logger, "propagate", False)
    monkeypatch.setattr(prefect_logger, "level", logging.INFO)
    monkeypatch.setattr(prefect_logger, "handlers", [handler])
    seen = {}

    def fake_run(params, *, dask, progress):
        seen["workers"] = os.environ.get("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL")
        log = logging.getLogger("prefect.engine")  # propagates to "prefect"
        log.info("Finished in state Completed()")
        log.warning("a warning the user should see")
        folder = tmp_path / "evals" / "stamp"
        folder.mkdir(parents=True)
        pd.DataFrame({"error": [None]}).to_parquet(folder / "results.parquet")
        return folder

    monkeypatch.setattr(flows.evaluate, "run_evaluation", fake_run)
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
    code = main(["evaluate", "--methods", "mst", "--epsilons", "1", "--seeds", "1",
                 "--classifiers", "logistic", "--out", str(tmp_path / "evals")])
    assert code == 0
    assert "Completed" not in console.getvalue() and "a warning" in console.getvalue()
    assert seen["workers"] == "WARNING"
    assert handler.level == logging.NOTSET  # restored
    assert "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL" not in os.environ
