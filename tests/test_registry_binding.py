"""Issue 45.2: a dataset's budget lives in one registry. One dataset released through two
registries with separate stores published 4 against a budget for 2, and a deleted registry
folder (new database, new key) was accepted by the same client with a new store: the
witness was keyed by the registry key, so a new key escaped it. The client now binds each
dataset to the registry it first saw charge it, and refuses any other."""

from __future__ import annotations

import shutil

import pytest
from test_release_store import params

from privfair.release.run import release_table as run_release
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
