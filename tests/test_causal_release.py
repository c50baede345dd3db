"""``privfair discover``: a graph release through the store and lifetime ledger; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privfair.causal.coarsen import REST, coarsen
from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.core.accounting import zcdp_rho
from privfair.core.domain import Domain
from privfair.core.errors import DomainError
from privfair.release.protocol import run_release
from privfair.store.registry import read_lifetime_ledger
from tests.conftest import SECRET_PREFIX, TOY_CONTRACT


def _discover(contract: Path, data: Path, store: Path, *extra: str) -> int:
    return main(["discover", "--contract", str(contract), "--data", str(data), "--epsilon", "1",
                 "--seed", "3", "--insecure-seed", "--out", str(store), "--no-prefect",
                 "--work-dir", str(store.parent / "work"), *extra])


def test_discover_publishes_a_graph_release(toy_contract, toy_parquet, tmp_path, capsys):
    store = tmp_path / "store"
    assert _discover(toy_contract, toy_parquet, store) == 0
    folder = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert sorted(p.name for p in folder.iterdir()) == [
        "contract.yaml", "graph.json", "ledger.json", "manifest.json", "report.html"]
    graph = json.loads((folder / "graph.json").read_text())
    assert set(graph) == {"nodes", "edges", "undirected"}
    assert graph["nodes"] == ["age", "sex", "race", "edu", "hours", "income"]
    for u, v in graph["edges"]:
        assert v not in ("sex", "race") and u != "income"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "graph" and manifest["graph"] == graph
    ledger = json.loads((folder / "ledger.json").read_text())
    assert len(ledger["entries"]) == len(manifest["ledger"]) > 0
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    assert manifest["guarantee"]["rho_reserved"] == pytest.approx(rho)
    assert manifest["guarantee"]["spent"]["rho"] <= rho * (1 + 1e-9)
    # The lifetime is charged the whole reservation, not the data-dependent spend.
    lifetime = read_lifetime_ledger(store, load_contract(toy_contract))
    assert lifetime.rho_spent == pytest.approx(rho)
    text = "".join(p.read_text(errors="ignore") for p in folder.iterdir())
    assert SECRET_PREFIX not in text
    assert "aria-label='causal graph'" in (folder / "report.html").read_text()


@pytest.mark.parametrize(("extra", "message"), [
    (("--coarsen", "nope"), "coarsen: 'nope' is neither"),
    (("--epsilon", "50"), "lifetime budget"),
    (("--alpha", "2"), "alpha"),
])
def test_discover_refuses_bad_input_with_one_line(toy_contract, toy_parquet, tmp_path, capsys,
                                                  extra, message):
    store = tmp_path / "store"
    assert _discover(toy_contract, toy_parquet, store, *extra) == 2
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith("cost: ")]
    assert len(err) == 1 and message in err[0]
    assert not store.exists() or not any(store.rglob("graph.json"))


def test_discover_refuses_a_contract_without_discretisation(toy_parquet, tmp_path, capsys):
    contract = tmp_path / "open.yaml"
    contract.write_text(TOY_CONTRACT.replace(
        "    bins: [1, 20, 40, 60, 100]", "    dp_bins: 4\n    lower: 1\n    upper: 100"))
    assert _discover(contract, toy_parquet, tmp_path / "store") == 2
    err = capsys.readouterr().err
    assert "no declared discretisation" in err and "hours" in err


def test_coarsen_maps_codes_by_public_groups_and_checks_the_partition():
    domain = Domain(("a", "b"), (4, 2))
    labels = {"a": ["w", "x", "y", "z"], "b": ["0", "1"]}.__getitem__
    codes = np.array([[0, 1], [1, 0], [2, 1], [3, 0]])
    out, coarse = coarsen(codes, domain, labels, {"a": [["x"], [REST]]})
    assert coarse.sizes == (2, 2)
    assert out[:, 0].tolist() == [1, 0, 1, 1] and out[:, 1].tolist() == [1, 0, 1, 0]
    with pytest.raises(DomainError, match="must partition"):
        coarsen(codes, domain, labels, {"a": [["w", "x"], ["x", "y", "z"]]})


@pytest.mark.prefect
def test_discover_flow_publishes_a_graph_release(prefect_harness, toy_contract, toy_parquet,
                                                 tmp_path):
    from flows.kinds import FLOWS

    folder = FLOWS["discover"](epsilon=1.0, contract=str(toy_contract), data=str(toy_parquet),
                            out=str(tmp_path / "store"))
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    assert folder.endswith("v1") and manifest["kind"] == "graph"
    assert manifest["seed_policy"].startswith("fresh OS entropy")


def test_discover_reserves_before_reading_and_stays_charged_after_noise(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    """Rule 5: the search's ρ is reserved before the first private read; a run that fails
    after drawing noise stays charged, one that fails before gets its reservation back."""
    from privfair.causal import privpc
    from privfair.release.kinds.causal_graph import kind

    store, contract = tmp_path / "store", load_contract(toy_contract)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    seen: list[float] = []

    def read_then_fail(context, state):
        seen.append(read_lifetime_ledger(None, contract).rho_spent)
        raise OSError("disk went away")

    with monkeypatch.context() as patched:  # not undo(): it would drop the test registry
        patched.setattr(kind, "read_stage", read_then_fail)
        assert _discover(toy_contract, toy_parquet, store) != 0
    assert seen == [pytest.approx(rho)]  # reserved when the private read began
    assert read_lifetime_ledger(None, contract).rho_spent == 0.0  # no noise: given back

    def noisy_then_fail(*args, **kwargs):
        raise RuntimeError("crash during the search")

    monkeypatch.setattr(privpc, "priv_pc", noisy_then_fail)
    with pytest.raises(RuntimeError):
        run_release(kind.GRAPH, {"contract": str(toy_contract), "data": str(toy_parquet),
                                 "epsilon": 1.0, "out": str(store),
                                 "work_dir": str(tmp_path / "work")})
    assert read_lifetime_ledger(None, contract).rho_spent == pytest.approx(rho)


def test_discover_refuses_a_seed_without_the_insecure_test_mode(toy_contract, toy_parquet,
                                                               tmp_path, capsys):
    """Issue 10.3 for graph releases: one line, exit 2, nothing written."""
    store = tmp_path / "store"
    code = main(["discover", "--contract", str(toy_contract), "--data", str(toy_parquet),
                 "--epsilon", "1", "--seed", "3", "--out", str(store), "--no-prefect"])
    assert code == 2
    assert "insecure_seed" in capsys.readouterr().err
    assert not store.exists()
