"""Per-part sampling and decoding of a partitioned release (issue 23.1/23.5): the Arrow paths
give what the pandas ones gave."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from privfair.contracts import encoding as disc
from privfair.contracts.datasets import load_codes
from privfair.release.tabular.partitioned import (
    labelled_columns,
    read_part,
    sample_part,
    validate_part,
    validate_parts,
)
from privfair.release.tabular.plan import OutputValidationError
from privfair.store.artefacts import save_model, save_one_way
from privfair.store.files import StoreError
from privfair.synth.synthesizer import FairSynthesizer, generate, generate_columns


@pytest.fixture(scope="module")
def adult_mst():
    codes, contract = load_codes("adult")
    synth = FairSynthesizer(domain=contract.domain(), roles=contract.roles(), epsilon=1.0,
                            delta=1e-9, method="mst").fit(codes, rng=np.random.default_rng(0))
    return synth, contract


def test_generate_columns_draws_what_generate_draws(adult_mst) -> None:
    synth, _ = adult_mst
    frame = generate(synth.model_, synth.compression_, 5_000, rng=np.random.default_rng(4),
                     narrow=True)
    columns = generate_columns(synth.model_, synth.compression_, 5_000,
                               rng=np.random.default_rng(4))
    assert list(columns) == list(frame.columns)
    for name, codes in columns.items():
        assert codes.dtype == frame[name].dtype
        assert np.array_equal(codes, frame[name].to_numpy())


def test_labelled_columns_decode_as_decode(adult_mst) -> None:
    synth, contract = adult_mst
    columns = generate_columns(synth.model_, synth.compression_, 3_000,
                               rng=np.random.default_rng(5))
    expected = disc.decode({a: c.astype(np.int64) for a, c in columns.items()}, contract)
    got = labelled_columns(columns, contract).to_pandas()
    assert list(got.columns) == list(expected.columns)
    for name in expected.columns:
        assert list(got[name].cat.categories) == list(expected[name].cat.categories)
        assert np.array_equal(got[name].cat.codes.to_numpy(), expected[name].cat.codes.to_numpy())
    released = labelled_columns(columns, contract, released=True)
    assert released.column_names == [contract.released_names()[a] for a in columns]


def test_labelled_columns_refuse_a_code_outside_the_labels(adult_mst) -> None:
    _, contract = adult_mst
    name = contract.column_names[0]
    with pytest.raises(pa.ArrowException):
        labelled_columns({name: np.array([0, len(contract.labels(name))], np.uint8)}, contract)


def test_a_sampled_part_is_the_published_table_of_its_generator(adult_mst, tmp_path) -> None:
    synth, contract = adult_mst
    model = save_model(synth.model_, tmp_path)
    one_way = save_one_way(synth.one_way_, synth.one_way_measurements_, tmp_path)
    part, checks = sample_part(model, one_way, contract, str(tmp_path), 0, 2_000,
                               np.random.default_rng(6))
    frame = read_part(part, contract)
    columns = generate_columns(synth.model_, synth.compression_, 2_000,
                               rng=np.random.default_rng(6))
    expected = disc.decode({a: c.astype(np.int64) for a, c in columns.items()}, contract)
    assert list(frame.columns) == list(expected.columns)
    for name in expected.columns:
        assert frame[name].astype(str).tolist() == expected[name].astype(str).tolist()


def test_validation_takes_the_checks_sampling_ran_and_reads_only_unchecked_parts(
        adult_mst, tmp_path) -> None:
    """Sampling checks each part before writing it; validation combines those checks by the
    part's sha256 and reads back only a part without one (issue 23.5: no second read of
    100M synthetic rows). A failed check still refuses the release."""
    synth, contract = adult_mst
    model = save_model(synth.model_, tmp_path)
    one_way = save_one_way(synth.one_way_, synth.one_way_measurements_, tmp_path)
    sampled = [sample_part(model, one_way, contract, str(tmp_path), i, 1_500,
                           np.random.default_rng(i)) for i in range(3)]
    parts, checks = [ref for ref, _ in sampled], [c for _, c in sampled]
    for part, check in zip(parts, checks, strict=True):
        assert check == validate_part(part, contract)  # the same verdicts as a read-back
    summary = validate_parts(parts, contract, n_rows=4_500, checked=checks)
    assert summary["passed"]

    # a checked part is not read: its file may be gone; an unchecked one is read
    for part in parts[:2]:
        Path(part.path).unlink()
    assert validate_parts(parts, contract, n_rows=4_500, checked=checks[:2])["passed"]
    with pytest.raises(StoreError, match="missing"):
        validate_parts(parts, contract, n_rows=4_500, checked=checks[1:])

    # a failed check refuses, and the row count is the parts' total
    column = next(i for i, c in enumerate(checks[2]["checks"]) if c["column"])
    failed = {**checks[2], "checks": [{**c, "success": False} if i == column else c
                                      for i, c in enumerate(checks[2]["checks"])]}
    with pytest.raises(OutputValidationError):
        validate_parts(parts, contract, n_rows=4_500, checked=[*checks[:2], failed])
    with pytest.raises(OutputValidationError):
        validate_parts(parts, contract, n_rows=4_501, checked=checks)
