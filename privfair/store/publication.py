"""Publication of a release folder into the store: a small protocol that recovers from a kill.

Under the dataset's store lock:

1. **intent**: ``<store>/<dataset>/.intent-vN.json`` names the version, the run and the staged
   folder (and, once written, the ledger and catalog records);
2. **files**: everything is written into ``.tmp-vN-…`` (mode 0700), invisible to readers;
3. **ledger**: a ``publish`` entry in the lifetime ledger: *the commit point*;
4. **rename**: the staged folder becomes ``vN``: a release folder is visible only once the
   ledger charges it (issue 36.5), never in between;
5. **catalog**: the catalog row, then the store's copy of the ledger;
6. the intent record is removed.

A failure before step 3 removes the staged folder and the intent (no write is needed, so a
full disk cannot block it); the run's noise stays charged by its reservation. A kill leaves
the intent: :func:`recover_store` (run at the next start, by ``privfair store check
--repair`` and before every publication) rolls it forward (rename, catalog) if the ledger has
the ``publish`` entry and back (the staged folder removed) otherwise.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfair.store.catalog import CATALOG_COLUMNS, catalog
from privfair.store.files import StoreError, atomic_write, json_bytes
from privfair.store.ledger import LifetimeLedger, fold
from privfair.store.locks import locked
from privfair.store.registry import read_chain, record_published, write_store_copy

log = logging.getLogger(__name__)


# --- the protocol ------------------------------------------------------------------------------


def reached(step: str) -> None:
    """A publication step is about to run (fault-injection tests raise or kill here)."""
    log.debug("publication step: %s", step)


#: The names privfair gives a publication's intent record and staged folder: repair touches
#: nothing else in a dataset's folder (a user's ``.tmp-notes`` is not privfair's).
INTENT_NAME = re.compile(r"\.intent-(v\d+)\.json")
STAGED_NAME = re.compile(r"\.tmp-v\d+-[0-9a-f]{8}")


def staged_name(version: str) -> str:
    """A fresh name for the staged (invisible) folder of ``version``."""
    return f".tmp-{version}-{uuid.uuid4().hex[:8]}"


def is_publication_leftover(path: Path) -> bool:
    """An intent record or a staged folder of a publication (privfair's names only)."""
    return bool(INTENT_NAME.fullmatch(path.name)
                or (STAGED_NAME.fullmatch(path.name) and path.is_dir()))


def _intent_path(folder: Path, version: str) -> Path:
    return folder / f".intent-{version}.json"


def write_intent(folder: Path, version: str, **record: Any) -> Path:
    reached("intent")
    path = _intent_path(folder, version)
    atomic_write(path, json_bytes({"version": version, **{k: str(v) if isinstance(v, Path)
                                                          else v for k, v in record.items()}}))
    return path


def commit_publication(*, store: Path, contract_budget: tuple[float, float], ident: str,
                       dataset: str, version: str, staged: Path, final: Path, intent: Path,
                       release: Mapping[str, Any], catalog_row: list[Any]) -> LifetimeLedger:
    """Steps 3–6 of the protocol, for a fully written ``staged`` folder (any release kind)."""
    write_intent(final.parent, version, run_id=release.get("run_id"), staged=staged,
                 ident=ident, release=dict(release), catalog_row=catalog_row)
    try:
        reached("ledger")
        book = record_published(ident=ident, name=dataset, budget=contract_budget,
                                store=store, releases=[dict(release)])
    except BaseException:
        # An error after the registry committed (a dropped connection) must not lose a
        # charged release: then the intent stays for recovery to roll forward.
        if not _committed(store, dataset, ident, version):
            shutil.rmtree(staged, ignore_errors=True)
            intent.unlink(missing_ok=True)
        raise
    # Committed: from here a failure leaves the intent for recovery to roll forward.
    try:
        reached("rename")
        _make_visible(staged, final)
        reached("catalog")
        _insert_row(store, catalog_row)
        write_store_copy(store, book)
        reached("done")
    except Exception as exc:
        raise StoreError(f"{final} is published and charged, but the store could not be "
                         f"updated ({exc}); `privfair store check --out {store} --repair` "
                         "completes it") from exc
    intent.unlink(missing_ok=True)
    return book


def _make_visible(staged: Path, final: Path) -> None:
    """Rename the staged folder of a committed release to its version (readable by all)."""
    os.chmod(staged, 0o755)
    os.rename(staged, final)


def _committed(store: Path, dataset: str, ident: str | None, version: str) -> bool:
    """Whether the ledger has the ``publish`` entry of ``version`` in ``store`` (True when
    the registry cannot tell: recovery decides later, nothing is removed now)."""
    try:
        chain = read_chain(ident) if ident else []
    except Exception:
        return True
    here = str(store.resolve())
    return any(r.get("version") == version and r.get("store") == here
               for r in fold(chain, dataset, ident or dataset).releases)


def _insert_row(store: Path, row: list[Any]) -> None:
    # an intent written before a column was added has a shorter row: the new ones are null
    row = [*row, *[None] * (len(CATALOG_COLUMNS) - len(row))]
    with catalog(store) as con:
        con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?", [row[0], row[1]])
        con.execute(f"INSERT INTO releases ({', '.join(CATALOG_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(CATALOG_COLUMNS))})", row)


def delete_row(store: Path, dataset: str, version: str) -> None:
    if (store / "catalog.duckdb").is_file():
        with catalog(store) as con:
            con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?",
                        [dataset, version])


