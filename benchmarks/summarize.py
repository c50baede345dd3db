"""Markdown tables from the saved benchmark JSON in benchmarks/results/ (for docs/results.md).

    python benchmarks/summarize.py [engine|table3|aim|safes ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def engine() -> str:
    doc = _load("engine_adult")
    rows = ["| method | ε | sampling | fit s | sample s | peak RSS MB | TVD-1 | TVD-2 | TVD-3 "
            "| fair tree | CI test O ⟂ P \\| nbrs(O), synthetic: rejections at 5 % (mean p) "
            "| same test, real data: max p |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in doc["summary"]:
        ci = (f"{s['ci_rejections_at_0.05']} ({s['ci_pvalues_synthetic_mean']:.2f})"
              if "ci_rejections_at_0.05" in s else "")
        real = f"{s['ci_pvalues_real_max']:.3f}" if "ci_pvalues_real_max" in s else ""
        rows.append(
            f"| {s['method']} | {s['epsilon']:g} | {s['sample_mode']} | {s['fit_s']:.2f} "
            f"| {s['sample_s']:.3f} | {s['peak_rss_mb']:.0f} | {s['tvd1']:.4f} "
            f"| {s['tvd2']:.4f} ± {s.get('tvd2_sd', 0):.4f} | {s['tvd3']:.4f} "
            f"| {'yes' if s['fair_all_runs'] else 'no'} | {ci} | {real} |")
    return "\n".join(rows)


def table3() -> str:
    columns = ("tvd1", "tvd2", "acd", "accuracy", "DP", "TPRB", "TNRB", "CDP", "CTPRB",
               "CTNRB")
    header = ("| dataset | rows | " + " | ".join(c.upper() if c.startswith("tvd") or c == "acd"
                                              else c for c in columns) + " |")
    out = [header, "|" + "---|" * (len(columns) + 2)]
    for name, label in (("prefair_table3", "1×"), ("prefair_table3_round", "1×, round"),
                        ("prefair_table3_rows10", "10×")):
        doc = _load(name)
        if doc is None:
            continue
        for ds in doc["datasets"]:
            ours = ds["greedy_as_percent_of_mst"]
            cells = " | ".join("n/a" if ours[c] is None else f"{ours[c]:.1f}%" for c in columns)
            out.append(f"| {ds['dataset']} (privfair) | {label} | {cells} |")
            if label == "1×":
                paper = " | ".join(f"{ds['paper_percent'][c]:.1f}%" for c in columns)
                out.append(f"| {ds['dataset']} (paper) | 1× | {paper} |")
    return "\n".join(out)


def aim() -> str:
    out = ["| dataset | method | fit s | peak RSS MB | 2-way TVD iid | 2-way TVD round | rounds "
           "| fair model | peer fit s | peer RSS MB | peer TVD iid |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("aim_compare_compas", "aim_compare_adult"):
        doc = _load(name)
        if doc is None:
            continue
        for s in doc["summary"]:
            peer = s.get("peer") or {}
            fit = peer.get("fit_s", "")
            out.append(
                f"| {s['dataset']} | {s['method']} | {s['fit_s']:.1f} | {s['peak_rss_mb']:.0f} "
                f"| {s['tvd2_iid']:.4f} | {s['tvd2_round']:.4f} | {s['rounds']:.1f} "
                f"| {'yes' if s['fair_all_runs'] else 'no'} | {fit} "
                f"| {peer.get('peak_rss_mb', ''):} | {peer.get('tvd2_iid', '')} |")
    return "\n".join(out)


def safes() -> str:
    doc = _load("safes_adult")
    out = ["| ε | η | TVD-1 | TVD-2 | TVD-3 | COD sex | COD race | SPD sex | SPD race "
           "| AOD sex | AOD race | accuracy |", "|" + "---|" * 12]
    for s in doc["summary"]:
        out.append(
            f"| {s['epsilon']:g} | {s['eta']} | {s['tvd1']:.4f} | {s['tvd2']:.4f} "
            f"| {s['tvd3']:.4f} | {s['COD_sex']:+.3f} | {s['COD_race']:+.3f} "
            f"| {s['SPD_sex']:+.3f} | {s['SPD_race']:+.3f} | {s['AOD_sex']:+.3f} "
            f"| {s['AOD_race']:+.3f} | {s['accuracy']:.3f} |")
    ref = doc["safes_dp_only_large_eps"]
    out.append(f"| SAFES DP-only, large ε | none | | | | {ref['COD_sex']:+.3f} | | "
               f"{ref['SPD_sex']:+.3f} | | | | {ref['accuracy']:.3f} |")
    return "\n".join(out)


TABLES = {"engine": engine, "table3": table3, "aim": aim, "safes": safes}

if __name__ == "__main__":
    for key in sys.argv[1:] or list(TABLES):
        print(TABLES[key]())
        print()
