"""Issue 45.2: a dataset's budget lives in one registry. One dataset released through two
registries with separate stores published 4 against a budget for 2, and a deleted registry
folder (new database, new key) was accepted by the same client with a new store: the
witness was keyed by the registry key, so a new key escaped it. The client now binds each
dataset to the registry it first saw charge it, and refuses any other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_release_store import params, version_dirs

from privfair.release.run import release_table as run_release
from privfair.store.check import check_store
from privfair.store.files import StoreError


def test_a_second_registry_is_refused_for_a_dataset_bound_to_the_first(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None,
                       out=str(tmp_path / "store-a")))
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-b"))
    with pytest.raises(StoreError) as refused:
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None,
                           out=str(tmp_path / "store-b")))
    message = str(refused.value)
    assert "bound to registry" in message and "PRIVFAIR_REGISTRY" in message
    assert "\n" not in message
    assert not (tmp_path / "store-b" / "toy").exists()


def test_a_deleted_and_recreated_registry_is_refused(toy_contract, toy_parquet, tmp_path,
                                                     privacy_registry):
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    shutil.rmtree(privacy_registry)
    privacy_registry.mkdir()
    with pytest.raises(StoreError, match="bound to registry"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None,
                           out=str(tmp_path / "fresh-store")))


def test_other_datasets_may_use_another_registry(toy_contract, toy_parquet, tmp_path,
                                                 monkeypatch):
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    other = tmp_path / "other.yaml"
    other.write_text(toy_contract.read_text().replace("name: toy", "name: toy-two"))
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-b"))
    run_release(params(other, toy_parquet, tmp_path, seed=None, out=str(tmp_path / "b")))


# --- the store's binding and its ledger copy (issue 45.2, round two) -------------------------


def test_the_store_records_the_binding_at_the_first_charge(toy_contract, toy_parquet, tmp_path,
                                                           monkeypatch):
    """The binding is in the registry (its ``open`` entry) and in the store (the ledger copy,
    written at the reservation, before any private read): a run that stops before it
    publishes anything still leaves it."""
    from privfair.store import publication
    from privfair.store.registry import read_chain, registry_id

    def broken(step):
        raise RuntimeError(f"stopped at {step}, before any publication")

    store = tmp_path / "releases"
    monkeypatch.setattr(publication, "reached", broken)
    with pytest.raises(RuntimeError, match="stopped at intent"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    copy = json.loads((store / "toy" / "lifetime_ledger.json").read_text())
    assert copy["registry_id"] == registry_id() and len(registry_id()) == 32
    assert copy["entries"][0]["registry_id"] == registry_id()
    assert read_chain("toy")[0]["registry_id"] == registry_id()
    assert not list((store / "toy").glob("v*"))


def test_a_fresh_client_and_registry_are_refused_by_the_bound_store(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    """No witness to help (a new PRIVFAIR_STATE_HOME) and a new registry: the store the
    dataset was published to names its registry, and refuses the other."""
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-b"))
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "fresh-state"))
    with pytest.raises(StoreError) as refused:
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    message = str(refused.value)
    assert "binds dataset 'toy' to registry" in message and "PRIVFAIR_REGISTRY" in message
    assert "\n" not in message
    assert version_dirs(tmp_path / "releases") == ["v1"]
    report = check_store(tmp_path / "releases", work_dir=tmp_path / "work")
    assert any("binds dataset 'toy'" in p for p in report.problems)


def _edit_copy(copy: Path, edit) -> None:
    raw = json.loads(copy.read_text())
    edit(raw)
    copy.write_text(json.dumps(raw, indent=2, sort_keys=True))


@pytest.mark.parametrize("where", ["releases", "entries", "spent", "registry_id"])
def test_store_check_finds_an_edited_ledger_copy(where, toy_contract, toy_parquet, tmp_path):
    """The store's published ``lifetime_ledger.json`` is checked against the registry: a ρ
    divided by 100 (in its releases, in its chain, or in the spend it shows) fails, the run
    refuses the store, and ``--repair`` rewrites the copy from the registry."""
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    store, work = tmp_path / "releases", tmp_path / "work"
    copy = store / "toy" / "lifetime_ledger.json"
    assert check_store(store, work_dir=work).consistent
    original = copy.read_bytes()

    def edit(raw):
        if where == "releases":
            raw["releases"][0]["rho"] /= 100
        elif where == "entries":
            publish = next(e for e in raw["entries"] if e["kind"] == "publish")
            publish["rho"] /= 100
        elif where == "spent":
            raw["spent"]["rho"] /= 100
            raw["spent"]["epsilon_at_budget_delta"] /= 100
        else:
            raw["registry_id"] = "0" * 32
            raw["entries"][0]["registry_id"] = "0" * 32

    _edit_copy(copy, edit)
    report = check_store(store, work_dir=work)
    assert not report.consistent
    if where == "registry_id":
        assert any("binds dataset 'toy' to registry 000" in p for p in report.problems)
        return
    assert any("ledger copy" in p and "edited" in p for p in report.problems), report.problems
    with pytest.raises(StoreError, match="edited"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    repaired = check_store(store, work_dir=work, repair=True)
    assert any("rewrote the ledger copy" in line for line in repaired.repaired)
    assert check_store(store, work_dir=work).consistent
    assert json.loads(copy.read_bytes()) == json.loads(original)
