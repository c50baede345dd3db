"""Scoring with a published model release (public post-processing, numpy only)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import load_contract
from privfair.release.model.budget import ModelReleaseError
from privfair.store.files import sha256_file


def decision_function(weights: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Logits of a released model (numpy only)."""
    if "coef" in weights:
        return np.asarray(x, dtype=float) @ weights["coef"]
    from privfair.learn.dpsgd import forward

    return forward(dict(weights), np.asarray(x, dtype=np.float32)).astype(float)


def constant_prediction(weights: Mapping[str, np.ndarray],
                        encoding: FeatureEncoding) -> int | None:
    """1 or 0 when a linear model predicts that class for every input the contract allows
    (exact: every row is one-hot per feature block plus the intercept); None when it does
    not, or for a network with hidden layers (not decidable from the weights this way)."""
    if "coef" in weights:
        w, bias = np.asarray(weights["coef"], dtype=float).ravel(), 0.0
    elif set(weights) == {"layer0.weight", "layer0.bias"}:
        w = np.asarray(weights["layer0.weight"], dtype=float)[0]
        bias = float(np.asarray(weights["layer0.bias"], dtype=float).ravel()[0])
    else:
        return None
    if w.size != encoding.dimension:
        return None
    top = low = bias + w[-1]  # the intercept input is always 1
    offset = 0
    for _, labels in encoding.features:
        block = w[offset:offset + len(labels)]
        top += float(block.max())
        low += float(block.min())
        offset += len(labels)
    if top <= 0:
        return 0
    if low > 0:
        return 1
    return None


def predict(release: str | Path, data: str | Path | pd.DataFrame) -> pd.DataFrame:
    """Scores and labels of a model release for new rows (public post-processing).

    Returns a frame with ``score`` (probability of the positive label) and ``prediction``
    (the outcome label).
    """
    folder = Path(release)
    manifest_file = folder / "manifest.json"
    if not manifest_file.is_file():
        raise ModelReleaseError(f"release {folder}: no manifest.json; expected a model release")
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("kind") != "model":
        raise ModelReleaseError(f"release {folder} is not a model release")
    for name, digest in manifest.get("files", {}).items():
        if sha256_file(folder / name) != digest:
            raise ModelReleaseError(f"release {folder}: {name} does not match its manifest hash")
    contract = load_contract(folder / "contract.yaml")
    encoding = FeatureEncoding.from_dict(manifest["features"])
    frame = data if isinstance(data, pd.DataFrame) else (
        pd.read_parquet(data) if str(data).lower().endswith((".parquet", ".pq"))
        else pd.read_csv(data))
    with np.load(folder / "weights.npz", allow_pickle=False) as npz:
        weights = {k: npz[k] for k in npz.files}
    logits = decision_function(weights, encoding.transform(frame, contract))
    labels = contract.labels(encoding.outcome)
    negative = next(lab for lab in labels if lab != encoding.positive)
    return pd.DataFrame({
        "score": 1 / (1 + np.exp(-np.clip(logits, -500, 500))),
        "prediction": np.where(logits > 0, encoding.positive, negative),
    }, index=frame.index)
