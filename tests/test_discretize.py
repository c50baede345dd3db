"""Discretization by contract: embedded data, policies, decoding and streaming."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.contracts.datasets import (
    contract_path,
    dataset_path,
    default_contract_path,
    default_dataset_path,
    load_dataset,
)
from privfair.contracts.encoding import (
    PolicyTally,
    decode,
    discretize,
    encode,
    iter_discretized_batches,
)
from privfair.contracts.schema import Contract, load_contract, parse_contract
from privfair.core.errors import DomainError

SECRET = "SECRET-VALUE-7731"

TOY = """\
name: toy
version: "1"
drop: [row_id]
columns:
  - name: sex
    type: categorical
    categories: [F, M]
    aliases: {female: F, male: M, "0": F, "1": M}
  - name: degree
    type: categorical
    categories: [none, some, other]
    out_of_domain: "other:other"
    nulls: "as:none"
  - name: hours
    type: numeric
    integer: true
    bins: [0, 10, 20]
    out_of_domain: clamp
  - name: score
    type: numeric
    bins: [0.0, 0.5, 1.0]
    out_of_domain: "other:[0.5, 1]"
  - name: hired
    type: categorical
    categories: ["no", "yes"]
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


@pytest.fixture(scope="module")
def adult_contract() -> Contract:
    return load_contract(default_contract_path())


@pytest.fixture(scope="module")
def adult_codes(adult_contract: Contract) -> dict[str, np.ndarray]:
    return discretize(load_dataset("adult"), adult_contract)


@pytest.fixture
def toy() -> Contract:
    return parse_contract(TOY)


def _toy_frame(**overrides: list[object]) -> pd.DataFrame:
    columns: dict[str, list[object]] = {
        "sex": ["F", "M", "female", "1"],
        "degree": ["none", "some", "other", "some"],
        "hours": [0, 9, 10, 20],
        "score": [0.0, 0.49, 0.5, 1.0],
        "hired": ["no", "yes", "yes", "no"],
    }
    columns.update(overrides)
    return pd.DataFrame(columns)


# --- embedded data -----------------------------------------------------------------------


def test_adult_discretization_shape_and_domain(adult_contract: Contract,
                                               adult_codes: dict[str, np.ndarray]) -> None:
    assert list(adult_codes) == list(adult_contract.column_names)
    assert len(adult_codes) == 13
    assert {len(v) for v in adult_codes.values()} == {48_842}
    assert all(v.dtype == np.int64 for v in adult_codes.values())
    adult_contract.domain().check_codes(adult_codes)  # every code within its declared size


# Counted independently from the raw adult.data + adult.test files with awk (not with this
# code): e.g. `awk -F', ' 'NF==15 && $15 ~ /^>50K/' | wc -l` gives 11687.
@pytest.mark.parametrize(
    ("column", "label", "expected"),
    [
        ("income", ">50K", 11_687),
        ("income", "<=50K", 37_155),
        ("sex", "Female", 16_192),
        ("capital-gain", "0", 44_807),
        ("capital-gain", ">=10000", 1_134),
        ("capital-loss", "1-4999", 2_282),
        ("age", "17-21", 4_719),
        ("age", "87-90", 66),
        ("hours-per-week", "91-99", 171),
        ("workclass", "?", 2_799),
    ],
)
def test_adult_known_cells(adult_contract: Contract, adult_codes: dict[str, np.ndarray],
                           column: str, label: str, expected: int) -> None:
    code = adult_contract.labels(column).index(label)
    assert int(np.sum(adult_codes[column] == code)) == expected


def test_compas_discretization() -> None:
    contract = load_contract(contract_path("compas"))
    codes = discretize(load_dataset("compas"), contract)
    assert {len(v) for v in codes.values()} == {5_278}
    # Checked independently with awk on the raw CSV under the SAFES filters.
    assert np.bincount(codes["priors_count"]).tolist() == [1_667, 1_953, 1_658]
    assert int(np.sum(codes["two_year_recid"] == 1)) == 2_483  # alias "1" -> "Yes"
    assert np.bincount(codes["race"]).tolist() == [3_175, 2_103]


def test_arrow_inputs_match_pandas(adult_contract: Contract,
                                   adult_codes: dict[str, np.ndarray]) -> None:
    table = pq.read_table(default_dataset_path())
    for frame in (table, table.to_batches(max_chunksize=100_000)[0]):
        codes = discretize(frame, adult_contract)
        n = frame.num_rows
        for name, values in codes.items():
            np.testing.assert_array_equal(values, adult_codes[name][:n])


