"""Garbage collection of a working folder (``.privfair/`` by default).

A release run leaves in its working folder:

* ``artefacts/`` — content-addressed post-noise files (ledgers, noisy measurements, models,
  synthetic codes), reused by cached tasks, never removed by a run;
* ``prefect-results/`` — Prefect's cached ``estimate``/``sample`` results (file references
  into ``artefacts/``);
* ``staging/<run>/`` — private staging, removed at the end of every run; one is left only by
  a process that was killed;
* ``private-reports/`` — input-validation details of refused inputs (private, for the owner).

:func:`collect_garbage` removes what is older than a cut-off. Whenever an artefact goes, the
whole result cache goes too: a cached result may point at it, and the cache only saves time.
Staging folders are removed once older than ``stale_staging_s`` (the flow timeout) and
only when privfair made them (their lock file) and no run holds their lock. Releases and the lifetime ledgers live in the store, never here.

Only what privfair marked as its own is removed (issue 45.1: ``--work-dir proj`` once took a
user's ``proj/artefacts/thesis.docx``): an artefact by its content-addressed name
(:data:`~privfair.store.files.ARTEFACT_NAME`), a cached result by Prefect's hex cache key, a
private report by its run id, a staging folder by its lock file. Symbolic links are never
followed nor removed.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from privfair.core.errors import PrivfairError
from privfair.store.files import ARTEFACT_NAME
from privfair.store.leftovers import dead_staging

__all__ = ["RUN_TIME_LIMIT_S", "GarbageReport", "collect_garbage"]

_KNOWN = ("artefacts", "prefect-results", "staging", "private-reports")

#: Prefect's result files are named by their cache key, a hex digest.
RESULT_NAME = re.compile(r"[0-9a-f]{32,128}")
#: What earlier versions kept of a refused input: ``<run id>-input-validation.json``.
REPORT_NAME = re.compile(r"[0-9]{8}T[0-9]{6}-[0-9a-f]{8}(?:-resume)?-input-validation\.json")

#: The release flow's time limit: a staging folder older than this belongs to no live run.
RUN_TIME_LIMIT_S = 6 * 3600


class WorkDirError(PrivfairError, ValueError):
    """The folder is not a privfair working folder."""


@dataclass
class GarbageReport:
    removed: list[Path] = field(default_factory=list)
    bytes_freed: int = 0
    dry_run: bool = False

    def line(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        return (f"{verb} {len(self.removed)} item(s), {self.bytes_freed / 1e6:.1f} MB "
                f"from the working folder")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _newest_mtime(path: Path) -> float:
    times = [path.stat().st_mtime]
    if path.is_dir():
        times += [p.stat().st_mtime for p in path.rglob("*")]
    return max(times)


def _marked(folder: Path, name: re.Pattern[str]) -> list[Path]:
    """The regular files directly in ``folder`` whose name carries privfair's mark (none
    when ``folder`` is a symbolic link: it may lead anywhere)."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    return [p for p in sorted(folder.iterdir())
            if name.fullmatch(p.name) and p.is_file() and not p.is_symlink()]


def collect_garbage(work_dir: str | Path, *, older_than_s: float, stale_staging_s: float,
                    dry_run: bool = False, now: float | None = None) -> GarbageReport:
    """Remove artefacts, cached results and private reports older than ``older_than_s``.

    Raises :class:`WorkDirError` for a folder that has none of the working-folder parts, so
    a mistyped path is never emptied.
    """
    root = Path(work_dir)
    if not root.is_dir() or not any((root / part).is_dir() for part in _KNOWN):
        raise WorkDirError(f"{root} is not a privfair working folder (expected some of "
                           f"{', '.join(p + '/' for p in _KNOWN)})")
    now = time.time() if now is None else now
    report = GarbageReport(dry_run=dry_run)

    def take(path: Path) -> None:
        report.removed.append(path)
        report.bytes_freed += _size(path)
        if dry_run:
            return
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def old(path: Path, age: float) -> bool:
        return now - _newest_mtime(path) > age

    artefacts = _marked(root / "artefacts", ARTEFACT_NAME)
    stale = [p for p in artefacts if old(p, older_than_s)]
    cached = _marked(root / "prefect-results", RESULT_NAME)
    for path in stale:
        take(path)
    # an artefact gone: any cached result may point at it; else only old cached results go
    for path in cached if stale else [p for p in cached if old(p, older_than_s)]:
        take(path)
    for path in _marked(root / "private-reports", REPORT_NAME):
        if old(path, older_than_s):
            take(path)
    staging = root / "staging"
    runs = [] if staging.is_symlink() or not staging.is_dir() else sorted(staging.iterdir())
    for path in runs:
        # Only a staging folder privfair made whose run is gone; never one whose run holds
        # its lock, however old (issue 36.3), nor a folder privfair did not make.
        if dead_staging(path) and old(path, stale_staging_s):
            take(path)
    return report
