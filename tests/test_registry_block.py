"""The team's registry block (issue 35.8): a flow run charges the block's registry, not the
environment's, and the key reaches Prefect's database only encrypted (a SecretStr field)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

pytest.importorskip("prefect")

from test_flows import params  # noqa: E402

from flows.kinds import run_local  # noqa: E402
from privfair.store import registry  # noqa: E402
from privfair.store.backends import DB_FILE, using_registry  # noqa: E402
from tasks.registry_blocks import BLOCK_NAME, PrivfairRegistry, load_settings, main  # noqa: E402


def _prefect_db_bytes() -> bytes:
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    db = Path(PREFECT_SERVER_DATABASE_CONNECTION_URL.value().split("///", 1)[1])
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_a_saved_block_is_the_registry_a_flow_charges(prefect_harness, privacy_registry,
                                                      toy_contract, toy_parquet, tmp_path):
    key = secrets.token_bytes(32)
    key_file = tmp_path / "registry.key"
    key_file.write_bytes(key)
    team = tmp_path / "team-registry"
    assert main(["save", "--url", str(team), "--key-file", str(key_file)]) == 0
    try:
        run_local(params(toy_contract, toy_parquet, tmp_path), command="release")
        settings = load_settings()
    finally:
        PrivfairRegistry.delete(BLOCK_NAME)  # the harness's database is shared by the session
    assert load_settings() is None  # no block: the environment decides again
    assert settings is not None and settings.key == key
    with using_registry(settings):
        assert registry.has_ledger("toy")  # charged in the block's registry ...
    assert (team / DB_FILE).is_file() and (team / "registry.key").read_bytes() == key
    assert not (privacy_registry / DB_FILE).is_file()  # ... not in $PRIVFAIR_REGISTRY's
    stored = _prefect_db_bytes()
    assert str(team).encode() in stored  # the database read is Prefect's, with the block
    assert stored.count(key.hex().encode()) == 0 and stored.count(key) == 0  # only encrypted