def test_decode_roundtrip(adult_contract: Contract, adult_codes: dict[str, np.ndarray]) -> None:
    decoded = decode(pd.DataFrame(adult_codes), adult_contract)
    raw = load_dataset("adult")
    assert list(decoded.columns) == list(adult_contract.column_names)
    assert isinstance(decoded["income"].dtype, pd.CategoricalDtype)
    assert list(decoded["income"].cat.categories) == ["<=50K", ">50K"]
    # Categorical columns decode to the raw value, up to the declared aliases.
    expected_income = raw["income"].str.removesuffix(".")
    assert (decoded["income"].astype(str) == expected_income).all()
    assert (decoded["workclass"].astype(str) == raw["workclass"]).all()
    assert decoded.loc[0, "age"] == "37-41"  # first row of adult.data: age 39
    assert decode(adult_codes, adult_contract).equals(decoded)


def test_decode_refuses_bad_codes(toy: Contract) -> None:
    with pytest.raises(DomainError, match=r"'sex'.*0\.\.1"):
        decode(pd.DataFrame({"sex": [0, 2]}), toy)
    with pytest.raises(DomainError, match="'sex'.*integer"):
        decode(pd.DataFrame({"sex": [0.0, 1.0]}), toy)
    with pytest.raises(DomainError, match="'salary' is not declared"):
        decode(pd.DataFrame({"salary": [0]}), toy)


# --- columns -----------------------------------------------------------------------------


def test_toy_codes_and_bin_edges(toy: Contract) -> None:
    codes = discretize(_toy_frame(), toy)
    assert codes["sex"].tolist() == [0, 1, 0, 1]  # aliases, including integer-looking "1"
    assert codes["degree"].tolist() == [0, 1, 2, 1]
    # [0, 10) and [10, 20]: 10 opens the second bin, 20 closes it.
    assert codes["hours"].tolist() == [0, 0, 1, 1]
    assert codes["score"].tolist() == [0, 0, 1, 1]


def test_dropped_columns_are_ignored_and_may_be_absent(toy: Contract) -> None:
    with_drop = _toy_frame(row_id=[1, 2, 3, 4])
    assert discretize(with_drop, toy)["hours"].tolist() == [0, 0, 1, 1]


def test_missing_and_extra_columns_are_named(toy: Contract) -> None:
    with pytest.raises(DomainError, match=r"missing columns \['hired'\]"):
        discretize(_toy_frame().drop(columns="hired"), toy)
    with pytest.raises(DomainError, match=r"unexpected columns \['salary'\]"):
        discretize(_toy_frame(salary=[1, 2, 3, 4]), toy)


def test_integer_raw_values_match_text_categories(toy: Contract) -> None:
    frame = _toy_frame(sex=[0, 1, 1, 0])
    assert discretize(frame, toy)["sex"].tolist() == [0, 1, 1, 0]
    floats = _toy_frame(sex=[0.0, 1.0, 1.0, 0.0])
    assert discretize(floats, toy)["sex"].tolist() == [0, 1, 1, 0]


# --- out-of-domain policies --------------------------------------------------------------


def test_drop_leaves_the_row_out_and_tallies_it(toy: Contract) -> None:
    """Issue 21.2: a value never raises; ``drop`` (the default, and ``refuse``, its
    deprecated alias) leaves the row out of every column."""
    tally = PolicyTally()
    codes = discretize(_toy_frame(sex=["F", SECRET, "M", "F"]), toy, tally=tally)
    assert codes["sex"].tolist() == [0, 1, 0]
    assert {len(c) for c in codes.values()} == {3}
    assert tally.to_dict() == {"sex": {"dropped": 1}}


def test_other_policy_maps_to_the_declared_bucket(toy: Contract) -> None:
    codes = discretize(_toy_frame(degree=["none", SECRET, "phd", "some"]), toy)
    assert codes["degree"].tolist() == [0, 2, 2, 1]
    # numeric: out-of-range numbers and non-numbers go to the declared label
    codes = discretize(_toy_frame(score=[-0.1, 0.2, 7.0, "n/a"]), toy)
    assert codes["score"].tolist() == [1, 0, 1, 1]


def test_clamp_goes_to_the_nearest_bin(toy: Contract) -> None:
    codes = discretize(_toy_frame(hours=[-5, 3, 25, 1_000_000]), toy)
    assert codes["hours"].tolist() == [0, 0, 1, 1]
    fractional = discretize(_toy_frame(hours=[9.5, 10.0, 0.2, 19.9]), toy)
    assert fractional["hours"].tolist() == [0, 1, 0, 1]
    # text that is not a number has no nearest bin: the row is dropped
    tally = PolicyTally()
    codes = discretize(_toy_frame(hours=["3", SECRET, "40", "5"]), toy, tally=tally)
    assert codes["hours"].tolist() == [0, 1, 0]
    assert tally.to_dict() == {"hours": {"dropped": 1, "clamped": 1}}


