"""Data contracts: the shipped ones load, bad ones are refused with a one-line message."""

from __future__ import annotations

from pathlib import Path

import pytest

from privfair.contracts.datasets import contract_path, default_contract_path
from privfair.contracts.schema import Contract, load_contract, parse_contract
from privfair.core.domain import Domain, Roles
from privfair.core.errors import ContractError, DomainError

ROOT = Path(__file__).resolve().parents[1]
CANONICAL = ROOT / "data_contracts"
SHIPPED = ("adult", "adult_safes", "adult_pse_dr", "compas", "example_open_domain")

MINIMAL = """\
name: toy
version: "1"
columns:
  - name: sex
    type: categorical
    categories: [F, M]
  - name: degree
    type: categorical
    categories: [none, some]
  - name: hours
    type: numeric
    integer: true
    bins: [0, 10, 20]
  - name: hired
    type: categorical
    categories: ["no", "yes"]
roles:
  protected: [sex]
  admissible: [degree]
  outcome: [hired]
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


def _refused(text: str, *needles: str) -> str:
    with pytest.raises(ContractError) as info:
        parse_contract(text, source="bad.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("contract bad.yaml: ")
    for needle in needles:
        assert needle in message, message
    return message


# --- shipped contracts -------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_contracts_load(name: str) -> None:
    contract = load_contract(CANONICAL / f"{name}.yaml")
    assert isinstance(contract, Contract)
    assert contract.roles().outcome  # every shipped contract is a fair-release contract


@pytest.mark.parametrize("name", SHIPPED)
def test_packaged_copies_are_byte_identical(name: str) -> None:
    assert contract_path(name).read_bytes() == (CANONICAL / f"{name}.yaml").read_bytes()


def test_adult_contract_declares_13_attributes() -> None:
    contract = load_contract(default_contract_path())
    assert contract.column_names == (
        "age", "workclass", "education", "marital-status", "occupation", "relationship",
        "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
        "income",
    )
    assert contract.drop == ("fnlwgt", "education-num")
    assert contract.domain() == Domain(
        contract.column_names, (15, 9, 16, 7, 15, 6, 5, 2, 4, 4, 10, 42, 2)
    )
    assert contract.labels("age")[0] == "17-21" and contract.labels("age")[-1] == "87-90"
    assert contract.labels("hours-per-week") == [
        "1-10", "11-20", "21-30", "31-40", "41-50", "51-60", "61-70", "71-80", "81-90", "91-99"
    ]
    assert contract.labels("capital-gain") == ["0", "1-4999", "5000-9999", ">=10000"]
    assert contract.labels("income") == ["<=50K", ">50K"]
    assert "?" in contract.labels("workclass") and "?" in contract.labels("native-country")
    assert contract.roles() == Roles(
        protected=("sex", "race", "native-country"),
        admissible=("workclass", "education", "occupation", "capital-gain", "capital-loss",
                    "hours-per-week"),
        outcome=("income",),
    )
    assert contract.free_columns() == ("age", "marital-status", "relationship")
    assert contract.budget.epsilon == 10.0 and contract.budget.delta == 1e-6


def test_pse_dr_view_binarises_the_eleven_cfgan_attributes() -> None:
    """Xu's Table 7.1 setting: PSE-DR's 11 attributes, each with two categories, a DAG
    that parses with sex exogenous and income the sink, and every embedded row mapped."""
    import pandas as pd

    from privfair.contracts.datasets import embedded_dataset_for, load_codes
    from privfair.generative.dag import parse_dag

    codes, contract = load_codes("adult_pse_dr")
    domain = contract.domain()
    assert set(domain.attributes) == {
        "age", "sex", "race", "native-country", "marital-status", "workclass", "education",
        "occupation", "relationship", "hours-per-week", "income"}
    assert all(domain.size(a) == 2 for a in domain)
    assert len(codes) == 48_842
    dag = parse_dag(contract.causal_graph.as_mapping(), domain, protected=("sex",),
                    outcome=("income",))
    assert dag.parents("sex") == () and "marital-status" in dag.parents("income")
    raw = pd.read_parquet(embedded_dataset_for("adult_pse_dr"))
    married = raw["marital-status"].isin(["Married-civ-spouse", "Married-AF-spouse"])
    assert codes["marital-status"].mean() == pytest.approx(married.mean(), abs=1e-12)
    assert codes["hours-per-week"].mean() == pytest.approx(
        (raw["hours-per-week"] > 40).mean(), abs=1e-12)
    assert codes["age"].mean() == pytest.approx((raw["age"] >= 37).mean(), abs=1e-12)


def test_compas_contract() -> None:
    contract = load_contract(contract_path("compas"))
    assert contract.labels("priors_count") == ["0", "1-3", ">3"]
    assert contract.labels("race") == ["African-American", "Caucasian"]
    assert contract.roles().protected == ("race", "sex")
    assert contract.free_columns() == ("age_cat",)


def test_open_domain_contract_needs_released_categories() -> None:
    contract = load_contract(contract_path("example_open_domain"))
    spec = contract.column("gender")
    assert spec.open_domain is not None
    assert spec.open_domain.size == sum(27**k for k in range(1, 13))  # words of <= 12 chars
    with pytest.raises(DomainError, match="'gender'.*open_categories"):
        contract.domain()
    domain = contract.domain(open_categories={"gender": ("female", "male")})
    # The declared other bucket is appended after the released values.
    assert contract.labels("gender", open_categories={"gender": ["female", "male"]}) == [
        "female", "male", "(other)"
    ]
    assert domain.size("gender") == 3
    with pytest.raises(DomainError, match="only text"):
        contract.domain(open_categories={"gender": ["x"], "hired": ["no"]})


def test_fingerprint_ignores_layout_but_not_content() -> None:
    base = parse_contract(MINIMAL)
    reformatted = parse_contract("# a comment\n" + MINIMAL.replace(
        "budget: {epsilon: 1.0, delta: 1.0e-6}", "budget:\n  delta: 0.000001\n  epsilon: 1"))
    assert base.fingerprint() == reformatted.fingerprint()
    assert len(base.fingerprint()) == 64
    changed = parse_contract(MINIMAL.replace("[0, 10, 20]", "[0, 10, 21]"))
    assert changed.fingerprint() != base.fingerprint()


def test_numeric_label_generation_and_bounds() -> None:
    contract = parse_contract(MINIMAL)
    assert contract.labels("hours") == ["0-9", "10-20"]
    real = parse_contract(MINIMAL.replace("    integer: true\n", ""))
    assert real.labels("hours") == ["[0, 10)", "[10, 20]"]
    assert real.column("hours").bounds == (0.0, 20.0)


def test_yaml_12_floats_and_integer_categories() -> None:
    text = MINIMAL.replace('["no", "yes"]', "[0, 1]").replace("1.0e-6", "1e-6")
    contract = parse_contract(text)
    assert contract.labels("hired") == ["0", "1"]
    assert contract.budget.delta == 1e-6


# --- refusals ----------------------------------------------------------------------------


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: toy\nversion: '1'\ncolumns: [\n  - oops: : :\n")
    with pytest.raises(ContractError, match=r"broken.yaml: YAML syntax error at line \d+"):
        load_contract(path)


def test_missing_file() -> None:
    with pytest.raises(ContractError, match="cannot read"):
        load_contract("/nonexistent/contract.yaml")


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        # overlapping roles
        ("outcome: [hired]", "outcome: [hired, sex]", ("['sex']", "protected and outcome")),
        # a role naming an unknown column
        ("admissible: [degree]", "admissible: [degree, salary]", ("roles.admissible",
                                                                  "['salary']")),
        # outcome with no admissible attribute
        ("  admissible: [degree]\n", "", ("no admissible", "fair release is impossible")),
        # bins not strictly increasing
        ("[0, 10, 20]", "[0, 20, 10]", ("column 'hours'", "strictly increasing")),
        ("[0, 10, 20]", "[0, 10, 10]", ("strictly increasing",)),
        # empty category list
        ("categories: [none, some]", "categories: []", ("column 'degree'", "empty")),
        # unknown key, at the top level and in a column
        ("name: toy", "name: toy\nowner: me", ("unknown key 'owner'", "expected one of")),
        ("    integer: true", "    integr: true", ("column 'hours'", "unknown key 'integr'")),
        # duplicate categories and duplicate keys
        ("categories: [F, M]", "categories: [F, F]", ("'F' is listed twice",)),
        ("version: \"1\"", "version: \"1\"\nversion: \"2\"", ("duplicate key 'version'",)),
        # policies
        ("    categories: [F, M]", "    categories: [F, M]\n    out_of_domain: clamp",
         ("clamp needs a numeric column",)),
        ("    categories: [F, M]", "    categories: [F, M]\n    nulls: as:X",
         ("nulls", "'X' is not a declared category")),
        ("    categories: [F, M]", "    categories: [F, M]\n    out_of_domain: other",
         ("must name a category",)),
        ("    categories: [F, M]", "    categories: [F, M]\n    aliases: {f: Q}",
         ("alias 'f'", "not a declared category")),
        # YAML booleans are not silently turned into categories
        ('["no", "yes"]', "[no, yes]", ("must be strings", "quote")),
        # budget
        ("epsilon: 1.0", "epsilon: -1.0", ("budget.epsilon",)),
        ("delta: 1.0e-6", "delta: 1.5", ("budget.delta",)),
        # wrong keys for the column type, and missing essentials
        ("    integer: true\n", "    integer: true\n    categories: [a]\n",
         ("'categories' is not allowed for a numeric column",)),
        ("    bins: [0, 10, 20]\n", "", ("needs a 'bins' list",)),
        ("    bins: [0, 10, 20]", "    bins: [0, 10, 20]\n    labels: [a]",
         ("1 labels for 2 bins",)),
        ("    bins: [0, 10, 20]", "    bins: [0, 10, 20]\n    lower: -5", ("lower/upper",)),
        ("    bins: [0, 10, 20]", "    bins: [0, 0.2, 0.5, 20]", ("bin 1", "no whole number")),
        ("budget: {epsilon: 1.0, delta: 1.0e-6}\n", "", ("missing required key 'budget'",)),
    ],
)
def test_bad_contracts_are_refused(old: str, new: str, needles: tuple[str, ...]) -> None:
    assert old in MINIMAL
    _refused(MINIMAL.replace(old, new, 1), *needles)


def test_role_naming_a_dropped_column_says_so() -> None:
    text = MINIMAL.replace("version: \"1\"", "version: \"1\"\ndrop: [salary]").replace(
        "protected: [sex]", "protected: [sex, salary]")
    _refused(text, "roles.protected", "dropped")


def test_drop_and_columns_must_not_overlap() -> None:
    _refused(MINIMAL.replace("version: \"1\"", "version: \"1\"\ndrop: [sex]"), "drop", "sex")


def test_text_column_needs_open_domain() -> None:
    text = MINIMAL.replace("  - name: degree", "  - name: note\n    type: text\n  - name: degree")
    _refused(text, "column 'note'", "open_domain")


def test_top_level_must_be_a_mapping() -> None:
    _refused("- just\n- a list\n", "expected a mapping")
