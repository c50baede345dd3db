"""Issue 10.4, 10.5 and 10.8: the lifetime ledger in the privacy registry, reservations before
the first private read, the hash chain, and ``privfair store check``."""

from __future__ import annotations

import json
import math
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import TOY_CONTRACT
from test_release_store import params

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.core.accounting import zcdp_rho
from privfair.core.errors import BudgetExceededError, ReleaseInputError
from privfair.release.run import release_table as run_release
from privfair.release.tabular import stages as runner
from privfair.store import files as files_module
from privfair.store import publication
from privfair.store.check import check_store
from privfair.store.files import StoreError
from privfair.store.ledger import run_history
from privfair.store.registry import has_ledger, read_chain, read_lifetime_ledger


def write_contract(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


# --- item 4: reserve before the first private read; noise stays charged ----------------------


def test_reservation_is_in_the_ledger_before_the_first_private_read(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    """Item 4: when ``load`` runs, the run's ρ is already reserved in the lifetime ledger."""
    seen = {}
    real_load = runner.load

    def spy(*a, **k):
        book = read_lifetime_ledger(None, load_contract(toy_contract))
        seen["state"] = [p["state"] for p in book.pending]
        seen["spent"] = book.rho_spent
        return real_load(*a, **k)

    monkeypatch.setattr(runner, "load", spy)
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    assert seen["state"] == ["reserved"]
    assert seen["spent"] == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-9))


def test_failed_runs_that_drew_noise_stay_charged(toy_contract, toy_parquet, tmp_path,
                                                  monkeypatch):
    """Item 4: two runs failing after measuring use up the budget; a third is refused at
    preflight (at 613a631 every run went ahead: only publication charged)."""
    contract = load_contract(toy_contract)  # lifetime epsilon 3, delta 1e-6

    def fail(*a, **k):
        raise RuntimeError("output validation failed")

    monkeypatch.setattr(runner, "validate_output", fail)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=2.0, delta=1e-6, seed=None))
    book = read_lifetime_ledger(tmp_path / "releases", contract)
    assert [p["state"] for p in book.pending] == ["spent, not published"] * 2
    with pytest.raises(BudgetExceededError, match="lifetime budget"):
        run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=2.0, delta=1e-6, seed=None))


def test_a_run_refused_before_any_noise_gets_its_reservation_back(toy_contract, toy_frame,
                                                                   toy_parquet, tmp_path,
                                                                   monkeypatch):
    """Item 4: a missing column is a public schema fact, refused before the reservation (no
    entry at all); a failure in a private stage before any noise cancels the reservation."""
    bad = tmp_path / "bad.parquet"
    toy_frame.drop(columns=["race"]).to_parquet(bad, index=False)
    with pytest.raises(ValueError, match="race"):
        run_release(params(toy_contract, bad, tmp_path))
    assert read_lifetime_ledger(None, load_contract(toy_contract)).entries == []

    def unreadable(*a, **k):
        raise OSError("disk went away")

    monkeypatch.setattr(runner, "load", unreadable)
    # one line naming the file, not the reader's words (they may quote a value)
    with pytest.raises(ReleaseInputError, match="cannot be read") as info:
        run_release(params(toy_contract, toy_parquet, tmp_path))
    assert "disk went away" not in str(info.value)
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    assert book.rho_spent == 0.0 and book.pending == [] and book.releases == []
    assert [e["kind"] for e in book.entries] == ["open", "reserve", "cancel"]


# --- item 5: keyed by dataset id, fixed budget, hash chain, cross-checks ---------------------


def test_new_out_folders_and_a_renamed_contract_share_one_budget(toy_contract, toy_parquet,
                                                                 tmp_path):
    """Item 5: the ledger follows the dataset id, not --out or the contract name."""
    text = TOY_CONTRACT.replace("name: toy", "name: toy\ndataset_id: toy-survey-2024")
    first = write_contract(tmp_path, "a", text)
    renamed = write_contract(tmp_path, "b", text.replace("name: toy", "name: toy_renamed"))
    run_release(params(first, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6,
                       out=str(tmp_path / "out1")))
    with pytest.raises(BudgetExceededError):
        run_release(params(first, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6,
                           out=str(tmp_path / "out2")))
    with pytest.raises(BudgetExceededError):
        run_release(params(renamed, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6,
                           out=str(tmp_path / "out3")))
    assert has_ledger("toy-survey-2024")


