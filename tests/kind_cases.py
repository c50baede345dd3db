"""A small valid request for every release kind, for the tests that run against all kinds.

A new kind adds one entry to :data:`CASES` (and to ``privfair.release.registry``): the protocol
suite (``test_protocol.py``) and the parity test (``test_parity.py``) then cover it.

Each case builds, from the ``toy`` fixtures of ``conftest.py``, the request's parameters as a
dict (no seed: tests add one) and names the CLI command that publishes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class KindCase:
    """How to make a small release of one kind in a test."""

    command: str
    #: ``(contract, data, tmp_path) -> parameters`` (contract and data: the toy fixtures).
    params: Callable[[Path, Path, Path], dict[str, Any]]
    #: A column of the toy data the kind reads (dropping it must be refused before any read).
    column: str = "income"


def _common(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0,
            "out": str(tmp_path / "releases"), "work_dir": str(tmp_path / "work")}


def _table(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {**_common(contract, data, tmp_path), "delta": 1e-9, "method": "mst",
            "max_iters": 50}


def _gan(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {**_common(contract, data, tmp_path), "delta": 1e-9, "method": "dpgan",
            "gan_epochs": 1}


def _model(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {**_common(contract, data, tmp_path), "model": "pflr", "delta": 1e-6}


def _graph(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {**_common(contract, data, tmp_path), "method": "privpc", "delta": 1e-6,
            "max_order": 1}


CASES: dict[str, KindCase] = {
    "table": KindCase("release", _table),
    "gan": KindCase("release", _gan),
    "model": KindCase("train", _model),
    "graph": KindCase("discover", _graph),
}


def _embedding(contract: Path, data: Path, tmp_path: Path) -> dict[str, Any]:
    return {**_common(contract, data, tmp_path), "delta": 1e-6, "dim": 4}


def edge_list_example() -> tuple[Path, Path]:
    """The packaged edge-list contract and its data (``privfair/data``)."""
    from privfair.contracts.datasets import contract_path, embedded_dataset_for

    return contract_path("example_graph"), Path(embedded_dataset_for("example_graph"))


#: Kinds whose data is an edge list, not the toy table: called with :func:`edge_list_example`
#: (or a copy of its data) instead of the toy fixtures. Kept out of :data:`CASES`, whose
#: suites (protocol, parity) build every request from the toy table.
EDGE_LIST_CASES: dict[str, KindCase] = {
    "embedding": KindCase("embed", _embedding, column="source"),
}


def without_column(data: Path, column: str, tmp_path: Path) -> Path:
    """A copy of the toy data without ``column`` (a schema problem: public)."""
    out = tmp_path / f"without-{column}.parquet"
    pd.read_parquet(data).drop(columns=[column]).to_parquet(out, index=False)
    return out
