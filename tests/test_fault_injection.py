"""Fault injection at every publication step (issue 10.8): an exception, a full disk (ENOSPC)
or a SIGKILL leaves no private file, no uncharged noise, and a store that ``store check``
reports consistent (after ``--repair`` where a kill left work behind)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_release_store import params

from privfair.contracts.schema import load_contract
from privfair.release.run import release_table as run_release
from privfair.store import publication
from privfair.store.catalog import list_releases
from privfair.store.check import check_store
from privfair.store.files import StoreError
from privfair.store.registry import read_lifetime_ledger

ROOT = Path(__file__).resolve().parents[1]
BEFORE_COMMIT = ["intent", "files", "ledger"]
AFTER_COMMIT = ["rename", "catalog", "done"]


def _no_private_leftovers(work: Path) -> None:
    staging = work / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []


@pytest.mark.parametrize("step", BEFORE_COMMIT + AFTER_COMMIT)
def test_enospc_at_each_publication_step(step, toy_contract, toy_parquet, tmp_path,
                                         monkeypatch):
    """Issue 10.8: a full disk at any step. Before the ledger commit nothing is published
    and the run stays charged as "spent, not published"; after it the release is charged and
    ``store check --repair`` completes the catalog."""
    store, work = tmp_path / "releases", tmp_path / "work"
    contract = load_contract(toy_contract)

    def full_disk(at):
        if at == step:
            raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(publication, "reached", full_disk)
        with pytest.raises((OSError, StoreError)) as caught:
            run_release(params(toy_contract, toy_parquet, tmp_path, max_iters=50))
    _no_private_leftovers(work)
    book = read_lifetime_ledger(None, contract)
    if step in BEFORE_COMMIT:
        # one line naming the store (issue 45.5), the run still charged
        assert isinstance(caught.value, StoreError)
        assert f"the release store {store} cannot be written (No space left on device)" in \
            str(caught.value)
        assert [p["state"] for p in book.pending] == ["spent, not published"]
        assert book.releases == []
        assert not (store / "toy" / "v1").exists()
        assert check_store(store, work_dir=work).consistent
    else:
        assert "store check" in str(caught.value)
        assert [r["version"] for r in book.releases] == ["v1"] and book.pending == []
        assert not check_store(store).consistent  # the intent record is still there
        assert check_store(store, repair=True).repaired
        assert check_store(store, work_dir=work).consistent
        assert [r["version"] for r in list_releases(store)] == ["v1"]
    assert not [p for p in (store / "toy").glob(".*") if p.name != ".lock"] \
        if (store / "toy").exists() else True


def _killed_run(script: str, where: str, contract: Path, data: Path,
                tmp_path: Path) -> tuple[Path, Path]:
    """Run a release in a child process that SIGKILLs itself at ``where``."""
    store, work = tmp_path / "releases", tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script, where, str(contract), str(data),
                           str(store), str(work)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    return store, work


_KILLER = """
import os, signal, sys
from privfair.store import publication
from privfair.release.run import release_table as run_release
step = sys.argv[1]
def die(at):
    if at == step:
        os.kill(os.getpid(), signal.SIGKILL)
publication.reached = die
run_release(dict(contract=sys.argv[2], data=sys.argv[3], out=sys.argv[4], work_dir=sys.argv[5],
                 epsilon=1.0, delta=1e-9, max_iters=50))
"""


@pytest.mark.parametrize("step", ["ledger", "rename", "catalog"])
def test_sigkill_during_publication_is_recovered(step, toy_contract, toy_parquet, tmp_path):
    """Issue 10.8: a process SIGKILLed before the ledger commit, after it but before the
    rename, or after the rename leaves an intent record (and no private file); ``store check
    --repair`` rolls it back or forward, and the noise is charged either way. Issue 36.5:
    the release folder is visible only once the ledger charges it."""
    store, work = _killed_run(_KILLER, step, toy_contract, toy_parquet, tmp_path)
    # Renamed only after the commit: never a complete, uncharged v1 for readers (or repair).
    assert (store / "toy" / "v1").is_dir() == (step == "catalog")
    assert [p.name.startswith(".tmp-v1-") for p in (store / "toy").glob(".tmp-*")] \
        == ([] if step == "catalog" else [True])
    _no_private_leftovers(work)  # private staging was gone before publication began
    report = check_store(store, work_dir=work)
    assert not report.consistent
    check_store(store, work_dir=work, repair=True)
    assert check_store(store, work_dir=work).consistent
    _no_private_leftovers(work)
    book = read_lifetime_ledger(store, load_contract(toy_contract))
    assert book.rho_spent > 0
    assert not list((store / "toy").glob(".tmp-*"))
    if step == "ledger":
        assert not (store / "toy" / "v1").exists() and book.releases == []
        assert [p["state"] for p in book.pending] == ["spent, not published"]
    else:  # committed: rolled forward (renamed, catalogued)
        assert [r["version"] for r in list_releases(store)] == ["v1"]
        manifest = json.loads((store / "toy" / "v1" / "manifest.json").read_text())
        assert manifest["version"] == "v1"


_STAGE_KILLER = """
import os, signal, sys
from privfair.release.kinds.table import kind as table
from privfair.release.tabular import stages as shared
stage = sys.argv[1]
runner = table if hasattr(table, stage) else shared  # the module that calls the stage
real = getattr(runner, stage)
def die(*a, **k):
    real(*a, **k)  # the stage ran (and wrote its private files); then the process dies
    os.kill(os.getpid(), signal.SIGKILL)
setattr(runner, stage, die)
from privfair.release.run import release_table
release_table(dict(contract=sys.argv[2], data=sys.argv[3], out=sys.argv[4],
                        work_dir=sys.argv[5], epsilon=1.0, delta=1e-9, max_iters=50))
"""


@pytest.mark.parametrize(("stage", "drew_noise"), [("load", False),
                                                   ("measure_table", True)])
def test_sigkill_in_a_private_stage(stage, drew_noise, toy_contract, toy_parquet, tmp_path):
    """Issue 10.4/10.8: a run SIGKILLed in a private stage leaves private staging and its
    reservation; ``store check --repair`` removes the staging, gives back the reservation of
    a run that drew no noise and keeps a run that drew noise charged."""
    store, work = _killed_run(_STAGE_KILLER, stage, toy_contract, toy_parquet, tmp_path)
    assert list((work / "staging").iterdir())  # private input left by the kill
    assert not check_store(store, work_dir=work).consistent
    check_store(store, work_dir=work, repair=True)
    assert check_store(store, work_dir=work).consistent
    _no_private_leftovers(work)
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    assert [p["state"] for p in book.pending] == (["spent, not published"] if drew_noise
                                                  else [])
    assert (book.rho_spent > 0) == drew_noise
