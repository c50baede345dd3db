"""Issue 22: the privacy registry as one transactional database (SQLite and PostgreSQL).

Every registry test runs on both backends: the embedded SQLite file and a real PostgreSQL 15
server started once for the session (skipped only if ``initdb`` is not installed).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import registry_race
from conftest import TOY_CONTRACT

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.core.accounting import zcdp_rho
from privfair.core.errors import BudgetExceededError
from privfair.store import backends, registry_sql
from privfair.store.chain import chain_append, entry_hash
from privfair.store.check import check_store
from privfair.store.files import StoreError
from privfair.store.ledger import fold
from privfair.store.registry import read_chain, read_lifetime_ledger, registry_ledgers, seed_key

BUDGET_RHO = zcdp_rho(epsilon=3.0, delta=1e-6)  # the toy contract's lifetime budget
HALF = BUDGET_RHO / 2  # exactly two runs fit


@pytest.fixture(scope="session")
def pg_server():
    import pg_server as pg

    if pg.find_initdb() is None:
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")
    server = pg.start()
    yield server
    server.stop()


@dataclass(frozen=True)
class Backend:
    kind: str
    url: str | None  # PostgreSQL URL; None for SQLite
    folder: Path  # the SQLite registry folder, or where the PostgreSQL key lives

    def env(self) -> dict[str, str]:
        if self.url:
            return {"PRIVFAIR_REGISTRY": self.url,
                    "PRIVFAIR_REGISTRY_KEY_FILE": str(self.folder / "registry.key")}
        return {"PRIVFAIR_REGISTRY": str(self.folder)}

    def sql(self, *statements: str) -> None:
        """Run statements as whoever can bypass the append-only guards (a tamperer)."""
        if self.url is None:
            con = sqlite3.connect(self.folder / "registry.sqlite", isolation_level=None)
            for (trigger,) in con.execute("SELECT name FROM sqlite_master "
                                          "WHERE type = 'trigger'").fetchall():
                con.execute(f"DROP TRIGGER {trigger}")
            for s in statements:
                con.execute(s)
            con.close()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as con:
            for table in ("entries", "resets", "seed_keys"):  # as a superuser can
                con.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            for s in statements:
                con.execute(s)

    def rows(self, query: str) -> list[tuple]:
        if self.url is None:
            con = sqlite3.connect(self.folder / "registry.sqlite")
            try:
                return con.execute(query).fetchall()
            finally:
                con.close()
        import psycopg

        with psycopg.connect(self.url) as con:
            return con.execute(query).fetchall()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, monkeypatch, privacy_registry, tmp_path) -> Backend:
    if request.param == "sqlite":
        out = Backend("sqlite", None, privacy_registry)
    else:
        server = request.getfixturevalue("pg_server")
        url = server.create_database(f"reg_{uuid.uuid4().hex[:12]}")
        out = Backend("postgresql", url, tmp_path / "team")
    for name, value in out.env().items():
        monkeypatch.setenv(name, value)
    return out


@pytest.fixture
def contract_path(tmp_path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONTRACT)
    return path


def _publish(contract_path: Path, store: Path, run_id: str, rho: float = HALF / 4) -> str:
    return registry_race.reserve_and_publish(
        registry_race.fake_charge(str(contract_path), str(store), run_id, rho))


# --- concurrency: one budget, many processes --------------------------------------------------


def test_eight_racing_processes_never_overspend(backend, contract_path, tmp_path):
    """8 spawned processes, with two different HOME/registry settings pointing at one
    database, reserve and publish against a budget that fits exactly 2 runs: exactly 2
    publish and the chain holds exactly 2 runs' worth."""
    seed_key("toy")  # creates the registry (and, for PostgreSQL, the team's key) first
    if backend.url:
        settings = [backend.env() | {"HOME": str(tmp_path / "home-a")},
                    {"PRIVFAIR_REGISTRY": backend.url, "HOME": str(tmp_path / "home-b"),
                     "PRIVFAIR_REGISTRY_HOME": str(backend.folder)}]
    else:
        # One worker names the folder, the other reaches the same file as its default
        # registry (XDG_DATA_HOME/privfair/registry).
        xdg = tmp_path / "xdg"
        (xdg / "privfair").mkdir(parents=True)
        (xdg / "privfair" / "registry").symlink_to(backend.folder)
        settings = [backend.env() | {"HOME": str(tmp_path / "home-a")},
                    {"XDG_DATA_HOME": str(xdg), "HOME": str(tmp_path / "home-b")}]
    jobs = [(settings[i % 2], str(contract_path), str(tmp_path / f"store{i}"), f"run-{i}", HALF)
            for i in range(8)]
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        results = pool.map(registry_race.race_worker, jobs)
    assert sorted(results) == ["published"] * 2 + ["refused"] * 6
    book = fold(read_chain("toy"), "toy", "toy")
    assert len(book.releases) == 2 and book.pending == []
    assert book.rho_spent == pytest.approx(2 * HALF, rel=1e-12)
    assert [e["kind"] for e in book.entries].count("reserve") == 2


