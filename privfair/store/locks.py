"""Folder locks: one ``flock`` per folder, shared by the store, the registry and the CLI."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold the exclusive ``flock`` of the lock file ``path`` (created 0600, whatever the
    umask)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the exclusive ``flock`` of ``folder/.lock``."""
    with locked_file(folder / ".lock"):
        yield
