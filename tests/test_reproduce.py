"""The papers' reproduction (``benchmarks/reproduce``): verdict logic and a CI-sized run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from reproduce.core import compare_row, mean_sd, run_cells, verdict  # noqa: E402


def test_verdict_known_values():
    # Within the paper's sd combined with ours: sqrt(0.03² + 0.04²) = 0.05.
    assert verdict(0.85, 0.04, 0.80, 0.03)[0] == "within"
    assert verdict(0.86, 0.04, 0.80, 0.03, better="higher")[0] == "better"
    assert verdict(0.86, 0.04, 0.80, 0.03, better="lower")[0] == "worse"
    assert verdict(0.86, 0.04, 0.80, 0.03)[0] == "worse"  # no direction: a gap is a miss
    # No paper sd: 10 % of the paper's value.
    assert verdict(105.0, 0.0, 100.0)[0] == "within"
    assert verdict(111.0, 0.0, 100.0, better="lower")[0] == "worse"
    # A disparity: closer to 0 is better.
    assert verdict(-0.01, 0.0, 0.2, 0.01, better="abs_lower")[0] == "better"
    # abs_tol floors the spread.
    assert verdict(0.004, 0.0, 0.0, 0.0, abs_tol=0.005)[0] == "within"
    assert verdict(math.nan, 0.0, 1.0)[0] == "not comparable"
    assert verdict(1.0, 0.0, None)[0] == "not comparable"


def test_compare_row_and_mean_sd():
    mean, sd, n = mean_sd([1.0, 3.0, None, math.nan])
    assert (mean, n) == (2.0, 2) and sd == pytest.approx(math.sqrt(2))
    row = compare_row("s", "m", [0.5, 0.7], {"value": 0.6, "sd": 0.2, "source": "T1"},
                      paper_accounting=[0.1])
    assert row["verdict"] == "within" and row["n"] == 2 and row["source"] == "T1"
    assert row["paper_accounting"] == 0.1 and row["paper_accounting_verdict"] == "worse"


def test_cells_resume(tmp_path):
    calls = []

    def runner(c):
        calls.append(c["id"])
        if c["seed"] == 1 and len(calls) < 3:
            raise ValueError("boom")
        return {"x": c["seed"]}

    cells = [{"section": "t", "id": f"t|seed={s}", "setting": {}, "seed": s} for s in (0, 1)]
    log = tmp_path / "results.jsonl"
    first = run_cells(cells, runner, log, log=lambda text: None)
    assert [r["status"] for r in first] == ["ok", "failed"]
    second = run_cells(cells, runner, log, log=lambda text: None)
    assert [r["status"] for r in second] == ["ok", "ok"]
    assert calls == ["t|seed=0", "t|seed=1", "t|seed=1"]  # the ok cell is not re-run


@pytest.mark.slow
def test_quick_subset_report_complete(tmp_path):
    sections = ["cathist", "xu_causal", "xu_dpne"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "reproduce"), "--quick", "--only",
         *sections, "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
        timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert [s["name"] for s in report["sections"]] == sections
    for section in report["sections"]:
        assert section["rows"], section["name"]
        assert not section["failed"], section["failed"]
    html = (tmp_path / "report.html").read_text()
    assert all(f"id='{name}'" in html for name in sections)
    assert "data:image/png;base64," in html  # CatHist's plot is inline
