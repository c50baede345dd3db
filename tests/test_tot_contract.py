"""TOT for any contract: the `tot:` block, its distortion in YAML, and preflight refusals."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.datasets import contract_path
from privfair.contracts.schema import load_contract, parse_contract
from privfair.contracts.tot_settings import tot_setting
from privfair.core.errors import ContractError
from privfair.fair.tot import safes_adult_distortion, safes_compas_distortion
from privfair.release.run import release_table as run_release
from privfair.release.tabular import plan
from privfair.release.tabular.plan import ReleaseParams


def all_pairs(contract, columns):
    sizes = [len(contract.labels(c)) for c in columns]
    cells = np.array(list(itertools.product(*(range(s) for s in sizes))))
    old = np.repeat(cells, len(cells), axis=0)
    new = np.tile(cells, (len(cells), 1))
    return ({c: old[:, i] for i, c in enumerate(columns)},
            {c: new[:, i] for i, c in enumerate(columns)})


@pytest.mark.parametrize("name, registered", [("adult_safes", safes_adult_distortion),
                                              ("compas", safes_compas_distortion)])
def test_shipped_yaml_distortions_equal_the_safes_functions(name, registered):
    contract = load_contract(contract_path(name))
    setting = tot_setting(contract)
    assert setting.source == "contract"
    old, new = all_pairs(contract, [*setting.features, setting.outcome])
    np.testing.assert_array_equal(setting.distortion(old, new), registered(old, new))


CREDIT = """
name: credit
version: "1"
description: A 1,000-row credit table.
columns:
  - {name: checking, type: categorical, categories: [A11, A12, A13, A14]}
  - {name: duration, type: numeric, integer: true, bins: [0, 12, 24, 36, 72]}
  - name: purpose
    type: categorical
    categories: [business, car, education, furniture, radio/tv]
  - {name: amount, type: numeric, integer: true, bins: [0, 1000, 2500, 5000, 20000]}
  - {name: sex, type: categorical, categories: [female, male]}
  - {name: age, type: numeric, integer: true, bins: [18, 25, 35, 50, 80]}
  - {name: credit_risk, type: categorical, categories: [bad, good]}
roles:
  protected: [sex]
  admissible: [checking, amount]
  outcome: [credit_risk]
budget: {epsilon: 4.0, delta: 1.0e-6}
"""

TOT_BLOCK = """
tot:
  features: [duration, age]
  discrimination: additive
  eta: 0.05
  distortion:
    combine: sum
    thresholds: [0.99, 1.99]
    bounds: [0.2, 0.0]
    columns:
      duration: {ordinal: [0, 1, 2]}
      age: {ordinal: [0, 1, 2]}
      credit_risk: {changes: {good: {bad: 1}}, default: 0}
"""


def credit_frame(n: int = 1000) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    sex = rng.choice(["female", "male"], n)
    good = rng.random(n) < np.where(sex == "male", 0.8, 0.55)  # unfair on purpose
    return pd.DataFrame({
        "checking": rng.choice(["A11", "A12", "A13", "A14"], n),
        "duration": rng.integers(4, 72, n),
        "purpose": rng.choice(["car", "furniture", "radio/tv", "education", "business"], n),
        "amount": rng.integers(250, 18500, n), "sex": sex, "age": rng.integers(19, 76, n),
        "credit_risk": np.where(good, "good", "bad")})


def release_params(tmp_path, text: str, **kw) -> ReleaseParams:
    contract = tmp_path / "credit.yaml"
    contract.write_text(text)
    data = tmp_path / "credit.parquet"
    if not data.exists():
        credit_frame().to_parquet(data, index=False)
    base = {"contract": str(contract), "data": str(data), "epsilon": 4.0, "delta": 1e-6,
            "method": "mst", "seed": 2, "insecure_seed": True, "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work"), "fairness_transform": "tot"}
    return ReleaseParams(**{**base, **kw})


def test_tot_release_on_a_contract_that_declares_it(tmp_path):
    final = run_release(release_params(tmp_path, CREDIT + TOT_BLOCK))
    record = json.loads((final / "manifest.json").read_text())["fairness_transform"]
    assert record["applied"] and record["columns"] == {
        "protected": ["sex"], "features": ["duration", "age"], "outcome": "credit_risk"}
    assert record["parameters"]["eta"] == 0.05  # from the contract: no --eta given
    assert record["achieved_discrimination"]["max_additive_gap"] <= 0.05 + 1e-6


def test_without_a_tot_block_the_size_guard_refuses_at_preflight(tmp_path):
    p = release_params(tmp_path, CREDIT, eta=0.05)
    with pytest.raises(plan.ReleaseInputError) as info:
        plan.check(p)
    message = str(info.value)
    # Before: 9e13 variables refused only after every DP stage, suggesting functools.partial.
    assert "tot.features" in message and "partial" not in message
    assert not (tmp_path / "work").exists() and not (tmp_path / "releases").exists()


def test_contract_size_guard_names_the_contract_keys(tmp_path):
    text = CREDIT + TOT_BLOCK.replace("features: [duration, age]",
                                      "features: [duration, age, amount, purpose, checking]"
                                      ).replace("bounds: [0.2, 0.0]", "bounds: [0.2, 0.5]")
    text = text.replace("      age: {ordinal", "      amount: {ordinal: [0, 1]}\n"
                        "      purpose: {changes: {}, default: 1}\n"
                        "      checking: {ordinal: [0, 1]}\n      age: {ordinal")
    with pytest.raises(plan.ReleaseInputError,
                       match="contract key tot.features.*contract key tot.distortion.bounds.*"
                       "tot.max_variables"):
        plan.check(release_params(tmp_path, text.replace("eta: 0.05", "eta: 0.05\n"
                                                             "  max_variables: 100000")))


def test_a_registered_distortion_that_does_not_fit_is_refused_with_a_hint(tmp_path):
    compas = contract_path("compas").read_text()
    without = compas[:compas.index("\ntot:")] + "\n" + compas[compas.index("budget:"):]
    data = tmp_path / "compas.parquet"
    pd.read_parquet(contract_path("compas").parents[1] / "compas.parquet").to_parquet(data)
    contract = tmp_path / "compas.yaml"
    contract.write_text(without)
    p = ReleaseParams(contract=str(contract), data=str(data), epsilon=1.0, delta=1e-6,
                      out=str(tmp_path / "r"), work_dir=str(tmp_path / "w"),
                      fairness_transform="tot", eta=0.05)
    with pytest.raises(plan.ReleaseInputError, match="--distortion safes-compas"):
        plan.check(p)


@pytest.mark.parametrize("edit, message", [
    (("      age: {ordinal: [0, 1, 2]}\n", ""), "no penalty for moved column.*'age'"),
    (("features: [duration, age]", "features: [duration, sex]"), "protected or the outcome"),
    (("good: {bad: 1}", "great: {bad: 1}"), "'great' is not a label"),
    (("{ordinal: [0, 1, 2]}", "{ordinal: [1, 2]}"), "starts with 0"),
    (("thresholds: [0.99, 1.99]", "thresholds: [0.99]"), "one bound per threshold"),
    (("combine: sum", "combine: mean"), "tot.distortion.combine"),
])
def test_bad_tot_blocks_are_refused_naming_the_key(edit, message):
    with pytest.raises(ContractError, match=message):
        parse_contract(CREDIT + TOT_BLOCK.replace(*edit, 1))
