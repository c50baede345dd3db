"""The pandas pre-check gives Great Expectations' own verdicts, expectation by expectation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import make_toy_frame

from privfair.contracts.schema import load_contract
from privfair.contracts.validation import precheck, suite_spec, validate_frames

ROOT = Path(__file__).resolve().parents[1]


def _input_frame(toy_frame: pd.DataFrame) -> pd.DataFrame:
    # as ingest.load stages it: declared columns, numbers as float64, the rest as text
    return toy_frame.drop(columns=["secret_name"]).astype({"age": float, "hours": float})


def _input_variants(good: pd.DataFrame) -> dict[str, pd.DataFrame]:
    # Faults on different columns are independent verdicts, so a frame may carry several.
    variants = {"clean": good, "empty": good.iloc[:0]}
    for name, faults in {
        "unknown category, above upper": [("race", 3, "Zorblax"), ("age", 7, 90.5)],
        "nulls, case change": [("age", 4, np.nan), ("race", 5, None), ("sex", 10, "f")],
        "closed edges": [("age", 8, 90.0), ("age", 9, 18.0), ("hours", 2, 100.0)],
        "below lower": [("age", 6, 17.0), ("hours", 1, 0.5)],
    }.items():
        frame = good.copy()
        for column, row, value in faults:
            frame[column] = frame[column].astype(object)
            frame.loc[row, column] = value
        variants[name] = frame.astype({c: good[c].dtype for c in ("age", "hours")})
    missing = good.drop(columns=["race"])
    missing["edu"] = None  # and an all-null column
    variants["missing column, all-null column"] = missing
    variants["extra column"] = good.assign(extra="x")
    return variants


_VALIDATORS: dict = {}


def _gx_verdicts(frame: pd.DataFrame, contract, *, side: str, n_rows=None) -> list[bool]:
    from privfair.contracts.validation import _gx_validator, gx_verdicts

    key = (contract.name, side, n_rows)  # one GX context per suite keeps the test quick
    if key not in _VALIDATORS:
        _VALIDATORS[key] = _gx_validator(contract, side=side, n_rows=n_rows)
    result = _VALIDATORS[key](frame)
    return gx_verdicts(result, suite_spec(contract, side=side, n_rows=n_rows))


def test_precheck_matches_great_expectations(toy_contract, toy_frame):
    contract = load_contract(toy_contract)
    good = _input_frame(toy_frame.iloc[:200])
    spec = suite_spec(contract, side="input")
    disagreements = {}
    for name, frame in _input_variants(good).items():
        mine, theirs = precheck(frame, spec), _gx_verdicts(frame, contract, side="input")
        if mine != theirs:
            disagreements[f"input/{name}"] = (mine, theirs)
    labelled = pd.DataFrame({c: np.resize(np.asarray(contract.labels(c), dtype=object), 40)
                             for c in contract.column_names})
    faulty = labelled.copy()
    faulty.loc[0, "edu"] = "Kindergarten"
    faulty.loc[1, "sex"] = None
    for name, frame, n_rows in [("clean", labelled, 40), ("open count", labelled, None),
                                ("wrong count", labelled, 41), ("bad label, null", faulty, 40),
                                ("empty", labelled.iloc[:0], None)]:
        spec = suite_spec(contract, side="output", n_rows=n_rows)
        mine = precheck(frame, spec)
        theirs = _gx_verdicts(frame, contract, side="output", n_rows=n_rows)
        if mine != theirs:
            disagreements[f"output/{name}"] = (mine, theirs)
    assert disagreements == {}
    # the variants do exercise failures, not only passes
    assert not all(precheck(_input_variants(good)["below lower"], suite_spec(
        contract, side="input")))


def test_failing_batch_gets_gx_details_and_same_checks(toy_contract, toy_frame):
    contract = load_contract(toy_contract)
    good = _input_frame(toy_frame)
    bad = good.copy()
    bad.loc[2, "edu"] = "Kindergarten"
    outcome = validate_frames([good, bad, good], contract, side="input")
    assert not outcome.passed and outcome.batches == 3
    assert [c["column"] for c in outcome.failures()] == ["edu"]
    # batches 1 and 3 were pre-checked; batch 2 was validated by GX, whose results are kept
    assert [d.get("checked_by") for d in outcome.private_details[::2]] == [
        "privfair pre-check"] * 2
    assert "Kindergarten" in str(outcome.private_details[1])


def test_clean_table_never_imports_great_expectations(toy_contract, tmp_path):
    frame = _input_frame(make_toy_frame(200))
    data = tmp_path / "frame.parquet"
    frame.to_parquet(data)
    code = (
        "import sys, pandas as pd\n"
        "from privfair.contracts.schema import load_contract\n"
        "from privfair.contracts.validation import suite_spec, validate_frames\n"
        f"c = load_contract({str(toy_contract)!r})\n"
        f"out = validate_frames([pd.read_parquet({str(data)!r})], c, side='input')\n"
        "assert out.passed, out.checks\n"
        "assert out.n_expectations == len(suite_spec(c, side='input')) > 1\n"
        "assert 'great_expectations' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_categorical_column_is_checked_by_its_values_not_its_unused_categories():
    """The in-set check of a categorical column may stop at its categories when they all lie
    in the set; otherwise it looks at the values, as the plain check does."""
    spec = [("expect_column_values_to_be_in_set", "c", {"value_set": ["a", "b"]})]

    def verdict(values, categories):
        frame = pd.DataFrame({"c": pd.Categorical(values, categories=categories)})
        return precheck(frame, spec)[0]

    assert verdict(["a", "b", None], ["a", "b"]) is True
    assert verdict(["a", "a"], ["a", "b", "zz"]) is True  # an unused category outside
    assert verdict(["a", "zz"], ["a", "b", "zz"]) is False  # a used one
    assert verdict([1, 2], [1, 2]) is False  # numbers are not the labels "1", "2"
    plain = pd.DataFrame({"c": ["a", "zz", None]})
    assert precheck(plain, spec) == [False]
