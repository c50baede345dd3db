"""Scoring with a published model release (public post-processing, numpy only)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import load_contract
from privfair.release.kinds.model.budget import ModelReleaseError
from privfair.store.files import sha256_file


def decision_function(weights: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Logits of a released model (numpy only)."""
    if "coef" in weights:
        linear: np.ndarray = np.asarray(x, dtype=float) @ weights["coef"]
        return linear
    from privfair.learn.dpsgd import forward

    logits: np.ndarray = forward(dict(weights), np.asarray(x, dtype=np.float32)).astype(float)
    return logits


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


#: Largest number of inputs the contract allows that :func:`probe_prediction` scores one by
#: one; past it, a fixed public sample of that many.
PROBE_INPUTS = 4096


def probe_inputs(encoding: FeatureEncoding, *, limit: int = PROBE_INPUTS
                 ) -> tuple[np.ndarray, bool]:
    """Inputs the contract allows, one-hot per feature block plus the intercept: every one
    when there are at most ``limit``, else ``limit`` drawn uniformly from a generator with
    a fixed public seed (the probe is built from the contract alone, never from data).
    Returns the inputs and whether they are all of them."""
    sizes = [len(labels) for _, labels in encoding.features]
    total = int(np.prod(sizes, dtype=float)) if sizes else 1
    if total <= limit:
        codes = np.indices(sizes).reshape(len(sizes), -1).T if sizes else np.zeros((1, 0),
                                                                                  int)
        exhaustive = True
    else:
        probe_rng = np.random.default_rng(0)  # public, fixed: the probe is not a noise draw
        codes = np.stack([probe_rng.integers(0, k, size=limit) for k in sizes], axis=1)
        exhaustive = False
    x = np.zeros((len(codes), encoding.dimension))
    offset = 0
    for j, k in enumerate(sizes):
        x[np.arange(len(codes)), offset + codes[:, j]] = 1.0
        offset += k
    x[:, -1] = 1.0
    return x, exhaustive


def probe_prediction(weights: Mapping[str, np.ndarray], encoding: FeatureEncoding
                     ) -> dict[str, Any]:
    """Whether the model predicts one class, decided from the model alone (issue 35.1).

    Linear models: exactly (:func:`constant_prediction`). Networks: on the inputs of
    :func:`probe_inputs`. Returns ``constant`` (0, 1 or None), ``positive_share`` (share of
    probe inputs predicted positive, None for the exact linear test when not constant) and
    ``how`` (a sentence for the model card)."""
    exact = constant_prediction(weights, encoding)
    linear = "coef" in weights or set(weights) == {"layer0.weight", "layer0.bias"}
    if linear:
        return {"constant": exact, "positive_share": None if exact is None else float(exact),
                "how": "exact, from the weights: a linear model's largest and smallest score "
                       "over every input the contract allows"}
    x, exhaustive = probe_inputs(encoding)
    share = float(np.mean(decision_function(weights, x) > 0))
    constant = 1 if share == 1.0 else 0 if share == 0.0 else None
    return {"constant": constant, "positive_share": share,
            "how": (f"the model scored on every one of the {len(x):,} inputs the contract "
                    "allows" if exhaustive else
                    f"the model scored on {len(x):,} inputs drawn uniformly from the "
                    "contract's domains (public: no data)")}


def _read_rows(path: Path) -> pd.DataFrame:
    """The rows to score; a file that does not read is named (pandas' own message, e.g.
    "No columns to parse from file", does not say which file)."""
    import pyarrow as pa

    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        return pd.read_parquet(path) if parquet else pd.read_csv(path)
    except (ValueError, OSError, pa.ArrowException) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelReleaseError(f"data {path}: cannot read it as "
                                f"{'Parquet' if parquet else 'CSV'}: {why}") from None


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
    frame = data if isinstance(data, pd.DataFrame) else _read_rows(Path(data))
    with np.load(folder / "weights.npz", allow_pickle=False) as npz:
        weights = {k: npz[k] for k in npz.files}
    logits = decision_function(weights, encoding.transform(frame, contract))
    labels = contract.labels(encoding.outcome)
    negative = next(lab for lab in labels if lab != encoding.positive)
    return pd.DataFrame({
        "score": 1 / (1 + np.exp(-np.clip(logits, -500, 500))),
        "prediction": np.where(logits > 0, encoding.positive, negative),
    }, index=frame.index)
