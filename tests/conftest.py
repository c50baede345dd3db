"""Shared test set-up.

Prefect is isolated at import time, before any test module can import it: a throw-away
``PREFECT_HOME``, no telemetry, no analytics. Flow-level tests (``@pytest.mark.prefect``) ask
for the session-scoped ``prefect_harness`` fixture (one temporary API server, ~9 s); nothing
else starts Prefect.

The ``toy_*`` fixtures give the release tests a small contract and matching private data, so
a whole release runs in about a second.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="privfair-prefect-home-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API server + database for every flow-level test."""
    from prefect.testing.utilities import prefect_test_harness

    # generous: on a loaded 2-core machine the server has taken over a minute to answer
    with prefect_test_harness(server_startup_timeout=180):
        yield


TOY_CONTRACT = """\
# A small contract for the release tests.
name: toy
version: "1"
drop: [secret_name]
columns:
  - name: age
    type: numeric
    integer: true
    bins: [18, 30, 45, 65, 90]
    out_of_domain: refuse
    nulls: refuse
  - name: sex
    type: categorical
    categories: [F, M]
  - name: race
    type: categorical
    categories: [A, B, C]
  - name: edu
    type: categorical
    categories: [HS, BA, MA, PhD]
    nulls: "as:HS"
  - name: hours
    type: numeric
    integer: true
    bins: [1, 20, 40, 60, 100]
  - name: income
    type: categorical
    categories: [low, high]
roles:
  protected: [sex, race]
  admissible: [edu, hours]
  outcome: [income]
  free: [age]
budget: {epsilon: 3.0, delta: 1.0e-6}
"""

#: Marker strings in a dropped column: they must never leave the private side.
SECRET_PREFIX = "SECRET-XYZZY-"


def make_toy_frame(n: int = 1500, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    race = rng.choice(["A", "B", "C"], n, p=[0.6, 0.3, 0.1])
    edu = rng.choice(["HS", "BA", "MA", "PhD"], n, p=[0.4, 0.3, 0.2, 0.1])
    hours = np.clip(rng.normal(40, 10, n).round(), 1, 99).astype(np.int64)
    high = (np.isin(edu, ["MA", "PhD"]) & (hours > 35)) | (rng.random(n) < 0.15)
    return pd.DataFrame({
        "age": rng.integers(18, 91, n),
        "sex": sex,
        "race": race,
        "edu": edu,
        "hours": hours,
        "income": np.where(high, "high", "low"),
        "secret_name": [f"{SECRET_PREFIX}{i}" for i in range(n)],
    })


#: The toy GAN tests' columns and sizes: a, s (protected), m (s's mediator), c, y (outcome).
GAN_TOY_DOMAIN = {"a": 3, "s": 2, "m": 4, "c": 3, "y": 2}


def gan_toy_table(n: int = 400, seed: int = 7) -> dict[str, np.ndarray]:
    """Integer codes over :data:`GAN_TOY_DOMAIN` where s drives m and y, and a drives c."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, n)
    a = rng.integers(0, 3, n)
    m = np.where(rng.random(n) < 0.6, s * 2, rng.integers(0, 4, n))
    c = np.where(rng.random(n) < 0.5, a, rng.integers(0, 3, n))
    y = (rng.random(n) < 0.2 + 0.4 * s + 0.1 * (m == 3)).astype(np.int64)
    return {"a": a, "s": s, "m": m, "c": c, "y": y}


@pytest.fixture
def toy_contract(tmp_path: Path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONTRACT)
    return path


@pytest.fixture
def toy_frame() -> pd.DataFrame:
    return make_toy_frame()


@pytest.fixture
def toy_parquet(tmp_path: Path, toy_frame: pd.DataFrame) -> Path:
    path = tmp_path / "toy.parquet"
    toy_frame.to_parquet(path, index=False)
    return path


@pytest.fixture
def toy_csv(tmp_path: Path, toy_frame: pd.DataFrame) -> Path:
    path = tmp_path / "toy.csv"
    toy_frame.to_csv(path, index=False)
    return path


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (empty if it does not exist)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.fixture
def store_snapshot():
    return snapshot


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own defaults for the default registry and the client state: a test that
    loses its per-test registry (a ``monkeypatch.undo()``) still never charges the user's."""
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ[name] = tempfile.mkdtemp(prefix=f"privfair-tests-{name.lower()}-")


@pytest.fixture(autouse=True)
def system_temp(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own system temp folder: `store check` scans it for the
    ``privfair-src-*`` leftovers of dead processes (issue 21.7), never the machine's."""
    root = tmp_path_factory.mktemp("systemp")
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.fixture(autouse=True)
def privacy_registry(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own privacy registry (lifetime ledgers), never the user's, and its
    own client state (the witness of the ledger heads it has seen)."""
    root = tmp_path_factory.mktemp("registry")
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(root))
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    return root
