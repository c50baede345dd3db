"""Issue 42.6: ``ledger raise`` is the one way to raise, the contract and the ledger agree,
``ledger show`` lists each budget change with its reason, and run states say what they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TOY_CONTRACT
from test_release_store import params

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.release.run import release_table as run_release
from privfair.store.ledger import budget_history, run_state_words
from privfair.store.registry import read_lifetime_ledger


def _contract(tmp_path: Path, epsilon: str) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONTRACT.replace("epsilon: 3.0", f"epsilon: {epsilon}"))
    return path


def test_a_raise_the_contract_would_cap_is_refused_and_not_recorded(
        toy_contract, toy_parquet, tmp_path, capsys):
    """The referee's case: ``ledger raise --epsilon 20`` printed "now 20" while every run
    stayed capped by the contract's 10. A raise above the contract's budget is refused in one
    line that names the contract's figure and the fix; the chain gets no ``raise``."""
    run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=1.0, delta=1e-6, seed=None))
    code = main(["ledger", "raise", "--contract", str(toy_contract), "--epsilon", "30",
                 "--delta", "1e-6", "--reason", "season 2"])
    err = capsys.readouterr().err
    assert code == 2
    assert "epsilon=3" in err and "budget:" in err and len(err.strip().splitlines()) == 1
    entries = read_lifetime_ledger(tmp_path / "releases", load_contract(toy_contract)).entries
    assert [e["kind"] for e in entries if e["kind"] in ("open", "raise")] == ["open"]


def test_a_raise_defaults_to_the_contract_budget_and_the_next_run_can_use_it(
        toy_contract, toy_parquet, tmp_path, capsys):
    """Edit the contract, then ``ledger raise --reason``: the ledger takes the contract's
    budget, and a run the old budget refused now fits."""
    run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6, seed=None))
    raised = _contract(tmp_path, "30")
    code = main(["ledger", "raise", "--contract", str(raised), "--reason", "board 2026-12"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "epsilon=30" in out.out
    run_release(params(raised, toy_parquet, tmp_path, epsilon=2.5, delta=1e-6, seed=None))
    book = read_lifetime_ledger(tmp_path / "releases", load_contract(raised))
    assert book.epsilon_budget == pytest.approx(30.0)


def test_ledger_show_lists_the_opening_and_each_raise_with_its_reason(
        toy_contract, toy_parquet, tmp_path, capsys):
    run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=1.0, delta=1e-6, seed=None))
    raised = _contract(tmp_path, "12")
    assert main(["ledger", "raise", "--contract", str(raised), "--reason",
                 "approved by the data board"]) == 0
    capsys.readouterr()
    assert main(["ledger", "show", "--out", str(tmp_path / "releases")]) == 0
    shown = capsys.readouterr().out
    assert "approved by the data board" in shown
    assert "raised" in shown and "opened" in shown
    assert main(["ledger", "show", "--out", str(tmp_path / "releases"), "--json"]) == 0
    [ledger] = json.loads(capsys.readouterr().out)
    changes = ledger["budget_history"]
    assert [c["change"] for c in changes] == ["opened", "raised"]
    assert changes[1]["epsilon"] == pytest.approx(12.0)
    assert changes[1]["reason"] == "approved by the data board"


def test_budget_history_folds_open_and_raise_entries_only():
    entries = [
        {"kind": "open", "epsilon": 3.0, "delta": 1e-6, "at": "t0"},
        {"kind": "reserve", "run_id": "r1", "rho": 0.1, "at": "t1"},
        {"kind": "raise", "epsilon": 9.0, "delta": 1e-6, "reason": "why", "by": "ana",
         "at": "t2"},
    ]
    assert budget_history(entries) == [
        {"change": "opened", "epsilon": 3.0, "delta": 1e-6, "at": "t0", "reason": "",
         "by": ""},
        {"change": "raised", "epsilon": 9.0, "delta": 1e-6, "at": "t2", "reason": "why",
         "by": "ana"}]


@pytest.mark.parametrize(("state", "alive", "words"), [
    ("reserved", True, "running: reserved, no noise drawn yet"),
    ("reserved", False, "stopped before drawing noise: reservation held"),
    ("spent, not published", True, "running: charged, noise drawn"),
    ("spent, not published", False, "stopped after drawing noise: charged, not published"),
    ("published", False, "published"),
])
def test_a_run_state_says_whether_the_run_is_running_or_stopped(state, alive, words):
    """A run in progress read as "spent, not published": the state now says whether its
    process still runs, and what the user can do about a stopped one."""
    assert run_state_words(state, alive=alive).startswith(words)
