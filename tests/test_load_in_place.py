"""A Parquet input read in place (no staged copy) gives the loader's codes and tally."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.schema import load_contract
from privfair.release.ingest import (
    INPUT_REFERENCE,
    code_batches,
    discretize_counted,
    iter_frames,
    load,
)
from privfair.store.files import StoreError

CONTRACT = """\
name: mixed
version: "1"
drop: [note]
columns:
  - name: age
    type: numeric
    integer: true
    bins: [18, 30, 45, 65, 90]
  - name: hours
    type: numeric
    bins: [0, 20, 40, 60, 100]
  - name: sex
    type: categorical
    categories: [F, M]
    normalize: strip
  - name: grade
    type: categorical
    categories: ["1", "2", "3"]
  - name: edu
    type: categorical
    categories: [HS, BA, MA]
roles:
  protected: [sex]
  admissible: [edu]
  outcome: [grade]
  free: [age, hours]
budget: {epsilon: 3.0, delta: 1.0e-6}
"""


def mixed_frame(n: int = 2000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = pd.array(rng.integers(10, 99, n), dtype="Int64")  # some out of the bins
    age[::97] = pd.NA
    hours = rng.normal(40, 20, n)
    hours[::51] = np.nan
    hours[::203] = np.inf
    sex = rng.choice([" F", "M ", "F", "M", "X", "\tF"], n).astype(object)
    sex[::89] = None
    grade = rng.choice([1, 2, 3, 9], n)  # integers: matched as their decimal text
    edu = pd.Categorical(rng.choice(["HS", "BA", "MA", "PhD"], n))  # a dictionary column
    return pd.DataFrame({"age": age, "hours": hours, "sex": sex, "grade": grade, "edu": edu,
                         "note": ["private"] * n}, index=pd.RangeIndex(5, n + 5, name="id"))


@pytest.fixture
def mixed(tmp_path):
    contract_path = tmp_path / "mixed.yaml"
    contract_path.write_text(CONTRACT)
    data = tmp_path / "mixed.parquet"
    mixed_frame().to_parquet(data)  # with its pandas index, which is not data
    return load_contract(contract_path), data


def staged_codes(tmp_path, name, contract, data, *, in_place):
    staging = tmp_path / name
    staging.mkdir()
    staged = load(data, contract, staging, batch_size=300, in_place=in_place)
    codes, tally = discretize_counted(staged, contract, staging, batch_size=300)
    columns = {}
    for batch in code_batches(codes):
        for k, v in batch.items():
            columns.setdefault(k, []).append(v)
    return staged, {k: np.concatenate(v) for k, v in columns.items()}, json.loads(
        tally.open_checked().read_text())


def test_in_place_gives_the_copys_codes_and_tally(mixed, tmp_path):
    contract, data = mixed
    staged, codes, tally = staged_codes(tmp_path, "in-place", contract, data, in_place=True)
    copied, expected, expected_tally = staged_codes(tmp_path, "copy", contract, data,
                                                    in_place=False)
    assert staged.path.endswith(INPUT_REFERENCE) and copied.path.endswith("input.parquet")
    assert codes.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(codes[name], expected[name], err_msg=name)
    assert tally == expected_tally
    assert sum(sum(v.values()) for v in tally.values()) > 0  # the policies did touch rows
    # the frames other stages read (input validation) hold the copy's values
    got = pd.concat(iter_frames(staged, batch_size=500))
    want = pd.concat(iter_frames(copied, batch_size=500))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True),
                                  check_dtype=False)


def test_a_column_the_loader_must_convert_is_copied(mixed, tmp_path):
    contract, data = mixed
    frame = mixed_frame()
    frame["grade"] = frame["grade"].astype(float)  # floats as text need the loader's rule
    frame.to_parquet(data)
    staging = tmp_path / "s"
    staging.mkdir()
    assert load(data, contract, staging, in_place=True).path.endswith("input.parquet")


def test_an_input_changed_after_loading_is_refused_at_the_next_read(mixed, tmp_path):
    contract, data = mixed
    staging = tmp_path / "s"
    staging.mkdir()
    staged = load(data, contract, staging, in_place=True)
    mixed_frame(seed=4).to_parquet(data)
    with pytest.raises(StoreError, match="changed since it was written"):
        discretize_counted(staged, contract, staging)


def test_a_dask_worker_reads_a_part_as_the_one_file_release_does(mixed, tmp_path):
    """A Dask worker's part (:func:`~privfair.release.tabular.partitioned.ingest_part`) goes
    through the same schema reading (:func:`~privfair.release.ingest.column_readings`) and
    gives the one-file release's codes and tally, leaving trimming and integer text to the
    encoder."""
    import pyarrow.parquet as pq

    from privfair.contracts.encoding import PolicyTally
    from privfair.release.ingest import column_readings
    from privfair.release.tabular.partitioned import ingest_part

    contract, data = mixed
    assert column_readings(pq.read_schema(data), contract) is not None  # the direct path
    _, expected, expected_tally = staged_codes(tmp_path, "file", contract, data,
                                               in_place=True)
    part, tally = ingest_part(str(data), {}, {}, contract, str(tmp_path), 0, 300, True)
    got = pq.read_table(part.path)
    for name in expected:
        np.testing.assert_array_equal(got.column(name).to_numpy(), expected[name],
                                      err_msg=name)
    assert PolicyTally.from_dict(tally).to_dict() == expected_tally


def test_integer_categories_in_a_dictionary_read_by_their_values():
    """A dictionary of whole numbers (e.g. a hive partition key) reads as its values: as
    numbers for the encoder, as their decimal text for the loader's staged values."""
    import pyarrow as pa

    from privfair.release.ingest import read_columns

    grade = pa.DictionaryArray.from_arrays(pa.array([1, 0, None, 1], pa.int32()),
                                           pa.array([3, 9], pa.int64()))
    batch = pa.RecordBatch.from_pydict({"grade": grade})
    raw = read_columns(batch, {"grade": "integer text"}, as_loaded=False).column(0)
    assert pa.types.is_int64(raw.type) and raw.to_pylist() == [9, 3, None, 9]
    loaded = read_columns(batch, {"grade": "integer text"}).column(0)
    assert loaded.type == pa.dictionary(loaded.type.index_type, pa.string())
    assert loaded.to_pylist() == ["9", "3", None, "9"]
