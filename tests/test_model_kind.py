"""The ``model`` kind on the release protocol: regression tests of issues 20, 21.1, 21.4 and
25.1 (each fails on the hand-written ``privfair train`` it replaced)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import load_contract
from privfair.core.errors import ReleaseInputError
from privfair.release.kinds.model import train as module
from privfair.release.kinds.model.budget import functional_entries, plan_budget, policy_entry
from privfair.release.kinds.model.evaluation import TRIVIAL, noisy_metrics
from privfair.release.kinds.model.predict import constant_prediction, decision_function
from privfair.release.kinds.model.train import MODEL, holdout_mask
from privfair.release.protocol import plan_release, run_release
from privfair.release.seeds import kind_rng
from privfair.store.catalog import list_releases
from privfair.store.files import StoreError
from privfair.store.registry import read_lifetime_ledger, registry_ledgers


def params(contract: Path, data: Path, tmp_path: Path, **extra) -> dict:
    return {"contract": str(contract), "data": str(data), "model": "pflr", "epsilon": 1.0,
            "out": str(tmp_path / "store"), "work_dir": str(tmp_path / "work"), **extra}


def kinds_in_registry(contract: Path) -> list[str]:
    ledgers = registry_ledgers(load_contract(contract).name)
    return [e["kind"] for e in ledgers[0]["entries"]] if ledgers else []


# --- issue 20: seed, refusals before noise, declared cost ---------------------------------


def test_a_second_seeded_model_release_with_the_same_seed_is_refused(toy_contract,
                                                                   toy_parquet, tmp_path):
    seeded = {"seed": 7, "insecure_seed": True, "holdout": 0.0}
    run_release(MODEL, params(toy_contract, toy_parquet, tmp_path, **seeded))
    with pytest.raises(StoreError, match="seed"):
        run_release(MODEL, params(toy_contract, toy_parquet, tmp_path, epsilon=2.0,
                                  model="dpsgd", **seeded))
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    assert len(book.releases) == 1 and book.pending == []


@pytest.mark.parametrize("column, value", [("race", "Martian"), ("race", None),
                                           ("age", None)])
def test_bad_values_get_the_contracts_policy_and_never_refuse(
        column, value, toy_contract, toy_frame, tmp_path):
    """Issue 21.2: the contract's policy drops or maps the row; the release publishes."""
    frame = toy_frame.copy()
    if column == "age":
        frame["age"] = frame["age"].astype(float)
    frame.loc[3, column] = value
    data = tmp_path / "bad.parquet"
    frame.to_parquet(data, index=False)
    folder = run_release(MODEL, params(toy_contract, data, tmp_path))
    assert kinds_in_registry(toy_contract) == ["open", "reserve", "spend", "publish"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["validation"]["input"]["refused_on_values"] is False
    assert not list((tmp_path / "work" / "staging").glob("*/*"))


def test_a_missing_column_is_refused_from_the_schema_before_the_reservation(
        toy_contract, toy_csv, tmp_path):
    data = tmp_path / "no_edu.csv"
    pd.read_csv(toy_csv).drop(columns=["edu"]).to_csv(data, index=False)
    with pytest.raises(ReleaseInputError, match="missing column\\(s\\) \\['edu'\\]"):
        run_release(MODEL, params(toy_contract, data, tmp_path))
    assert kinds_in_registry(toy_contract) == []


@pytest.mark.parametrize("bad", [{"hidden": [-5]}, {"epsilon": 1e-300}, {"holdout": 1.0},
                                 {"evaluation_share": 0.0}])
def test_bad_numbers_are_refused_by_the_parameter_model(bad, toy_contract, toy_parquet,
                                                        tmp_path, capsys):
    with pytest.raises(ReleaseInputError, match=next(iter(bad))):
        run_release(MODEL, params(toy_contract, toy_parquet, tmp_path, **bad))
    args = ["train", "--contract", str(toy_contract), "--data", str(toy_parquet),
            "--model", "dpsgd", "--epsilon", "1", "--out", str(tmp_path / "store"),
            "--no-prefect"]
    for name, value in bad.items():
        args += [f"--{name.replace('_', '-')}",
                 *(map(str, value) if isinstance(value, list) else [str(value)])]
    assert main(args) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert kinds_in_registry(toy_contract) == []


def test_functional_cost_is_the_curve_of_its_planned_entries(toy_contract, toy_parquet,
                                                             toy_frame, tmp_path):
    planned = plan_release(MODEL, params(toy_contract, toy_parquet, tmp_path, holdout=0.0))
    from privfair.core.accounting import PrivacyLedger

    budget = planned.plan.budget
    scratch = PrivacyLedger(epsilon_budget=1.0, delta=1e-6, accounting="rdp")
    # the noisy counts of rows the policies touched (issue 21.2), then the model
    scratch.spend(policy_entry(budget.policy_rho, sensitivity=budget.policy_sensitivity,
                               cells=budget.policy_cells)[1])
    for entry in functional_entries("pflr", budget.model_epsilon, fairness_share=0.5):
        scratch.spend(entry)
    np.testing.assert_allclose(planned.cost.rdp, scratch.rdp())
    # Public inputs only: a tenth of the rows declares the same cost.
    small = tmp_path / "small.parquet"
    toy_frame.head(150).to_parquet(small, index=False)
    assert plan_release(MODEL, params(toy_contract, small, tmp_path, holdout=0.0)
                        ).cost.rdp == planned.cost.rdp


def test_dpsgd_reserves_its_declared_curve_and_spends_no_more_at_any_order(
        toy_contract, toy_parquet, tmp_path):
    pytest.importorskip("torch")
    # 1500 toy rows against a public bound of 5000: the run gets more noise, not more cost.
    request = params(toy_contract, toy_parquet, tmp_path, model="dpsgd", epsilon=2.0,
                     epochs=1, min_rows=5000, holdout=0.0)
    planned = plan_release(MODEL, request)
    budget = planned.plan.budget
    folder = run_release(MODEL, request)
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    (release,) = book.releases
    manifest = json.loads((folder / "manifest.json").read_text())
    spent = np.asarray(manifest["guarantee"]["rdp_spent"])
    # charged its declared curve (issue 41.3: q follows the noisy count, so only the curve
    # fixed before any read bounds the run), its own at or below it at every order
    np.testing.assert_allclose(release["rdp"], planned.cost.rdp)
    assert np.all(spent <= np.asarray(planned.cost.rdp))
    assert "rho" not in release  # never a ρ, let alone "the whole remaining budget"
    assert 0 < book.epsilon_spent() <= 2.0 * (1 + 1e-9)
    gradients = manifest["ledger"][2]  # after the policy counts and the row count
    assert gradients["sample_rate"] > budget.sample_rate  # q = b/ñ with ñ < min_rows
    assert manifest["hyper_parameters"]["noise_multiplier"] > budget.noise_multiplier
    assert manifest["guarantee"]["declared"]["dpsgd_declared"]["min_rows"] == 5000
    # The declared cost depends on min_rows, a public parameter.
    other = plan_budget(model="dpsgd", epsilon=2.0, delta=1e-6, holdout=0.0,
                        evaluation_share=0.1, groups=2, min_rows=100, epochs=1)
    assert other.curve != budget.curve


# --- issue 21.1 / 25.1: no statistic of real rows; trivial models ----------------------


def _held_out(toy_frame, contract, seed, holdout, weights, encoding):
    """The exact held-out confusion counts, replaying the run's split (test only)."""
    rng = kind_rng(seed, "model", "split", stages=MODEL.seed_stages)
    held = holdout_mask(rng, len(toy_frame), holdout)
    frame = toy_frame[held]
    y, groups = encoding.labels_and_groups(frame, contract)
    pred = decision_function(weights, encoding.transform(frame, contract)) > 0
    counts = np.zeros((2, 2, 2))
    np.add.at(counts, (groups, y.astype(int), pred.astype(int)), 1)
    return held, counts


def test_the_card_publishes_only_dp_figures_of_the_held_out_rows(toy_contract, toy_frame,
                                                                 tmp_path, monkeypatch):
    contract = load_contract(toy_contract)
    runs = {}
    for name in ("D", "D-prime"):
        frame = toy_frame
        if name == "D-prime":  # one held-out person's label changed
            held = holdout_mask(kind_rng(5, "model", "split", stages=MODEL.seed_stages),
                                len(toy_frame), 0.3)
            person = int(np.flatnonzero(held)[0])
            frame = toy_frame.copy()
            frame.loc[person, "income"] = "high" if frame.loc[person, "income"] == "low" \
                else "low"
        data = tmp_path / f"{name}.parquet"
        frame.to_parquet(data, index=False)
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / f"registry-{name}"))
        # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / f"registry-{name}") + "-client")
        folder = run_release(MODEL, params(toy_contract, data, tmp_path / name, seed=5,
                                           insecure_seed=True, holdout=0.3))
        runs[name] = json.loads((folder / "manifest.json").read_text()), folder
    (m1, f1), (m2, f2) = runs["D"], runs["D-prime"]
    # Same seed, same training rows: only the noisy evaluation differs.
    volatile = {"started_at", "published_at", "run_id", "files", "metrics", "trivial"}
    assert {k: v for k, v in m1.items() if k not in volatile} == \
        {k: v for k, v in m2.items() if k not in volatile}
    assert (f1 / "weights.npz").read_bytes() == (f2 / "weights.npz").read_bytes()
    metrics = m1["metrics"]
    assert metrics["privacy"].startswith("DP: ") and "Gaussian mechanism" in metrics["privacy"]
    encoding = FeatureEncoding.from_dict(m1["features"])
    with np.load(f1 / "weights.npz") as npz:
        weights = {k: npz[k] for k in npz.files}
    held, exact = _held_out(toy_frame, contract, 5, 0.3, weights, encoding)
    noisy = np.asarray([metrics["noisy_confusion"][g] for g in encoding.group_labels])
    sigma = m1["guarantee"]["declared"]["evaluation"]["sigma"]
    # The published counts are the exact ones plus Gaussian noise, never the exact ones...
    assert not np.allclose(noisy, exact)
    assert np.all(np.abs(noisy - exact) < 6 * sigma)
    # ...and every figure is derived from them (counts clipped at 0), not from real rows.
    c = np.maximum(noisy, 0)
    assert metrics["accuracy"] == pytest.approx((c[:, 0, 0].sum() + c[:, 1, 1].sum())
                                                / c.sum(), abs=1e-3)
    exact_accuracy = (exact[:, 0, 0].sum() + exact[:, 1, 1].sum()) / exact.sum()
    assert metrics["accuracy"] != exact_accuracy
    # D and D' differ by one person moving between two cells; the noise is the same draw.
    noisy2 = np.asarray([m2["metrics"]["noisy_confusion"][g] for g in encoding.group_labels])
    assert np.abs(noisy2 - noisy).sum() == pytest.approx(2, abs=1e-2)
    # The catalog's verdict comes from the noisy figures.
    catalog = list_releases(tmp_path / "D" / "store")
    assert catalog[0]["fairness_passed"] == bool(metrics["fair"])


