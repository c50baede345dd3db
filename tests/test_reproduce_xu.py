"""Xu 2021 sections of ``benchmarks/reproduce``: transcriptions, verdict reasons, small cells."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from reproduce import xu_causal, xu_causal_numeric  # noqa: E402
from reproduce.core import paper_table  # noqa: E402


def test_tables_4_4_to_4_6_transcribed():
    rows = paper_table("xu_table4_4_4_6")
    # 3 values of p, 4 of n, 3 of s; 3 methods × 3 metrics each.
    assert Counter(r["table"] for r in rows) == {"4.4": 27, "4.5": 36, "4.6": 27}
    assert all(r["value"] is not None and r["sd"] is not None for r in rows)
    by_key = {(r["table"], r["n"], r["p"], r["s"], r["method"], r["metric"]): r for r in rows}
    assert by_key[("4.4", "5000", "15", "0.2", "lapmech", "tdr")]["value"] == 0.227
    assert by_key[("4.5", "1000", "10", "0.2", "privpc", "tdr")]["value"] == 0.620
    assert by_key[("4.6", "5000", "10", "0.6", "pc", "fpr")]["sd"] == 0.066


def test_tables_4_8_to_4_11_transcribed():
    rows = paper_table("xu_table4_8_4_11")
    # 4 ε, 3 n, 4 p, 3 s; 2 methods × 3 metrics each.
    assert Counter(r["table"] for r in rows) == {"4.8": 24, "4.9": 18, "4.10": 24, "4.11": 18}
    by_key = {(r["table"], r["epsilon"], r["n"], r["p"], r["s"], r["method"], r["metric"]): r
              for r in rows}
    assert by_key[("4.8", "0.01", "10000", "10", "0.4", "privpc_star", "tpr")]["sd"] == 0.383
    assert by_key[("4.10", "1", "10000", "100", "0.4", "pc", "tdr")]["value"] == 0.039


def test_causal_grid_settings_are_distinct_and_cover_the_tables():
    full = xu_causal.grid_settings("full")
    # p ∈ {5, 10, 15}, n ∈ {10k, 5k, 3k, 1k}, s ∈ {.2, .4, .6} share the default once.
    assert len(full) == 3 + 4 + 3 - 2
    numeric = xu_causal_numeric.settings("full")
    assert len(numeric) == 4 + 3 + 4 + 3 - 3  # 4.8–4.10 share the default; 4.11 shares p = 20
    assert all(c["seed"] in range(5) for c in xu_causal_numeric.cells("full"))


def test_lapmech_row_explains_its_gap_with_the_measurement():
    metrics = {"pc": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0},
               "lapmech": {"tpr": 1.0, "fpr": 0.9, "tdr": 0.2},
               "privpc": {"tpr": 0.9, "fpr": 0.0, "tdr": 1.0},
               "lapmech_per_test": {"tpr": 1.0, "fpr": 0.01, "tdr": 0.97},
               "draws_per_pair_cell": 5000.0, "full_cells": 100_000}
    setting = {"epsilon": 1.0, "n": 10_000, "p": 10, "s": 0.2}
    records = [{"status": "ok", "setting": setting, "metrics": metrics, "id": "x", "seed": 0}]
    rows = xu_causal.summarize(records, "quick")["rows"]
    fpr = next(r for r in rows if r["setting"].endswith("lapmech") and r["metric"] == "fpr")
    assert fpr["verdict"] == "worse" and fpr["paper"] == 0.105
    assert "≈5,000 Laplace(1/ε) draws" in fpr["why"] and "sd ≈ 100" in fpr["why"]
    assert fpr["paper_accounting"] == 0.01 and fpr["paper_accounting_verdict"] == "better"


def test_lapmech_over_its_cell_limit_is_not_comparable():
    metrics = {"pc": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0}, "lapmech": {},
               "privpc": {"tpr": 0.8, "fpr": 0.05, "tdr": 0.8},
               "lapmech_per_test": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0},
               "draws_per_pair_cell": 1e7, "full_cells": 3e8}
    setting = {"epsilon": 5.0, "n": 5_000, "p": 15, "s": 0.2}
    records = [{"status": "ok", "setting": setting, "metrics": metrics, "id": "x", "seed": 0}]
    rows = [r for r in xu_causal.summarize(records, "full")["rows"]
            if r["setting"].endswith("lapmech")]
    assert len(rows) == 3 and {r["verdict"] for r in rows} == {"not comparable"}
    assert all("over LapMech's limit" in r["why"] for r in rows)


@pytest.mark.parametrize("module, setting", [
    (xu_causal, {"epsilon": 5.0, "n": 5_000, "p": 5, "s": 0.2}),
    (xu_causal_numeric, {"epsilon": 1.0, "n": 1_000, "p": 10, "s": 0.4}),
])
def test_small_causal_cell_runs(module, setting):
    from reproduce.core import cell

    out = module.run(cell(module.NAME, setting, 0))
    for method in module.METHODS:
        assert set(out[method]) >= {"tpr", "fpr", "tdr"}
        assert all(0.0 <= out[method][k] <= 1.0 for k in ("tpr", "fpr", "tdr"))
    rows = module.summarize([{"status": "ok", "setting": setting, "metrics": out, "id": "x",
                              "seed": 0}], "quick")["rows"]
    assert len(rows) == 3 * len(module.METHODS)
    assert all(r["paper"] is not None for r in rows)
