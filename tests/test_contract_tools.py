"""`privfair contract draft` and `privfair contract check --data`: the publisher's own tools."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from privfair.cli import main
from privfair.contracts.schema import load_contract, parse_contract
from privfair.contracts.tools import check_data, draft_contract, suggest_edges
from privfair.store.registry import registry_ledgers

OCCUPATIONS = ["Handlers equip cleaners etc ", "Adm support incl clerical ", "Sales ",
               "Not in universe or children ", "Precision production craft & repair "]


def wide_table(n: int = 600, columns: int = 30, seed: int = 0) -> pd.DataFrame:
    """Dozens of categorical columns whose raw values carry trailing spaces, census-style."""
    rng = np.random.default_rng(seed)
    data = {f"c{i}": rng.choice([f"{v}{i % 3} " for v in ("a", "bb", "ccc")], n)
            for i in range(columns)}
    data["occupation"] = rng.choice(OCCUPATIONS, n)
    data["state"] = rng.choice([f"State {i:02d}" for i in range(51)], n)  # high cardinality
    data["age"] = rng.integers(0, 91, n)
    data["wage"] = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 9000, n))
    return pd.DataFrame(data)


def credit_table(n: int = 1000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "checking": rng.choice(["A11", "A12", "A13", "A14"], n),
        "duration": rng.integers(4, 73, n),
        "purpose": rng.choice(["car", "furniture", "radio/tv", "education", "business"], n),
        "amount": rng.integers(250, 18500, n),
        "sex": rng.choice(["female", "male"], n),
        "age": rng.integers(19, 76, n),
        "foreign": rng.choice([0, 1], n),
        "credit_risk": rng.choice(["bad", "good"], n, p=[0.3, 0.7]),
    })


def test_draft_of_a_wide_table_is_a_valid_reviewable_contract(tmp_path):
    path = tmp_path / "census.csv"
    wide_table().to_csv(path, index=False)
    text = draft_contract(path, max_categories=20)
    assert "PUBLIC in every release" in text.split("name:")[0]
    contract = parse_contract(text)
    assert contract.reviewed is False and contract.normalize == "strip"
    assert contract.column("c0").categories == ("a0", "bb0", "ccc0")  # sorted, stripped
    assert contract.column("occupation").categories == tuple(sorted(o.strip() for o in OCCUPATIONS))
    assert "state" in contract.drop  # 51 values > 20: left out until a universe is declared
    age = contract.column("age")
    assert age.type == "numeric" and age.integer and age.bins[0] <= 0 and age.bins[-1] >= 90
    assert all(e % 5 == 0 for e in age.bins)  # round-number edges
    wage = contract.column("wage")
    assert wage.bins[:2] == (0, 1)  # the mass at 0 gets its own bin
    # The draft fits the very data it was written from.
    assert check_data(contract, path).passed


def test_suggested_edges_are_round_and_cover_the_range():
    # issue 42.8: the upper edge is rounded strictly above the maximum, never copied from it
    assert suggest_edges(17, 90, [28.2, 37.1, 45.6, 57.3], integer=True) == [15, 30, 35, 45,
                                                                                55, 95]
    # a zero-inflated wide column: the point bin at 0, then powers of ten (was [0, 1, 100000])
    assert suggest_edges(0, 99999, [0, 0, 0, 0], integer=True) == [0, 1, 10, 100, 1000, 10000,
                                                                   100000]
    edges = suggest_edges(0.013, 0.97, [0.2, 0.41, 0.6, 0.8], integer=False)
    assert edges[0] <= 0.013 and edges[-1] >= 0.97 and edges == sorted(set(edges))


HAND = """
name: census
version: "1"
columns:
{columns}
  - name: age
    type: numeric
    integer: true
    bins: [18, 30, 65]
  - name: sex
    type: categorical
    categories: [Female, Male]
