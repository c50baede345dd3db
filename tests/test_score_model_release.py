"""Issue 42.7: ``privfair evaluate --release`` scores a model release on the real rows (it
refused every release without a synthetic table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from privfair.cli import main
from privfair.release.kinds.model.predict import predict
from privfair.release.kinds.model.train import MODEL
from privfair.release.protocol import run_release


def test_evaluate_scores_a_model_release_on_the_real_rows(toy_contract, toy_parquet,
                                                          tmp_path, capsys):
    folder = Path(run_release(MODEL, {
        "contract": str(toy_contract), "data": str(toy_parquet), "model": "pflr",
        "epsilon": 1.0, "out": str(tmp_path / "store"), "work_dir": str(tmp_path / "work")}))
    assert main(["evaluate", "--release", str(folder), "--data", str(toy_parquet), "--out",
                 str(tmp_path / "evaluations")]) == 0
    written = Path(capsys.readouterr().out.strip().splitlines()[-1])
    score = json.loads((written / "score.json").read_text())
    assert (written / "report.html").is_file()
    # the figures are the model's own predictions on every real row, measured here again
    real = pd.read_parquet(toy_parquet)
    manifest = json.loads((folder / "manifest.json").read_text())
    positive = manifest["features"]["positive"]
    predicted = (predict(folder, real)["prediction"] == positive).to_numpy()
    truth = (real[manifest["features"]["outcome"]] == positive).to_numpy()
    assert score["kind"] == "model" and score["real_rows"] == len(real)
    assert np.isclose(score["model_accuracy"], (predicted == truth).mean())
    assert np.isclose(score["model_baseline_accuracy"], max(truth.mean(), 1 - truth.mean()))
    assert score["model_predicts_one_class"] == bool(predicted.all() or not predicted.any())
    rates = real.assign(p=predicted).groupby("sex")["p"].mean()
    assert np.isclose(score["model_rd_sex"], rates.max() - rates.min())
