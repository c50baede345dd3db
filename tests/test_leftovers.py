"""`store check` finds every private leftover of a dead run by itself and never touches a run
that holds its lock (issue 21.7)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from privfair.contracts.encoding import literal_file
from privfair.store.check import check_store
from privfair.store.files import Workspace
from privfair.store.leftovers import find_leftovers


@pytest.fixture
def systmp(tmp_path, monkeypatch):
    folder = tmp_path / "systmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _old(path: Path, seconds: float = 7200) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_live_run_staging_is_never_touched_and_a_dead_one_is_removed(tmp_path, systmp):
    work, store = tmp_path / "work", tmp_path / "store"
    live = Workspace.open(work)
    (live.staging / "input.parquet").write_bytes(b"private")
    # A killed run: its lock file is there, nobody holds it.
    dead = work / "staging" / "20200101T000000-deadbeef"
    dead.mkdir(parents=True)
    (dead / ".lock").touch()
    (dead / "input.parquet").write_bytes(b"private")
    report = check_store(store, work_dir=work)
    assert any(str(dead) in p for p in report.problems)
    assert not any(str(live.staging) in p for p in report.problems)
    check_store(store, work_dir=work, repair=True)
    assert not dead.exists()
    assert (live.staging / "input.parquet").read_bytes() == b"private"
    live.cleanup_private()
    assert not live.staging.exists()


def test_lock_is_held_by_another_process_until_it_ends(tmp_path, systmp):
    work = tmp_path / "work"
    code = ("import sys, time; from privfair.store.files import Workspace; "
            f"ws = Workspace.open({str(work)!r}, 'run-x'); print('ready', flush=True); "
            "sys.stdin.readline()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    try:
        assert child.stdout.readline().strip() == "ready"
        assert find_leftovers(work, temp_dir=systmp) == []  # held: a live run
    finally:
        child.communicate("\n", timeout=30)
    assert find_leftovers(work, temp_dir=systmp) == [work / "staging" / "run-x"]


def test_check_without_work_dir_looks_in_the_default_work_folder(tmp_path, systmp,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    dead = tmp_path / ".privfair" / "staging" / "killed"
    dead.mkdir(parents=True)
    (dead / ".lock").touch()
    (dead / "input.parquet").write_bytes(b"private")
    report = check_store(tmp_path / "store")
    assert not report.consistent
    assert any("killed" in p for p in report.problems)


def test_src_folders_of_dead_processes_and_tmp_files_are_found(tmp_path, systmp):
    data = tmp_path / "rows.csv"
    data.write_text("a\n1\n")
    with literal_file(data) as link:
        folder = Path(link).parent
        assert folder.parent == systmp and folder.name.startswith(f"privfair-src-{os.getpid()}-")
        assert find_leftovers(tmp_path / "work", temp_dir=systmp) == []  # our pid: alive
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead_src = systmp / f"privfair-src-{gone}-abc"
    dead_src.mkdir()
    os.symlink(data, dead_src / "source.csv")
    store = tmp_path / "store"
    (store / "toy").mkdir(parents=True)
    intent = store / "toy" / f"..intent-v1.json.{'0a1b' * 8}.tmp"
    intent.write_text("{}")
    _old(intent)
    fresh = store / "toy" / f".manifest.json.{'ff' * 16}.tmp"
    fresh.write_text("{}")  # a write in progress: left alone
    found = find_leftovers(tmp_path / "work", store, temp_dir=systmp)
    assert found == sorted([dead_src, intent])
    check_store(store, work_dir=tmp_path / "work", repair=True)
    assert not dead_src.exists() and not intent.exists() and fresh.exists()
    assert data.exists()  # the link is removed, never the file it names


# --- issue 36.3: repair deletes only what privfair made, never a live run's -----------------


def test_repair_never_deletes_a_users_files(tmp_path, systmp):
    """A user's folder under ``staging/`` and ``.tmp`` files privfair did not make survive
    repair however old they are; privfair's own leftovers beside them go."""
    work, store = tmp_path / "work", tmp_path / "store"
    Workspace.open(work).cleanup_private()  # a real work folder
    photo = work / "staging" / "photos" / "a.jpg"
    photo.parent.mkdir(parents=True)
    photo.write_bytes(b"jpeg")
    (store / "toy").mkdir(parents=True)
    theirs = [work / ".report.tmp", store / "toy" / ".draft.tmp", store / ".notes.abc.tmp",
              store / "toy" / ".tmp-notes"]
    for path in theirs:
        path.write_text("mine")
    dead = work / "staging" / "20200101T000000-deadbeef"  # a killed run: lock file, free
    dead.mkdir()
    (dead / ".lock").touch()
    ours = store / "toy" / f".manifest.json.{uuid.uuid4().hex}.tmp"
    ours.write_text("{}")
    for path in [photo, photo.parent, *theirs, dead, ours]:
        _old(path, 30 * 86_400)
    report = check_store(store, work_dir=work, repair=True)
    assert photo.read_bytes() == b"jpeg"
    assert all(p.read_text() == "mine" for p in theirs)
    assert not dead.exists() and not ours.exists()
    assert not any("photos" in line or "notes" in line or "draft" in line
                   or "report" in line for line in report.repaired + report.problems)


def test_an_empty_staging_folder_left_while_being_created_is_removed(tmp_path, systmp):
    """A run killed while creating its staging folder leaves a ``.privfair-new-*`` one (the
    run folder itself never exists without its lock); repair removes it once not young."""
    work = tmp_path / "work"
    Workspace.open(work).cleanup_private()
    half = work / "staging" / ".privfair-new-0123"
    half.mkdir()
    assert find_leftovers(work, temp_dir=systmp) == []  # young: its creator may be alive
    _old(half)
    assert find_leftovers(work, temp_dir=systmp) == [half]
    check_store(tmp_path / "store", work_dir=work, repair=True)
    assert not half.exists()


_PAUSED_WRITE = """
import sys
from pathlib import Path
from privfair.store import files

def pause(tmp):
    print(tmp, flush=True)
    sys.stdin.readline()  # paused between the write and the rename

files.reached_rename = pause
files.atomic_write(Path(sys.argv[1]), b"payload")
print("renamed", flush=True)
"""


def test_repair_never_deletes_a_live_writes_tmp_file_however_old(tmp_path, systmp):
    """A run paused between its write and its rename (65 s and more): its ``.tmp`` file is
    aged by hand past every grace period; repair leaves it, and the run then renames it."""
    store = tmp_path / "store"
    (store / "toy").mkdir(parents=True)
    target = store / "toy" / "lifetime_ledger.json"
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_WRITE, str(target)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parents[1])
    try:
        tmp = Path(child.stdout.readline().strip())
        assert tmp.parent == target.parent and tmp.is_file()
        _old(tmp, 65)
        assert find_leftovers(tmp_path / "work", store, temp_dir=systmp) == []
        check_store(store, work_dir=tmp_path / "work", repair=True)
        assert tmp.is_file()
        out, _ = child.communicate("\n", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0 and "renamed" in out
    assert target.read_bytes() == b"payload" and not tmp.exists()