def test_budget_is_fixed_at_the_first_release_and_raised_only_by_command(
        toy_contract, toy_parquet, tmp_path, capsys):
    """Item 5: raising ``budget:`` in the contract is refused; ``privfair ledger raise``
    records the raise in the chain."""
    run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=2.0, delta=1e-6, seed=None))
    raised = write_contract(tmp_path, "toy", TOY_CONTRACT.replace("epsilon: 3.0", "epsilon: 30"))
    with pytest.raises(StoreError, match="privfair ledger raise"):
        run_release(params(raised, toy_parquet, tmp_path, epsilon=2.0, delta=1e-6, seed=None))
    code = main(["ledger", "raise", "--contract", str(raised), "--epsilon", "30", "--delta",
                 "1e-6", "--reason", "board approval 2026-11"])
    assert code == 0, capsys.readouterr().err
    assert "epsilon=30" in capsys.readouterr().out
    run_release(params(raised, toy_parquet, tmp_path, epsilon=2.0, delta=1e-6, seed=None))
    entries = read_lifetime_ledger(tmp_path / "releases", load_contract(raised)).entries
    assert [e["kind"] for e in entries if e["kind"] in ("open", "raise")] == ["open", "raise"]
    assert entries[-1]["kind"] == "publish"


@pytest.mark.parametrize("tamper", ["nan-rho", "negative-rho", "drop-entry", "reset",
                                    "delete-ledger"])
def test_a_tampered_or_reset_ledger_is_refused(tamper, toy_contract, toy_parquet, tmp_path,
                                               privacy_registry):
    """Item 5: NaN/negative numbers, a removed entry, ``releases: []`` style resets and a
    deleted ledger are refused (at 613a631 each silently reset or disabled the check)."""
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    con = sqlite3.connect(privacy_registry / "registry.sqlite", isolation_level=None)
    for (trigger,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        con.execute(f"DROP TRIGGER {trigger}")  # whoever tampers can drop the guards too
    seq, body = con.execute("SELECT seq, body FROM entries WHERE kind = 'reserve'").fetchone()
    entry = json.loads(body)
    if tamper in ("nan-rho", "negative-rho"):
        entry["rho"] = math.nan if tamper == "nan-rho" else -1.0
        con.execute("UPDATE entries SET body = ? WHERE seq = ?", [json.dumps(entry), seq])
    elif tamper == "drop-entry":
        con.execute("DELETE FROM entries WHERE seq = 1")
    elif tamper == "reset":
        con.execute("DELETE FROM entries WHERE seq > 0")
    elif tamper == "delete-ledger":
        con.execute("DELETE FROM entries")
        con.execute("DELETE FROM heads")
    con.close()
    with pytest.raises(StoreError, match="lifetime ledger|disagree"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))


# --- item 8: store check ----------------------------------------------------------------------


def test_store_check_reports_and_repairs_a_killed_publication(toy_contract, toy_parquet,
                                                              tmp_path, monkeypatch, capsys):
    """Item 8: a publication stopped before its ledger commit leaves an intent record and its
    staged folder (never a visible ``v2``: issue 36.5); ``store check`` reports it,
    ``--repair`` rolls it back and removes private staging; the run stays charged. A stale
    catalog row does not block the next release."""
    store = tmp_path / "releases"
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))

    class Killed(BaseException):
        pass

    def die(step):
        if step == "ledger":
            raise Killed

    # A kill cannot run the rollback: keep the staged folder, the intent and private staging.
    with monkeypatch.context() as m:
        m.setattr(publication, "reached", die)
        m.setattr(publication.shutil, "rmtree", lambda *a, **k: None)
        m.setattr(publication.Path, "unlink", lambda *a, **k: None)
        m.setattr(files_module.Workspace, "cleanup_private", lambda self: None)
        with pytest.raises(Killed):
            run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    # The kill also ends the process, which releases its staging lock.
    for staging in list(files_module._STAGING_LOCKS):
        os.close(files_module._STAGING_LOCKS.pop(staging))
    assert not (store / "toy" / "v2").exists()
    assert [p.name[:8] for p in (store / "toy").glob(".tmp-*")] == [".tmp-v2-"]
    code = main(["store", "check", "--out", str(store), "--work-dir", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 1 and ".intent-v2.json" in out and "private leftover of a dead run" in out
    code = main(["store", "check", "--out", str(store), "--work-dir", str(tmp_path / "work"),
                 "--repair"])
    assert code == 0, capsys.readouterr().out
    assert not (store / "toy" / "v2").exists() and not list((store / "toy").glob(".tmp-*"))
    assert check_store(store, work_dir=tmp_path / "work").consistent
    book = read_lifetime_ledger(store, load_contract(toy_contract))
    assert [p["state"] for p in book.pending] == ["spent, not published"]
    assert run_release(params(toy_contract, toy_parquet, tmp_path, seed=None)).name == "v2"


def test_a_second_release_with_the_same_test_seed_is_refused(toy_contract, toy_parquet,
                                                              tmp_path, monkeypatch):
    """Issue 10.3 (store side): two releases made with one seed cancel their noise, so the
    registry refuses the second before any private read; it records only the keyed
    fingerprint of the seed, never the seed."""
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=424242, epsilon=0.5))

    def boom(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(runner, "load", boom)
    with pytest.raises(StoreError, match="seed"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=424242, epsilon=0.5,
                           out=str(tmp_path / "elsewhere")))
    text = json.dumps(read_chain("toy"))
    assert "424242" not in text and "hmac-sha256:" in text


