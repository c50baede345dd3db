"""The release protocol, against every release kind (issue 20).

Each test is parametrized over ``privfair.release.registry.KINDS`` (with the requests of
``kind_cases.CASES``), so a new kind is covered by adding it to both lists. What holds for
every kind: the declared cost is reserved before the first private read and never exceeded;
a run that fails before drawing noise gets its reservation back; a test seed is never used
twice for one dataset, whatever the working folder; publication writes the intent first and
the files in a 0700 folder; a failure before or after the ledger's commit point is recovered
by ``store check --repair``; Ctrl-C exits 130 with one line; bad numbers and paths are
refused in one line before anything is written.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from kind_cases import CASES, EDGE_LIST_CASES, edge_list_example, without_column

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.release.protocol import InProcess, plan_release, run_release
from privfair.release.registry import FAMILIES, KINDS
from privfair.store import publication
from privfair.store.registry import (
    read_lifetime_ledger,
    registry_ledgers,
    store_problems,
)

COVERED = [kind for kind in KINDS if kind.name in CASES or kind.name in EDGE_LIST_CASES]


def case_of(kind):
    return CASES.get(kind.name) or EDGE_LIST_CASES[kind.name]


def inputs_of(kind, toy_contract, toy_parquet):
    """The contract and data a kind's case is built on (the toy table, or an edge list)."""
    return (toy_contract, toy_parquet) if kind.name in CASES else edge_list_example()


@pytest.fixture(params=COVERED, ids=lambda kind: kind.name)
def kind(request):
    return request.param


def request_for(kind, toy_contract, toy_parquet, tmp_path, **extra):
    contract, data = inputs_of(kind, toy_contract, toy_parquet)
    return {**case_of(kind).params(contract, data, tmp_path), **extra}


def cli_args(kind, params: dict) -> list[str]:
    """The command line that makes the same request (flags from the parameter model)."""
    from privfair.cli_options import _flag

    model = kind.params
    args = [case_of(kind).command]
    for name, value in params.items():
        flag = _flag(name, model.model_fields[name])
        if isinstance(value, bool):
            args += [flag] if value else []
        else:
            args += [flag, str(value)]
    return args


def entries(contract_path: Path) -> list[dict]:
    ident = load_contract(contract_path).name
    ledgers = registry_ledgers(ident)
    return ledgers[0]["entries"] if ledgers else []


def test_every_kind_has_a_case():
    assert {kind.name for kind in KINDS} <= set(CASES) | set(EDGE_LIST_CASES)


def test_declared_cost_is_reserved_before_the_first_private_read(kind, toy_contract,
                                                                 toy_parquet, tmp_path):
    params = request_for(kind, toy_contract, toy_parquet, tmp_path)
    planned = plan_release(kind, params)
    before = read_lifetime_ledger(None, planned.plan.contract)
    # The declared cost: a zCDP ρ, or a Rényi curve (never a ρ that depends on the lifetime).
    declared = (planned.cost.epsilon_at(before.delta_budget))
    seen: dict[str, list] = {}

    class Spy(InProcess):
        def run_stage(self, stage, context, state):
            if stage.private and "pending" not in seen:
                book = read_lifetime_ledger(None, context.plan.contract)
                seen["pending"] = [(p["state"], p.get("rho"), p.get("rdp"))
                                   for p in book.pending]
                seen["epsilon"] = book.epsilon_spent()
            return super().run_stage(stage, context, state)

    final = run_release(kind, params, driver=Spy())
    ((state, rho, rdp),) = seen["pending"]
    assert state == "reserved" and seen["epsilon"] == pytest.approx(declared)
    if planned.cost.rdp is None:
        assert rho == pytest.approx(planned.cost.rho) and rdp is None
    else:
        assert rho is None
        np.testing.assert_allclose(rdp, planned.cost.rdp)
    book = read_lifetime_ledger(final.parents[1], planned.plan.contract)
    (release,) = book.releases
    # A run accounted by its Rényi curve may come out cheaper than declared, never dearer.
    assert book.epsilon_spent() <= declared * (1 + 1e-9) and book.pending == []
    if "rdp" not in release:
        assert release["rho"] == pytest.approx(planned.cost.rho)
        assert book.rho_spent == pytest.approx(release["rho"])
    # (a GAN run may settle its reservation to its own curve: a second, settling reserve)
    kinds = [e["kind"] for e in entries(inputs_of(kind, toy_contract, toy_parquet)[0])
             if not e.get("settles")]
    assert kinds == ["open", "reserve", "spend", "publish"]


