"""The registry handed to a process explicitly (issue 35.8): explicit > environment > default.

An orchestrator (the Prefect block of ``tasks/registry_blocks.py``) hands the library a
:class:`~privfair.store.backends.RegistrySettings`; without one the environment decides, as
before. The library never reads the orchestrator's storage itself.
"""

from __future__ import annotations

import secrets

import pytest
from test_registry_db import pg_server  # noqa: F401 - the session's PostgreSQL fixture

from privfair.store import backends
from privfair.store.backends import RegistrySettings, using_registry
from privfair.store.files import StoreError
from privfair.store.registry_sql import open_registry


def test_explicit_over_environment_over_default(tmp_path, monkeypatch):
    explicit, env = tmp_path / "explicit", tmp_path / "env"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("PRIVFAIR_REGISTRY")
    assert backends.registry_folder() == tmp_path / "data" / "privfair" / "registry"
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(env))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(env) + "-client")
    assert backends.registry_folder() == env
    with using_registry(RegistrySettings(url=str(explicit))):
        assert backends.registry_folder() == explicit
        assert backends.registry_url() is None
        with using_registry(None):  # None keeps what the process was handed
            assert backends.registry_folder() == explicit
    assert backends.registry_folder() == env  # restored on leaving
    url = "postgresql://team@db.example/registry"
    with using_registry(RegistrySettings(url=url)):
        assert backends.registry_url() == url


def test_a_handed_key_opens_its_registry_and_no_other(tmp_path):
    key = secrets.token_bytes(32)
    folder = tmp_path / "reg"
    with using_registry(RegistrySettings(url=str(folder), key=key)):
        reg = open_registry()
    assert reg.key == key  # a new folder registry is made with the handed key
    assert (folder / backends.KEY_FILE).read_bytes() == key
    other = RegistrySettings(url=str(folder), key=secrets.token_bytes(32), source="the block")
    with using_registry(other), pytest.raises(StoreError) as info:
        open_registry()
    message = str(info.value)
    assert "\n" not in message and "handed by the block" in message
    assert "not this registry's key" in message
    assert key.hex() not in repr(other) and other.key.hex() not in repr(other)


@pytest.mark.parametrize("url", ["mysql://x@h/db", "https://registry.example", "  "])
def test_a_bad_url_is_refused_naming_the_setting(url, monkeypatch):
    with pytest.raises(StoreError) as info:
        RegistrySettings(url=url, source="PrivfairRegistry.url")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("PrivfairRegistry.url: ")
    monkeypatch.setenv("PRIVFAIR_REGISTRY", url)
    if url.strip():  # the environment's value is refused the same way, naming it
        with pytest.raises(StoreError, match=r"^PRIVFAIR_REGISTRY: .*postgresql://"):
            backends.registry_folder()


def test_a_short_key_is_refused():
    with pytest.raises(StoreError, match="^RegistrySettings.url: the registry key must be 32"):
        RegistrySettings(url="/tmp/x", key=b"short")


def test_a_handed_key_claims_a_new_postgresql_registry_and_no_file_is_written(
        pg_server, tmp_path, monkeypatch):  # noqa: F811
    """A team registry handed its key (the block's Secret) writes no key file anywhere; a
    client handed another key is refused before any ledger is read."""
    import uuid

    url = pg_server.create_database(f"reg_{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("PRIVFAIR_REGISTRY_HOME", str(tmp_path / "home"))
    key = secrets.token_bytes(32)
    with using_registry(RegistrySettings(url=url, key=key)):
        assert open_registry().key == key
    assert not (tmp_path / "home").exists()  # the key stays where it was handed from
    with using_registry(RegistrySettings(url=url, key=secrets.token_bytes(32),
                                         source="the block")), \
            pytest.raises(StoreError, match="handed by the block is not this registry's key"):
        open_registry()
