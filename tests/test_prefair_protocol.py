"""PreFair's protocol (Pujol et al. 2023, §5.1) as a named evaluation setting, and Table 3's
percentage as the paper computes it: Greedy's mean over MST's mean."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmarks.reproduce import prefair
from privfair.contracts.datasets import load_codes
from privfair.evaluation.evaluate import TEST_ROWS, load_embedded


def test_test_rows_all_fits_and_tests_on_the_whole_table():
    codes, _ = load_codes("compas")
    whole = load_embedded("compas", test_rows="all")
    assert len(whole.train) == len(whole.test) == len(codes)
    assert whole.train.equals(whole.test)
    held_out = load_embedded("compas")  # the default: 80/20, disjoint
    assert len(held_out.train) + len(held_out.test) == len(codes)
    assert len(held_out.test) == round(0.2 * len(codes))
    assert TEST_ROWS == ("held-out", "all")
    with pytest.raises(ValueError, match="test_rows"):
        load_embedded("compas", test_rows="train")


def test_linearized_ratio_is_the_ratio_of_means_with_its_delta_method_error():
    greedy, mst = [1.0, 1.0, 0.5], [1.0, 3.0, 0.5]
    values = prefair.linearized_ratio(greedy, mst)
    ratio = 100 * statistics.fmean(greedy) / statistics.fmean(mst)  # 55.6, not the 66.7 of
    assert statistics.fmean(values) == pytest.approx(ratio)           # the per-seed ratios
    r = ratio / 100
    residual = [g - r * m for g, m in zip(greedy, mst, strict=True)]
    se = 100 / statistics.fmean(mst) * statistics.stdev(residual) / math.sqrt(3)
    assert statistics.stdev(values) / math.sqrt(3) == pytest.approx(se)
    assert prefair.linearized_ratio([1.0], [0.0]) == []


def _record(method: str, seed: int, value: float, **extra) -> dict:
    setting = {"dataset": "adult", "method": method, "epsilon": 1.0, "rows": 1, **extra}
    return {"section": "prefair", "id": f"{method}{extra}{seed}", "setting": setting,
            "seed": seed, "status": "ok", "metrics": {"DP": value}}


def test_ratio_runs_keep_the_papers_protocol_and_the_default_apart():
    records = [_record("mst", 0, 0.04, test_rows="all"), _record("mst", 1, 0.002,
                                                                  test_rows="all"),
               _record("prefair-greedy", 0, 0.02, test_rows="all"),
               _record("prefair-greedy", 1, 0.004, test_rows="all"),
               _record("mst", 0, 0.5), _record("prefair-greedy", 0, 0.5)]
    paper = [v for v, _ in prefair.ratio_runs(records, "DP", method="prefair-greedy",
                                              dataset="adult", rows=1, epsilon=1.0,
                                              test_rows="all")]
    # 100 · 0.012 / 0.021: one near-zero MST seed does not dominate (per-seed ratios: 125 %)
    assert len(paper) == 2 and statistics.fmean(paper) == pytest.approx(100 * 0.012 / 0.021)
    default = prefair.ratio_runs(records, "DP", method="prefair-greedy", dataset="adult",
                                 rows=1, epsilon=1.0, test_rows=None)
    assert [v for v, _ in default] == pytest.approx([100.0])
