"""A publisher's own files: literal file names, hidden pandas index, whitespace normalization."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.encoding import (
    discretize,
    encode,
    iter_discretized_batches,
    normalize_text,
)
from privfair.contracts.schema import STRIP_CHARS, parse_contract
from privfair.release import ingest
from privfair.release.run import release_table as run_release
from privfair.release.tabular.plan import ReleaseParams

SMALL = """
name: small
version: "1"
normalize: {normalize}
columns:
  - name: sex
    type: categorical
    categories: [female, male]
  - name: age
    type: numeric
    integer: true
    bins: [0, 40, 120]
roles: {{protected: [sex]}}
budget: {{epsilon: 1.0, delta: 1.0e-6}}
"""


def small(normalize: str = "none"):
    return parse_contract(SMALL.format(normalize=normalize))


def frame(n: int, *, pad: str = "") -> pd.DataFrame:
    rng = np.random.default_rng(n)
    return pd.DataFrame({"sex": [pad + s for s in rng.choice(["female", "male"], n)],
                         "age": rng.integers(18, 90, n)})


def staged_rows(data: Path, contract, tmp_path: Path) -> pd.DataFrame:
    staging = tmp_path / f"staging-{data.name.replace('*', 'x')}"
    staging.mkdir()
    return pd.read_parquet(ingest.load(data, contract, staging).path)


# --- 10.7: --data is one literal file, never a glob ------------------------------------------


@pytest.mark.parametrize("name, neighbours", [
    ("part?.parquet", ["part1.parquet", "part2.parquet"]),
    ("survey[2024].parquet", ["survey2.parquet", "survey0.parquet"]),
    ("export*.csv", ["export-old.csv", "export2.csv"]),
])
def test_data_is_read_as_the_literal_file(tmp_path, name, neighbours):
    contract = small()
    for i, other in enumerate(neighbours):
        write(frame(500 + i), tmp_path / other)
    target = tmp_path / name
    write(frame(100), target)
    assert len(staged_rows(target, contract, tmp_path)) == 100
    rows = sum(len(b["sex"]) for b in iter_discretized_batches(target, contract))
    assert rows == 100


def write(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)


# --- hidden pandas index -------------------------------------------------------------------


def test_pandas_index_column_in_parquet_is_not_data(tmp_path):
    contract = small()
    df = frame(300)
    path = tmp_path / "filtered.parquet"
    df[df.age < 80].to_parquet(path)  # keeps the filtered RangeIndex as __index_level_0__
    import pyarrow.parquet as pq

    assert "__index_level_0__" in pq.read_schema(path).names
    staged = staged_rows(path, contract, tmp_path)
    assert list(staged.columns) == ["sex", "age"] and len(staged) == int((df.age < 80).sum())
    codes = list(iter_discretized_batches(path, contract))
    assert sum(len(b["age"]) for b in codes) == len(staged)
    named = tmp_path / "named.parquet"
    df.set_index(pd.Index(range(1000, 1300), name="row_id")).to_parquet(named)
    assert len(staged_rows(named, contract, tmp_path)) == 300


def test_undeclared_real_column_is_still_refused(tmp_path):
    path = tmp_path / "extra.parquet"
    frame(50).assign(zip="12345").to_parquet(path, index=False)
    with pytest.raises(Exception, match="unexpected column"):
        staged_rows(path, small(), tmp_path)


# --- 10.6: one whitespace rule for CatHist and the encoder ---------------------------------


def test_normalize_text_is_the_rule_the_loader_applies(tmp_path):
    values = ["  female", "male\t", "\n male \r\n", "fe male", " ", "\x0bmale\x0c", None]
    expected = ["female", "male", "male", "fe male", "", "male", None]
    assert list(normalize_text(np.array(values, dtype=object), "strip")) == expected
    assert list(normalize_text(np.array(values, dtype=object), "none")) == values
    assert STRIP_CHARS.strip() == ""
    path = tmp_path / "ws.parquet"
    pd.DataFrame({"sex": values[:-1], "age": [20] * 6}).to_parquet(path, index=False)
    loose = parse_contract(SMALL.format(normalize="strip").replace(
        "categories: [female, male]", "categories: [female, male, fe male, blank]\n    aliases: {'': blank}"))
    assert staged_rows(path, loose, tmp_path)["sex"].tolist() == expected[:-1]
    assert discretize(pd.DataFrame({"sex": values[:-1], "age": [20] * 6}), loose)["sex"].tolist(
        ) == [0, 1, 1, 2, 3, 1]


def test_strip_per_contract_and_per_column(tmp_path):
    padded = frame(200, pad=" ")
    # without strip the padded values match no category: their rows are dropped (issue 21.2)
    kept = encode(padded, small("none"))
    assert not kept.keep.all() and set(kept.tally.to_dict()) == {"sex"}
    codes = discretize(padded, small("strip"))["sex"]
    assert (codes == (padded["sex"] == " male").to_numpy()).all()
    per_column = parse_contract(SMALL.format(normalize="none").replace(
        "type: categorical\n", "type: categorical\n    normalize: strip\n"))
    assert per_column.normalization("sex") == "strip" and per_column.normalization("age") == "none"
    assert (discretize(padded, per_column)["sex"] == codes).all()
    with pytest.raises(Exception, match="leading or trailing whitespace"):
        parse_contract(SMALL.format(normalize="strip").replace("[female, male]",
                                                              "[' female', male]"))


OPEN = """
name: survey
version: "1"
normalize: {normalize}
columns:
  - name: gender
    type: text
    open_domain: {{universe: {{values: [female, male, ' female', ' male']}}, tolerance: 0.9}}
    out_of_domain: "other:(other)"
    nulls: "as:(other)"
  - name: degree
    type: categorical
    categories: [none, bachelor]
  - name: hired
    type: categorical
    categories: ["no", "yes"]