# --- tampering ----------------------------------------------------------------------------------


def _ledger(backend: Backend, contract_path: Path, tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for i in range(2):
        assert _publish(contract_path, store, f"run-{i}") == "published"
    return store


def test_zeroed_rho_with_a_recomputed_unkeyed_chain_is_refused(backend, contract_path,
                                                               tmp_path):
    """Every ρ set to 0 and the chain recomputed as the old unkeyed SHA-256 chain (accepted
    by the JSON registry) fails the HMAC check."""
    _ledger(backend, contract_path, tmp_path)
    entries, forged = read_chain("toy"), []
    for e in entries:
        fields = {k: (0.0 if k == "rho" else v) for k, v in e.items()
                  if k not in ("seq", "prev", "hash", "kind", "at")}
        chain_append(forged, e["kind"], key=None, ident="toy", at=e["at"], **fields)
    statements = ["DELETE FROM entries"]
    for e in forged:
        body = json.dumps(e).replace("'", "''")
        statements.append(f"INSERT INTO entries VALUES ('toy', 0, {e['seq']}, '{e['kind']}', "
                          f"'{e['hash']}', '{body}')")
    statements.append(f"UPDATE heads SET head = '{forged[-1]['hash']}'")
    backend.sql(*statements)
    with pytest.raises(StoreError, match="hash does not match|head record fails"):
        read_lifetime_ledger(None, load_contract(contract_path))
    with pytest.raises(StoreError):
        _publish(contract_path, tmp_path / "store", "run-after")


def test_a_truncated_prefix_is_refused(backend, contract_path, tmp_path):
    _ledger(backend, contract_path, tmp_path)
    backend.sql("DELETE FROM entries WHERE seq < 2")
    with pytest.raises(StoreError, match="lifetime ledger .* fails its check|truncated"):
        read_chain("toy")


def test_dropped_last_entries_are_refused_by_the_head(backend, contract_path, tmp_path):
    """Deleting the newest entries (a rollback) leaves a valid chain prefix: the head and
    entry count recorded with the key refuse it."""
    _ledger(backend, contract_path, tmp_path)
    backend.sql("DELETE FROM entries WHERE seq >= 4")
    with pytest.raises(StoreError, match="truncated or rolled back"):
        read_chain("toy")


def test_an_edited_head_or_summary_is_refused_or_ignored(backend, contract_path, tmp_path,
                                                         capsys):
    """An edited entry count in the heads table is refused; an edited summary in the store's
    copy is never shown: ``ledger show`` computes from the verified chain."""
    store = _ledger(backend, contract_path, tmp_path)
    book = read_lifetime_ledger(None, load_contract(contract_path))
    from privfair.store.registry import write_store_copy

    (store / "toy").mkdir(parents=True, exist_ok=True)  # the reservation wrote a copy
    write_store_copy(store, book)
    copy = store / "toy" / "lifetime_ledger.json"
    raw = json.loads(copy.read_text())
    raw["spent"]["rho"] = 0.0
    copy.write_text(json.dumps(raw))
    assert main(["ledger", "show", "--store", str(store), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown[0]["spent"]["rho"] == pytest.approx(2 * HALF / 4)
    assert [r["state"] for r in shown[0]["runs"]] == ["published", "published"]
    backend.sql("UPDATE heads SET entry_count = 2")
    with pytest.raises(StoreError, match="head record fails its check"):
        read_chain("toy")


def test_a_deleted_ledger_is_refused_not_read_as_new(backend, contract_path, tmp_path, capsys):
    """Deleting a dataset's entries and head row: the HMAC'd list of datasets still names it,
    so the next run is refused; ``ledger reset`` records the loss and reopens it."""
    _ledger(backend, contract_path, tmp_path)
    backend.sql("DELETE FROM entries", "DELETE FROM heads")
    with pytest.raises(StoreError, match="was deleted"):
        _publish(contract_path, tmp_path / "store2", "run-after")
    assert main(["ledger", "reset", "--dataset", "toy", "--reason", "disk failure"]) == 0
    out = capsys.readouterr().out
    assert "ledger reset" in out and "0 were left" in out
    assert _publish(contract_path, tmp_path / "store2", "run-new") == "published"
    resets = backend.rows("SELECT dataset, generation FROM resets")
    assert resets == [("toy", 1)]


def test_deleted_sqlite_database_is_refused(contract_path, tmp_path, privacy_registry):
    """The key says a registry existed: a deleted ``registry.sqlite`` is refused."""
    _ledger(Backend("sqlite", None, privacy_registry), contract_path, tmp_path)
    for p in privacy_registry.glob("registry.sqlite*"):
        p.unlink()
    with pytest.raises(StoreError, match="database was deleted"):
        _publish(contract_path, tmp_path / "store", "run-after")
    assert not (privacy_registry / "registry.sqlite").exists()


def test_a_new_registry_is_refused_by_the_stores_copy(toy_contract, toy_parquet, tmp_path,
                                                       privacy_registry, monkeypatch):
    """The whole registry folder (key included) deleted is a new registry; the store's copy
    and release folders it does not account for refuse it before any private read."""
    from test_release_store import params

    from privfair.release.run import release_table as run_release

    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    shutil.rmtree(privacy_registry)
    # this client bound the dataset to the deleted registry (issue 45.2) and refuses first;
    # another client, with no binding, is refused by the store's copy
    with pytest.raises(StoreError, match="bound to registry"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "another-client"))
    with pytest.raises(StoreError, match="binds dataset 'toy' to registry"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))


def test_update_and_delete_of_entries_are_refused(backend, contract_path, tmp_path):
    """Entries are only inserted: triggers refuse UPDATE, DELETE (and on PostgreSQL,
    TRUNCATE) from an ordinary connection."""
    _ledger(backend, contract_path, tmp_path)
    statements = ["UPDATE entries SET body = '{}'", "DELETE FROM entries"]
    if backend.url is None:
        con = sqlite3.connect(backend.folder / "registry.sqlite")
        for statement in statements:
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                con.execute(statement)
        con.close()
    else:
        import psycopg

        for statement in [*statements, "TRUNCATE entries"]:
            with psycopg.connect(backend.url) as con, \
                    pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                con.execute(statement)
    assert len(read_chain("toy")) == 7


def test_unreachable_registry_fails_closed_before_any_read(toy_contract, toy_parquet,
                                                           tmp_path, monkeypatch):
    """A registry that cannot be reached: one StoreError line naming it, no private read."""
    from test_release_store import params

    from privfair.release.run import release_table as run_release
    from privfair.release.tabular import stages as runner

    monkeypatch.setenv("PRIVFAIR_REGISTRY", "postgresql://nobody@127.0.0.1:1/registry")
    monkeypatch.setenv("PRIVFAIR_REGISTRY_KEY_FILE", str(tmp_path / "k" / "registry.key"))

    def boom(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(runner, "load", boom)
    with pytest.raises(StoreError, match=r"privacy registry postgresql://nobody@127\.0\.0\.1:1"
                                         r"/registry cannot be used") as info:
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    assert "\n" not in str(info.value)


def test_seed_keys_live_in_the_registry(backend):
    key = seed_key("toy")
    assert len(key) == 32 and seed_key("toy") == key and seed_key("other") != key
    assert backend.rows("SELECT dataset FROM seed_keys ORDER BY dataset") == [("other",),
                                                                              ("toy",)]


# --- the ledger commands --------------------------------------------------------------------------


@pytest.mark.parametrize("argv, words", [
    (["--epsilon", "1e300", "--delta", "1e-6"], "outside [1e-06, 100]"),
    (["--epsilon", "nan", "--delta", "1e-6"], "not a finite"),
    (["--epsilon", "3", "--delta", "5e-324"], "outside (1e-50, 1)"),
    (["--epsilon", "3", "--delta", "1"], "outside (1e-50, 1)"),
    (["--epsilon", "0.1", "--delta", "1e-6"], "already spent"),
])
def test_ledger_raise_refusals(argv, words, backend, contract_path, tmp_path, capsys):
    _ledger(backend, contract_path, tmp_path)
    before = read_chain("toy")
    code = main(["ledger", "raise", "--contract", str(contract_path), *argv,
                 "--reason", "test"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert read_chain("toy") == before


def test_ledger_raise_refuses_an_unknown_dataset(backend, contract_path, capsys):
    code = main(["ledger", "raise", "--contract", str(contract_path), "--epsilon", "5",
                 "--delta", "1e-6", "--reason", "test"])
    assert code == 2 and "no lifetime ledger" in capsys.readouterr().err
    assert registry_ledgers() == []
    if backend.url is None:
        assert not [p for p in backend.folder.iterdir() if p.is_dir()]


def test_ledger_verify_export_show(backend, contract_path, tmp_path, capsys):
    store = _ledger(backend, contract_path, tmp_path)
    charge = registry_race.fake_charge(str(contract_path), str(store), "run-x", HALF / 4)
    from privfair.store.registry import release_unspent, reserve_run

    reserve_run(charge)
    release_unspent(charge, reason="refused while loading")
    assert main(["ledger", "verify"]) == 0
    assert "ok: toy: 9 entries" in capsys.readouterr().out
    out_file = tmp_path / "audit.json"
    assert main(["ledger", "export", "--dataset", "toy", "--out", str(out_file)]) == 0
    exported = json.loads(out_file.read_text())
    assert exported["verified"].startswith("HMAC-SHA256") and len(exported["entries"]) == 9
    assert [r["state"] for r in exported["runs"]] == ["published", "published",
                                                      "cancelled (not charged)"]
    capsys.readouterr()
    assert main(["ledger", "show"]) == 0
    shown = capsys.readouterr().out
    assert "computed from the verified chain" in shown and "refused while loading" in shown


def _legacy_folder(folder: Path, ident: str = "toy") -> Path:
    """A JSON registry of the previous version: one unkeyed chain and a seed key."""
    entries: list[dict] = []
    chain_append(entries, "open", key=None, ident="", epsilon=3.0, delta=1e-6, dataset=ident)
    chain_append(entries, "reserve", key=None, ident="", run_id="old", rho=0.05,
                 epsilon=1.0, delta=1e-9, method="mst")
    chain_append(entries, "publish", key=None, ident="", run_id="old", version="v1",
                 store="/somewhere")
    (folder / ident).mkdir(parents=True)
    path = folder / ident / "lifetime_ledger.json"
    path.write_text(json.dumps({"format": "privfair-lifetime-ledger/2", "entries": entries}))
    (folder / ident / "seed-fingerprint.key").write_bytes(b"k" * 32)
    return path


def test_a_json_registry_at_the_default_location_is_migrated(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVFAIR_REGISTRY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "xdg" / "privfair" / "registry"
    old = _legacy_folder(folder)
    old_head = json.loads(old.read_text())["entries"][-1]["hash"]
    book = fold(read_chain("toy"), "toy", "toy")
    assert book.rho_spent == pytest.approx(0.05) and [r["version"] for r in book.releases] == [
        "v1"]
    assert book.entries[-1]["legacy_hash"] == old_head
    assert not old.exists() and old.with_name("lifetime_ledger.json.imported").is_file()
    assert seed_key("toy") == b"k" * 32
    assert (folder / "registry.key").stat().st_mode & 0o777 == 0o600


def test_a_json_registry_that_fails_its_check_is_not_migrated(tmp_path, monkeypatch):
    """A tampered JSON ledger stops the migration, naming the file, and leaves no half
    registry behind: once the file is dealt with, the registry is created normally."""
    folder = tmp_path / "registry"
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(folder))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(folder) + "-client")
    old = _legacy_folder(folder)
    raw = json.loads(old.read_text())
    raw["entries"][1]["rho"] = 0.0
    old.write_text(json.dumps(raw))
    with pytest.raises(StoreError, match="lifetime_ledger.json fails its check at entry 1"):
        read_chain("toy")
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [".lock"]
    old.rename(old.with_name("lifetime_ledger.json.tampered"))
    assert read_chain("toy") == [] and (folder / "registry.sqlite").is_file()


def test_ledger_import_verifies_the_old_chain(backend, tmp_path, capsys):
    old = _legacy_folder(tmp_path / "old")
    raw = json.loads(old.read_text())
    raw["entries"][1]["rho"] = 0.0  # edited without recomputing the hash
    old.write_text(json.dumps(raw))
    assert main(["ledger", "import", str(tmp_path / "old")]) == 2
    assert "fails its check at entry 1" in capsys.readouterr().err
    assert read_chain("toy") == []
    raw["entries"][1]["rho"] = 0.05
    old.write_text(json.dumps(raw))
    assert main(["ledger", "import", str(old)]) == 0
    assert "imported" in capsys.readouterr().out
    assert fold(read_chain("toy"), "toy", "toy").rho_spent == pytest.approx(0.05)
    assert entry_hash({"a": 1}) != entry_hash({"a": 1}, key=b"x" * 32, ident="toy")


def test_a_budget_run_out_is_refused_on_both_backends(backend, contract_path, tmp_path):
    assert _publish(contract_path, tmp_path / "s", "a", HALF) == "published"
    assert _publish(contract_path, tmp_path / "s", "b", HALF) == "published"
    with pytest.raises(BudgetExceededError):
        registry_race.reserve_run(registry_race.fake_charge(
            str(contract_path), str(tmp_path / "s"), "c", HALF / 100))
    assert os.environ["PRIVFAIR_REGISTRY"] == (backend.url or str(backend.folder))
    assert backends.registry_url() == backend.url


# --- issue 36.4: one registry per dataset, no silent rollback -----------------------------------


def _snapshot(backend: Backend, tmp_path: Path) -> Path:
    """A backup of the registry as it is now: SQLite's backup API, or ``pg_dump``."""
    out = tmp_path / f"backup-{uuid.uuid4().hex[:6]}"
    if backend.url is None:
        src, dst = sqlite3.connect(backend.folder / "registry.sqlite"), sqlite3.connect(out)
        src.backup(dst)
        src.close(), dst.close()
        return out
    pg_dump = Path(backend.server.bindir) / "pg_dump"
    import subprocess

    subprocess.run([str(pg_dump), "--clean", "--if-exists", "-f", str(out), backend.url],
                   check=True, capture_output=True)
    return out


def _restore(backend: Backend, backup: Path) -> None:
    """Put the backup back in place of the live registry (as an administrator would)."""
    if backend.url is None:
        src, dst = sqlite3.connect(backup), sqlite3.connect(backend.folder / "registry.sqlite")
        src.backup(dst)
        src.close(), dst.close()
        return
    import subprocess

    subprocess.run([str(Path(backend.server.bindir) / "psql"), "-q", "-v", "ON_ERROR_STOP=1",
                    "-f", str(backup), backend.url], check=True, capture_output=True)


@pytest.fixture
def restorable(backend, request) -> Backend:
    if backend.url is not None:
        server = request.getfixturevalue("pg_server")
        if not (Path(server.bindir) / "pg_dump").is_file():
            pytest.skip("pg_dump is not installed")
        object.__setattr__(backend, "server", server)
    return backend


def test_a_restored_older_registry_is_refused(restorable, contract_path, tmp_path):
    """An older ``registry.sqlite`` or ``pg_dump`` put back is a consistent registry that has
    forgotten later charges: this client's witness of the head it saw refuses it."""
    backend = restorable
    _publish(contract_path, tmp_path / "store", "run-0")
    backup = _snapshot(backend, tmp_path)
    _publish(contract_path, tmp_path / "store", "run-1")
    seen = len(read_chain("toy"))
    _restore(backend, backup)
    assert backend.rows("SELECT entry_count FROM heads")[0][0] < seen  # restored indeed
    with pytest.raises(StoreError, match="rolled back"):
        read_chain("toy")
    with pytest.raises(StoreError, match="rolled back"):
        _publish(contract_path, tmp_path / "store2", "run-2")


def test_an_emptied_registry_is_refused(backend, contract_path, tmp_path):
    """Every table emptied by a superuser (key check and list of datasets included): the
    registry would read as new; the witness says this client saw the dataset's ledger."""
    _ledger(backend, contract_path, tmp_path)
    backend.sql("DELETE FROM entries", "DELETE FROM heads", "DELETE FROM meta",
                "DELETE FROM seed_keys", "DELETE FROM resets")
    with pytest.raises(StoreError, match="is missing, but this client has seen it"):
        _publish(contract_path, tmp_path / "store2", "run-after")


def test_a_second_registry_refuses_a_bound_dataset(backend, contract_path, tmp_path,
                                                   monkeypatch, toy_csv):
    """``contract draft`` pins the registry it was run with; every reservation with the
    contract refuses any other registry (another user's SQLite file, say)."""
    draft = tmp_path / "draft.yaml"
    assert main(["contract", "draft", "--data", str(toy_csv), "--out", str(draft)]) == 0
    pinned = registry_sql.open_registry().ident
    assert len(pinned) == 32 and f"registry_id: {pinned}" in draft.read_text()
    contract_path.write_text(TOY_CONTRACT.replace("name: toy\n",
                                                  f"name: toy\nregistry_id: {pinned}\n"))
    assert _publish(contract_path, tmp_path / "store", "run-0") == "published"
    other = tmp_path / "other-registry"
    other.mkdir()
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(other))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(other) + "-client")
    monkeypatch.delenv("PRIVFAIR_REGISTRY_KEY_FILE", raising=False)
    with pytest.raises(StoreError, match=f"pins registry {pinned}"):
        _publish(contract_path, tmp_path / "store", "run-1")
    assert registry_ledgers() == []  # the second registry charged nothing
    unpinned = tmp_path / "unpinned.yaml"
    unpinned.write_text(TOY_CONTRACT)
    assert load_contract(unpinned).fingerprint() != load_contract(contract_path).fingerprint()


_FIRST_CONTACT = """
import os, sys, time
from privfair.store import registry_sql
from privfair.store.files import StoreError
while time.time() < float(sys.argv[1]):
    time.sleep(0.001)
try:
    registry_sql.open_registry()
    print("opened")
except StoreError as exc:
    print("refused:", exc)
"""


def test_two_clients_on_an_empty_postgresql_end_with_one_key(pg_server, tmp_path):
    """Two HOMEs make first contact with an empty PostgreSQL at the same instant: one key
    is made (the other client keeps none and is told to copy it), and with it both open."""
    import subprocess
    import sys
    import time

    url = pg_server.create_database(f"reg_{uuid.uuid4().hex[:12]}")
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    start = time.time() + 3.0  # both processes imported and waiting by then
    procs = [subprocess.Popen([sys.executable, "-c", _FIRST_CONTACT, str(start)],
                              env={**os.environ, "PRIVFAIR_REGISTRY": url,
                                   "PRIVFAIR_REGISTRY_HOME": str(home)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=Path(__file__).parents[1]) for home in homes]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    keys = [h / "registry.key" for h in homes if (h / "registry.key").is_file()]
    assert sorted(o.split(":")[0] for o in outs) == ["opened", "refused"], outs
    assert len(keys) == 1 and "copy the team's registry.key" in " ".join(outs)
    assert not list(tmp_path.glob("home-*/registry.key.pending"))
    loser = next(h for h in homes if not (h / "registry.key").is_file())
    loser.mkdir(parents=True, exist_ok=True)
    shutil.copy(keys[0], loser / "registry.key")
    done = subprocess.run([sys.executable, "-c", _FIRST_CONTACT, "0"],
                          env={**os.environ, "PRIVFAIR_REGISTRY": url,
                               "PRIVFAIR_REGISTRY_HOME": str(loser)},
                          capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.stdout.strip() == "opened", done.stdout + done.stderr


def test_registry_files_are_0600_whatever_the_folder(tmp_path, monkeypatch, contract_path):
    """A registry folder that exists with mode 0755 (``PRIVFAIR_REGISTRY`` names it): the
    database, its journal files, key and locks are 0600 all the same."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(folder))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(folder) + "-client")
    _publish(contract_path, tmp_path / "store", "run-0")
    files = sorted(p for p in folder.iterdir() if p.is_file())
    assert {p.name for p in files} >= {"registry.sqlite", "registry.key", "registry.lock"}
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {
        p.name: oct(0o600) for p in files}


def test_seed_keys_are_stored_wrapped_under_the_registry_key(backend):
    key = seed_key("toy")
    (stored,), = backend.rows("SELECT key FROM seed_keys")
    assert stored.startswith("aeskw1:") and key.hex() not in stored
    assert key[:8].hex() not in stored
    # A wrapped key copied to another dataset's row does not unwrap there.
    backend.sql(f"INSERT INTO seed_keys (dataset, key) VALUES ('copy', '{stored}')")
    with pytest.raises(StoreError, match="fails its check"):
        seed_key("copy")
    assert seed_key("toy") == key


def test_one_damaged_dataset_does_not_stop_the_others(backend, contract_path, tmp_path,
                                                      capsys):
    """``ledger verify``, ``ledger show`` and ``store check`` report the damaged ledger and go
    on with the rest."""
    store = _ledger(backend, contract_path, tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(TOY_CONTRACT.replace("name: toy", "name: other"))
    assert _publish(other, store, "run-o") == "published"
    backend.sql("UPDATE heads SET mac = '" + "0" * 64 + "' WHERE dataset = 'other'")
    assert main(["ledger", "verify"]) == 1
    out = capsys.readouterr().out
    assert "ok: toy:" in out and "damaged:" in out and "'other'" in out
    assert main(["ledger", "show"]) == 1
    shown = capsys.readouterr()
    assert "toy: epsilon" in shown.out and "damaged:" in shown.err and "other" in shown.err
    for name in ("other", "toy"):  # checked in this order: the damaged one first
        (store / name).mkdir(parents=True, exist_ok=True)
    report = check_store(store, work_dir=tmp_path / "work")
    assert [p for p in report.problems if p.startswith("other:") and "fails its check" in p]
    # toy is still checked: its (fake) releases have no folders in this store.
    assert [p for p in report.problems if p.startswith("ledger entry toy v-run-")]
