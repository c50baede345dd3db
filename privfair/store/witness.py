"""The client's witness of every ledger head it has seen: no silent rollback of a registry.

A registry's own checks (HMAC chain, HMAC'd head and entry count) cannot tell a ledger from an
older copy of itself: a restored older ``registry.sqlite`` or ``pg_dump``, or tables emptied
by a superuser, are each a consistent registry that has forgotten later charges. So every
client keeps, **outside the registry**, the highest head it has seen of each dataset
(generation, entry count, head hash) and refuses a registry that shows less: fewer entries, an
older generation, another history, or no ledger at all. A ``ledger reset`` opens a new
generation and is accepted (it is recorded in the registry).

The witness is ``witness.json`` in ``$PRIVFAIR_STATE_HOME`` (default
``$XDG_STATE_HOME/privfair``, else ``~/.local/state/privfair``), 0600 in a 0700 folder,
grouped by a fingerprint of the registry key (the key outlives a restored or emptied
database, so the witness still applies to it); updated under an ``flock`` after each committed
transaction, so it only grows.

It also binds each dataset to the first registry this client saw charge it (issue 45.2): a
registry under another key (a second registry, or a deleted registry folder made anew, whose
new key escaped the per-key witness) is refused for that dataset, whatever the contract says,
so one dataset's budget lives in one registry.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfair.store.files import StoreError, atomic_write

WITNESS_FILE = "witness.json"
_NAMESPACE = b"privfair-witness/1"
#: The witness's section of dataset -> the registry (key fingerprint, name) it is bound to.
BOUND = "bound"


@dataclass(frozen=True)
class Seen:
    """A ledger head: its generation (``ledger reset`` count), entry count and head hash."""

    generation: int
    count: int
    head: str


def state_folder() -> Path:
    """Where this client keeps its witness (never the registry's folder)."""
    env = os.environ.get("PRIVFAIR_STATE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser().resolve() / "privfair"


def _namespace(key: bytes) -> str:
    return hmac.new(key, _NAMESPACE, hashlib.sha256).hexdigest()[:32]


class StateFolderError(StoreError):
    """The client's state folder cannot be made or written (a full disk, a file in its
    place); the message names the path. Raised after a registry transaction committed, the
    caller decides what the committed entry means (a reservation is cancelled)."""


def _state_failure(path: Path, exc: OSError) -> StateFolderError:
    why = exc.strerror or type(exc).__name__
    return StateFolderError(f"state folder {state_folder()} (PRIVFAIR_STATE_HOME): {path} "
                            f"cannot be written ({why}); free space there or point "
                            "PRIVFAIR_STATE_HOME at a writable folder")


@contextlib.contextmanager
def _locked_file() -> Iterator[Path]:
    folder = state_folder()
    lock = folder / f".{WITNESS_FILE}.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _state_failure(lock, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder / WITNESS_FILE
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StoreError(f"the registry witness {path} cannot be read ({exc}); it guards "
                         "against rolled-back registries: restore it or remove it knowingly") \
            from None
    return raw if isinstance(raw, dict) else {}


def seen(key: bytes, dataset: str) -> Seen | None:
    """The highest head of ``dataset`` this client has seen in the registry of ``key``."""
    with _locked_file() as path:
        entry = _read(path).get(_namespace(key), {}).get(dataset)
    if not entry:
        return None
    return Seen(int(entry[0]), int(entry[1]), str(entry[2]))


def check(key: bytes, dataset: str, registry: str, shown: Seen | None,
          entries: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a registry whose ledger of ``dataset`` (head ``shown``, chain ``entries``) is
    behind, or beside, what this client has seen."""
    check_bound(key, dataset, registry)
    known = seen(key, dataset)
    if known is None:
        return
    where = f"lifetime ledger of dataset {dataset!r} in registry {registry}"
    fix = ("(restored from an older backup, or emptied?); restore the registry's latest "
           f"copy, or record the loss with `privfair ledger reset --dataset {dataset}`")
    if shown is None:
        raise StoreError(f"{where} is missing, but this client has seen it with {known.count} "
                         f"entries {fix}")
    if shown.generation < known.generation or (
            shown.generation == known.generation and shown.count < known.count):
        raise StoreError(f"{where} has {shown.count} entries (generation {shown.generation}) "
                         f"but this client has seen {known.count} (generation "
                         f"{known.generation}): rolled back {fix}")
    if shown.generation == known.generation and known.count and (
            len(entries) < known.count
            or not hmac.compare_digest(str(entries[known.count - 1].get("hash")), known.head)):
        raise StoreError(f"{where} differs from the history this client has seen at entry "
                         f"{known.count - 1} (replaced) {fix}")


def check_bound(key: bytes, dataset: str, registry: str) -> None:
    """Refuse ``dataset`` in the registry of ``key`` when this client bound it to another
    registry at its first charge (one line, with the fix)."""
    with _locked_file() as path:
        bound = _read(path).get(BOUND, {}).get(dataset)
    if not bound or hmac.compare_digest(str(bound.get("key", "")), _namespace(key)):
        return
    raise StoreError(
        f"dataset {dataset!r} is bound to registry {bound.get('registry') or '(unnamed)'}, "
        f"where this client saw it charged; registry {registry} (another key: a second "
        "registry, or one made anew) would start its budget afresh. Point PRIVFAIR_REGISTRY "
        "at the bound registry; if it is lost for good, its spend is lost with it: remove "
        f"the binding of {dataset!r} from {path} knowingly")


def record(key: bytes, dataset: str, shown: Seen, *, registry: str = "") -> None:
    """Remember ``shown`` if it is ahead of what this client has seen (after a commit), and
    bind ``dataset`` to this registry if it is bound to none."""
    with _locked_file() as path:
        raw = _read(path)
        bound = raw.setdefault(BOUND, {})
        changed = dataset not in bound
        if changed:
            bound[dataset] = {"key": _namespace(key), "registry": registry}
        space = raw.setdefault(_namespace(key), {})
        old = space.get(dataset)
        if not (old and (int(old[0]), int(old[1])) >= (shown.generation, shown.count)):
            space[dataset] = [shown.generation, shown.count, shown.head]
            changed = True
        if changed:
            try:
                atomic_write(path, json.dumps(raw, sort_keys=True).encode("utf-8"))
                os.chmod(path, 0o600)
            except OSError as exc:
                raise _state_failure(path, exc) from None
