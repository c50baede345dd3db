"""Several protected attributes, stated (issue 34.2).

TOT over three protected columns formed 40 intersectional groups and stayed infeasible up to
η = 0.5 without saying the gap it reached, the smallest workable η, or that groups multiply;
nothing let it use one constraint per attribute. The contract's ``fairness:`` block now says
which protected attributes are constrained and how they form groups.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.schema import load_contract, parse_contract
from privfair.contracts.tot_settings import tot_setting
from privfair.core.errors import ContractError, PrivfairError
from privfair.fair.tot import InfeasibleFairnessError, TOTransform
from privfair.release.run import release_table
from privfair.release.tabular.post_noise import tot_input_path
from privfair.store.registry import read_lifetime_ledger

DOMAIN = {"a": 2, "b": 4, "c": 5, "x": 3, "y": 2}


def three_protected(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Codes with three protected attributes (2 x 4 x 5 = 40 groups); the outcome rate
    depends on each of them and on one combination in particular."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.integers(0, 2, n), rng.integers(0, 4, n), rng.integers(0, 5, n)
    rate = 0.2 + 0.25 * a + 0.08 * b - 0.04 * c + 0.1 * ((a == 1) & (b == 3) & (c == 0))
    y = (rng.random(n) < np.clip(rate, 0.02, 0.98)).astype(np.int64)
    return pd.DataFrame({"a": a, "b": b, "c": c, "x": rng.integers(0, 3, n), "y": y})


def distortion(old, new):
    return np.abs(new["x"] - old["x"]) * 1.0 + np.where(old["y"] != new["y"], 1.0, 0.0)


def transform(groups: str, eta: float) -> TOTransform:
    return TOTransform(d_cols=["a", "b", "c"], x_cols=["x"], y_col="y", domain=DOMAIN,
                       eta=eta, distortion=distortion, clist=[0.99, 1.99], dlist=[0.15, 0.0],
                       groups=groups)


def test_per_attribute_meets_an_eta_the_intersectional_groups_cannot():
    frame = three_protected()
    with pytest.raises(InfeasibleFairnessError) as info:
        transform("intersectional", 0.2).fit(frame)
    assert info.value.groups == {"intersectional": 40}
    fitted = transform("per_attribute", 0.2).fit(frame)
    record = fitted.discrimination_
    assert record["grouping"] == "per_attribute" and set(record["per_attribute"]) == {
        "a", "b", "c"}
    for attribute, size in (("a", 2), ("b", 4), ("c", 5)):
        table = np.asarray(record["per_attribute"][attribute]["q_outcome_given_group"])
        assert table.shape == (size, 2)
        assert (table.max(axis=0) - table.min(axis=0)).max() <= 0.2 + 1e-6
        # computed from the map: the input's gap on a was far above eta
    assert record["per_attribute"]["a"]["input_max_additive_gap"] > 0.25
    assert record["max_additive_gap"] <= 0.2 + 1e-6


@pytest.mark.parametrize("groups", ["intersectional", "per_attribute"])
def test_infeasible_names_the_gap_reached_and_the_smallest_feasible_eta(groups):
    frame = three_protected()
    with pytest.raises(InfeasibleFairnessError) as info:
        transform(groups, 0.05).fit(frame)
    err = info.value
    assert err.smallest_eta >= err.smallest_gap > 0.05
    assert err.smallest_eta - err.smallest_gap < 2e-4
    message = str(err)
    assert f"{err.smallest_gap:.4g}" in message and f"--eta {err.smallest_eta:g}" in message
    if groups == "intersectional":
        assert "formed 40 groups" in message and "per_attribute" in message
    else:
        assert "a 2 groups, b 4 groups, c 5 groups" in message
    # the suggestion is feasible, and anything clearly below the gap is not
    fitted = transform(groups, err.smallest_eta).fit(frame)
    assert fitted.discrimination_["max_additive_gap"] <= err.smallest_eta + 1e-6
    with pytest.raises(InfeasibleFairnessError):
        transform(groups, err.smallest_gap - 2e-3).fit(frame)


def test_the_ratio_form_suggests_a_feasible_eta_by_bisection():
    frame = three_protected()
    tot = transform("per_attribute", 0.05)
    tot.discrimination = "ratio"
    with pytest.raises(InfeasibleFairnessError) as info:
        tot.fit(frame)
    suggested = info.value.smallest_eta
    tot.eta = suggested
    assert tot.fit(frame).discrimination_["max_ratio_gap"] <= suggested + 1e-6
    tot.eta = suggested * 0.97
    with pytest.raises(InfeasibleFairnessError):
        tot.fit(frame)


# --- the contract -------------------------------------------------------------------------

CONTRACT = """
name: three
version: "1"
columns:
  - {name: a, type: categorical, categories: [a0, a1]}
  - {name: b, type: categorical, categories: [b0, b1, b2, b3]}
  - {name: c, type: categorical, categories: [c0, c1, c2, c3, c4]}
  - {name: x, type: categorical, categories: [x0, x1, x2]}
  - {name: y, type: categorical, categories: [low, high]}
