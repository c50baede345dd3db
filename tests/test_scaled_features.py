"""Scaled model inputs (``privfair.contracts.scaled_features``): Xu 2021's 40 Adult features."""

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.datasets import contract_path, load_dataset
from privfair.contracts.scaled_features import (
    ADULT_EDUCATION_ORDER,
    ScaledFeatureEncoding,
    xu2021_adult,
)
from privfair.contracts.schema import load_contract
from privfair.core.errors import DomainError


@pytest.fixture(scope="module")
def adult():
    frame = load_dataset("adult").head(2000)
    return load_contract(contract_path("adult")), frame[~(frame == "?").any(axis=1)]


def _row(**values):
    base = {"age": 17, "workclass": "Private", "education": "Preschool",
            "marital-status": "Married-civ-spouse", "occupation": "Tech-support",
            "relationship": "Wife", "race": "White", "sex": "Female", "capital-gain": 0,
            "capital-loss": 0, "hours-per-week": 1, "native-country": "Mexico",
            "income": "<=50K"}
    return {**base, **values}


def test_xu2021_adult_has_the_papers_forty_inputs(adult):
    contract, frame = adult
    encoding = xu2021_adult(contract)
    assert encoding.dimension == 40 == len(encoding.feature_names)
    assert [n.column for n in encoding.numbers] == ["age", "capital-gain", "capital-loss",
                                                     "hours-per-week"]
    assert [r.column for r in encoding.ranks] == ["education"]
    counts = {d.column: len(d.labels) for d in encoding.indicators}
    assert counts == {"workclass": 6, "marital-status": 6, "occupation": 13,
                      "relationship": 5, "race": 4, "native-country": 1}
    assert "sex" not in encoding.feature_columns and "income" not in encoding.feature_columns
    x = encoding.transform(frame, contract)
    assert x.shape == (len(frame), 40) and x.min() >= 0 and x.max() <= 1
    # Every column is used by these rows, and no row is past the public norm bound.
    assert (x.max(axis=0) > 0).all()
    assert np.linalg.norm(x, axis=1).max() <= encoding.row_l2_bound + 1e-6
    y, group = encoding.labels_and_groups(frame, contract)
    np.testing.assert_array_equal(y, (frame["income"].str.rstrip(".") == ">50K").to_numpy())
    np.testing.assert_array_equal(group, (frame["sex"] == "Male").to_numpy().astype(int))


def test_scaling_comes_from_the_contract_not_the_rows(adult):
    contract, _ = adult
    encoding = xu2021_adult(contract, reference="declared")
    rows = pd.DataFrame([
        _row(),
        _row(age=90, education="Doctorate", **{"hours-per-week": 99, "capital-gain": 5000,
                                               "native-country": "United-States"}),
        _row(age=53, education="HS-grad", workclass="State-gov", race="Black",
             **{"capital-gain": 99999, "capital-loss": 2500}),
        _row(workclass="?", occupation="?", **{"native-country": "?"})])
    x = encoding.transform(rows, contract)
    names = list(encoding.feature_names)
    col = {name: x[:, names.index(name)] for name in names}
    np.testing.assert_allclose(col["age"], [0, 1, 36 / 73, 0], atol=1e-6)
    np.testing.assert_allclose(col["hours-per-week"], [0, 1, 0, 0], atol=1e-6)
    # Capital amounts by the contract's finite bin edges, 0 to 10,000, clipped above.
    np.testing.assert_allclose(col["capital-gain"], [0, 0.5, 1, 0], atol=1e-6)
    np.testing.assert_allclose(col["capital-loss"], [0, 0, 0.25, 0], atol=1e-6)
    np.testing.assert_allclose(col["education"], [0, 1, 8 / 15, 0], atol=1e-6)
    np.testing.assert_array_equal(col["native-country=United-States"], [0, 1, 0, 0])
    np.testing.assert_array_equal(col["workclass=State-gov"], [0, 0, 1, 0])
    np.testing.assert_array_equal(col["race=Black"], [0, 0, 1, 0])
    # The reference labels (and "?", which complete-case rows never hold) are all zeros.
    assert x[0].sum() == 0 and x[3].sum() == 0
    # A row encodes the same alone as beside other rows: nothing is fitted to the data.
    for i in range(len(rows)):
        np.testing.assert_array_equal(encoding.transform(rows.iloc[[i]], contract), x[[i]])


def test_xu2021_reference_labels_are_the_sorted_first_by_default(adult):
    contract, frame = adult
    paper, declared = xu2021_adult(contract), xu2021_adult(contract, reference="declared")
    assert paper.dimension == declared.dimension == 40
    # pandas.get_dummies(drop_first=True) sorts the labels and drops the first.
    reference = {"workclass": "Federal-gov", "marital-status": "Divorced",
                 "occupation": "Adm-clerical", "relationship": "Husband",
                 "race": "Amer-Indian-Eskimo"}
    for dummy in paper.indicators:
        if dummy.column in reference:
            assert reference[dummy.column] not in dummy.labels
            others = [d for d in declared.indicators if d.column == dummy.column][0]
            # The declared reference (the contract's first label) is an indicator here.
            assert contract.labels(dummy.column)[0] in dummy.labels
            assert len(dummy.labels) == len(others.labels)
    rows = pd.DataFrame([_row(**{"workclass": "Federal-gov", "marital-status": "Divorced",
                                 "occupation": "Adm-clerical", "relationship": "Husband",
                                 "race": "Amer-Indian-Eskimo", "sex": "Male"}), _row()])
    x = paper.transform(rows, contract)
    assert x[0].sum() == 0 and x[1].sum() == 5  # Private, Married, Tech-support, Wife, White
    np.testing.assert_array_equal(declared.transform(rows, contract).sum(axis=1), [5, 0])
    # The two settings span the same inputs with an intercept: same rows, other columns.
    assert not np.array_equal(paper.transform(frame, contract),
                              declared.transform(frame, contract))
    with pytest.raises(ValueError, match="reference: expected one of"):
        xu2021_adult(contract, reference="alphabetical")


def test_encoding_round_trips_and_predicts_without_outcome_or_group(adult):
    contract, frame = adult
    encoding = xu2021_adult(contract)
    assert ScaledFeatureEncoding.from_dict(encoding.to_dict()) == encoding
    np.testing.assert_array_equal(
        encoding.transform(frame.drop(columns=["income", "sex"]), contract),
        encoding.transform(frame, contract))
    assert len(ADULT_EDUCATION_ORDER) == 16


def test_generic_encoding_and_bad_settings(adult):
    contract, _ = adult
    default = ScaledFeatureEncoding.from_contract(contract, group="sex")
    # Every column but income and sex: 4 numbers, 7 categorical columns without a reference.
    assert len(default.numbers) == 4 and not default.ranks
    assert default.dimension == 4 + sum(len(contract.labels(d.column)) - 1
                                        for d in default.indicators)
    with pytest.raises(DomainError, match="ranks: the order of 'education'"):
        ScaledFeatureEncoding.from_contract(contract, group="sex",
                                            ranks={"education": ADULT_EDUCATION_ORDER[1:]})
    with pytest.raises(DomainError, match="indicators: 'race'"):
        ScaledFeatureEncoding.from_contract(contract, group="sex", indicators={"race": ["Xx"]})
    with pytest.raises(DomainError, match="ranges: column 'age'"):
        ScaledFeatureEncoding.from_contract(contract, group="sex", ranges={"age": (5, 5)})
    with pytest.raises(DomainError, match=r"ranges: \['nope'\]"):
        ScaledFeatureEncoding.from_contract(contract, group="sex", ranges={"nope": (0, 1)})
