"""The encoder's Arrow path (issue 23.5): dictionary text and float columns are encoded on
their buffers, with the same codes, kept rows and policy tally as the pandas path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from privfair.contracts import encoding as disc
from privfair.contracts.datasets import default_contract_path
from privfair.contracts.schema import load_contract


def _messy_table(contract, rows: int, seed: int) -> pa.Table:
    """Declared values mixed with nulls, NaN, out-of-range numbers, non-integers, unknown
    labels and padded labels (the Adult contract strips text)."""
    rng = np.random.default_rng(seed)
    null = rng.random(rows) < 0.05
    columns = {}
    for spec in contract.columns:
        if spec.type == "numeric":
            lower, upper = float(spec.edges[0]), float(min(spec.edges[-1], 1e5))
            values = rng.uniform(lower, upper, rows).round()
            values[rng.random(rows) < 0.05] = np.nan
            values[rng.random(rows) < 0.05] = upper + 1e6
            values[rng.random(rows) < 0.05] = lower - 1e6
            values[rng.random(rows) < 0.05] = lower + 0.5
            columns[spec.name] = pa.array(values, mask=null)
        else:
            labels = np.asarray(contract.labels(spec.name), dtype=object)
            text = labels[rng.integers(0, len(labels), rows)]
            text[rng.random(rows) < 0.05] = "no such label"
            pad = rng.random(rows) < 0.05
            text[pad] = [f"  {v} " for v in text[pad]]
            text[null] = None
            columns[spec.name] = pc.dictionary_encode(pa.array(list(text), pa.string()))
    return pa.table(columns)


@pytest.mark.parametrize("seed", [0, 1])
def test_arrow_path_encodes_as_the_pandas_path(seed: int) -> None:
    contract = load_contract(default_contract_path())
    table = _messy_table(contract, 5_000, seed)
    assert {str(t) for t in table.schema.types} == {"double",
                                                    "dictionary<values=string, indices=int32, ordered=0>"}
    arrow = disc.encode(table, contract)
    frame = disc.encode(table.to_pandas(), contract)
    assert np.array_equal(arrow.keep, frame.keep)
    assert 0 < arrow.keep.sum() < table.num_rows  # some rows were dropped by a policy
    for name, codes in frame.codes.items():
        assert np.array_equal(arrow.codes[name], codes), name
    assert arrow.tally.to_dict() == frame.tally.to_dict()
    assert any(cells.get("mapped") for cells in arrow.tally.to_dict().values())


def test_arrow_path_of_a_chunked_and_an_empty_column() -> None:
    contract = load_contract(default_contract_path())
    table = _messy_table(contract, 2_000, 3)
    chunked = pa.concat_tables([table.slice(0, 700), table.slice(700)])
    assert chunked.column(0).num_chunks == 2
    one, two = disc.encode(table, contract), disc.encode(chunked, contract)
    for name in one.codes:
        assert np.array_equal(one.codes[name], two.codes[name])
    empty = disc.encode(table.slice(0, 0), contract)
    assert all(len(codes) == 0 for codes in empty.codes.values())
