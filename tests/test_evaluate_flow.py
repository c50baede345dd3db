"""The ``privfair-evaluate`` flow and the ``privfair evaluate`` command."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from privfair.cli import main  # noqa: E402
from privfair.evaluation.evaluate import NOT_PRIVATE  # noqa: E402


@pytest.mark.prefect
def test_evaluate_flow_writes_results_report_and_marker(prefect_harness, tmp_path):
    from prefect.cache_policies import NO_CACHE
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.evaluate import evaluate
    from tasks import evaluate as ev

    assert ev.evaluate_cell.persist_result is False and ev.evaluate_cell.cache_policy is NO_CACHE
    # eta=1e-4 is infeasible for TOT on COMPAS: recorded in `error`, the grid goes on.
    folder = Path(evaluate({"datasets": ["compas"], "methods": ["mst", "prefair-greedy"],
                            "epsilons": [1.0], "seeds": 1, "etas": [1e-4],
                            "classifiers": ["logistic"], "out": str(tmp_path / "evals")}))
    assert folder.parent == tmp_path / "evals"
    results = pd.read_parquet(folder / "results.parquet")
    assert list(results.columns[:6]) == ["dataset", "method", "epsilon", "seed", "eta", "error"]
    assert {"tvd2", "logistic_accuracy", "logistic_sex_DP", "logistic_race_CDP",
            "data_race_COD", "fit_s"} <= set(results.columns)
    assert len(results) == 4
    assert results["method"].tolist() == ["mst", "mst", "prefair-greedy", "prefair-greedy"]
    plain = results[results["eta"].isna()]
    assert plain["error"].isna().all() and plain["tvd2"].between(0, 1).all()
    tot = results[results["eta"].notna()]
    assert tot["error"].str.contains("InfeasibleFairnessError").all()
    assert tot["tvd2"].isna().all()
    html = (folder / "report.html").read_text()
    assert "<svg class='chart'" in html and "Not privacy-protected" in html
    assert (folder / "NOT_PRIVACY_PROTECTED.txt").read_text().strip() == NOT_PRIVATE

    with get_client(sync_client=True) as client:
        [summary] = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["privfair-evaluation"])))
        progress = [a for a in client.read_artifacts() if a.type == "progress"]
    assert "Not privacy-protected" in summary.data and "2 failed" in summary.data
    assert "| compas | mst | 1 |" in summary.data
    assert any(float(a.data) == 100.0 for a in progress)


@pytest.mark.prefect
def test_evaluate_flow_artifact_holds_no_metric_of_own_data(prefect_harness, tmp_path):
    """Issue 21.8: on a publisher's own data the Prefect artifact (visible to everyone with
    the UI) says only that the grid ran and where its output is; the metrics stay local."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from test_tot_contract import CREDIT, credit_frame

    from flows.evaluate import evaluate

    data = tmp_path / "credit.csv"
    credit_frame().to_csv(data, index=False)
    contract = tmp_path / "credit.yaml"
    contract.write_text(CREDIT)
    folder = Path(evaluate({"contract": str(contract), "data": str(data), "methods": ["mst"],
                            "epsilons": [2.0], "seeds": 1, "classifiers": ["logistic"],
                            "out": str(tmp_path / "evals")}))
    results = pd.read_parquet(folder / "results.parquet")
    assert results["error"].isna().all() and results["tvd2"].notna().all()
    with get_client(sync_client=True) as client:
        [text] = [a.data for a in client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["privfair-evaluation"]))) if str(folder) in a.data]
    assert str(folder) in text and "cells: **1**" in text
    assert "Means over seeds" not in text and "|" not in text
    # The wall time is the run's own; every other number must not be a metric of the data.
    shown_text = re.sub(r"wall time: [\d.]+ s", "", text.replace(str(folder), ""))
    for column in results.select_dtypes("number").columns:
        value = results[column].iloc[0]
        if column in ("epsilon", "seed") or pd.isna(value) or float(value).is_integer():
            continue  # small integers (counts of cells) appear for other reasons
        for shown in (f"{value:.3f}", f"{value:.2f}", f"{value:g}"):
            assert shown not in shown_text, (column, shown)


@pytest.mark.parametrize("argv, needle", [
    (["--epsilons", "0"], "epsilons"),
    (["--datasets", "mnist"], "invalid choice"),
    (["--datasets", "adult", "--etas", "0.1"], "TOT"),
    (["--no-prefect", "--dask"], "--dask"),
    (["--out", "{store}/evals"], "release store"),
])
def test_cli_evaluate_refuses_bad_arguments_in_one_line(capsys, tmp_path, argv, needle):
    store = tmp_path / "releases"
    (store / "adult").mkdir(parents=True)
    (store / "adult" / "lifetime_ledger.json").write_text("{}")
    argv = [a.format(store=store) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "evals")]
    code = main(["evaluate", *argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("privfair: error: ") and needle in err
    assert not (tmp_path / "evals").exists() and not (store / "evals").exists()


def test_cli_evaluate_no_prefect_prints_the_folder_last(capsys, tmp_path):
    code = main(["evaluate", "--datasets", "compas", "--methods", "mst", "--epsilons", "2",
                 "--seeds", "1", "--classifiers", "logistic", "--out", str(tmp_path / "evals"),
                 "--no-prefect"])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = Path(out.strip().splitlines()[-1])
    assert folder.parent == tmp_path / "evals"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert len(pd.read_parquet(folder / "results.parquet")) == 1
    assert {p.name for p in folder.iterdir()} >= {"results.parquet", "report.html",
                                                  "NOT_PRIVACY_PROTECTED.txt"}
