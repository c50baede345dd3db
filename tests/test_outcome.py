"""A release says what it built, and a fair method never publishes a failed check (issue 25.1).

On a small table at ε = 1 the tree methods fall back to the independence model; before this,
the CLI printed nothing about it and the report still named the method with a green PASS.
A FairGAN table that failed its own parity check was published with exit code 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_toy_frame

from privfair.cli import main
from privfair.core.accounting import RDP_ORDERS, rdp_epsilon
from privfair.core.errors import FairnessViolationError
from privfair.release.kinds.gan import kind as gan_kind
from privfair.release.kinds.table import kind as table_kind
from privfair.release.run import release_table
from privfair.store.registry import read_lifetime_ledger


def _request(contract, data, tmp_path, **kw):
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "out": str(tmp_path / "releases"), "work_dir": str(tmp_path / "work"),
            "max_iters": 50, **kw}


def test_the_last_lines_name_the_fallback(toy_contract, tmp_path, capsys):
    small = tmp_path / "small.parquet"
    make_toy_frame(n=200, seed=3).to_parquet(small, index=False)
    code = main(["release", "--contract", str(toy_contract), "--data", str(small),
                 "--epsilon", "0.2", "--delta", "1e-9", "--method", "prefair-greedy",
                 "--out", str(tmp_path / "releases"), "--work-dir", str(tmp_path / "work"),
                 "--no-prefect"])
    captured = capsys.readouterr()
    assert code == 0
    folder = Path(captured.out.strip())
    manifest = json.loads((folder / "manifest.json").read_text())
    line = captured.err.strip().splitlines()[-1]
    assert manifest["structure"]["method"] == "independent (small-n fallback)"
    assert line.startswith("built prefair-greedy -> independent (small-n fallback): 0 edges")
    assert f"{manifest['sampling']['n_rows']} rows" in line
    assert "independent (small-n fallback)" in (folder / "report.html").read_text()


def test_a_tree_release_names_its_edges_and_checks(toy_contract, toy_parquet, tmp_path):
    folder = release_table(_request(toy_contract, toy_parquet, tmp_path,
                                    method="prefair-greedy", epsilon=3.0))
    manifest = json.loads((folder / "manifest.json").read_text())
    line = table_kind.TABLE.outcome(manifest)
    edges = len(manifest["structure"]["edges"])
    assert line.startswith(f"built prefair-greedy: {edges} edges")
    assert "model-graph fairness PASS" in line and "output contract PASS" in line


def _failing_parity(real):
    def sample(*args, **kwargs):
        ref, record = real(*args, **kwargs)
        record["fairness_check"]["passed"] = False
        record["fairness_check"]["data_fairness"]["rd"] = 0.078
        record["fairness_check"]["violations"] = [
            {"protected": "sex", "outcome": "income", "rd": 0.078, "allowance": 0.0,
             "why": "|RD(D)| = 0.078 is above 0.05 plus its sampling allowance 0.000"}]
        return ref, record
    return sample


def _failing_parity_no_fallback(real):
    """As _failing_parity, and the run kept no noisy one-way marginals to fall back on."""
    def sample(*args, **kwargs):
        ref, record = _failing_parity(real)(*args, **kwargs)
        record["versus_independence"].pop("noisy_one_way", None)
        return ref, record
    return sample


def test_a_fair_gan_that_fails_its_check_publishes_independence_instead(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    """Issue 42.2: a fair method publishes, the independence model of its own noisy
    marginals (parity up to sampling), stated, rather than charge and publish nothing."""
    monkeypatch.setattr(gan_kind, "sample_gan", _failing_parity(gan_kind.sample_gan))
    folder = release_table(_request(toy_contract, toy_parquet, tmp_path, method="fairgan",
                                    gan_epochs=1))
    manifest = json.loads((folder / "manifest.json").read_text())
    versus = manifest["versus_independence"]
    assert versus["published"] == "independence" and "0.078" in versus["why"]
    check = manifest["fairness_check"]
    assert check["passed"] and check["gan_table"]["passed"] is False
    assert "independence model's rows" in check["measured_on"]
    line = gan_kind.GAN.outcome(manifest)
    assert "PASS" in line and "INDEPENDENCE" in line and "0.078" in line


def test_a_fair_gan_that_fails_its_check_without_a_fallback_publishes_nothing(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    monkeypatch.setattr(gan_kind, "sample_gan",
                        _failing_parity_no_fallback(gan_kind.sample_gan))
    request = _request(toy_contract, toy_parquet, tmp_path, method="fairgan", gan_epochs=1)
    with pytest.raises(FairnessViolationError, match=r"\|RD\(D\)\| = 0.078") as caught:
        release_table(request)
    assert any("stays charged" in note for note in caught.value.__notes__)
    assert not (tmp_path / "releases" / "toy" / "v1").exists()
    book = read_lifetime_ledger(None, gan_kind.GAN.check(
        gan_kind.GAN.parse(request)).contract)
    assert [p["state"] for p in book.pending] == ["spent, not published"]


def test_allow_unfair_publishes_and_records_it(toy_contract, toy_parquet, tmp_path,
                                               monkeypatch):
    monkeypatch.setattr(gan_kind, "sample_gan", _failing_parity(gan_kind.sample_gan))
    folder = release_table(_request(toy_contract, toy_parquet, tmp_path, method="fairgan",
                                    gan_epochs=1, allow_unfair=True))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["parameters"]["allow_unfair"] is True
    line = gan_kind.GAN.outcome(manifest)
    assert "FAIL" in line and "--allow-unfair" in line


def test_dpgan_claims_no_parity(toy_contract, toy_parquet, tmp_path, monkeypatch):
    monkeypatch.setattr(gan_kind, "sample_gan", _failing_parity(gan_kind.sample_gan))
    folder = release_table(_request(toy_contract, toy_parquet, tmp_path, method="dpgan",
                                    gan_epochs=1))
    line = gan_kind.GAN.outcome(json.loads((folder / "manifest.json").read_text()))
    assert "FAIL (not claimed by this method)" in line


def test_the_outcome_names_the_tot_eta_and_what_it_reached():
    manifest = {"method": {"name": "mst"}, "structure": {"method": "mst", "edges": [["a", "b"]]},
                "fairness": {"model_graph": {"passed": False}},
                "fairness_transform": {"applied": True, "parameters": {"eta": 0.08},
                                       "achieved_discrimination": 0.0612},
                "parameters": {}, "validation": {"output": {"passed": True}},
                "sampling": {"n_rows": 10}}
    line = table_kind.TABLE.outcome(manifest)
    assert "TOT eta=0.08 applied (discrimination 0.061)" in line
    assert "model-graph check before TOT: fail" in line


def test_a_tot_release_line_gives_one_fairness_verdict_with_the_gap_it_reached():
    """Issue 42.6 (the unseen-table walk): the manifest TOT writes holds the reached gap
    under fairness_check (achieved_discrimination is a mapping), and report.html's verdict
    is TOT's; the terminal line said "model-graph fairness FAIL ...; TOT eta=0.05 applied"
    with no gap, a FAIL beside the report's PASS."""
    manifest = {"method": {"name": "mst"}, "structure": {"method": "mst", "edges": [["a", "b"]]},
                "fairness": {"model_graph": {"passed": False}},
                "fairness_transform": {
                    "applied": True, "parameters": {"eta": 0.05},
                    "achieved_discrimination": {"max_additive_gap": 0.0473,
                                                "input_max_additive_gap": 0.21},
                    "fairness_check": {"passed": True, "eta": 0.05, "achieved": 0.0473}},
                "parameters": {}, "validation": {"output": {"passed": True}},
                "sampling": {"n_rows": 10}}
    line = table_kind.TABLE.outcome(manifest)
    assert "TOT eta=0.05 applied PASS (discrimination 0.047)" in line
    fairness = [w for w in line.replace("output contract PASS", "").split() if w in (
        "PASS", "FAIL")]
    assert fairness == ["PASS"]