roles: {{protected: [sex]}}
budget: {{epsilon: 1.0, delta: 1.0e-6}}
"""


def test_check_reports_every_failing_column_at_once(tmp_path, capsys):
    df = wide_table(columns=6).drop(columns=["state", "wage"])
    rng = np.random.default_rng(2)
    df["sex"] = rng.choice(["Female", "Male", "female"], len(df))
    df.loc[:4, "sex"] = None
    path = tmp_path / "census.parquet"
    df.to_parquet(path, index=False)
    declared = "\n".join(
        f"  - name: c{i}\n    type: categorical\n    categories: [a{i % 3}, bb{i % 3}, ccc{i % 3}]"
        for i in range(6))
    declared += ("\n  - name: occupation\n    type: categorical\n    categories: "
                 + yaml.safe_dump([o.strip() for o in OCCUPATIONS[:3]], default_flow_style=True)
                 .strip())
    contract_path = tmp_path / "census.yaml"
    contract_path.write_text(HAND.format(columns=declared))
    result = check_data(load_contract(contract_path), path)
    assert result.failing_columns == [f"c{i}" for i in range(6)] + ["occupation", "age", "sex"]
    by_column = {p.column: p for p in result.problems if "not declared" in p.problem}
    assert by_column["c0"].rows == len(df)
    assert any("normalize: strip" in f for f in by_column["c0"].fixes)
    occupation = by_column["occupation"]
    assert {v for v, _ in occupation.examples} == set(OCCUPATIONS)
    assert sum(n for _, n in occupation.examples) == len(df)
    assert any("other:" in f for f in occupation.fixes)  # two of them are no category at all
    sex = [p for p in result.problems if p.column == "sex"]
    assert [p.rows for p in sex if "nulls" in p.problem] == [5]
    assert any("aliases: {'female': 'Female'}" in f for p in sex for f in p.fixes)
    age = next(p for p in result.problems if p.column == "age")
    assert "[0, 90]" in age.problem and "clamp" in age.fixes[0]

    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["contract", "check", str(contract_path), "--data", str(path)])
    err = capsys.readouterr().err
    assert code == 1 and "data breaks contract 'census' in 9 column(s)" in err
    assert "'Handlers equip cleaners etc '" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # a diagnostic writes nothing


def test_cli_draft_then_check_warns_until_reviewed(tmp_path, capsys):
    data = tmp_path / "credit.parquet"
    credit_table().to_parquet(data, index=False)
    out = tmp_path / "credit.yaml"
    assert main(["contract", "draft", "--data", str(data), "--out", str(out)]) == 0
    assert main(["contract", "draft", "--data", str(data), "--out", str(out)]) == 2  # no clobber
    capsys.readouterr()
    # Issue 25.3: a draft's empty roles are named first: the fair methods would refuse them.
    assert main(["contract", "check", str(out), "--data", str(data)]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("WARNING: release with the fair methods") and "empty" in first
    out.write_text(out.read_text().replace(
        "  protected: []\n  admissible: []\n  outcome: []",
        "  protected: [sex]\n  admissible: [checking]\n  outcome: [credit_risk]"))
    assert main(["contract", "check", str(out), "--data", str(data)]) == 0
    captured = capsys.readouterr()
    assert "WARNING" in captured.err and "reviewed: true" in captured.err
    assert "no problem found" in captured.err
    assert captured.out.startswith("contract fingerprint: ") and len(captured.out.split()[-1]) == 64
    contract = load_contract(out)
    assert contract.column("foreign").categories == ("0", "1")
    assert contract.column("amount").type == "numeric"
    out.write_text(out.read_text().replace("reviewed: false", "reviewed: true"))
    assert main(["contract", "check", str(out)]) == 0
    assert "WARNING" not in capsys.readouterr().err


def mixed_census(n: int = 3000, seed: int = 4) -> pd.DataFrame:
    """A census-like table: 24 columns of mixed types, a 50-value state, a free-text name,
    numeric columns with nulls, booleans, blanks and null text."""
    rng = np.random.default_rng(seed)

    def holes(values: np.ndarray, share: float) -> np.ndarray:
        return np.where(rng.random(n) < share, np.nan, values)

    return pd.DataFrame({
        "state": rng.choice([f"State {i:02d}" for i in range(50)], n),
        "name": [f"Person {i} {rng.integers(10**9)}" for i in range(n)],  # all distinct
        "city": rng.choice([f"city{i}" for i in range(300)], n),
        "county": rng.choice([f"cty{i}" for i in range(120)], n),
        "occupation": rng.choice(OCCUPATIONS, n),
        "sex": rng.choice(["F", "M"], n), "race": rng.choice(["A", "B", "C", ""], n),
        "edu": rng.choice(["HS", "BA", "MA", "PhD", None], n),
        "note": rng.choice(["", "ok", None, "review"], n),
        "grade": rng.choice(list("ABCDEF"), n), "married": rng.random(n) < 0.5,
        "age": rng.integers(17, 91, n), "kids": rng.integers(0, 6, n),
        "flag": rng.integers(0, 2, n), "rating": rng.integers(1, 6, n),
        "income": holes(rng.lognormal(10, 1, n), 0.1),
        "hours": holes(rng.integers(1, 99, n).astype(float), 0.05),
        "tenure": holes(rng.integers(0, 40, n).astype(float), 0.2),
        "score": rng.normal(0, 1, n), "weight": rng.normal(70, 10, n).round(1),
        "debt": rng.exponential(1000, n), "neg": rng.normal(-5, 3, n),
        "big": rng.integers(0, 10**9, n), "zip": rng.integers(10000, 99999, n).astype(str),
    })


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_draft_of_any_table_passes_contract_check(fmt, tmp_path, capsys):
    """Issue 35: `contract check` refused the draft of a census-like file (an open-domain
    column with a bare size and no universe), and CSV files could not be drafted at all."""
    frame = mixed_census()
    data = tmp_path / f"census.{fmt}"
    frame.to_csv(data, index=False) if fmt == "csv" else frame.to_parquet(data, index=False)
    out = tmp_path / "census.yaml"
    assert main(["contract", "draft", "--data", str(data), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["contract", "check", str(out)]) == 0, capsys.readouterr().err
    contract = load_contract(out)
    assert contract.column("state").type == "categorical"  # 50 <= --max-categories 100
    # above 100 values: left out with a note, no placeholder universe guessed (issue 42.8)
    assert {"name", "city", "county", "zip"} <= set(contract.drop)
    text = out.read_text()
    assert "# REVIEW name: more than 100 distinct values" in text and "placeholder" not in text


@pytest.mark.parametrize("bad", ["0", "-3", "x"])
def test_draft_refuses_bad_max_categories(tmp_path, capsys, bad):
    data = tmp_path / "credit.csv"
    credit_table(50).to_csv(data, index=False)
    assert main(["contract", "draft", "--data", str(data), "--max-categories", bad]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_draft_handles_booleans_codes_with_nulls_dates_and_nullable_amounts(tmp_path):
    rng = np.random.default_rng(5)
    n = 200
    frame = pd.DataFrame({"flag": rng.choice([True, False], n),
                          "industry": rng.integers(0, 30, n).astype(float),
                          "income": rng.normal(100, 30, n),
                          "interviewed": pd.Timestamp("2024-01-01")})
    frame.loc[:3, "industry"] = np.nan
    frame.loc[:2, "income"] = np.nan
    path = tmp_path / "mixed.parquet"
    frame.to_parquet(path, index=False)
    text = draft_contract(path, max_categories=40, max_codes=40)
    contract = parse_contract(text)
    assert contract.column("flag").categories == ("False", "True")  # the encoder's spelling
    industry = contract.column("industry")
    assert industry.categories[:2] == ("0", "1") and industry.categories[-1] == "(missing)"
    assert industry.nulls == "as:(missing)" and industry.type == "categorical"
    assert contract.drop == ("interviewed",)
    assert "# REVIEW income: 3 null(s)" in text
    result = check_data(contract, path)
    assert result.failing_columns == ["income"]  # only the reviewed one, as the note says


def test_release_from_an_unreviewed_draft_is_refused(tmp_path, capsys):
    """Issue 25.3: a draft released with a warning and fixed the dataset's lifetime budget."""
    data = tmp_path / "credit.parquet"
    credit_table(300).to_parquet(data, index=False)
    out = tmp_path / "credit.yaml"
    assert main(["contract", "draft", "--data", str(data), "--out", str(out)]) == 0
    out.write_text(out.read_text().replace(
        "  protected: []\n  admissible: []\n  outcome: []",
        "  protected: [sex]\n  admissible: [checking]\n  outcome: [credit_risk]"))
    capsys.readouterr()
    args = ["release", "--contract", str(out), "--data", str(data), "--epsilon", "1",
            "--delta", "1e-7", "--method", "mst", "--out", str(tmp_path / "releases"),
            "--work-dir", str(tmp_path / "work"), "--no-prefect"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a draft (reviewed: false)" in err[0]
    assert not (tmp_path / "releases").exists()
    assert registry_ledgers("credit") == []  # no budget fixed by a draft
    out.write_text(out.read_text().replace("reviewed: false", "reviewed: true"))
    assert main(args) == 0


STABLE = """
name: stable
version: "1"
description: Written before normalize, rename, label, reviewed and tot existed.
columns:
  - {name: sex, type: categorical, categories: [female, male], aliases: {F: female}}
  - {name: age, type: numeric, integer: true, bins: [0, 40, 120], out_of_domain: clamp}
roles: {protected: [sex], admissible: [age]}
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


def test_new_contract_keys_at_their_defaults_keep_old_fingerprints():
    # The fingerprint this contract had before the keys existed (commit 613a631).
    old = "9c3b7557a4c5a30d73013846aadd08df8693e17968650306df2f7cef5e6aad77"
    assert parse_contract(STABLE).fingerprint() == old
    explicit = STABLE.replace('version: "1"', 'version: "1"\nnormalize: none')
    assert parse_contract(explicit).fingerprint() == old
    assert parse_contract(STABLE.replace('version: "1"', 'version: "1"\nnormalize: strip')
                          ).fingerprint() != old


def test_draft_bins_a_whole_number_column_with_many_values(tmp_path):
    """Issue 25.3: a duration with 33 distinct whole values became 33 categories."""
    import numpy as np
    import pandas as pd

    from privfair.contracts.tools import draft_contract

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"duration": rng.integers(4, 37, 500),  # 33 distinct months
                          "flag": rng.integers(0, 2, 500)})
    data = tmp_path / "durations.parquet"
    frame.to_parquet(data, index=False)
    drafted = yaml.safe_load(draft_contract(data))
    columns = {c["name"]: c for c in drafted["columns"]}
    assert columns["duration"]["type"] == "numeric" and len(columns["duration"]["bins"]) <= 7
    assert columns["flag"]["type"] == "categorical"


def test_draft_of_an_empty_csv_is_one_line_naming_the_file(tmp_path, capsys):
    """An empty CSV has no header: refused in one line, not an internal error (issue 36)."""
    from privfair.cli import main

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["contract", "draft", "--data", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(empty) in err and "no header line" in err
    assert "internal error" not in err