roles:
  protected: [a, b, c]
  admissible: [x]
  outcome: [y]
budget: {epsilon: 100.0, delta: 1.0e-6}
tot:
  features: [x]
  distortion:
    combine: sum
    thresholds: [0.99, 1.99]
    bounds: [0.15, 0.0]
    columns:
      x: {ordinal: [0, 1, 2]}
      y: {ordinal: [0, 1]}
"""


def test_the_fairness_block_sets_the_constrained_attributes_and_grouping():
    default = parse_contract(CONTRACT)
    setting = tot_setting(default, eta=0.1)
    assert setting.protected == ("a", "b", "c") and setting.groups == "intersectional"
    stated = parse_contract(CONTRACT + "fairness: {protected: [a, c], groups: per_attribute}\n")
    setting = tot_setting(stated, eta=0.1)
    assert setting.protected == ("a", "c") and setting.groups == "per_attribute"
    assert default.fingerprint() != stated.fingerprint()
    assert "fairness" not in default.model_dump() or default.fairness is None


@pytest.mark.parametrize(("block", "message"), [
    ("fairness: {protected: [a, x]}", r"fairness.protected: \['x'\] are not protected"),
    ("fairness: {protected: [a, a]}", "fairness.protected: a column is listed twice"),
    ("fairness: {groups: pairwise}", "fairness.groups"),
    ("fairness: {protected: []}", "fairness.protected"),
])
def test_a_bad_fairness_block_is_refused_naming_the_field(block, message):
    with pytest.raises(ContractError, match=message):
        parse_contract(CONTRACT + block + "\n")


def _params(tmp_path, text: str, **kw) -> dict:
    contract = tmp_path / "three.yaml"
    contract.write_text(text)
    data = tmp_path / "three.parquet"
    if not data.exists():
        codes = three_protected(3000, seed=1)
        labels = {"a": ["a0", "a1"], "b": ["b0", "b1", "b2", "b3"],
                  "c": ["c0", "c1", "c2", "c3", "c4"], "x": ["x0", "x1", "x2"],
                  "y": ["low", "high"]}
        pd.DataFrame({k: np.asarray(v)[codes[k]] for k, v in labels.items()}).to_parquet(
            data, index=False)
    return {"contract": str(contract), "data": str(data), "epsilon": 20.0, "delta": 1e-6,
            "method": "mst", "out": str(tmp_path / "releases"), "max_iters": 200,
            "work_dir": str(tmp_path / "work"), "fairness_transform": "tot", **kw}


def test_release_per_attribute_publishes_and_resume_takes_the_suggested_eta(tmp_path, capsys):
    # intersectional at the stated eta: infeasible; the run stays charged, the message
    # names the smallest feasible eta, and resuming with it publishes at no privacy cost
    with pytest.raises(PrivfairError, match="formed 40 groups") as info:
        release_table(_params(tmp_path, CONTRACT, eta=0.2))
    message = str(info.value)
    suggested = float(message.split("--resume RUN --eta ")[1].split(" ")[0])
    assert suggested > 0.2
    (pending,) = read_lifetime_ledger(None, load_contract(tmp_path / "three.yaml")).pending
    run_id = pending["run_id"]
    kept = tot_input_path(tmp_path / "work", run_id)
    assert kept.stat().st_mode & 0o777 == 0o600
    # the command the message names, as a publisher types it
    command = message.split("with ")[1].split(" (")[0].replace("RUN", run_id).split()
    assert command == ["--resume", run_id, "--eta", f"{suggested:g}"]
    capsys.readouterr()
    code = main(["release", *command, "--work-dir", str(tmp_path / "work"), "--no-prefect"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    folder = Path(captured.out.strip().splitlines()[-1])
    record = json.loads((folder / "manifest.json").read_text())["fairness_transform"]
    assert record["parameters"]["eta"] == suggested
    # fitted on the table the message was about, not a fresh sample with its own smallest eta
    assert "infeasible TOT" in record["fitted_on"]
    assert record["achieved_discrimination"]["n_groups"] == 40
    assert record["fairness_check"]["passed"]

    # per attribute at the same stated eta: publishes, every attribute within it
    text = CONTRACT + "fairness: {groups: per_attribute}\n"
    contract = tmp_path / "per.yaml"
    contract.write_text(text.replace("name: three", "name: three-per"))
    folder = release_table({**_params(tmp_path, CONTRACT, eta=0.2),
                            "contract": str(contract)})
    record = json.loads((folder / "manifest.json").read_text())["fairness_transform"]
    assert record["parameters"]["groups"] == "per_attribute"
    per = record["achieved_discrimination"]["per_attribute"]
    assert set(per) == {"a", "b", "c"}
    assert all(t["max_additive_gap"] <= 0.2 + 1e-6 for t in per.values())


# --- the fair GANs ------------------------------------------------------------------------


def _trainer(method: str, constrained: tuple[str, ...]):
    torch = pytest.importorskip("torch")
    from privfair.core.domain import Domain
    from privfair.generative import gan

    domain = Domain(("a", "s", "b", "x", "y"), (3, 2, 2, 4, 2))
    config = gan.GANConfig(method=method, epochs=1, batch_size=50, hidden=16,
                           discriminator_hidden=16, noise_dim=8, constrained=constrained)
    dag = (gan.parse_dag({"edges": [["s", "x"], ["x", "y"], ["s", "y"], ["b", "y"],
                                    ["a", "y"]]}, domain, protected=("s", "b"),
                         outcome=("y",)) if method == "cfgan" else None)
    return gan._Trainer(config, domain, "s", "y", dag, {"s": [0.5, 0.5], "y": [0.5, 0.5]},
                        torch.Generator().manual_seed(0), torch.device("cpu"), 50.0), domain


@pytest.mark.parametrize("method", ["fairgan", "fairgan-plus"])
def test_fairgan_adversaries_constrain_every_protected_attribute(method):
    trainer, domain = _trainer(method, ("s", "a", "b"))
    values, terms = trainer.fairness_terms(64)
    assert [name for name, _, _ in terms] == ["D2", "D2:a", "D2:b"]
    hidden = set(trainer.layout.columns(["s", "a", "b"]))
    for (name, inputs, target), attribute in zip(terms, ("s", "a", "b"), strict=True):
        assert trainer.adversaries[name].outputs == domain.size(attribute)
        assert torch_equal(target, values[attribute].argmax(1))
        # no head sees a constrained attribute: each must find it in (X, Y) alone
        assert not hidden & set(trainer.not_s) and inputs.shape[1] == len(trainer.not_s)
    if method == "fairgan-plus":
        assert {"D3", "D3:a", "D3:b"} <= set(trainer.adversaries)
    trainer.public_step()  # every head trains and the generator takes each gain


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_cfgan_intervenes_on_each_binary_protected_attribute():
    trainer, _ = _trainer("cfgan", ("s", "b"))
    _, terms = trainer.fairness_terms(32)
    assert [name for name, _, _ in terms] == ["D2", "D2:b"]
    trainer.public_step()
    from privfair.core.domain import Domain
    from privfair.generative import gan

    with pytest.raises(ValueError, match="protected attribute 'a' must be binary"):
        gan._check_inputs(gan.GANConfig(method="cfgan", constrained=("s", "a")),
                          Domain(("a", "s", "y"), (3, 2, 2)), "s", "y",
                          {"edges": [["s", "y"], ["a", "y"]]})


def test_a_fair_gan_release_states_parity_per_protected_attribute(tmp_path):
    pytest.importorskip("torch")
    contract = tmp_path / "gan.yaml"
    contract.write_text(CONTRACT.replace("name: three", "name: three-gan"))
    request = {**_params(tmp_path, CONTRACT), "contract": str(contract), "method": "fairgan",
               "gan_epochs": 1, "epsilon": 5.0, "fairness_transform": "none",
               "allow_unfair": True, "seed": 3, "insecure_seed": True}
    folder = release_table(request)
    manifest = json.loads((folder / "manifest.json").read_text())
    check = manifest["fairness_check"]
    assert manifest["method"]["gan"]["constrained"] == ["a", "b", "c"]
    assert check["constrained"] == ["a", "b", "c"] and "a, b, c" in check["criterion"]
    per = check["data_fairness"]["per_protected"]
    assert list(per) == ["a", "b", "c"]
    synthetic = pd.read_parquet(folder / "synthetic.parquet")
    high = synthetic["y"] == "high"
    for attribute in ("a", "b", "c"):
        rates = high.groupby(synthetic[attribute]).mean()
        stated = [r for r in per[attribute]["positive_rate_by_group"] if np.isfinite(r)]
        assert len(per[attribute]["positive_rate_by_group"]) == DOMAIN[attribute]
        assert sorted(stated) == pytest.approx(sorted(rates.to_list()))
        assert per[attribute]["constrained"] is True
        gap = rates.max() - rates.min()
        assert abs(per[attribute]["rd"]) == pytest.approx(gap)
    worst = max(abs(p["rd"]) for p in per.values())
    assert check["passed"] is (worst <= 0.05)
