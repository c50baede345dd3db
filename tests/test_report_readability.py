"""Issue 25.4 and 25.5: TOT on your own data and reports that are easy to read.

* 25.4: ``contract draft`` proposes a ``tot:`` block that, adopted as proposed (roles
  declared, two features kept), releases with TOT on the first try; an infeasible TOT names
  the contract's keys (``tot.eta``, ``tot.distortion.bounds``), never ``clist``/``dlist``;
  the report has a TOT section with η, the discrimination before and after (synthetic rows)
  and the cost in TVD.
* 25.5: structures and causal graphs are drawn in layers by role, long labels are shortened
  in the middle with their full names listed, the ledger is grouped by stage, the Method table
  holds tables and no JSON, and an AIM report shows no MST-style thirds.

The browser check of every report kind is ``tests/test_report_browser.py`` (slow).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from browser_check import reviewed_credit

from privfair.cli import main
from privfair.contracts.datasets import contract_path
from privfair.release.run import release_table as run_release
from privfair.release.tabular.plan import ReleaseParams
from privfair.reporting.report import build_report, structure_svg

ROOT = Path(__file__).resolve().parents[1]
LONG = "status_of_existing_checking_account_months"  # 42 characters


def compas_release(tmp_path: Path, **extra) -> Path:
    params = ReleaseParams(contract=str(contract_path("compas")), epsilon=1.0, delta=1e-7,
                           seed=5, insecure_seed=True, out=str(tmp_path / "releases"),
                           work_dir=str(tmp_path / "work"), **{"method": "mst", **extra})
    return Path(run_release(params))


def report_of(folder: Path, manifest: dict | None = None) -> str:
    manifest = manifest or json.loads((folder / "manifest.json").read_text())
    synthetic = pd.read_parquet(folder / "synthetic.parquet")
    return build_report(manifest, synthetic, labels=manifest["domain"]["labels"])


def section(page: str, heading: str) -> str:
    start = page.index(f"<h2>{heading}")
    end = page.find("<h2>", start + 4)
    return page[start:end if end > 0 else None]


# --- 25.4: TOT --------------------------------------------------------------------------------


def test_draft_proposes_a_tot_block_that_releases_on_the_first_try(tmp_path, capsys):
    data, draft, text = reviewed_credit(tmp_path)  # contract draft, then the review
    assert "\n# tot:\n" in text and "#     thresholds:" in text and "#     bounds:" in text
    for column in ("duration", "age", "credit_risk", LONG):
        assert re.search(rf"^#       {column}:\s+\{{", text, re.M), column
    assert main(["contract", "check", str(draft), "--data", str(data)]) == 0
    capsys.readouterr()
    code = main(["release", "--contract", str(draft), "--data", str(data), "--epsilon", "1",
                 "--delta", "1e-7", "--method", "mst", "--fairness", "tot", "--seed", "2",
                 "--insecure-seed", "--out", str(tmp_path / "releases"), "--work-dir",
                 str(tmp_path / "work"), "--no-prefect"])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = Path(out.strip().splitlines()[-1])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["fairness_transform"]["applied"]
    assert manifest["fairness_transform"]["fairness_check"]["passed"]


def test_infeasible_tot_names_the_contract_keys(tmp_path, capsys):
    # Per group (SAFES eq. (10) as written): the shipped contract's pooled scope can reach
    # a tiny eta on some synthetic tables.
    contract = tmp_path / "compas.yaml"
    contract.write_text(contract_path("compas").read_text().replace(
        "distortion_scope: pooled", "distortion_scope: per_group"))
    code = main(["release", "--contract", str(contract), "--epsilon", "1",
                 "--delta", "1e-7", "--method", "mst", "--fairness", "tot", "--eta", "0.001",
                 "--seed", "4", "--insecure-seed", "--out", str(tmp_path / "releases"),
                 "--work-dir", str(tmp_path / "work"), "--no-prefect"])
    err = capsys.readouterr().err
    assert code != 0
    assert "TOT infeasible" in err
    assert "tot.eta" in err and "tot.distortion.bounds" in err
    assert "clist" not in err and "dlist" not in err


def test_report_has_a_tot_section(tmp_path):
    folder = compas_release(tmp_path, fairness_transform="tot", eta=0.15)
    manifest = json.loads((folder / "manifest.json").read_text())
    page = (folder / "report.html").read_text()
    tot = section(page, "Fairness transform (TOT)")
    record = manifest["fairness_transform"]
    achieved = record["achieved_discrimination"]
    assert "η (bound on the discrimination)</th><td>0.15<" in tot
    assert f"{achieved['input_max_additive_gap']:.6g}" in tot  # before, on synthetic rows
    assert f"{achieved['max_additive_gap']:.6g}" in tot  # after, the map
    assert "discrimination after, the released synthetic rows" in tot
    assert "cost: TVD of (protected, outcome)" in tot and "TOT&#x27;s objective" in tot
    from privfair.release.tabular.manifest import summary_markdown

    summary = summary_markdown(manifest, folder)
    assert "before; both on synthetic rows" in summary and "cost: TVD" in summary


# --- 25.5: readable reports -----------------------------------------------------------------


def test_structure_is_layered_by_role_and_long_labels_fit():
    from privfair.reporting.charts import shorten

    attributes = ["sex", LONG, "age", "income"]
    drawing = structure_svg(attributes, [("sex", LONG), (LONG, "income"), ("age", LONG)],
                            {"protected": ["sex"], "admissible": [LONG], "outcome": ["income"]})
    # a box per node: x of the layer, one column per role, protected left of the outcome
    x = {name: float(m) for m, name in re.findall(
        r"<rect x='([\d.]+)'[^>]*><title>([^<(]+) \(", drawing)}
    x = {k.strip(): v for k, v in x.items()}
    assert x["sex"] < x[LONG] < x["age"] < x["income"]
    short = shorten(LONG, 24)
    assert short == "status_of_ex…ccount_months" or ("…" in short and len(short) == 24)
    assert f">{short}</text>" in drawing  # drawn shortened in the middle, both ends kept
    assert f"<td>{short}</td><td>{LONG}</td>" in drawing  # full name in the table


def test_ledger_is_grouped_by_stage():
    from privfair.reporting.charts import ledger_stage, ledger_svg, ledger_tables

    entries = [{"name": f"PrivPC level {lv}, col{i}: removal", "mechanism": "exponential",
                "rho": 0.001, "queries": 1} for lv in (0, 1) for i in range(120)]
    entries += [{"name": "AIM measure round 3", "mechanism": "gaussian", "rho": 0.01,
                 "queries": 2}] * 5
    assert len(entries) == 245
    chart = ledger_svg(entries)
    assert chart.count("fill='#4c72b0'") == 3  # one bar per stage, not 245
    assert "PrivPC level 0 (120 steps)" in chart
    tables = ledger_tables(entries)
    assert "<details><summary>every step (245)</summary>" in tables
    assert ledger_stage("select edge 3/14") == "select edge"


def test_graph_report_draws_svg_layers_and_a_grouped_ledger(tmp_path, capsys):
    code = main(["discover", "--contract", str(contract_path("compas")), "--epsilon", "2",
                 "--delta", "1e-6", "--method", "privpc", "--seed", "3", "--insecure-seed",
                 "--out", str(tmp_path / "releases"), "--work-dir", str(tmp_path / "work"),
                 "--no-prefect"])
    out, err = capsys.readouterr()
    assert code == 0, err
    page = (Path(out.strip().splitlines()[-1]) / "report.html").read_text()
    assert "<img" not in page  # the graph and the ledger are SVG (their text is checkable)
    assert "aria-label='causal graph'" in page and "ρ by stage" in page


def test_method_table_has_tables_not_json_and_aim_has_no_thirds(tmp_path):
    folder = compas_release(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    method = section(report_of(folder, manifest), "Method")
    assert "{&quot;" not in method and '{"' not in method
    assert "<th>max_iters</th>" in method  # the estimation record as a nested table
    aim = json.loads(json.dumps(manifest))
    aim["method"]["name"] = "aim"
    aim["method"]["time_budget_s"] = 240.0
    method = section(report_of(folder, aim), "Method")
    for third in ("one_way", "select", "measure"):
        assert f"<th>{third}</th>" not in method
    assert "AIM rounds (select + measure, adaptive; see the ledger)" in method


@pytest.mark.parametrize(("label", "limit"), [("abcdefghij", 5), ("abcdefghij", 10)])
def test_shorten_keeps_both_ends(label, limit):
    from privfair.reporting.charts import shorten

    short = shorten(label, limit)
    assert len(short) == min(len(label), limit)
    assert short[0] == "a" and short[-1] == "j"


def test_draft_says_how_to_constrain_each_protected_attribute_on_its_own(tmp_path):
    """Issue 35's walk: with three protected attributes the draft's tot block, adopted as
    proposed, was infeasible at its own eta (40 intersectional groups) and the draft did not
    say so; its hint, pasted as written, gives one constraint per attribute."""
    from privfair.contracts.schema import load_contract

    data, draft, text = reviewed_credit(tmp_path)
    hints = [line for line in text.splitlines() if "per_attribute" in line]
    assert hints and all(line.startswith("#") for line in hints)
    block = re.search(r"`(fairness: \{groups: per_attribute\})`", text).group(1)
    adopted = tmp_path / "per_attribute.yaml"
    adopted.write_text(text + block + "\n")
    assert load_contract(adopted).fairness.groups == "per_attribute"
