"""``privfair store check [--repair]``: reconcile release folders, ledgers and the catalog.

A store is consistent when every ``vN`` release folder, every catalog row and every
``publish`` entry of the lifetime ledgers (for this store) agree, no publication is
half-done (``.intent-*``/``.tmp-*``), and no private file is left in the working folder.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privfair.store.catalog import list_releases
from privfair.store.files import StoreError
from privfair.store.ledger import fold
from privfair.store.leftovers import find_leftovers, remove
from privfair.store.publication import delete_row, is_publication_leftover, recover_store
from privfair.store.registry import (
    cancel_reservation,
    check_store_binding,
    read_chain,
    read_ledger_file,
    registry_ledgers,
    store_problems,
    write_store_copy,
)


@dataclass
class StoreReport:
    problems: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems


def _datasets(store: Path) -> list[tuple[str, str]]:
    """(folder name, dataset id) of every dataset in the store."""
    names = {p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")} \
        if store.is_dir() else set()
    names |= {str(r["dataset"]) for r in list_releases(store)}
    out = []
    for name in sorted(names):
        ident = name
        copy = store / name / "lifetime_ledger.json"
        if copy.is_file():
            with contextlib.suppress(ValueError):
                ident = str(read_ledger_file(copy).get("dataset_id") or name)
        out.append((name, ident))
    # Datasets whose runs reserved budget for this store but never published there.
    known = {ident for _, ident in out}
    # A damaged ledger is reported where the store holds its dataset (check_store), never a
    # reason to skip the others.
    for raw in registry_ledgers(damaged=[]):
        ident = str(raw["dataset_id"])
        if ident not in known and any(p.get("store") == str(store) for p in raw["pending"]):
            out.append((str(raw.get("dataset") or ident), ident))
    return out


def pid_alive(pid: Any, host: Any) -> bool:
    """Whether process ``pid`` on ``host`` still runs; true when it cannot be told (another
    host, no pid), so nothing is taken from a run that may be alive."""
    if host != socket.gethostname() or not isinstance(pid, int):
        return True  # cannot tell: assume it still runs
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_store(store: str | Path, *, repair: bool = False,
                work_dir: str | Path | None = ".privfair") -> StoreReport:
    """Problems of ``store`` and the private leftovers of dead runs (``work_dir``'s staging,
    ``privfair-src-*`` temp folders, ``.*.tmp`` files: :mod:`privfair.store.leftovers`);
    with ``repair``, fix what can be fixed safely and report what is left. A staging folder
    whose run holds its lock is never touched."""
    store = Path(store).expanduser().resolve()
    report = StoreReport()
    for name, ident in _datasets(store):
        try:
            _check_dataset(store, name, ident, repair, report)
        except StoreError as exc:  # one damaged ledger: reported, the others still checked
            report.problems.append(f"{name}: {exc}")
    for path in find_leftovers(work_dir if work_dir is not None else ".privfair", store):
        if repair:
            remove(path)
            report.repaired.append(f"removed private leftover of a dead run {path}")
        else:
            report.problems.append(f"private leftover of a dead run: {path}")
    return report


def _check_dataset(store: Path, name: str, ident: str, repair: bool,
                   report: StoreReport) -> None:
    """The problems (and, with ``repair``, the repairs) of one dataset of ``store``."""
    folder = store / name
    leftovers = sorted(p.name for p in folder.iterdir() if is_publication_leftover(p)) \
        if folder.is_dir() else []
    if repair and leftovers:
        report.repaired += recover_store(store, name)
    else:
        report.problems += [f"{name}: unfinished publication {n}" for n in leftovers]
    check_store_binding(store, name, ident)  # another registry's dataset: nothing to repair
    chain = read_chain(ident)
    book = fold(chain, name, ident)
    for problem in store_problems(store, book):
        if repair and problem.startswith("the store's ledger copy") and (
                "edited" in problem or "unreadable" in problem):
            write_store_copy(store, book)  # a cache of the registry's chain: rewritten
            report.repaired.append(f"rewrote the ledger copy of {name} from the registry")
        elif repair and problem.startswith("catalog row") and not (
                folder / problem.split()[3]).is_dir():
            version = problem.split()[3]
            delete_row(store, name, version)
            report.repaired.append(f"removed the stale catalog row {name} {version}")
        else:
            report.problems.append(problem)
    here = str(store)
    for r in book.releases:
        if r.get("store") != here:
            continue
        version = str(r.get("version"))
        if not (folder / version).is_dir():
            report.problems.append(f"ledger entry {ident} {version} has no release folder")
        elif not any(row["version"] == version for row in list_releases(store, name)):
            report.problems.append(f"release {name} {version} has no catalog row")
    for p in book.pending:
        if p.get("store") != here:
            continue
        if p["state"] != "reserved" or pid_alive(p.get("pid"), p.get("host")):
            continue  # a run that drew noise stays charged; a live run is not stale
        if repair and cancel_reservation(ident, name, p["run_id"],
                                         reason="store check --repair: the run died "
                                                "before drawing noise"):
            report.repaired.append(f"gave back the reservation of dead run {p['run_id']}")
        else:
            report.problems.append(f"{ident}: run {p['run_id']} died holding a reservation "
                                   "(charged; it drew no noise)")

