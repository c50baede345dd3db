"""Issue 45, "Done when", end to end with real servers and real ``privfair`` processes.

* A kill -9 of a Prefect release (through a real ``prefect server``) left its dataset's
  concurrency slot held and every later Prefect release of the dataset waited forever: a
  second Prefect release now publishes within a minute, and the killed run stays charged.
* One dataset through two registries (SQLite, then PostgreSQL, separate stores, a packaged
  contract) published 4 against a budget for 2: it now publishes what one budget allows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from prefect_server import ROOT, alive, poll, running_server

from privfair.contracts.datasets import resolve_contract_name
from privfair.contracts.schema import load_contract
from privfair.store.registry import read_lifetime_ledger

pytestmark = pytest.mark.slow


def _privfair(*argv: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "privfair.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _with_root(env: dict[str, str]) -> dict[str, str]:
    """The child imports this checkout's privfair, tasks and flows."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                env.get("PYTHONPATH")]))}


def _compas_pending() -> list[dict]:
    return read_lifetime_ledger(None, load_contract(resolve_contract_name("compas"))).pending


@pytest.mark.prefect
def test_a_killed_prefect_release_does_not_block_the_next_one(tmp_path):
    with running_server(tmp_path) as server:
        env = _with_root({**server.env, "PRIVFAIR_SLOT_WAIT_S": "120"})
        store, holder = tmp_path / "store", (Path(os.environ["PRIVFAIR_STATE_HOME"]) / "slots"
                                             / "privfair-release-compas.json")
        # a DP GAN with many epochs runs for minutes: long enough to be killed mid-run
        killed = subprocess.Popen(
            [sys.executable, "-m", "privfair.cli", "release", "--contract", "compas",
             "--method", "dpgan", "--gan-epochs", "5000", "--epsilon", "1", "--delta", "1e-8",
             "--out", str(store), "--work-dir", str(tmp_path / "work")],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # killed once it holds the slot and has drawn noise (its reservation is spent)
            pending = poll(lambda: (holder.exists(), _compas_pending()),
                           until=lambda seen: seen[0] and any(
                               p["state"] == "spent, not published" for p in seen[1]),
                           timeout=180)
            assert pending[0], f"no holder record at {holder}\n{server.log_tail()}"
            assert killed.poll() is None, "the GAN release ended before it could be killed"
            assert [p["state"] for p in pending[1]] == ["spent, not published"], pending
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait(30)
        assert not alive(killed.pid) and holder.exists()  # the dead run's record stays
        killed_run = pending[1][0]["run_id"]

        started = time.monotonic()
        second = _privfair("release", "--contract", "compas", "--epsilon", "1",
                           "--delta", "1e-8", "--out", str(store),
                           "--work-dir", str(tmp_path / "work"), env=env, timeout=180)
        elapsed = time.monotonic() - started
        print(f"second Prefect release after the kill: {elapsed:.1f} s")
        output = second.stdout + second.stderr
        assert second.returncode == 0, output
        assert elapsed < 60, f"second release took {elapsed:.0f} s\n{output}"
        assert f"{store / 'compas' / 'v1'}" in second.stdout
        assert "freed concurrency slot 'privfair-release-compas'" in output
        assert f"pid {killed.pid}" in output
        assert (store / "compas" / "v1" / "manifest.json").is_file()
        assert not holder.exists()  # the second run's record is gone with its slot
        # the killed run's flow run no longer shows Running forever on the server
        states = {r["id"]: r["state_type"]
                  for r in server.api("POST", "/flow_runs/filter", json={})}
        assert sorted(states.values()) == ["COMPLETED", "CRASHED"], states
        assert any(f"its flow run {run} is marked Crashed" in output
                   for run, state in states.items() if state == "CRASHED"), output

        # the killed run drew noise: it stays charged, shown beside the published release
        book = read_lifetime_ledger(None, load_contract(resolve_contract_name("compas")))
        assert [(p["run_id"], p["state"]) for p in book.pending] == [
            (killed_run, "spent, not published")]
        assert [r["version"] for r in book.releases] == ["v1"]
        shown = _privfair("ledger", "show", env=env, timeout=120)
        assert shown.returncode == 0, shown.stderr
        row = next(line for line in shown.stdout.splitlines() if killed_run in line)
        assert "stopped after drawing noise: charged," in row, shown.stdout


# --- one dataset, two registries ----------------------------------------------------------


@pytest.fixture(scope="module")
def postgres():
    import pg_server as pg

    if pg.find_initdb() is None:
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")
    server = pg.start()
    yield server
    server.stop()


def _versions(store: Path) -> list[str]:
    folder = store / "compas"
    return sorted(p.name for p in folder.glob("v*")) if folder.is_dir() else []


def test_one_dataset_through_two_registries_publishes_one_budget(postgres, tmp_path):
    """The packaged COMPAS contract (lifetime ε=10, δ=1e-6, no ``registry_id``) at ε=6,
    δ=1e-7 per release: two releases fit its budget, a third does not."""
    sqlite_env = _with_root(dict(os.environ))
    pg_env = {**sqlite_env,
              "PRIVFAIR_REGISTRY": postgres.create_database(f"reg_{uuid.uuid4().hex[:12]}"),
              "PRIVFAIR_REGISTRY_KEY_FILE": str(tmp_path / "pg-key" / "registry.key")}
    store_a, store_b = tmp_path / "store-a", tmp_path / "store-b"

    def release(store: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return _privfair("release", "--contract", "compas", "--epsilon", "6", "--delta", "1e-7",
                         "--out", str(store), "--work-dir", str(tmp_path / "work"),
                         "--no-prefect", env=env)

    for _ in range(2):
        done = release(store_a, sqlite_env)
        assert done.returncode == 0, done.stderr
    over = release(store_a, sqlite_env)
    assert over.returncode == 2 and "lifetime budget of dataset 'compas' exceeded" in over.stderr

    # the same client, a second registry and a new store: refused, one line
    moved = release(store_b, pg_env)
    assert moved.returncode == 2, moved.stdout + moved.stderr
    refusal = moved.stderr.strip()
    assert "\n" not in refusal and "bound to registry" in refusal, refusal
    assert "PRIVFAIR_REGISTRY" in refusal

    # another client (no binding) with the first store: the store's ledger copy binds the
    # dataset to the first registry and refuses the second (issue 45.2)
    other_client = {**pg_env, "PRIVFAIR_STATE_HOME": str(tmp_path / "another-client")}
    other = release(store_a, other_client)
    assert other.returncode == 2, other.stdout + other.stderr
    assert "binds dataset 'compas' to registry" in other.stderr, other.stderr
    assert "\n" not in other.stderr.strip(), other.stderr

    # a pinned copy of the packaged contract (`contract pin`) is refused by the second
    # registry even with a new client and a new store: nothing there knows the first
    pinned = tmp_path / "compas-pinned.yaml"
    made = _privfair("contract", "pin", "compas", "--out", str(pinned), env=sqlite_env,
                     timeout=120)
    assert made.returncode == 0, made.stderr
    fresh = _privfair("release", "--contract", str(pinned), "--epsilon", "6", "--delta",
                      "1e-7", "--out", str(tmp_path / "store-c"), "--work-dir",
                      str(tmp_path / "work"), "--no-prefect",
                      env={**other_client, "PRIVFAIR_STATE_HOME": str(tmp_path / "third")})
    assert fresh.returncode == 2 and "pins registry" in fresh.stderr, fresh.stderr

    assert _versions(store_a) == ["v1", "v2"] and _versions(store_b) == []
    assert _versions(tmp_path / "store-c") == []
    shown = _privfair("ledger", "show", env=pg_env, timeout=120)
    assert "compas" not in shown.stdout, shown.stdout  # the second registry charged nothing
