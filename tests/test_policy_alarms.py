"""Issue 42.6: a release's policy counts are read with a multiple-comparison rule. Tested at
2σ one by one, 25 clean cells gave about one false alarm per release ("age clamped: about
125 rows" on a clean column); the threshold now grows with the number of cells read together
so that a release with no touched row raises an alarm in at most 5 % of releases."""

from __future__ import annotations

import numpy as np
import pytest

from privfair.reporting.noisy import FAMILY_ALARM_RATE, count_reading, evidence_threshold
from privfair.reporting.report import policy_counts_section


def _alarms(values, sigma, cells):
    return sum(not count_reading(v, sigma, cells=cells).startswith("within noise")
               for v in values)


def test_clean_columns_raise_an_alarm_in_at_most_the_family_rate_of_releases():
    rng = np.random.default_rng(20261207)
    sigma, cells, releases = 187.0, 25, 4000
    noisy = rng.normal(0.0, sigma, size=(releases, cells))  # no row touched anywhere
    any_alarm = np.mean([_alarms(row, sigma, cells) > 0 for row in noisy])
    # 5 % family rate; the standard error over 4,000 releases is 0.0034
    assert any_alarm <= FAMILY_ALARM_RATE + 3 * np.sqrt(0.05 * 0.95 / releases)
    assert any_alarm >= 0.02  # the rule is not simply silent


def test_a_real_count_is_still_reported_among_many_cells():
    sigma = 187.0
    assert count_reading(6 * sigma, sigma, cells=25).startswith("about 1,122 rows")
    assert count_reading(2.5 * sigma, sigma, cells=1).startswith("about")
    assert count_reading(2.5 * sigma, sigma, cells=25).startswith("within noise of 0")


@pytest.mark.parametrize(("cells", "expected"), [(1, 2.0), (25, 2.878), (400, 3.662)])
def test_the_threshold_is_bonferroni_at_the_family_rate_and_never_below_2_sigma(cells,
                                                                                expected):
    # one-sided: 1.645 alone (raised to 2), z(1 - 0.05/25) = 2.878, z(1 - 0.05/400) = 3.662
    assert evidence_threshold(cells) == pytest.approx(expected, abs=1e-3)


def test_the_report_reads_every_cell_of_the_release_together():
    sigma = 100.0
    rows = [{"column": f"c{i}", "action": "clamped", "noisy_count": 0.0} for i in range(24)]
    rows.append({"column": "age", "action": "clamped", "noisy_count": 250.0})  # 2.5σ
    page = policy_counts_section({"touched_rows": rows, "policies": {},
                                  "noise": {"sigma": sigma}})
    assert "about 250 rows" not in page
    assert page.count("within noise of 0") == 25