roles: {{protected: [gender], admissible: [degree], outcome: [hired]}}
budget: {{epsilon: 1.0, delta: 1.0e-6}}
"""


@pytest.mark.parametrize("normalize, released", [("strip", {"female", "male"}),
                                                 ("none", {" female", " male"})])
def test_cathist_categories_and_encoding_follow_one_rule(tmp_path, normalize, released):
    rng = np.random.default_rng(3)
    n = 4000
    data = tmp_path / "survey.parquet"
    pd.DataFrame({"gender": rng.choice([" female", " male"], n),
                  "degree": rng.choice(["none", "bachelor"], n),
                  "hired": rng.choice(["no", "yes"], n)}).to_parquet(data, index=False)
    contract = tmp_path / "survey.yaml"
    contract.write_text(OPEN.format(normalize=normalize))
    final = run_release(ReleaseParams(
        contract=str(contract), data=str(data), epsilon=1.0, delta=1e-6, method="mst",
        seed=5, insecure_seed=True, out=str(tmp_path / "releases"),
        work_dir=str(tmp_path / "work")))
    labels = json.loads((final / "manifest.json").read_text())["domain"]["labels"]["gender"]
    assert released <= set(labels)
    synth = pd.read_parquet(final / "synthetic.parquet")["gender"].astype(str)
    # Before the fix every row was encoded as "(other)": CatHist stripped, the encoder did not.
    assert (synth == "(other)").mean() < 0.1


# --- rename / label / descriptions -----------------------------------------------------------

RENAMED = """
name: coded
version: "1"
description: A survey whose raw columns are coded c0, c1, c2.
columns:
  - name: c0
    rename: sex
    label: Sex of respondent
    description: As self-reported on the form.
    type: categorical
    categories: [female, male]
  - name: c1
    rename: degree
    type: categorical
    categories: [none, bachelor]
  - name: c2
    rename: hired
    type: categorical
    categories: ["no", "yes"]
roles: {protected: [c0], admissible: [c1], outcome: [c2]}
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


def test_rename_label_and_descriptions_reach_the_release(tmp_path):
    rng = np.random.default_rng(4)
    n = 1500
    data = tmp_path / "coded.parquet"
    pd.DataFrame({"c0": rng.choice(["female", "male"], n), "c1": rng.choice(["none", "bachelor"], n),
                  "c2": rng.choice(["no", "yes"], n)}).to_parquet(data, index=False)
    contract = tmp_path / "coded.yaml"
    contract.write_text(RENAMED)
    final = run_release(ReleaseParams(
        contract=str(contract), data=str(data), epsilon=1.0, delta=1e-6, method="mst",
        seed=5, insecure_seed=True, out=str(tmp_path / "releases"),
        work_dir=str(tmp_path / "work")))
    assert list(pd.read_parquet(final / "synthetic.parquet").columns) == ["sex", "degree", "hired"]
    manifest = json.loads((final / "manifest.json").read_text())
    notes = {c["name"]: c for c in manifest["columns"]}
    assert notes["c0"] == {"name": "c0", "released_as": "sex", "type": "categorical",
                           "label": "Sex of respondent",
                           "description": "As self-reported on the form."}
    assert manifest["contract"]["description"].startswith("A survey whose raw columns")
    report = (final / "report.html").read_text()
    assert "Sex of respondent" in report and "As self-reported on the form." in report


def test_released_names_must_be_unique():
    with pytest.raises(Exception, match="released names \\['degree'\\]"):
        parse_contract(RENAMED.replace("rename: hired", "rename: degree"))
