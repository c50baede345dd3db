import numpy as np
import pandas as pd
import pytest

from privfair.contracts.datasets import contract_path, load_dataset
from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import load_contract
from privfair.core.errors import DomainError


@pytest.fixture(scope="module")
def adult():
    return load_contract(contract_path("adult")), load_dataset("adult").head(500)


def test_adult_encoding_is_one_hot_with_a_public_row_norm(adult):
    contract, frame = adult
    encoding = FeatureEncoding.from_contract(contract)
    assert (encoding.outcome, encoding.positive, encoding.group) == ("income", ">50K", "sex")
    assert encoding.group_labels == ("Female", "Male")
    names = [n for n, _ in encoding.features]
    assert "sex" not in names and "income" not in names and len(names) == 11
    x = encoding.transform(frame, contract)
    assert x.shape == (500, encoding.dimension) == (500, len(encoding.feature_names))
    assert set(np.unique(x)) == {0.0, 1.0}
    np.testing.assert_array_equal(x.sum(axis=1), encoding.row_l1_bound)
    y, group = encoding.labels_and_groups(frame, contract)
    np.testing.assert_array_equal(y, (frame["income"].str.rstrip(".") == ">50K").to_numpy())
    np.testing.assert_array_equal(group, (frame["sex"] == "Male").to_numpy().astype(int))


def test_prediction_inputs_need_neither_outcome_nor_group(adult):
    contract, frame = adult
    encoding = FeatureEncoding.from_contract(contract)
    full = encoding.transform(frame, contract)
    np.testing.assert_array_equal(
        encoding.transform(frame.drop(columns=["income", "sex", "fnlwgt"]), contract), full)
    with pytest.raises(DomainError, match=r"missing columns \['age'\]"):
        encoding.transform(frame.drop(columns=["age"]), contract)
    assert FeatureEncoding.from_dict(encoding.to_dict()) == encoding


def test_bad_roles_refused(adult):
    contract, _ = adult
    with pytest.raises(DomainError, match="positive"):
        FeatureEncoding.from_contract(contract, positive="rich")
    with pytest.raises(DomainError, match="group"):
        FeatureEncoding.from_contract(contract, group="income")
    with pytest.raises(DomainError, match="group: .*'colour'"):
        FeatureEncoding.from_contract(contract, group="colour")
    with pytest.raises(DomainError, match="binary outcome"):
        FeatureEncoding.from_contract(contract, outcome="race")


def test_out_of_contract_value_drops_the_row_from_features_labels_and_groups(adult):
    """Issue 21.2: a value never raises; its policy (drop) leaves the row out of the
    features, the labels and the groups alike, and the tally counts it."""
    from privfair.contracts.encoding import PolicyTally, policy_cells

    contract, frame = adult
    encoding = FeatureEncoding.from_contract(contract)
    bad = pd.DataFrame(frame.copy())
    bad.loc[bad.index[0], "workclass"] = "Astronaut-secret"
    tally = PolicyTally()
    x = encoding.transform(bad, contract, tally=tally)
    y, groups = encoding.labels_and_groups(bad, contract)
    assert len(x) == len(y) == len(groups) == len(bad) - 1
    assert tally.to_dict() == {"workclass": {"dropped": 1}}
    assert ("workclass", "dropped") in policy_cells(encoding.used_contract(contract))
