"""Issue 32 item 7 (finding 5): ``ledger reset`` never gives spent budget back.

A ledger that verifies is never reset; a broken one is, and its new generation starts with
the longest prefix of the old chain that still verifies (the spend it proves stays charged).
"""

from __future__ import annotations

import sqlite3

import pytest
import registry_race
from conftest import TOY_CONTRACT

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.core.accounting import zcdp_rho
from privfair.store.registry import read_chain, read_lifetime_ledger

HALF = zcdp_rho(epsilon=3.0, delta=1e-6) / 2  # the toy contract's budget fits two runs


def _publish(contract, store, run_id) -> str:
    return registry_race.reserve_and_publish(
        registry_race.fake_charge(str(contract), str(store), run_id, HALF))


def _tamper(registry, *statements: str) -> None:
    con = sqlite3.connect(registry / "registry.sqlite", isolation_level=None)
    for (trigger,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        con.execute(f"DROP TRIGGER {trigger}")
    for s in statements:
        con.execute(s)
    con.close()


@pytest.fixture
def contract(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONTRACT)
    return path


def test_reset_of_a_ledger_that_verifies_is_refused(contract, tmp_path, capsys):
    store = tmp_path / "store"
    assert _publish(contract, store, "run-0") == "published"
    assert _publish(contract, store, "run-1") == "published"
    assert _publish(contract, store, "run-2") == "refused"  # over budget
    before = read_chain("toy")
    assert main(["ledger", "reset", "--dataset", "toy", "--reason", "oops"]) == 2
    assert "verifies" in capsys.readouterr().err
    assert read_chain("toy") == before  # nothing given back
    assert _publish(contract, store, "run-3") == "refused"


def test_reset_of_a_broken_ledger_carries_the_verified_spend(contract, tmp_path, privacy_registry,
                                                             capsys):
    store = tmp_path / "store"
    assert _publish(contract, store, "run-0") == "published"
    assert _publish(contract, store, "run-1") == "published"
    entries = read_chain("toy")
    # open, (reserve, spend, publish) x 2: break the second run's reserve entry (seq 4)
    assert [e["kind"] for e in entries][4] == "reserve"
    _tamper(privacy_registry, "UPDATE entries SET body = replace(body, '\"run-1\"', '\"run-x\"') "
                              "WHERE seq = 4")
    assert main(["ledger", "reset", "--dataset", "toy", "--reason", "disk failure"]) == 0
    out = capsys.readouterr().out
    assert "4 of them verified" in out and "carried over (still charged)" in out
    assert "'v-run-0'" in out
    book = read_lifetime_ledger(None, load_contract(contract))
    assert [r["version"] for r in book.releases] == ["v-run-0"]
    assert book.rho_spent == pytest.approx(HALF, rel=1e-12)
    assert book.entries[0]["carried_after_reset"]["entries"] == 4
    # the carried half stays spent: one more run fits, a second does not
    assert _publish(contract, tmp_path / "store2", "run-2") == "published"
    assert _publish(contract, tmp_path / "store2", "run-3") == "refused"
