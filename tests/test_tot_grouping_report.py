"""Issue 42.6: the report's disparity of the released rows is computed on the grouping η
constrains. TOT checked per attribute (gaps 0.059/0.030 on credit) while the report showed
the intersectional gap (0.104) beside η, which read as TOT breaking η."""

from __future__ import annotations

import pandas as pd
import pytest

from privfair.reporting.report import outcome_gap, tot_section


def _rows() -> pd.DataFrame:
    # sex and race each split the outcome by 0.1; jointly (f, b) against (m, a) by 0.2
    cells = {("f", "a"): 0.5, ("f", "b"): 0.4, ("m", "a"): 0.6, ("m", "b"): 0.5}
    rows = []
    for (sex, race), rate in cells.items():
        yes = int(rate * 1000)
        rows += [(sex, race, "1")] * yes + [(sex, race, "0")] * (1000 - yes)
    return pd.DataFrame(rows, columns=["sex", "race", "y"])


def _manifest(groups: str) -> dict:
    return {"fairness_transform": {
        "applied": True,
        "parameters": {"eta": 0.12, "discrimination": "additive", "groups": groups},
        "columns": {"protected": ["sex", "race"], "outcome": "y", "features": []},
        "fairness_check": {"passed": True, "criterion": "max gap"},
        "achieved_discrimination": {}}}


def test_the_gaps_of_the_fixture():
    frame = _rows()
    assert outcome_gap(frame, ["sex", "race"], "y") == pytest.approx(0.2)
    assert outcome_gap(frame, ["sex"], "y") == pytest.approx(0.1)
    assert outcome_gap(frame, ["race"], "y") == pytest.approx(0.1)


def test_per_attribute_tot_reports_the_per_attribute_gap_beside_eta():
    page = tot_section(_manifest("per_attribute"), _rows())
    assert "largest over attributes" in page
    assert "<td>0.1<" in page and "<td>0.2<" not in page


def test_intersectional_tot_reports_the_joint_gap():
    page = tot_section(_manifest("intersectional"), _rows())
    assert "intersectional" in page
    assert "<td>0.2<" in page
