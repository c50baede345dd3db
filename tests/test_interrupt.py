"""Ctrl-C during a release (issue 15): the command stops cleanly on both paths.

The real ``privfair release`` runs in a child process with one change: right after the
one-way marginals are measured (noise drawn and charged), it tells the test and sleeps. The
test then sends SIGINT to the child's process group, as a terminal's Ctrl-C does, and checks
that the command exits with 130, nothing is published, ``store check`` finds the store
consistent, the drawn noise stays charged in the lifetime ledger, and (through Prefect) the
temporary API server is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privfair.contracts.schema import load_contract
from privfair.store.catalog import list_releases
from privfair.store.check import check_store
from privfair.store.registry import read_lifetime_ledger

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from prefect_server import alive, uvicorn_children  # noqa: E402

_PAUSED_CLI = """
import pathlib, signal, sys, time
# A terminal's Ctrl-C, even when the test runner was started in the background (where the
# shell leaves SIGINT ignored for its children)
signal.signal(signal.SIGINT, signal.default_int_handler)
from privfair.release.kinds.table import kind as table_kind
real = table_kind.measure_table
def measured_then_paused(*args, **kwargs):
    out = real(*args, **kwargs)  # noise drawn, and charged to the lifetime ledger
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(120)  # Ctrl-C lands here
    return out
table_kind.measure_table = measured_then_paused
from privfair.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _interrupt(tmp_path: Path, contract: Path, data: Path, *, prefect: bool
               ) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """Run the paused release, Ctrl-C it once paused; (its result, its uvicorn children)."""
    ready = tmp_path / "measured"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PYTHONPATH=str(ROOT), PREFECT_HOME=str(tmp_path / "prefect-home"),
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
    args = ["release", "--contract", str(contract), "--data", str(data), "--epsilon", "1",
            "--delta", "1e-9", "--out", str(tmp_path / "releases"),
            "--work-dir", str(tmp_path / "work"), *([] if prefect else ["--no-prefect"])]
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_CLI, str(ready), *args],
                             env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            servers = uvicorn_children(child.pid) or servers
            time.sleep(0.05)
        assert ready.exists(), child.communicate(timeout=30)
        os.killpg(child.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), servers


def _assert_stopped_cleanly(done: subprocess.CompletedProcess[str], tmp_path: Path,
                            contract: Path) -> None:
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "privfair: interrupted", done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    store, work = tmp_path / "releases", tmp_path / "work"
    assert list_releases(store) == []  # nothing (half-)published
    assert not (store / "toy" / "v1").exists()
    report = check_store(store, work_dir=work)
    assert report.consistent, report
    assert not any((work / "staging").iterdir())  # private staging removed on the way out
    book = read_lifetime_ledger(None, load_contract(contract))
    # the noise drawn before Ctrl-C stays charged: no cancel of a run that drew noise
    assert [p["state"] for p in book.pending] == ["spent, not published"]
    assert book.rho_spent > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_ctrl_c_without_prefect_stops_cleanly(tmp_path, toy_contract, toy_parquet):
    done, _ = _interrupt(tmp_path, toy_contract, toy_parquet, prefect=False)
    _assert_stopped_cleanly(done, tmp_path, toy_contract)


@pytest.mark.prefect
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_ctrl_c_through_prefect_stops_cleanly_and_leaves_no_server(tmp_path, toy_contract,
                                                                   toy_parquet):
    done, servers = _interrupt(tmp_path, toy_contract, toy_parquet, prefect=True)
    assert servers, "the command started no temporary Prefect server"
    deadline = time.monotonic() + 15
    while any(alive(p) for p in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in servers if alive(p)]
    for p in leftover:  # never leave one running, whatever the outcome
        os.kill(p, signal.SIGKILL)
    assert leftover == []
    _assert_stopped_cleanly(done, tmp_path, toy_contract)