def test_a_concurrent_reservation_takes_the_budget_before_any_read(toy_contract, toy_parquet,
                                                                    tmp_path, monkeypatch):
    """Item 4: a run that has reserved (and is still reading) holds its ρ: a concurrent run
    that does not fit is refused before its first private read."""
    from privfair.release.protocol import plan_release, reserve
    from privfair.release.registry import KINDS

    reserve(plan_release(KINDS[0], params(toy_contract, toy_parquet, tmp_path, epsilon=2.5,
                                          delta=1e-6, seed=None)))

    def boom(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(runner, "load", boom)
    with pytest.raises(BudgetExceededError, match="lifetime budget"):
        run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6,
                           seed=None))


def test_a_stale_catalog_row_is_refused_in_one_line_then_repaired(toy_contract, toy_parquet,
                                                                  tmp_path, capsys):
    """Item 8: a catalog row no ledger entry backs (left by a crash) no longer breaks every
    later release with a ConstraintException: the run is refused naming the row, and
    ``store check --repair`` removes it."""
    from privfair.store.catalog import catalog

    store = tmp_path / "releases"
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    with catalog(store) as con:
        con.execute("INSERT INTO releases SELECT dataset, 'v2', 'toy/v2', published_at, epsilon,"
                    " delta, rho, method, n_rows, contract_fingerprint, fairness_passed, "
                    "orchestrator, fairness_claimed FROM releases WHERE version = 'v1'")
    with pytest.raises(StoreError, match="catalog row toy v2 is not in the ledger"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    assert main(["store", "check", "--out", str(store), "--repair"]) == 0
    assert "removed the stale catalog row toy v2" in capsys.readouterr().out
    assert run_release(params(toy_contract, toy_parquet, tmp_path, seed=None)).name == "v2"


def test_the_manifest_counts_the_reserved_run_once(toy_contract, toy_parquet, tmp_path):
    """Item 4: the reservation is in the ledger when the manifest is built; the manifest's
    lifetime spend counts this release once (not reservation + release)."""
    final = run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["lifetime"]["rho_spent_after"] == pytest.approx(
        zcdp_rho(epsilon=1.0, delta=1e-9))


def test_two_stores_versions_of_one_dataset_are_told_apart(toy_contract, toy_parquet,
                                                           tmp_path, capsys):
    """Issue 35.7: a CLI store and a deployment's store on one registry both publish ``v1``;
    ``ledger show`` names each one's store."""
    for out in ("cli-store", "deployment-store"):
        run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=0.5, delta=1e-6,
                           seed=None, out=str(tmp_path / out)))
    runs = [r for r in run_history(read_chain("toy")) if r["state"] == "published"]
    assert [r["version"] for r in runs] == ["v1", "v1"]
    assert {Path(r["store"]).name for r in runs} == {"cli-store", "deployment-store"}
    assert main(["ledger", "show", "--json"]) == 0
    [ledger] = json.loads(capsys.readouterr().out)
    stores = {Path(r["store"]).name for r in ledger["runs"] if r["state"] == "published"}
    assert stores == {"cli-store", "deployment-store"}
    assert main(["ledger", "show"]) == 0
    assert "store" in capsys.readouterr().out  # the table's column
