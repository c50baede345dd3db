"""Issue 45.5: public facts are checked before the reservation. A 100k-category column in a
PFLR model (MemoryError: 74.5 GiB), ``--hidden 200000 200000`` (160 GB), ``--alpha 1e308``
(an infinite sensitivity) and ``--batch-size 10^30`` all failed after noise was drawn, and
stayed charged. Each is now refused by the plan, in one line naming the parameter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from privfair.release.kinds.model import resources
from privfair.release.kinds.model.train import TrainParams, check


def _params(contract, data, tmp_path, **kw) -> TrainParams:
    base = {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-6,
            "model": "dpsgd", "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work")}
    return TrainParams(**(base | kw))


def test_the_defaults_fit(toy_contract, toy_parquet, tmp_path):
    plan = check(_params(toy_contract, toy_parquet, tmp_path))
    assert plan.params.model == "dpsgd"


def test_hidden_layers_too_big_for_this_machine_are_refused_by_the_plan(
        toy_contract, toy_parquet, tmp_path):
    with pytest.raises(resources.ResourceError) as refused:
        check(_params(toy_contract, toy_parquet, tmp_path, hidden=[200000, 200000]))
    message = str(refused.value)
    assert "\n" not in message and "--hidden" in message and "memory" in message


def test_a_functional_model_over_a_wide_domain_is_refused_by_the_plan(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    # d one-hot inputs give a d x d coefficient matrix: 8 d^2 bytes per copy
    from privfair.release import resources as shared

    monkeypatch.setattr(shared, "physical_memory", lambda: 2 * 2**30)
    with pytest.raises(resources.ResourceError) as refused:
        resources.check_model_resources(model="pflr", dimension=20_001, hidden=[],
                                        batch_size=256, flag="--contract")
    assert "pflr" in str(refused.value) and "GiB" in str(refused.value)
    resources.check_model_resources(model="pflr", dimension=135, hidden=[], batch_size=256,
                                    flag="--contract")


@pytest.mark.parametrize(("field", "value"), [("alpha", 1e308), ("batch_size", 10**30),
                                              ("hidden", [10**7]), ("clip", 1e308),
                                              ("min_rows", 10**30), ("learning_rate", 1e308)])
def test_absurd_numbers_are_refused_by_the_parameters(toy_contract, toy_parquet, tmp_path,
                                                      field, value):
    with pytest.raises(ValidationError) as refused:
        _params(toy_contract, toy_parquet, tmp_path, **{field: value})
    assert field in str(refused.value)


def test_the_estimate_grows_with_the_model():
    small = resources.model_bytes(model="dpsgd", dimension=135, hidden=[], batch_size=256)
    big = resources.model_bytes(model="dpsgd", dimension=135, hidden=[200000, 200000],
                                batch_size=256)
    assert small < 2**20 and big > 10**11
