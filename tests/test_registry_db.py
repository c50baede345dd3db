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
from privfair.store import backends
from privfair.store.artefacts import StoreError
from privfair.store.chain import chain_append, entry_hash
from privfair.store.registry import (
    fold,
    read_chain,
    read_lifetime_ledger,
    registry_ledgers,
    seed_key,
)

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

    (store / "toy").mkdir(parents=True)
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
                                                       privacy_registry):
    """The whole registry folder (key included) deleted is a new registry; the store's copy
    and release folders it does not account for refuse it before any private read."""
    from test_release_store import params

    from privfair.release.kinds import release_table as run_release

    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    shutil.rmtree(privacy_registry)
    with pytest.raises(StoreError, match="disagree"):
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

    from privfair.release.kinds import release_table as run_release
    from privfair.release.table import kind as runner

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
