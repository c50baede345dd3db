"""Issue 42.3 / 42.8: drafts of a census-like table. Industry and occupation codes were
drafted as numeric bins, the instance-weight column kept, a state column drafted as open text
with a placeholder universe, wide numeric columns got two bins with upper edges copied from the
data's maximum, no ``expected_rows:``, and a lifetime ε of 1 (about one release)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml

from privfair.contracts.schema import parse_contract
from privfair.contracts.tools import draft_contract, round_guess, season_budget


def _census(n: int = 4000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "person_id": np.arange(100000, 100000 + n),
        "instance_weight": rng.lognormal(7, 0.5, n).round(2),
        "industry_code": rng.integers(0, 52, n),          # 52 codes, whole numbers
        "occupation_code": rng.integers(0, 47, n),
        "state": rng.choice([f"S{i:02d}" for i in range(53)], n),  # 50 states + DC, PR, other
        "age": rng.integers(0, 91, n),
        "wage": np.where(rng.random(n) < 0.8, 0, rng.lognormal(9, 1.2, n)).round(),
        "full_name": [f"P{i}-{rng.integers(10**9)}" for i in range(n)],
    })


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    path = tmp_path_factory.mktemp("census") / "census.parquet"
    frame = _census()
    frame.to_parquet(path, index=False)
    text = draft_contract(path)
    return frame, text, parse_contract(text), yaml.safe_load(text)


def test_codes_are_categories(draft):
    _, _, contract, _ = draft
    for name, levels in (("industry_code", 52), ("occupation_code", 47)):
        spec = contract.column(name)
        assert spec.type == "categorical" and len(spec.categories) == levels


def test_a_state_column_is_categorical(draft):
    _, _, contract, _ = draft
    assert contract.column("state").type == "categorical"
    assert len(contract.column("state").categories) == 53


def test_weights_and_ids_are_flagged_and_left_out(draft):
    _, text, contract, _ = draft
    assert {"instance_weight", "person_id"} <= set(contract.drop)
    assert "# REVIEW instance_weight:" in text and "weight" in text
    assert "# REVIEW person_id:" in text and "identifier" in text


def test_an_open_text_column_is_not_given_a_placeholder_universe(draft):
    """A refusal to guess: the column is left out with a note asking for its universe."""
    _, text, contract, _ = draft
    assert "full_name" in contract.drop
    assert "# REVIEW full_name:" in text and "universe" in text
    assert "placeholder" not in text


def test_wide_numeric_columns_get_enough_bins_and_no_edge_is_the_data_maximum(draft):
    frame, _, contract, _ = draft
    for name in ("age", "wage"):
        edges = list(contract.column(name).bins)
        assert len(edges) - 1 >= 4, (name, edges)
        assert edges[-1] > frame[name].max() and edges[-1] != frame[name].max()
        top = edges[-1]
        assert float(f"{top:.2g}") == top, top  # a round figure: two significant digits


def test_expected_rows_is_a_rounded_guess_never_the_true_count(draft):
    frame, text, contract, _ = draft
    assert contract.expected_rows == 4000 or contract.expected_rows == round_guess(len(frame))
    assert re.search(r"expected_rows: \d+ +# a guess", text)
    assert round_guess(48842) == 50000 and round_guess(299285) == 300000
    assert round_guess(1000) == 1000 and round_guess(1234) == 1000 and round_guess(7) == 7


def test_the_lifetime_budget_is_sized_for_a_season_and_stated(draft):
    _, text, contract, _ = draft
    epsilon, releases, each = season_budget()
    assert contract.budget.epsilon == pytest.approx(epsilon)
    assert releases >= 12 and each == 1.0 and 2.0 < epsilon < 5.0
    assert f"{releases} releases at epsilon {each:g}" in text