def test_model_and_graph_outcomes_say_what_was_built():
    from privfair.release.kinds.causal_graph.kind import GRAPH
    from privfair.release.kinds.model.train import MODEL

    trivial = {"model": "pflr", "trivial": True, "metrics": {"fair": True}}
    assert "TRIVIAL" in MODEL.outcome(trivial) and "PASS" not in MODEL.outcome(trivial)
    model = {"model": "pflr", "trivial": False,
             "metrics": {"accuracy": 0.661, "majority_baseline_accuracy": 0.502,
                         "risk_difference": 0.179, "fair": False, "fair_threshold": 0.05}}
    assert MODEL.outcome(model) == ("built pflr: DP held-out accuracy 0.661 (majority 0.502); "
                                    "risk difference 0.179 FAIL (|RD| <= 0.05)")
    graph = {"method": "privpc", "graph": {"nodes": ["a", "b", "c"], "edges": [["a", "b"]],
                                           "undirected": [["b", "c"]]},
             "roles_audit": {"unblocked_paths": [["sex", "income"]]}}
    assert GRAPH.outcome(graph) == ("built privpc: 3 nodes, 1 directed and 1 undirected edges; "
                                    "roles audit FAIL (1 protected->outcome path(s) avoid "
                                    "every admissible attribute)")


def test_a_gan_release_ledger_adds_up_to_its_charge_in_one_unit(toy_contract, toy_parquet,
                                                                 tmp_path):
    """Issue 25.1: the DP-SGD row showed ρ = 0.0326 (its unamplified bound), more than the
    release's whole ρ; the rows now add up to what the lifetime ledger charged."""
    # ε 3: at ε 1 the GAN small-n rule (issue 42.1) measures one-way marginals instead
    folder = release_table(_request(toy_contract, toy_parquet, tmp_path, method="dpgan",
                                    gan_epochs=1, epsilon=3.0))
    manifest = json.loads((folder / "manifest.json").read_text())
    book = read_lifetime_ledger(None, table_kind.TABLE.check(table_kind.TABLE.parse(
        _request(toy_contract, toy_parquet, tmp_path))).contract)
    (release,) = book.releases
    rows = manifest["ledger"]
    # charged by its declared Rényi curve (issues 32.9, 41.3): the lifetime holds that curve,
    # whose ε at the run's δ is the declared ε at most, and no ρ that depends on the lifetime
    assert release.get("rho") is None and len(release["rdp"]) == len(RDP_ORDERS)
    own = rdp_epsilon(rdp=release["rdp"], delta=1e-9)[0]
    assert 0 < own <= 3.0 * (1 + 1e-9)
    dpsgd = [e for e in rows if e["mechanism"] == "subsampled-gaussian"]
    # no row shows a ρ above the release's: a DP-SGD row has none, only its unamplified bound
    assert dpsgd and all(e["rho"] is None and e["rho_unamplified_bound"] > 0 for e in dpsgd)
    assert all(e["rho"] <= manifest["guarantee"]["rho"] for e in rows if e["rho"] is not None)