def test_numeric_refuse_checks_range_and_whole_numbers() -> None:
    contract = load_contract(default_contract_path())
    raw = load_dataset("adult").head(3).copy()
    raw.loc[1, "age"] = 16
    enc = encode(raw, contract)
    assert enc.keep.tolist() == [True, False, True]
    assert enc.tally.to_dict() == {"age": {"dropped": 1}}
    raw = load_dataset("adult").head(3).astype({"hours-per-week": "float64"})
    raw.loc[0, "hours-per-week"] = 40.5
    enc = encode(raw, contract)
    assert enc.keep.tolist() == [False, True, True]
    assert enc.tally.to_dict() == {"hours-per-week": {"dropped": 1}}


def test_numeric_text_is_parsed(toy: Contract) -> None:
    codes = discretize(_toy_frame(hours=["0", "12", "10", "20"]), toy)
    assert codes["hours"].tolist() == [0, 1, 1, 1]


# --- null policy -------------------------------------------------------------------------


def test_nulls_dropped_by_default(toy: Contract) -> None:
    enc = encode(_toy_frame(hired=["no", None, "yes", "no"]), toy)
    assert enc.keep.tolist() == [True, False, True, True]
    assert enc.codes["hired"].tolist() == [0, 1, 0]
    enc = encode(_toy_frame(hours=[1.0, np.nan, 2.0, 3.0]), toy)
    assert enc.keep.tolist() == [True, False, True, True]
    assert enc.tally.to_dict() == {"hours": {"dropped": 1}}


def test_nulls_mapped_to_declared_category(toy: Contract) -> None:
    codes = discretize(_toy_frame(degree=[None, np.nan, "some", pd.NA]), toy)
    assert codes["degree"].tolist() == [0, 0, 1, 0]


def test_adult_question_mark_columns_map_nulls_to_question_mark() -> None:
    contract = load_contract(default_contract_path())
    raw = load_dataset("adult").head(4).copy()
    raw.loc[2, "occupation"] = None
    codes = discretize(raw, contract)
    assert codes["occupation"][2] == contract.labels("occupation").index("?")


# --- open-domain columns -----------------------------------------------------------------


def test_open_domain_column_uses_released_categories() -> None:
    contract = load_contract(contract_path("example_open_domain"))
    frame = pd.DataFrame({
        "gender": ["female", "male", "nonbinary", None, "female"],
        "age": [25, 17, 40, 70, 120],
        "degree": ["BSc", "PhD", "none", None, "diploma"],
        "hired": ["yes", "no", "no", "yes", "no"],
    })
    with pytest.raises(DomainError, match="'gender'.*open_categories"):
        discretize(frame, contract)
    released = {"gender": ("female", "male")}
    codes = discretize(frame, contract, open_categories=released)
    assert codes["gender"].tolist() == [0, 1, 2, 2, 0]  # unreleased and null -> "(other)"
    assert codes["age"].tolist() == [0, 0, 1, 3, 3]  # clamp both ends
    assert codes["degree"].tolist() == [1, 3, 0, 0, 4]
    decoded = decode(codes, contract, open_categories=released)
    assert decoded["gender"].tolist() == ["female", "male", "(other)", "(other)", "female"]


# --- streaming ---------------------------------------------------------------------------


def _concat(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_stream_parquet_in_batches(adult_contract: Contract,
                                   adult_codes: dict[str, np.ndarray]) -> None:
    batches = list(iter_discretized_batches(dataset_path("adult"), adult_contract,
                                            batch_size=20_000))
    assert [len(b["age"]) for b in batches] == [20_000, 20_000, 8_842]
    for name, values in _concat(batches).items():
        np.testing.assert_array_equal(values, adult_codes[name])


def test_stream_csv_in_batches(tmp_path: Path, toy: Contract) -> None:
    frame = pd.concat([_toy_frame(row_id=[1, 2, 3, 4])] * 5, ignore_index=True)
    path = tmp_path / "toy.csv"
    frame.to_csv(path, index=False)
    batches = list(iter_discretized_batches(path, toy, batch_size=3))
    assert sum(len(b["sex"]) for b in batches) == 20
    expected = discretize(frame, toy)
    for name, values in _concat(batches).items():
        np.testing.assert_array_equal(values, expected[name])


def test_stream_checks_header_and_suffix(tmp_path: Path, toy: Contract) -> None:
    path = tmp_path / "toy.parquet"
    pq.write_table(pa.Table.from_pandas(_toy_frame().drop(columns="hired"),
                                        preserve_index=False), path)
    with pytest.raises(DomainError, match=r"missing columns \['hired'\]"):
        next(iter_discretized_batches(path, toy))
    csv = tmp_path / "toy.csv"
    _toy_frame(extra=[1, 2, 3, 4]).to_csv(csv, index=False)
    with pytest.raises(DomainError, match=r"unexpected columns \['extra'\]"):
        next(iter_discretized_batches(csv, toy))
    with pytest.raises(ValueError, match="expected a .parquet"):
        next(iter_discretized_batches(tmp_path / "toy.json", toy))
    with pytest.raises(ValueError, match="batch_size"):
        next(iter_discretized_batches(path, toy, batch_size=0))
