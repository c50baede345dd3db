"""The store's files: errors, atomic and private writes, references, working folders.

Stages exchange :class:`FileRef` (path + sha256), never frames. Post-noise artefacts are
JSON or ``.npz`` written content-addressed into a 0700 folder (:func:`write_artefact`);
nothing is pickled. The lowest layer of ``privfair.store``: it imports no other store
module but ``leftovers`` (the staging lock).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privfair.core.errors import PrivfairError
from privfair.store.leftovers import create_staging


class StoreError(PrivfairError, ValueError):
    """The release store cannot be written, or its records are inconsistent."""


# --- small file helpers ---------------------------------------------------------------------


#: How code columns (small unsigned integers: staged codes, synthetic codes) are written to
#: Parquet: delta-packed bits, no dictionary, no compressor. About 2.4 times faster to write
#: than dictionary pages under zstd (which cost as much as encoding the table), read as fast,
#: about 1.6 times larger; the same values, and private or post-noise files only (the
#: published table keeps its own format).
CODES_PARQUET: dict[str, Any] = {"compression": "none", "use_dictionary": False,
                                 "column_encoding": "DELTA_BINARY_PACKED"}


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (and parents) and make it mode 0700, whatever the umask."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` by a temporary file renamed over it.

    The temporary file ``.<name>.<32 hex>.tmp`` is locked (``flock``) by this writer from its
    creation to its rename, so ``store check --repair`` knows it is privfair's and never
    removes it while the write is alive, however long it pauses (issue 36.3).
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # held until the file is closed
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            reached_rename(tmp)
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def reached_rename(tmp: Path) -> None:
    """An atomic write is about to rename ``tmp`` (tests pause or kill here)."""


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default).encode("utf-8")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@dataclass(frozen=True)
class FileRef:
    """A file passed between stages: its path and the sha256 of its content."""

    path: str
    sha256: str

    @classmethod
    def of(cls, path: str | Path) -> FileRef:
        return cls(str(Path(path).resolve()), sha256_file(path))

    def open_checked(self) -> Path:
        """The path, after checking that the file is there and unchanged."""
        self._check(sha256_file(self._existing()))
        return Path(self.path)

    def read_checked(self) -> bytes:
        """The file's bytes, checked as :meth:`open_checked` does, in one read."""
        data = self._existing().read_bytes()
        self._check(hashlib.sha256(data).hexdigest())
        return data

    def _existing(self) -> Path:
        path = Path(self.path)
        if not path.is_file():
            raise StoreError(f"artefact {path} is missing (was the working folder cleaned?)")
        return path

    def _check(self, digest: str) -> None:
        if digest != self.sha256:
            raise StoreError(f"artefact {self.path} changed since it was written (sha256 "
                             f"mismatch)")


#: The name :func:`write_artefact` gives a file: privfair's mark on it. ``store gc`` removes
#: from ``artefacts/`` only files so named (a user's ``thesis.docx`` there is not ours).
ARTEFACT_NAME = re.compile(r"[a-z][a-z0-9-]*-[0-9a-f]{16}\.(?:json|npz|parquet|yaml)")


def write_artefact(folder: str | Path, kind: str, data: bytes, ext: str) -> FileRef:
    """Write post-noise bytes content-addressed as ``<kind>-<sha16>.<ext>``."""
    digest = hashlib.sha256(data).hexdigest()
    name = f"{kind}-{digest[:16]}.{ext}"
    if not ARTEFACT_NAME.fullmatch(name):  # gc would never remove it: a programming error
        raise ValueError(f"artefact name {name!r} does not carry privfair's mark")
    path = private_dir(folder) / name
    if not (path.is_file() and sha256_file(path) == digest):
        atomic_write(path, data)
    return FileRef(str(path.resolve()), digest)


def stage_file(path: Path) -> FileRef:
    return FileRef.of(path)


def save_private_array(array: np.ndarray, *, folder: str | Path, name: str) -> FileRef:
    """Write an array of private rows as ``folder/name`` (a ``.npy``, no pickle).

    The one writer of private arrays: the file is created 0600 by ``open`` itself (any file
    left under that name is removed first, so no earlier mode carries over), never readable
    by others, not even between its creation and a later ``chmod``.
    """
    path = Path(folder) / name
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
    return FileRef.of(path)


# --- working folders ------------------------------------------------------------------------


@dataclass(frozen=True)
class Workspace:
    """The project-local working folder of one run (see the module docstring)."""

    root: Path
    run_id: str

    @classmethod
    def open(cls, root: str | Path, run_id: str | None = None) -> Workspace:
        """Create the folders and take the run's lock on ``staging/.lock`` (held until
        :meth:`cleanup_private`: ``store check`` never touches a locked staging folder)."""
        ws = cls(Path(root).resolve(), run_id or new_run_id())
        for p in (ws.root, ws.staging.parent, ws.artefacts, ws.results):
            private_dir(p)
        if ws.staging not in _STAGING_LOCKS:
            # Created with its lock held (the mark that makes it privfair's to remove).
            _STAGING_LOCKS[ws.staging] = create_staging(ws.staging)
        os.chmod(ws.staging, 0o700)
        return ws

    @property
    def staging(self) -> Path:
        return self.root / "staging" / self.run_id

    @property
    def artefacts(self) -> Path:
        return self.root / "artefacts"

    @property
    def results(self) -> Path:
        return self.root / "prefect-results"

    def cleanup_private(self) -> None:
        """Remove the private staging folder of this run, then release its lock."""
        shutil.rmtree(self.staging, ignore_errors=True)
        fd = _STAGING_LOCKS.pop(self.staging, None)
        if fd is not None:
            os.close(fd)


#: Descriptors of the staging locks this process holds (closing one releases it).
_STAGING_LOCKS: dict[Path, int] = {}


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
