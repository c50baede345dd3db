"""Private leftovers of runs that died, found without being told where (issue 21.7).

Repair deletes only what privfair made (issue 36.3): each kind of leftover carries privfair's
mark, and one whose writer still holds its lock is never touched, whatever its age.

* ``<work_dir>/staging/<run_id>/``: a run's private staging, marked by its lock file
  ``<run_id>/.lock``. :func:`create_staging` builds it under a ``.privfair-new-*`` name with
  the lock taken and renames it into place, so a run folder never exists without its lock;
  a live run holds the ``flock`` until its cleanup, a folder whose lock is free belongs to a
  dead run. A folder without a lock file is not privfair's (a user's ``photos/``) and is
  never touched; an empty ``.privfair-new-*`` folder (a run killed while creating it) is.
* ``privfair-src-<pid>-*`` folders in the system temp folder (links to private files made by
  :func:`privfair.contracts.encoding.literal_file`) whose process is gone.
* ``.<name>.<32 hex>.tmp`` files of interrupted :func:`~privfair.store.files.atomic_write`
  calls, in the work folder and the store: the writer holds an ``flock`` on the file from its
  creation to its rename, so a paused live write is never taken for a dead one. Other
  ``.tmp`` files (``.report.tmp``) are not privfair's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

LOCK_NAME = ".lock"
#: The prefix of a staging folder being created (lock not yet taken, or not yet renamed).
NEW_STAGING_PREFIX = ".privfair-new-"
#: Between a file's creation and its writer's lock there is an instant without a lock: a
#: privfair file younger than this is left alone as well (a held lock protects it after).
GRACE_S = 60.0
#: A ``privfair-src-*`` folder without a pid in its name was made by older code: left alone
#: until this old.
LEGACY_GRACE_S = 3600.0
_SRC = re.compile(r"privfair-src-(\d+)-")
#: The temporary name :func:`privfair.store.files.atomic_write` gives a file it writes.
ATOMIC_TMP = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")


def hold_staging_lock(staging: Path) -> int:
    """Take (non-blocking) the run's lock in ``staging``; returns the descriptor to keep."""
    fd = os.open(staging / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def create_staging(staging: Path) -> int:
    """Create the run folder ``staging`` (0700) with its lock held; returns the descriptor.

    The folder is built as ``.privfair-new-*`` beside it, the lock taken inside, then renamed:
    a run folder is never seen without its lock file (the mark repair needs). An existing
    folder (a resumed run) has its lock taken in place.
    """
    if staging.is_dir():
        return hold_staging_lock(staging)
    building = staging.parent / f"{NEW_STAGING_PREFIX}{uuid.uuid4().hex}"
    building.mkdir(mode=0o700)
    try:
        fd = hold_staging_lock(building)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    try:
        os.rename(building, staging)
    except OSError:
        os.close(fd)
        shutil.rmtree(building, ignore_errors=True)
        if not staging.is_dir():
            raise
        return hold_staging_lock(staging)  # another process of the same run made it first
    return fd


def is_locked(path: Path) -> bool:
    """Whether some process holds an ``flock`` on ``path`` (False if it cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def staging_is_live(run: Path) -> bool:
    """Whether a live run holds ``run``'s lock."""
    return is_locked(run / LOCK_NAME)


def staging_is_privfairs(run: Path) -> bool:
    """Whether privfair made the staging folder ``run`` (its lock file is the mark)."""
    if run.is_symlink() or not run.is_dir():
        return False
    if run.name.startswith(NEW_STAGING_PREFIX):
        return True
    lock = run / LOCK_NAME
    return lock.is_file() and not lock.is_symlink()


def dead_staging(run: Path) -> bool:
    """A staging folder privfair made whose run is gone (never one a run holds)."""
    if not staging_is_privfairs(run) or staging_is_live(run):
        return False
    if run.name.startswith(NEW_STAGING_PREFIX):  # its creator may not have locked it yet
        return not _young(run)
    return True


def dead_atomic_tmp(path: Path) -> bool:
    """A temporary file of an interrupted :func:`atomic_write` (never one being written)."""
    return bool(ATOMIC_TMP.fullmatch(path.name)) and not path.is_symlink() \
        and path.is_file() and not _young(path) and not is_locked(path)


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
        if dead_staging(run):
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
            out += [here / f for f in filenames if dead_atomic_tmp(here / f)]
    return sorted(set(out))


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
