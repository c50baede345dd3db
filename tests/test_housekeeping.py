"""``privfair store gc``: working-folder garbage collection (issue 16)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privfair.store.files import Workspace
from privfair.store.gc import WorkDirError, collect_garbage

DAY = 86_400.0


def _file(path: Path, age_days: float, now: float, data: bytes = b"x" * 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (now - age_days * DAY, now - age_days * DAY))
    return path


def _tree(tmp_path: Path, now: float) -> dict[str, Path]:
    ws = Workspace.open(tmp_path / "work", "run-old")
    return {
        "old_artefact": _file(ws.artefacts / "model-aaaaaaaaaaaaaaaa.npz", 10, now),
        "new_artefact": _file(ws.artefacts / "model-bbbbbbbbbbbbbbbb.npz", 1, now),
        "new_result": _file(ws.results / ("e" * 32), 1, now),
        "old_report": _file(ws.root / "private-reports" / "20260101T000000-0123abcd-input-validation.json", 10, now),
        # A killed run's staging: its lock file is there, nobody holds it.
        "crash_staging": _file(ws.root / "staging" / "run-killed" / "staged.parquet", 2, now),
        "crash_lock": _file(ws.root / "staging" / "run-killed" / ".lock", 2, now, b""),
        "live_staging": _file(ws.root / "staging" / "run-now" / "staged.parquet", 0.01, now),
        # This process's run holds its lock: never removed, however old.
        "held_staging": _file(ws.staging / "staged.parquet", 2, now),
        # Not privfair's (no lock file): never removed.
        "user_file": _file(ws.root / "staging" / "photos" / "a.jpg", 30, now),
    }


def test_gc_removes_old_files_crash_leftovers_and_the_cache_they_feed(tmp_path):
    now = 1_800_000_000.0
    files = _tree(tmp_path, now)
    dry = collect_garbage(tmp_path / "work", older_than_s=7 * DAY, stale_staging_s=6 * 3600,
                          dry_run=True, now=now)
    assert all(p.exists() for p in files.values())
    report = collect_garbage(tmp_path / "work", older_than_s=7 * DAY,
                             stale_staging_s=6 * 3600, now=now)
    assert sorted(map(str, report.removed)) == sorted(map(str, dry.removed))
    gone = {k for k, p in files.items() if not p.exists()}
    # the young cached result goes with the old artefact it may point at
    assert gone == {"old_artefact", "new_result", "old_report", "crash_staging", "crash_lock"}
    assert not files["crash_staging"].parent.exists()
    assert report.bytes_freed == 400 and report.line().startswith("removed 4 item(s)")


def test_gc_keeps_young_cache_when_no_artefact_goes(tmp_path):
    now = 1_800_000_000.0
    ws = Workspace.open(tmp_path / "work")
    kept = _file(ws.results / ("c" * 32), 1, now)
    old = _file(ws.results / ("d" * 32), 9, now)
    collect_garbage(ws.root, older_than_s=7 * DAY, stale_staging_s=DAY, now=now)
    assert kept.exists() and not old.exists()


def test_gc_refuses_a_folder_that_is_not_a_work_dir(tmp_path):
    (tmp_path / "precious.txt").write_text("keep")
    with pytest.raises(WorkDirError, match="is not a privfair working folder"):
        collect_garbage(tmp_path, older_than_s=0, stale_staging_s=0)
    assert (tmp_path / "precious.txt").exists()


def test_cli_store_gc_and_version(tmp_path, capsys):
    from privfair.cli import main

    now = __import__("time").time()
    ws = Workspace.open(tmp_path / "work")
    old = _file(ws.artefacts / "ledger-1111111111111111.json", 30, now)
    young = _file(ws.artefacts / "ledger-2222222222222222.json", 0, now)
    assert main(["store", "gc", "--work-dir", str(ws.root), "--dry-run"]) == 0
    assert old.exists() and capsys.readouterr().out.split() == [str(old)]
    assert main(["store", "gc", "--work-dir", str(ws.root), "--older-than", "7"]) == 0
    assert not old.exists() and young.exists()
    assert main(["store", "gc", "--work-dir", str(tmp_path / "nope")]) == 2
    assert "is not a privfair working folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip().startswith("privfair 0.")


def test_the_installed_version_is_the_one_privfair_records():
    """pyproject.toml reads the version from privfair/version.py: the distribution's metadata
    and what manifests and `--version` record cannot drift apart."""
    import importlib.metadata

    from privfair.store.catalog import code_version
    from privfair.version import VERSION

    assert importlib.metadata.version("privfair") == VERSION
    assert code_version()["privfair"] == VERSION
