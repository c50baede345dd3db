"""The release catalog of a store (``catalog.duckdb``) and version numbers."""

from __future__ import annotations

import contextlib
import math
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privfair.store.files import StoreError
from privfair.version import VERSION

if TYPE_CHECKING:
    from privfair.store.ledger import LifetimeLedger


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
ALTER TABLE releases ADD COLUMN IF NOT EXISTS fairness_claimed BOOLEAN;
"""
CATALOG_COLUMNS = ("dataset", "version", "path", "published_at", "epsilon", "delta", "rho",
                    "method", "n_rows", "contract_fingerprint", "fairness_passed",
                    "orchestrator", "fairness_claimed")


def fairness_label(row: Mapping[str, Any]) -> str:
    """The catalog's ``fair`` column in words (issue 35.2): ``yes`` or ``no`` for a release
    whose method claims a fairness criterion, ``not claimed`` for one that checks a criterion
    it does not promise (MST or AIM without TOT, dpgan, an embedding). A row written before
    the ``fairness_claimed`` column existed reads as claimed."""
    if row.get("fairness_claimed") is False:
        return "not claimed"
    return "yes" if row.get("fairness_passed") else "no"



#: Release kinds whose catalog method is ``kind:name`` and which publish no synthetic rows.
ROWLESS_KINDS = ("model", "graph", "embedding")


def rows_label(row: Mapping[str, Any]) -> str:
    """The catalog's ``n_rows`` column in words: the synthetic rows of a table release, ``-``
    for a model, graph or embedding release (which publishes no rows; its catalog row holds
    0, which a publisher read as an empty release in issue 35's walk)."""
    if str(row.get("method", "")).split(":", 1)[0] in ROWLESS_KINDS:
        return "-"
    return str(row.get("n_rows"))

@contextlib.contextmanager
def catalog(store: Path, *, read_only: bool = False, wait: float = 10.0) -> Iterator[Any]:
    """Open ``catalog.duckdb`` briefly; waits ``wait`` seconds if another process holds it."""
    import duckdb  # in the function: about 0.3 s to import, and most runs never open it

    path = store / "catalog.duckdb"
    deadline = time.monotonic() + wait
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if time.monotonic() > deadline:
                holder = re.search(r"PID (\d+)", str(exc))
                raise StoreError(
                    f"release catalog {path} is held by another process"
                    f"{f' (pid {holder.group(1)})' if holder else ''}; close it and retry"
                ) from None
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
    # A release charged by a Rényi curve has no ρ: NaN in the table, None (JSON null) here.
    return [{c: None if _is_nan(r.get(c)) else r.get(c) for c in CATALOG_COLUMNS}
            for r in rows]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def next_version(folder: Path, ledger: LifetimeLedger) -> str:
    """One past every version a folder, the ledger or the catalog has used (a stale catalog
    row never blocks a release)."""
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    here = str(folder.parent.resolve())
    names += [str(r.get("version", "")) for r in ledger.releases
              if r.get("store") in (None, here)]
    names += [re.sub(r"^\.(tmp|intent)-", "", n).split("-")[0].removesuffix(".json")
              for n in names if n.startswith((".tmp-", ".intent-"))]
    store = folder.parent
    if (store / "catalog.duckdb").is_file():
        names += [str(r["version"]) for r in list_releases(store, folder.name)]
    numbers = [int(m.group(1)) for n in names if (m := re.fullmatch(r"v(\d+)", n))]
    return f"v{max(numbers, default=0) + 1}"


def code_version() -> dict[str, Any]:
    """privfair version and, in a git checkout, the commit (with a dirty flag)."""
    out: dict[str, Any] = {"privfair": VERSION, "git_commit": None}
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