def test_a_schema_problem_is_refused_without_spending(kind, toy_contract, toy_parquet,
                                                      tmp_path):
    column = case_of(kind).column
    bad = without_column(inputs_of(kind, toy_contract, toy_parquet)[1], column, tmp_path)
    params = {**request_for(kind, toy_contract, toy_parquet, tmp_path), "data": str(bad)}
    with pytest.raises(Exception, match=column):
        run_release(kind, params)
    book = read_lifetime_ledger(None, load_contract(inputs_of(kind, toy_contract, toy_parquet)[0]))
    assert book.rho_spent == 0 and book.releases == []
    assert "spend" not in [e["kind"] for e in entries(inputs_of(kind, toy_contract, toy_parquet)[0])]
    assert not list((tmp_path / "work" / "staging").glob("*/*"))  # nothing private left


def test_a_test_seed_is_refused_the_second_time_whatever_the_work_folder(
        kind, toy_contract, toy_parquet, tmp_path):
    first = request_for(kind, toy_contract, toy_parquet, tmp_path, seed=7, insecure_seed=True)
    run_release(kind, first)
    second = {**first, "work_dir": str(tmp_path / "elsewhere"),
              "out": str(tmp_path / "other-store")}
    with pytest.raises(Exception, match="seed"):
        run_release(kind, second)
    fingerprints = [e.get("seed_fingerprint") for e in entries(inputs_of(kind, toy_contract, toy_parquet)[0])
                    if e["kind"] == "publish"]
    assert len(fingerprints) == 1 and fingerprints[0].startswith("hmac-sha256:")


def test_a_run_is_planned_once(kind, toy_contract, toy_parquet, tmp_path):
    """Issue 33.2: the run publishes under the run id of the plan it was given (the CLI's
    cost line and its run are one plan), and a planned request whose seed another run used
    meanwhile is still refused at the reservation."""
    request = request_for(kind, toy_contract, toy_parquet, tmp_path, seed=5, insecure_seed=True)
    planned = plan_release(kind, request)
    again = plan_release(kind, {**request, "work_dir": str(tmp_path / "elsewhere")})
    folder = run_release(planned)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["run_id"] == planned.plan.run_id != again.plan.run_id
    contract = inputs_of(kind, toy_contract, toy_parquet)[0]
    assert [e["run_id"] for e in entries(contract) if e["kind"] == "publish"] == [
        planned.plan.run_id]
    with pytest.raises(Exception, match="seed"):
        run_release(again)
    assert {e["run_id"] for e in entries(contract) if e.get("run_id")} == {
        planned.plan.run_id}  # the refused plan reserved nothing


def test_publication_writes_the_intent_first_and_files_in_a_0700_folder(
        kind, toy_contract, toy_parquet, tmp_path, monkeypatch):
    params = request_for(kind, toy_contract, toy_parquet, tmp_path)
    folder = tmp_path / "releases" / load_contract(inputs_of(kind, toy_contract, toy_parquet)[0]).name
    steps: list[tuple[str, bool, list[int]]] = []
    real = publication.reached

    visible: dict[str, bool] = {}

    def record(step):
        intents = list(folder.glob(".intent-*.json")) if folder.is_dir() else []
        modes = [p.stat().st_mode & 0o777 for p in folder.glob(".tmp-*")] \
            if folder.is_dir() else []
        steps.append((step, bool(intents), modes))
        visible[step] = (folder / "v1").exists()
        real(step)

    monkeypatch.setattr(publication, "reached", record)
    run_release(kind, params)
    names = [s[0] for s in steps]
    # Issue 36.5: the ledger's publish entry commits before the folder is renamed visible.
    assert names == ["intent", "files", "intent", "ledger", "rename", "catalog", "done"]
    assert all(has_intent for name, has_intent, _ in steps if name != "intent")
    rename = next(modes for name, _, modes in steps if name == "rename")
    assert rename == [0o700]
    assert visible == {"intent": False, "files": False, "ledger": False, "rename": False,
                       "catalog": True, "done": True}


