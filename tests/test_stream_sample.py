"""Streamed sampling to a partitioned Parquet (issue 15 item 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privfair.core.domain import Domain, Roles
from privfair.synth.synthesizer import FairSynthesizer, stream_sample


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    n = 20_000
    a = rng.integers(0, 3, n)
    b = (a + (rng.random(n) < 0.2)) % 3
    codes = pd.DataFrame({"a": a, "b": b, "y": (b == 2).astype(np.int64)})
    domain = Domain(("a", "b", "y"), (3, 3, 2))
    roles = Roles(protected=("a",), admissible=("b",), outcome=("y",))
    return FairSynthesizer(domain=domain, roles=roles, epsilon=5.0, delta=1e-6,
                           method="mst").fit(codes, rng=np.random.default_rng(1))


def test_parts_hold_every_row_and_follow_the_model(fitted, tmp_path):
    seen = []
    parts = stream_sample(fitted.model_, fitted.compression_, 25_000, tmp_path / "out",
                          rng=np.random.default_rng(2), chunk_rows=10_000,
                          progress=lambda done, total: seen.append(done))
    assert [p.name for p in parts] == ["part-00000.parquet", "part-00001.parquet",
                                       "part-00002.parquet"]
    assert seen == [10_000, 20_000, 25_000]
    table = pd.read_parquet(tmp_path / "out")
    assert len(table) == 25_000 and list(table.columns) == ["a", "b", "y"]
    assert str(table["a"].dtype) == "uint8"
    # same joint distribution as the model: 2-way TVD to the model's (a, b) marginal
    model = fitted.model_.marginal(["a", "b"]) / fitted.model_.total
    drawn = pd.crosstab(table["a"], table["b"]).reindex(index=range(3), columns=range(3),
                                                         fill_value=0).to_numpy() / len(table)
    assert 0.5 * np.abs(model - drawn).sum() < 0.02


def test_labels_are_dictionary_encoded(fitted, tmp_path):
    labels = {"a": ["x", "y", "z"], "b": ["p", "q", "r"], "y": ["no", "yes"]}
    stream_sample(fitted.model_, fitted.compression_, 500, tmp_path / "out",
                  rng=np.random.default_rng(3), chunk_rows=200, labels=labels)
    table = pd.read_parquet(tmp_path / "out")
    assert len(table) == 500 and set(table["y"].astype(str)) <= {"no", "yes"}
    assert isinstance(table["a"].dtype, pd.CategoricalDtype)


def test_bad_arguments_are_refused(fitted, tmp_path):
    with pytest.raises(ValueError, match="chunk_rows"):
        stream_sample(fitted.model_, fitted.compression_, 10, tmp_path, chunk_rows=0,
                      rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_rows"):
        stream_sample(fitted.model_, fitted.compression_, -1, tmp_path,
                      rng=np.random.default_rng(0))