def recover_store(store: Path, dataset: str, *, locked_already: bool = False) -> list[str]:
    """Finish or undo the publications a killed run left in ``store/dataset``; returns what
    was done. Staged folders without an intent record (older crashes) are removed."""
    folder = store / dataset
    if not folder.is_dir() or not any(is_publication_leftover(p) for p in folder.iterdir()):
        return []
    if not locked_already:
        with locked(folder):
            return recover_store(store, dataset, locked_already=True)
    done: list[str] = []
    for path in sorted(p for p in folder.glob(".intent-*.json")
                       if INTENT_NAME.fullmatch(p.name)):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            record = {"version": path.name[len(".intent-"):-len(".json")]}
        version = str(record["version"])
        final = folder / version
        ident = record.get("ident")
        chain = read_chain(ident) if ident else []
        book = fold(chain, dataset, ident or dataset)
        here = str(store.resolve())
        committed = any(r.get("version") == version and r.get("store") == here
                        for r in book.releases)
        staged = Path(record["staged"]) if record.get("staged") else None
        if staged is not None and (staged.parent.resolve() != folder.resolve()
                                   or not STAGED_NAME.fullmatch(staged.name)):
            staged = None  # not a name privfair gives: never touched
        if committed and not final.is_dir() and staged is not None and staged.is_dir():
            _make_visible(staged, final)  # committed before its rename: roll forward
        if committed and final.is_dir() and record.get("catalog_row"):
            _insert_row(store, record["catalog_row"])
            write_store_copy(store, book)
            done.append(f"completed the publication of {dataset} {version}")
        else:
            if not committed:  # an uncharged folder (left by older code: renamed first)
                shutil.rmtree(final, ignore_errors=True)
                delete_row(store, dataset, version)
            done.append(f"rolled back the unfinished publication of {dataset} {version}")
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
        path.unlink(missing_ok=True)
    for tmp in sorted(folder.glob(".tmp-*")):
        if STAGED_NAME.fullmatch(tmp.name) and tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
            done.append(f"removed the staged folder {tmp.name}")
    for line in done:
        log.warning("store recovery: %s", line)
    return done


# --- the commit point of a release of any kind ----------------------------------------------


def commit_release(*, store: Path, dataset: str, version: str, staged: Path, final: Path,
                   lifetime: Mapping[str, Any], catalog_row: Sequence[Any]) -> None:
    """Append the ``publish`` entry of ``staged``, rename it to ``final``, add the catalog row.

    ``lifetime`` is the caller's view of the ledger (``LifetimeLedger.to_dict()``) with the
    new release appended to ``releases``. A failure before the ledger entry removes the
    staged folder; after it, recovery renames it and completes the catalog.
    """
    release = dict(next(r for r in reversed(lifetime["releases"])
                        if r.get("version") == version))
    budget = lifetime["budget"]
    ident = str(lifetime.get("dataset_id") or dataset)
    intent = write_intent(final.parent, version, staged=staged, ident=ident)
    commit_publication(store=store, contract_budget=(float(budget["epsilon"]),
                                                     float(budget["delta"])),
                       ident=ident, dataset=dataset, version=version, staged=staged,
                       final=final, intent=intent, release=release,
                       catalog_row=list(catalog_row))