@pytest.mark.parametrize("step", ["ledger", "rename", "catalog"])
def test_a_failure_around_the_commit_point_is_recovered(kind, step, toy_contract, toy_parquet,
                                                        tmp_path, monkeypatch, capsys):
    params = request_for(kind, toy_contract, toy_parquet, tmp_path)
    store = tmp_path / "releases"

    class Crash(RuntimeError):
        pass

    real = publication.reached

    def crash(at):
        if at == step:
            raise Crash(at)
        real(at)

    with monkeypatch.context() as m:
        m.setattr(publication, "reached", crash)
        with pytest.raises(Exception):  # noqa: B017 - the crash, or the store error after it
            run_release(kind, params)
    code = main(["store", "check", "--out", str(store), "--repair"])
    assert code == 0, capsys.readouterr()
    book = read_lifetime_ledger(store, load_contract(inputs_of(kind, toy_contract, toy_parquet)[0]))
    assert store_problems(store, book) == []
    if step == "ledger":  # before the commit point: rolled back, still charged
        assert book.releases == [] and [p["state"] for p in book.pending] == [
            "spent, not published"]
        assert not (store / load_contract(inputs_of(kind, toy_contract, toy_parquet)[0]).name / "v1").exists()
    else:  # after it: rolled forward
        assert [r["version"] for r in book.releases] == ["v1"]
        manifest = json.loads((store / book.dataset / "v1" / "manifest.json").read_text())
        assert manifest["version"] == "v1"


def test_ctrl_c_exits_130_in_one_line_and_gives_the_reservation_back(
        kind, toy_contract, toy_parquet, tmp_path, monkeypatch, capsys):
    params = request_for(kind, toy_contract, toy_parquet, tmp_path)
    real = InProcess.run_stage

    def interrupted(self, stage, context, state):
        if stage.private:
            raise KeyboardInterrupt
        return real(self, stage, context, state)

    monkeypatch.setattr(InProcess, "run_stage", interrupted)
    code = main([*cli_args(kind, params), "--no-prefect"])
    err = capsys.readouterr().err
    assert code == 130
    assert err.strip().splitlines()[-1] == "privfair: interrupted"
    assert [e["kind"] for e in entries(inputs_of(kind, toy_contract, toy_parquet)[0])][-2:] == ["reserve", "cancel"]
    assert not list((tmp_path / "work" / "staging").glob("*/*"))


BAD_NUMBERS = [("epsilon", "1e-300"), ("epsilon", "1e300"), ("epsilon", "nan"),
               ("epsilon", "inf"), ("epsilon", "-1"), ("delta", "5e-324"), ("delta", "1"),
               ("delta", "0"), ("out", "rel*"), ("out", " ")]


@pytest.mark.parametrize(("name", "value"), BAD_NUMBERS)
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.command)
def test_bad_numbers_and_paths_are_refused_in_one_line(family, name, value, toy_contract,
                                                       toy_parquet, tmp_path, capsys):
    kind = family.kinds[0]
    params = {**request_for(kind, toy_contract, toy_parquet, tmp_path), name: value}
    code = main([*cli_args(kind, params), "--no-prefect"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert name in err[0]
    assert not (tmp_path / "releases").exists() and entries(inputs_of(kind, toy_contract, toy_parquet)[0]) == []


def test_costs_are_in_one_unit_and_finite(kind, toy_contract, toy_parquet, tmp_path):
    planned = plan_release(kind, request_for(kind, toy_contract, toy_parquet, tmp_path))
    cost = planned.cost
    assert (cost.rho is None) != (cost.rdp is None)
    values = [cost.rho] if cost.rho is not None else list(cost.rdp)
    assert all(math.isfinite(v) and v > 0 for v in values)
    assert os.environ.get("PRIVFAIR_REGISTRY")  # the suite never touches a user's registry


def test_spawn_keys_come_from_the_registry_and_stay_pinned():
    """Issue 33.1: a kind's spawn keys follow from its position in the one registry list
    (append only), the values seeded releases were made with."""
    from privfair.release.registry import REGISTRY
    from privfair.release.seeds import KIND_KEYS

    assert [r.name for r in REGISTRY] == ["table", "gan", "model", "graph", "embedding"]
    assert KIND_KEYS == {"model": 20, "graph": 30, "embedding": 40}
    assert [kind.name for kind in KINDS] == [r.name for r in REGISTRY]
