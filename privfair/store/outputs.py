"""Where a command may write: never over a file it did not make (issue 45.1).

Every ``--out``, ``--work-dir`` and export path of the command line goes through
:func:`check_output` before anything is read or reserved. An output is refused, in one line
naming its option, when it is or is inside

* an input of the same command (``--data``, the contract, a release it reads), compared
  after symbolic links are followed and, for existing files, by inode (a hard link);
* the privacy registry (its folder, ``registry.sqlite``, ``registry.key``, a PostgreSQL
  registry's key file) or the client's state folder (the witness);
* a release store (its ``catalog.duckdb``, a dataset's ``lifetime_ledger.json``, anything
  among the published releases), unless the output is the store itself (``store=True``: the
  ``--out`` of a publishing command, which still may not be inside another store);
* a published release (a folder whose ``manifest.json`` is a privfair manifest, also one
  copied out of its store).

Deleting is the other half: ``store gc`` and ``store check --repair`` remove only files and
folders privfair marked as its own (:mod:`privfair.store.leftovers`,
:data:`privfair.store.files.ARTEFACT_NAME`), never a user's file that happens to sit in a
folder of the same name.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from privfair.store.backends import DB_FILE, key_path, registry_folder
from privfair.store.files import StoreError
from privfair.store.witness import WITNESS_FILE, state_folder

__all__ = ["OutputPathError", "check_output", "is_published_release", "is_release_store"]

#: A published release's ``manifest.json`` holds these keys (privfair.release.manifest).
_MANIFEST_KEYS = frozenset({"dataset", "version", "run_id", "code_version"})
#: A manifest larger than this is not read to tell whether it is privfair's.
_MANIFEST_MAX_BYTES = 64 * 2**20


class OutputPathError(StoreError):
    """An output path that would overwrite an input, privfair's state or a release."""


def check_output(path: str | Path, *, flag: str,
                 inputs: Mapping[str, str | Path | None] | None = None,
                 store: bool = False, new_file: bool = False) -> Path:
    """The resolved output ``path`` of option ``flag``, or :class:`OutputPathError`.

    Parameters
    ----------
    path : str or Path
        The output as given (a file to write, a folder to create or write in).
    flag : str
        The option's name in the message (``--out``, ``--work-dir``).
    inputs : mapping of str to path, optional
        The command's inputs by option name (``{"--data": ..., "--contract": ...}``); None
        values are skipped.
    store : bool
        The output is a release store (a publishing command's ``--out``): it may be a store,
        never inside one nor inside a published release.
    new_file : bool
        The output is a file the command creates: an existing path (a user's file, which
        privfair cannot tell from its own) is refused.
    """
    target = _resolved(path, flag)
    for name, given in (inputs or {}).items():
        if given is None or not str(given).strip():
            continue
        with contextlib.suppress(RuntimeError, OSError):  # an input that cannot resolve
            source = Path(given).expanduser().resolve()  # is refused by its own check
            if _same(target, source):
                raise OutputPathError(
                    f"{flag} {path} is the {name} input {given}; an output never overwrites "
                    f"an input: choose another {flag}")
            if source in target.parents:
                raise OutputPathError(
                    f"{flag} {path} is inside the {name} input {given}; an output never "
                    f"writes into an input: choose another {flag}")
    for what, place in _state_places():
        if _same(target, place) or place in target.parents:
            where = "is" if _same(target, place) else "is inside"
            raise OutputPathError(
                f"{flag} {path} {where} {what} {place}; privfair's own state is never an "
                f"output: choose another {flag}")
    for folder in (target, *target.parents):
        if is_published_release(folder):
            where = "is" if folder == target else "is inside"
            raise OutputPathError(
                f"{flag} {path} {where} the published release {folder}; releases are never "
                f"written over: choose another {flag}")
        if (folder != target or not store) and is_release_store(folder):
            where = "is" if folder == target else "is inside"
            raise OutputPathError(
                f"{flag} {path} {where} the release store {folder} (its catalog, ledgers and "
                f"published releases): choose a {flag} outside it")
    # after the checks above, whose messages say more (an input, the registry, a store)
    if new_file and (target.exists() or target.is_symlink()):
        raise OutputPathError(
            f"{flag} {path} exists; expected a new file (privfair never writes over a file it "
            f"did not make): remove it or choose another {flag}")
    return target


def _resolved(path: str | Path, flag: str) -> Path:
    if not str(path).strip():  # Path('') is '.': never the current folder instead
        raise OutputPathError(f"{flag} is empty; expected a path")
    try:
        return Path(path).expanduser().resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: a symbolic link loop
        raise OutputPathError(f"{flag} {path}: cannot be resolved (a symbolic link loop?): "
                              f"{' '.join(str(exc).split())}") from None


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)  # a hard link, a bind mount
    except OSError:  # one of them does not exist (yet)
        return False


def _state_places() -> Iterator[tuple[str, Path]]:
    """privfair's own state: the registry's folder, database and key, the client's state
    folder (files named too, so that a hard link to one elsewhere is caught)."""
    folder = registry_folder()
    yield "the privacy registry folder", folder
    yield "the privacy registry's database", folder / DB_FILE
    yield "the privacy registry's key", key_path()
    state = state_folder()
    yield "privfair's state folder (the ledger witness)", state
    yield "privfair's ledger witness", state / WITNESS_FILE


def is_release_store(folder: Path) -> bool:
    """A folder holding a release catalog, or a dataset folder with its ledger copy."""
    try:
        if (folder / "catalog.duckdb").exists():
            return True
        with os.scandir(folder) as entries:
            return any(e.is_dir(follow_symlinks=False)
                       and os.path.isfile(os.path.join(e.path, "lifetime_ledger.json"))
                       for e in entries)
    except OSError:  # not a folder, or unreadable: nothing to protect there
        return False


def is_published_release(folder: Path) -> bool:
    """A folder whose ``manifest.json`` is a privfair release manifest."""
    manifest = folder / "manifest.json"
    try:
        if not manifest.is_file() or manifest.stat().st_size > _MANIFEST_MAX_BYTES:
            return False
        raw = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and raw.keys() >= _MANIFEST_KEYS