def test_a_model_that_predicts_one_class_is_flagged_trivial_and_never_fair(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    def always_negative(context, x, y, groups, ledger):
        return {"coef": -np.ones(x.shape[1])}, {"note": "test"}

    monkeypatch.setattr(module, "_train_functional", always_negative)
    folder = run_release(MODEL, params(toy_contract, toy_parquet, tmp_path, holdout=0.3))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["trivial"] is True and manifest["metrics"]["trivial"] is True
    assert manifest["metrics"]["fair"] is False
    assert TRIVIAL in (folder / "model_card.md").read_text()
    assert list_releases(tmp_path / "store")[0]["fairness_passed"] is False


def test_trivial_detection_without_data():
    encoding = FeatureEncoding((("a", ("x", "y")), ("b", ("u", "v", "w"))), "o", "1", "g",
                               ("F", "M"))
    assert constant_prediction({"coef": -np.ones(6)}, encoding) == 0
    assert constant_prediction({"coef": np.ones(6)}, encoding) == 1
    assert constant_prediction({"coef": np.array([3, -3, 0, 0, 0, 0.5])}, encoding) is None
    # RD = 0 between groups, but no held-out row shows as predicted positive: the counts
    # cannot show the positive class, so no fairness verdict; triviality is the model's
    # own (issue 35.1), decided from its weights, never from noisy counts.
    confusion = [[[300.4, 1.2], [80.3, -0.7]], [[290.1, -2.0], [95.6, 0.4]]]
    m = noisy_metrics(confusion, ("F", "M"), sigma=1.0, epsilon=1.0, delta=1e-6)
    assert m["trivial"] is False and m["fair"] is False
    assert m["within_noise_of_zero"] == ["positive"]
    m = noisy_metrics(confusion, ("F", "M"), sigma=1.0, epsilon=1.0, delta=1e-6, constant=0)
    assert m["trivial"] is True and m["fair"] is False
    # both classes clearly predicted and a small RD: fair
    clear = [[[200, 60], [40, 90]], [[210, 62], [38, 95]]]
    m = noisy_metrics(clear, ("F", "M"), sigma=1.0, epsilon=1.0, delta=1e-6)
    assert m["within_noise_of_zero"] == [] and m["fair"] is True


# --- issue 21.4: the held-out split ------------------------------------------------------


def test_each_row_is_held_out_independently():
    first = holdout_mask(kind_rng(3, "model", "split", stages=MODEL.seed_stages), 1000, 0.2)
    more = holdout_mask(kind_rng(3, "model", "split", stages=MODEL.seed_stages), 1001, 0.2)
    # Adding a person never moves another between training and held-out rows...
    np.testing.assert_array_equal(more[:1000], first)
    # ...and the held-out size is random, not round(0.2 n).
    sizes = {int(holdout_mask(np.random.default_rng(s), 1000, 0.2).sum()) for s in range(5)}
    assert len(sizes) > 1
    assert not holdout_mask(np.random.default_rng(0), 10, 0.0).any()


def test_holdout_zero_trains_on_every_row(toy_contract, toy_parquet, toy_frame, tmp_path,
                                          monkeypatch):
    seen = {}
    real = module._train_functional

    def spy(context, x, y, groups, ledger):
        seen["rows"] = len(x)
        return real(context, x, y, groups, ledger)

    monkeypatch.setattr(module, "_train_functional", spy)
    folder = run_release(MODEL, params(toy_contract, toy_parquet, tmp_path, holdout=0.0))
    assert seen["rows"] == len(toy_frame)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["metrics"] is None
    assert [e["name"] for e in manifest["ledger"]][-1] == "functional mechanism (PFLR)"


# --- the CLI and Prefect paths ------------------------------------------------------------


def test_train_dry_run_prints_the_cost_and_charges_nothing(toy_contract, toy_parquet,
                                                          tmp_path, capsys):
    code = main(["train", "--contract", str(toy_contract), "--data", str(toy_parquet),
                 "--model", "dpsgd-f", "--epsilon", "1", "--out", str(tmp_path / "store"),
                 "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0 and "cost: its Renyi curve, epsilon" in captured.out
    assert "dry run" in captured.out
    assert kinds_in_registry(toy_contract) == []


@pytest.mark.prefect
def test_train_flow_publishes_a_model_release(prefect_harness, toy_contract, toy_parquet,
                                              tmp_path):
    from flows.kinds import FLOWS

    folder = FLOWS["train"](model="pflr", epsilon=0.5, contract=str(toy_contract),
                            data=str(toy_parquet), out=str(tmp_path / "store"))
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    assert folder.endswith("v1") and manifest["model"] == "pflr"
    assert manifest["seed_policy"].startswith("fresh OS entropy")
    assert manifest["metrics"]["privacy"].startswith("DP: ")
