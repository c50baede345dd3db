"""Issue 21.2 for the model, graph and embedding kinds: a value never refuses a release.

A request whose data holds a value outside the declared domain and a null publishes: the
contract's policy (PrivPC*: clamp to the declared bounds, drop a null or a non-number) drops,
clamps or maps the row, the ledger shows reserve, spend, publish, the manifest holds the
noisy counts of the rows each policy touched with their σ, and the reservation is the
declared cost, no more. A missing column (a public fact of the file's schema) is still
refused before any ledger entry.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.datasets import contract_path, embedded_dataset_for
from privfair.contracts.encoding import policy_cells, policy_sensitivity
from privfair.contracts.schema import load_contract
from privfair.core.accounting import rdp_epsilon, zcdp_rho
from privfair.core.errors import ReleaseInputError
from privfair.release.kinds.causal_graph.kind import GRAPH
from privfair.release.kinds.embedding.kind import EMBEDDING
from privfair.release.kinds.model.budget import policy_entry
from privfair.release.kinds.model.train import MODEL
from privfair.release.policy_counts import LEDGER_NAME, POLICY_SHARE
from privfair.release.protocol import plan_release, run_release
from privfair.store.registry import read_lifetime_ledger, registry_ledgers
from tests.test_graph_kind import NUMERIC_CONTRACT


def _entries(contract: Path) -> list[dict]:
    ledgers = registry_ledgers(load_contract(contract).name)
    return ledgers[0]["entries"] if ledgers else []


def _kinds(contract: Path) -> list[str]:
    return [e["kind"] for e in _entries(contract)]


def _reserved(contract: Path) -> float:
    (entry,) = [e for e in _entries(contract) if e["kind"] == "reserve"]
    return float(entry["rho"])


def _reserved_curve(contract: Path) -> np.ndarray:
    (entry,) = [e for e in _entries(contract) if e["kind"] == "reserve"]
    assert "rho" not in entry  # charged by its curve, never a lifetime-dependent ρ
    return np.asarray(entry["rdp"])


def _request(contract: Path, data: Path, tmp_path: Path, **extra) -> dict:
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-6,
            "seed": 11, "insecure_seed": True, "out": str(tmp_path / "store"),
            "work_dir": str(tmp_path / "work"), **extra}


def _bad_toy(toy_frame: pd.DataFrame, tmp_path: Path) -> Path:
    """The toy data with a race outside the declared categories and a null age."""
    frame = toy_frame.copy()
    frame["age"] = frame["age"].astype(float)
    frame.loc[3, "race"] = "Martian"
    frame.loc[5, "age"] = None
    data = tmp_path / "bad.parquet"
    frame.to_parquet(data, index=False)
    return data


def _published(folder: Path, contract: Path, policies, rho: float) -> dict:
    """The checks every kind shares; returns the manifest."""
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    record = manifest["validation"]["input"]
    assert record["refused_on_values"] is False
    cells = policy_cells(policies)
    assert [(r["column"], r["action"]) for r in record["touched_rows"]] == cells
    sensitivity = policy_sensitivity(policies)
    sigma = sensitivity / math.sqrt(2 * rho)
    assert record["noise"]["rho"] == pytest.approx(rho)
    assert record["noise"]["sigma"] == pytest.approx(sigma)
    (entry,) = [e for e in manifest["ledger"] if e["name"] == LEDGER_NAME]
    assert entry["sigma"] == pytest.approx(sigma) and entry["rho"] == pytest.approx(rho)
    assert entry["sensitivity"] == pytest.approx(sensitivity)
    # exact discrete noise (issue 41.2): integers, and noisy (every exact count here is 0 or
    # 1; σ is tens to hundreds: a count within 1 of 0 has probability < 0.03)
    assert all(r["noisy_count"] == round(r["noisy_count"]) for r in record["touched_rows"])
    assert any(abs(r["noisy_count"]) > 1 for r in record["touched_rows"])
    return manifest


# --- model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["pflr", "dpsgd"])
def test_a_model_release_of_bad_values_publishes_at_its_declared_cost(
        model, toy_contract, toy_frame, tmp_path):
    if model == "dpsgd":
        pytest.importorskip("torch")
    data = _bad_toy(toy_frame, tmp_path)
    request = _request(toy_contract, data, tmp_path, model=model, epochs=1)
    planned = plan_release(MODEL, request)
    budget = planned.plan.budget
    declared = np.asarray(planned.cost.rdp)
    before = read_lifetime_ledger(None, load_contract(toy_contract))
    # The policy counts are part of the declared curve: ρ_pol·α, ρ_pol a public share.
    assert budget.policy_rho == pytest.approx(POLICY_SHARE * zcdp_rho(epsilon=1.0,
                                                                      delta=1e-6))
    policy_curve = policy_entry(budget.policy_rho, sensitivity=budget.policy_sensitivity,
                                cells=budget.policy_cells)[1].rdp_curve()
    assert np.all(declared >= policy_curve)
    assert rdp_epsilon(rdp=declared, delta=1e-6)[0] <= 1.0 * (1 + 1e-9)  # within (ε, δ)
    folder = run_release(MODEL, request)
    used = planned.plan.encoding.used_contract(load_contract(toy_contract))
    manifest = _published(folder, toy_contract, used, budget.policy_rho)
    # the reservation is the declared curve, whatever the lifetime; the run spends no more at
    # any order, and the lifetime is charged the declared curve (issue 41.3)
    np.testing.assert_allclose(_reserved_curve(toy_contract), declared)
    assert before.epsilon_spent() == 0.0
    (release,) = read_lifetime_ledger(None, load_contract(toy_contract)).releases
    np.testing.assert_allclose(release["rdp"], declared)
    assert np.all(np.asarray(manifest["guarantee"]["rdp_spent"]) <= declared * (1 + 1e-12))
    assert manifest["guarantee"]["declared"]["policy_counts"]["rho"] == pytest.approx(
        budget.policy_rho)
    assert "## Input policies" in (Path(folder) / "model_card.md").read_text()


# --- graph ----------------------------------------------------------------------------------


def test_a_privpc_release_of_bad_values_publishes_at_its_declared_cost(
        toy_contract, toy_frame, tmp_path):
    data = _bad_toy(toy_frame, tmp_path)
    request = _request(toy_contract, data, tmp_path, method="privpc", max_order=1)
    planned = plan_release(GRAPH, request)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    assert planned.cost.rho == pytest.approx(rho)
    folder = run_release(GRAPH, request)
    manifest = _published(folder, toy_contract, load_contract(toy_contract),
                          POLICY_SHARE * rho)
    assert _reserved(toy_contract) == pytest.approx(rho)
    g = manifest["guarantee"]
    assert g["search_rho"] + g["policy_counts_rho"] == pytest.approx(rho)
    assert sum(e["rho"] for e in manifest["ledger"]) <= rho * (1 + 1e-9)
    assert "Input policies" in (Path(folder) / "report.html").read_text()


def test_a_privpc_star_release_clamps_and_drops_and_counts_both(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = 0.8 * x + 0.6 * rng.normal(size=400)
    frame = pd.DataFrame({"x": x, "y": y, "z": 0.8 * y + 0.6 * rng.normal(size=400)})
    frame.loc[0, "x"] = 40.0  # outside the declared [-2.5, 2.5]: clamped
    frame.loc[1, "y"] = None  # null: dropped
    frame.loc[2, "x"] = np.inf  # not a finite number: dropped
    data = tmp_path / "chain.parquet"
    frame.to_parquet(data, index=False)
    contract = tmp_path / "chain.yaml"
    contract.write_text(NUMERIC_CONTRACT)
    request = _request(contract, data, tmp_path, method="privpc-star", epsilon=5.0)
    planned = plan_release(GRAPH, request)
    policies = planned.plan.policy_contract
    assert {(c.name, c.out_of_domain_policy.kind, c.null_policy.kind)
            for c in policies.columns} == {(a, "clamp", "drop") for a in "xyz"}
    rho = zcdp_rho(epsilon=5.0, delta=1e-6)
    folder = run_release(GRAPH, request)
    manifest = _published(folder, contract, policies, POLICY_SHARE * rho)
    assert {(r["column"], r["action"]) for r in manifest["validation"]["input"]
            ["touched_rows"]} == {(a, b) for a in "xyz" for b in ("dropped", "clamped")} | {
                ("(unparsed record)", "dropped")}
    assert _reserved(contract) == pytest.approx(rho)
    assert manifest["guarantee"]["spent"]["rho"] <= rho * (1 + 1e-9)


# --- embedding ------------------------------------------------------------------------------


def test_an_embedding_of_unknown_and_null_endpoints_publishes_at_its_declared_cost(tmp_path):
    contract = contract_path("example_graph")
    edges = pd.read_parquet(embedded_dataset_for("example_graph"))
    bad = pd.DataFrame({"source": ["n01", "n02", "zz99", "n03"],
                        "target": ["zz99", None, "n01", "n04"]})  # zz99: not a node
    data = tmp_path / "edges.parquet"
    pd.concat([edges, bad], ignore_index=True).to_parquet(data, index=False)
    request = _request(contract, data, tmp_path, dim=4)
    planned = plan_release(EMBEDDING, request)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    assert planned.cost.rho == pytest.approx(rho)
    # DPNE's pure ε′ comes from what the policy counts leave of ρ
    assert planned.plan.dpne_epsilon == pytest.approx(
        min(1.0, math.sqrt(2 * (1 - POLICY_SHARE) * rho)))
    folder = run_release(EMBEDDING, request)
    manifest = _published(folder, contract, load_contract(contract), POLICY_SHARE * rho)
    assert _reserved(contract) == pytest.approx(rho)
    assert manifest["guarantee"]["spent"]["rho"] <= rho * (1 + 1e-9)
    assert "Input policies" in (Path(folder) / "report.html").read_text()


def test_touched_edges_are_counted_once_per_distinct_edge():
    """An edge listed many times (either way round) moves each count by at most 1."""
    from privfair.contracts.encoding import PolicyTally, discretize
    from privfair.release.kinds.embedding.kind import distinct_edges

    contract = load_contract(contract_path("example_graph"))
    frame = pd.DataFrame({"source": ["n01", "zz99", "n01", "n02", None, "n02"],
                          "target": ["zz99", "n01", "zz99", None, "n02", "n03"]})
    first = distinct_edges(frame, contract, "source", "target")
    assert first.tolist() == [True, False, False, True, False, True]
    tally = PolicyTally()
    discretize(frame[first], contract, tally=tally)
    assert tally.to_dict() == {"target": {"dropped": 2}}


# --- a public fact still refuses -------------------------------------------------------------


@pytest.mark.parametrize(("kind", "column"), [(MODEL, "hours"), (GRAPH, "edu"),
                                              (EMBEDDING, "target")],
                         ids=["model", "graph", "embedding"])
def test_a_missing_column_is_refused_before_any_ledger_entry(kind, column, toy_contract,
                                                             toy_frame, tmp_path):
    if kind is EMBEDDING:
        contract, frame = (contract_path("example_graph"),
                           pd.read_parquet(embedded_dataset_for("example_graph")))
    else:
        contract, frame = toy_contract, toy_frame
    data = tmp_path / "missing.parquet"
    frame.drop(columns=[column]).to_parquet(data, index=False)
    extra = {"model": {"model": "pflr"}, "graph": {"method": "privpc"}}.get(kind.name, {})
    with pytest.raises(ReleaseInputError, match=f"'{column}'"):
        run_release(kind, _request(contract, data, tmp_path, **extra))
    assert _kinds(contract) == []
