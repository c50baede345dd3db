import json

import numpy as np
import pandas as pd
import pytest
import yaml

from privfair.cli import main
from privfair.contracts.datasets import contract_path, load_dataset
from privfair.contracts.schema import load_contract
from privfair.core.accounting import RDP_ORDERS, rdp_epsilon, subsampled_gaussian_rdp
from privfair.core.errors import BudgetExceededError, DomainError, ReleaseInputError
from privfair.release.kinds.model.predict import decision_function, predict
from privfair.release.kinds.model.train import MODEL, TrainParams
from privfair.release.protocol import plan_release, run_release
from privfair.store.catalog import list_releases
from privfair.store.ledger import LifetimeLedger
from privfair.store.registry import read_lifetime_ledger


@pytest.fixture(scope="module")
def adult_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "adult_sample.parquet"
    load_dataset("adult").sample(4000, random_state=0).to_parquet(path, index=False)
    return path


def train(params, tmp_path):
    return run_release(MODEL, {"work_dir": str(tmp_path / "work"), **params})


def _contract_with_budget(tmp_path, epsilon):
    raw = yaml.safe_load(contract_path("adult").read_text())
    raw["budget"] = {"epsilon": epsilon, "delta": 1e-6}
    path = tmp_path / "adult_small_budget.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_pflr_star_release_round_trips_through_predict(adult_file, tmp_path):
    store = tmp_path / "store"
    folder = train({"model": "pflr-star", "epsilon": 1.0, "data": str(adult_file),
                    "seed": 3, "insecure_seed": True, "out": str(store)}, tmp_path)
    assert folder == store / "adult" / "v1"
    assert sorted(p.name for p in folder.iterdir()) == [
        "contract.yaml", "manifest.json", "model_card.md", "weights.npz"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "model" and manifest["model"] == "pflr-star"
    assert manifest["guarantee"]["spent"]["epsilon"] <= 1.0 + 1e-6
    assert [e["name"] for e in manifest["ledger"]] == [
        "rows touched by the contract's policies", "group histogram (fairness centre)", "fairness shift (PFLR*)",
        "functional mechanism (PFLR*)", "held-out confusion matrices per group"]
    metrics = manifest["metrics"]
    assert metrics["privacy"].startswith("DP: ")
    assert 0.5 < metrics["majority_baseline_accuracy"] < 1
    assert set(metrics["per_group"]) == {"Female", "Male"}
    assert "seed" not in json.dumps(manifest["parameters"])
    card = (folder / "model_card.md").read_text()
    assert "majority-class baseline" in card and "| Female |" in card

    rows = load_dataset("adult").head(50).drop(columns=["income", "sex"])
    scored = predict(folder, rows)
    with np.load(folder / "weights.npz", allow_pickle=False) as npz:
        coef = npz["coef"]
    contract = load_contract(folder / "contract.yaml")
    from privfair.contracts.model_features import FeatureEncoding

    x = FeatureEncoding.from_dict(manifest["features"]).transform(rows, contract)
    logits = decision_function({"coef": coef}, x)
    np.testing.assert_allclose(scored["score"], 1 / (1 + np.exp(-logits)))
    assert set(scored["prediction"]) <= {"<=50K", ">50K"}
    np.testing.assert_array_equal(scored["prediction"] == ">50K", logits > 0)

    lifetime = json.loads((store / "adult" / "lifetime_ledger.json").read_text())
    entry = lifetime["releases"][0]
    assert entry["kind"] == "model" and len(entry["rdp"]) == len(RDP_ORDERS)
    [row] = list_releases(store)
    assert row["method"] == "model:pflr-star"
    # charged by its curve, it has no ρ: null, and the listing is strict JSON (no NaN)
    assert row["rho"] is None
    json.dumps(row, allow_nan=False, default=str)


def test_dpsgd_f_release_and_cli_predict(adult_file, tmp_path, capsys):
    pytest.importorskip("torch")
    store = tmp_path / "store"
    code = main(["train", "--model", "dpsgd-f", "--epsilon", "3", "--data", str(adult_file),
                 "--epochs", "2", "--seed", "1", "--insecure-seed", "--out", str(store),
                 "--work-dir", str(tmp_path / "work"), "--no-prefect"])
    assert code == 0
    folder = capsys.readouterr().out.strip().splitlines()[-1]
    manifest = json.loads((store / "adult" / "v1" / "manifest.json").read_text())
    assert folder.endswith("v1")
    assert 0 < manifest["guarantee"]["spent"]["epsilon"] <= 3.0 + 1e-9
    names = [e["name"] for e in manifest["ledger"]]
    # Gradients and group counts of one batch: one subsampled Gaussian (issue 21.5).
    # First the noisy counts of the rows the contract's policies touched (issue 21.2).
    assert names == ["rows touched by the contract's policies", "training row count",
                     "dpsgd-f gradients and clipped/unclipped counts "
                     "per group (one subsampled Gaussian)",
                     "held-out confusion matrices per group"]
    gradients = manifest["ledger"][2]
    assert gradients["sample_rate"] > 0 and gradients["steps"] >= 1
    # The run's curve stays under the declared (reserved) one at every order.
    declared = np.asarray(manifest["guarantee"]["declared"]["declared_rdp"])
    assert np.all(np.asarray(manifest["guarantee"]["rdp_spent"]) <= declared)
    rows = tmp_path / "rows.parquet"
    load_dataset("adult").head(20).to_parquet(rows, index=False)
    out = tmp_path / "scored.csv"
    assert main(["predict", "--release", folder, "--data", str(rows), "--out", str(out)]) == 0
    scored = pd.read_csv(out)
    assert len(scored) == 20 and scored["score"].between(0, 1).all()


def test_model_release_over_the_lifetime_budget_is_refused_before_reading(tmp_path):
    """Refused by the protocol's plan, before the reservation: no ledger, nothing read but the
    file's schema (public; every kind's shared check reads it first, issue 33.1)."""
    contract = _contract_with_budget(tmp_path, 1.0)
    params = {"model": "pflr", "epsilon": 2.0, "contract": str(contract),
              "out": str(tmp_path / "store")}
    with pytest.raises(BudgetExceededError, match="lifetime budget"):
        train(params, tmp_path)
    assert main(["train", "--model", "pflr", "--epsilon", "2", "--contract", str(contract),
                 "--out", str(tmp_path / "store"), "--no-prefect"]) == 2
    assert not (tmp_path / "store" / "adult" / "lifetime_ledger.json").exists()


@pytest.mark.parametrize("params, error, match", [
    ({"model": "svm"}, ValueError, "model"),
    ({"epsilon": 0.0}, ValueError, "epsilon"),
    ({"epsilon": -1.0}, ValueError, "epsilon"),
    ({"epsilon": 1e-300}, ValueError, "epsilon"),
    ({"hidden": [8, -5]}, ValueError, "hidden"),
    ({"min_rows": 0}, ValueError, "min_rows"),
    ({"group": "colour"}, DomainError, "group: column 'colour' is not in contract"),
    ({"model": "pflr", "group": "race"}, ValueError, "has 5 labels.*need two"),
])
def test_bad_requests_refused_in_preflight(params, error, match, tmp_path):
    with pytest.raises(error, match=match):
        MODEL.check({"epsilon": 1.0, "out": str(tmp_path)} | params)


def test_a_curve_charge_leaves_table_releases_exactly_the_composed_room():
    """Issue 32.9: a DP-SGD release is charged its own curve (no ρ); a later zCDP release may
    take what the composition of both leaves, and no more."""
    contract = load_contract(contract_path("adult"))
    lifetime = LifetimeLedger("adult", contract.budget.epsilon, contract.budget.delta,
                              [{"version": "v1", "rho": 0.05}])
    curve = subsampled_gaussian_rdp(noise_multiplier=1.0, sample_rate=0.01, steps=2000)
    lifetime.releases.append({"version": "v2", "rdp": list(curve)})
    assert lifetime.rho_spent == pytest.approx(0.05)  # the curve is not a ρ
    room = lifetime.rho_remaining
    assert room > 0
    lifetime.check(rho=room)
    with pytest.raises(BudgetExceededError):
        lifetime.check(rho=room * 1.01)
    total = lifetime.epsilon_spent(rho=room)
    assert contract.budget.epsilon * 0.999 < total <= contract.budget.epsilon * (1 + 1e-9)
    # Without amplification by subsampling the same steps would not fit at all.
    assert rdp_epsilon(rdp=np.asarray(RDP_ORDERS) * 2000 / 2, delta=1e-6)[0] > 10


def test_train_params_are_typed():
    params = TrainParams(model="naive", epsilon=2.0)
    assert params.delta == 1e-6 and params.holdout == 0.2 and params.min_rows == 1000
    assert params.evaluation_share == 0.1


def test_successive_model_releases_share_the_registry_ledger(adult_file, tmp_path):
    store = tmp_path / "store"
    for seed, model in enumerate(("privlr", "pflr")):
        train({"model": model, "epsilon": 2.0, "data": str(adult_file), "seed": seed,
               "insecure_seed": True, "out": str(store), "holdout": 0.0}, tmp_path)
    contract = load_contract(contract_path("adult"))
    book = read_lifetime_ledger(store, contract)  # cross-checks store, catalog and registry
    assert [r["version"] for r in book.releases] == ["v1", "v2"]
    assert all(r["kind"] == "model" and len(r["rdp"]) == len(RDP_ORDERS)
               for r in book.releases)
    # Two (2, δ)-DP releases (the functional mechanism next to the Gaussian policy counts):
    # their Rényi curves convert to a little under 4 at the lifetime delta.
    assert 3.7 < book.epsilon_spent() < 4.01
    manifest = json.loads((store / "adult" / "v2" / "manifest.json").read_text())
    assert manifest["metrics"] is None
    # A third release over what is left is refused before reading anything.
    with pytest.raises(BudgetExceededError):
        plan_release(MODEL, {"model": "pflr", "epsilon": 6.5, "out": str(store)})


def test_model_run_reserves_its_declared_cost_and_stays_charged_after_noise(
        adult_file, tmp_path, monkeypatch):
    """Rule 5: a model run holds its declared cost (not the dataset's whole remaining ρ)
    before its first private read; a failure after noise stays charged."""
    from privfair.release.kinds.model import train as module

    store, contract = tmp_path / "store", load_contract(contract_path("adult"))
    seen: list[float] = []
    real_read = module.read_private

    def watch_read(plan):
        seen.append(read_lifetime_ledger(None, contract).epsilon_spent())
        return real_read(plan)

    def crash(*args, **kwargs):
        raise RuntimeError("crash while training")

    params = {"model": "privlr", "epsilon": 2.0, "data": str(adult_file), "out": str(store),
              "holdout": 0.0}
    with monkeypatch.context() as patched:  # not undo(): it would drop the test registry
        patched.setattr(module, "read_private", watch_read)
        patched.setattr(module, "_train_functional", crash)
        with pytest.raises(RuntimeError):
            train(params, tmp_path)
    # the declared cost (its curve: ε 2 at the run's δ = the lifetime's), not the whole rest
    assert len(seen) == 1 and 1.9 < seen[0] <= 2.0 * (1 + 1e-8)
    book = read_lifetime_ledger(None, contract)
    assert book.epsilon_spent() == pytest.approx(seen[0])  # noise was drawn: stays charged
    assert book.pending[0]["state"] == "spent, not published"

    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry2"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "registry2") + "-client")
    final = train({**params, "out": str(tmp_path / "store2")}, tmp_path)
    book = read_lifetime_ledger(tmp_path / "store2", contract)
    manifest = json.loads((final / "manifest.json").read_text())
    assert not book.pending
    assert book.epsilon_spent() == pytest.approx(manifest["lifetime"]["charge_epsilon"])
    assert book.epsilon_spent() <= seen[0] * (1 + 1e-9)  # at most the declared cost


def test_a_fixed_seed_needs_the_insecure_test_mode(tmp_path):
    """Issue 10.3 for model releases: a seed without insecure_seed is refused up front."""
    with pytest.raises(ReleaseInputError, match="insecure_seed"):
        run_release(MODEL, {"model": "pflr", "epsilon": 1.0, "seed": 1,
                            "out": str(tmp_path)})
