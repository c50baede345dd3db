"""The release store: per-dataset lifetime ledgers and the DuckDB catalog of releases.

``releases/<dataset>/lifetime_ledger.json`` composes every published release of a dataset in
zCDP against the contract's lifetime budget; ``releases/catalog.duckdb`` lists releases. Both
are written under a per-dataset lock, atomically, by :func:`privfair.pipeline.publish.publish`.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import math
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfair.core.accounting import zcdp_epsilon, zcdp_rho
from privfair.core.errors import BudgetExceededError
from privfair.pipeline.artefacts import StoreError
from privfair.pipeline.contracts import Contract


@dataclass
class LifetimeLedger:
    """Everything published from one dataset, composed in zCDP against its lifetime budget."""

    dataset: str
    epsilon_budget: float
    delta_budget: float
    releases: list[dict[str, Any]]

    @property
    def rho_budget(self) -> float:
        return zcdp_rho(epsilon=self.epsilon_budget, delta=self.delta_budget)

    @property
    def rho_spent(self) -> float:
        return math.fsum(float(r["rho"]) for r in self.releases)

    @property
    def rho_remaining(self) -> float:
        return max(0.0, self.rho_budget - self.rho_spent)

    def epsilon_spent(self) -> float:
        return zcdp_epsilon(rho=self.rho_spent, delta=self.delta_budget)

    def check(self, *, rho: float) -> None:
        """Refuse a release of cost ``rho`` that would pass the lifetime budget."""
        if self.rho_spent + rho > self.rho_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"lifetime budget of dataset {self.dataset!r} exceeded: this release costs "
                f"rho={rho:.6g} but only {self.rho_remaining:.6g} of {self.rho_budget:.6g} "
                f"(epsilon={self.epsilon_budget:g}, delta={self.delta_budget:g}) is left")

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "budget": {"epsilon": self.epsilon_budget, "delta": self.delta_budget,
                       "rho": self.rho_budget},
            "spent": {"rho": self.rho_spent,
                      "epsilon_at_budget_delta": self.epsilon_spent()},
            "accounting": "zCDP: rho of releases add up; converted with the lifetime delta",
            "releases": self.releases,
        }


def ledger_path(store: Path, dataset: str) -> Path:
    return store / dataset / "lifetime_ledger.json"


def read_lifetime_ledger(store: str | Path, contract: Contract) -> LifetimeLedger:
    """The dataset's lifetime ledger (empty if nothing was published), with the budget the
    contract declares now."""
    path = ledger_path(Path(store), contract.name)
    releases: list[dict[str, Any]] = []
    if path.is_file():
        try:
            releases = list(json.loads(path.read_text())["releases"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"lifetime ledger {path} is unreadable ({exc}); fix or restore "
                             "it before releasing again") from None
    return LifetimeLedger(contract.name, contract.budget.epsilon, contract.budget.delta,
                          releases)


def read_ledger_file(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    private = folder / ".lock"
    with open(private, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    dataset VARCHAR NOT NULL,
    version VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    published_at VARCHAR NOT NULL,
    epsilon DOUBLE NOT NULL,
    delta DOUBLE NOT NULL,
    rho DOUBLE NOT NULL,
    method VARCHAR NOT NULL,
    n_rows BIGINT NOT NULL,
    contract_fingerprint VARCHAR NOT NULL,
    fairness_passed BOOLEAN NOT NULL,
    orchestrator VARCHAR,
    PRIMARY KEY (dataset, version)
);
ALTER TABLE releases ADD COLUMN IF NOT EXISTS orchestrator VARCHAR;
"""
CATALOG_COLUMNS = ("dataset", "version", "path", "published_at", "epsilon", "delta", "rho",
                    "method", "n_rows", "contract_fingerprint", "fairness_passed",
                    "orchestrator")


@contextlib.contextmanager
def catalog(store: Path, *, read_only: bool = False) -> Iterator[Any]:
    """Open ``catalog.duckdb`` briefly; waits a little if another process holds it."""
    import duckdb

    path = store / "catalog.duckdb"
    deadline = time.monotonic() + 10.0
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        if not read_only:
            con.execute(_CATALOG_SCHEMA)
        yield con
    finally:
        con.close()


def list_releases(store: str | Path, dataset: str | None = None) -> list[dict[str, Any]]:
    """Rows of the release catalog, oldest first (empty if the store has none)."""
    store = Path(store)
    if not (store / "catalog.duckdb").is_file():
        return []
    with catalog(store, read_only=True) as con:
        # SELECT *: a catalog written before a column was added reads it as None
        query = "SELECT * FROM releases"
        args: list[Any] = []
        if dataset is not None:
            query += " WHERE dataset = ?"
            args.append(dataset)
        result = con.execute(query + " ORDER BY published_at, dataset, version", args)
        names = [d[0] for d in result.description]
        rows = [dict(zip(names, r, strict=True)) for r in result.fetchall()]
    return [{c: r.get(c) for c in CATALOG_COLUMNS} for r in rows]


def lifetime_ledgers(store: str | Path, dataset: str | None = None) -> list[dict[str, Any]]:
    """Every lifetime ledger of the store, as written."""
    store = Path(store)
    if not store.is_dir():
        return []
    out = []
    for path in sorted(store.glob("*/lifetime_ledger.json")):
        if dataset is None or path.parent.name == dataset:
            out.append(read_ledger_file(path))
    return out


def next_version(folder: Path, ledger: LifetimeLedger) -> str:
    numbers = [int(m.group(1)) for p in folder.iterdir()
               if (m := re.fullmatch(r"v(\d+)", p.name))]
    numbers += [int(m.group(1)) for r in ledger.releases
                if (m := re.fullmatch(r"v(\d+)", str(r.get("version", ""))))]
    return f"v{max(numbers, default=0) + 1}"


def code_version() -> dict[str, Any]:
    """privfair version and, in a git checkout, the commit (with a dirty flag)."""
    try:
        version = importlib.metadata.version("privfair")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        if pyproject.is_file():
            m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
            version = m.group(1) if m else version
    out: dict[str, Any] = {"privfair": version, "git_commit": None}
    repo = Path(__file__).resolve().parents[2]
    if (repo / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                                    capture_output=True, text=True, timeout=5, check=True)
            out["git_commit"] = commit.stdout.strip()
            dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                    "--untracked-files=no", "--", "privfair"],
                                   capture_output=True, text=True, timeout=5, check=True)
            out["git_dirty"] = bool(dirty.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return out
