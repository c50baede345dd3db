"""Private leftovers of runs that died, found without being told where (issue 21.7).

* ``<work_dir>/staging/<run_id>/``: a run's private staging. A live run holds an ``flock`` on
  ``<run_id>/.lock`` (taken by :meth:`Workspace.open`, released by its cleanup); a folder
  whose lock is free belongs to a dead run. A folder whose lock is held is never touched (one
  without a lock file, from older code, only once it is an hour old).
* ``privfair-src-<pid>-*`` folders in the system temp folder (links to private files made by
  :func:`privfair.contracts.encoding.literal_file`) whose process is gone.
* ``.*.tmp`` files (e.g. ``..intent-*.tmp``) of interrupted atomic writes, in the work
  folder and the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

LOCK_NAME = ".lock"
#: A .tmp file younger than this may be a write in progress: left alone.
GRACE_S = 60.0
#: A staging folder without a lock file, or a ``privfair-src-*`` folder without a pid in its
#: name, was made by a run of older code that took no lock: left alone until this old.
LEGACY_GRACE_S = 3600.0
_SRC = re.compile(r"privfair-src-(\d+)-")


def hold_staging_lock(staging: Path) -> int:
    """Take (non-blocking) the run's lock in ``staging``; returns the descriptor to keep."""
    fd = os.open(staging / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def staging_is_live(run: Path) -> bool:
    """Whether a live run holds ``run``'s lock (a young folder without one counts as live)."""
    lock = run / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return _young(run, LEGACY_GRACE_S)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def _young(path: Path, grace: float = GRACE_S) -> bool:
    with contextlib.suppress(OSError):
        return time.time() - path.lstat().st_mtime < grace
    return False


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def find_leftovers(work_dir: str | Path, store: str | Path | None = None,
                   temp_dir: str | Path | None = None) -> list[Path]:
    """Every leftover of a dead run (never one of a live run), sorted."""
    out: list[Path] = []
    work = Path(work_dir).expanduser().resolve()
    staging = work / "staging"
    for run in sorted(staging.iterdir()) if staging.is_dir() else []:
        if run.is_dir() and not run.is_symlink() and not staging_is_live(run):
            out.append(run)
    tmp = Path(temp_dir or tempfile.gettempdir())
    for folder in sorted(tmp.glob("privfair-src-*")) if tmp.is_dir() else []:
        match = _SRC.match(folder.name)
        if folder.is_dir() and (_pid_gone(int(match.group(1))) if match
                                else not _young(folder, LEGACY_GRACE_S)):
            with contextlib.suppress(OSError):
                if folder.stat().st_uid == os.getuid():
                    out.append(folder)
    for root in (work, Path(store).expanduser().resolve() if store else None):
        if root is None or not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if here / d not in out
                           and not (here == staging and staging_is_live(here / d))]
            out += [here / f for f in filenames
                    if f.startswith(".") and f.endswith(".tmp") and not _young(here / f)]
    return sorted(set(out))


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
