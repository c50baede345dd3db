"""Issue 45.2: the packaged contracts carry no ``registry_id``, so a new client with a new
registry and a new store could start a dataset's budget afresh (nothing it can see knows of
the first). ``privfair contract pin`` writes a copy pinned to this registry, which every
other registry refuses, new store and new client included."""

from __future__ import annotations

import pytest
from test_release_store import params

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.release.run import release_table as run_release
from privfair.store.files import StoreError
from privfair.store.registry import registry_id


def test_a_packaged_contract_is_pinned_to_this_registry(tmp_path, capsys):
    out = tmp_path / "compas-pinned.yaml"
    assert main(["contract", "pin", "compas", "--out", str(out)]) == 0
    pinned = load_contract(out)
    assert pinned.registry_id == registry_id() and pinned.name == "compas"
    assert main(["contract", "pin", "compas", "--out", str(out)]) == 2  # never overwritten
    assert "--out" in capsys.readouterr().err
    assert load_contract(out).registry_id == registry_id()


def test_a_pinned_contract_is_refused_by_a_fresh_registry_store_and_client(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    pinned = tmp_path / "toy-pinned.yaml"
    assert main(["contract", "pin", str(toy_contract), "--out", str(pinned)]) == 0
    run_release(params(pinned, toy_parquet, tmp_path, seed=None))
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-b"))
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "fresh-state"))
    with pytest.raises(StoreError, match="pins registry"):
        run_release(params(pinned, toy_parquet, tmp_path, seed=None,
                           out=str(tmp_path / "fresh-store")))
    assert not (tmp_path / "fresh-store" / "toy").exists()
    # the unpinned contract is what the docs say cannot be caught there
    run_release(params(toy_contract, toy_parquet, tmp_path, seed=None,
                       out=str(tmp_path / "fresh-store")))


def test_a_contract_pinned_elsewhere_is_not_repinned(toy_contract, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text("registry_id: " + "a" * 32 + "\n" + toy_contract.read_text())
    assert main(["contract", "pin", str(other), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "already pins registry aaa" in capsys.readouterr().err
    assert not (tmp_path / "x.yaml").exists()
