"""The reproduction report's summary under the old rule and the new one, on the same cells.

``python benchmarks/reproduce_rule_before_after.py [--before REV] [--modes full quick]
[--out benchmarks/results/reproduce_rule_before_after.json]``

For each mode, the committed ``benchmarks/reproduce/results/<mode>/results.jsonl`` is copied
into two temporary folders and the report is written there without running a cell
(``--report-only``): once by the code at ``--before`` (the old rule: the paper's spread
combined with our seeds' sd, one row per setting of ours, any ``why`` marking a row
explained), once by this checkout (issue 40's rule). Neither pass writes into the results
folder. A third pass, ``se_only``, is the old code with only its spread changed to the
standard error of our mean (the old rows, merging and explanations): how many within rows
the standard error alone turns. The JSON gives the summaries per section, the totals, the
summary of the ``report.json`` as committed at ``--before``, and the commit that produced the
cells; a Markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "reproduce" / "results"
COUNTS = ("within", "better", "worse", "uninformative", "not comparable", "explained",
          "unexplained", "not_counted")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def _tree_at(rev: str, into: Path) -> Path:
    """The repository's files at ``rev`` (``git archive``), extracted into ``into``."""
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


#: The old compare_row's verdict call, and the same with the standard error of our mean.
OLD_CALL = "word, reason = verdict(mean, sd, value, paper_sd,"
SE_CALL = ("word, reason = verdict(mean, sd / math.sqrt(n) if n > 1 else 0.0, value, "
           "paper_sd,")


def _se_only(tree: Path, into: Path) -> Path:
    """A copy of the old tree whose compare_row combines the standard error, not the sd."""
    shutil.copytree(tree, into)
    core = into / "benchmarks" / "reproduce" / "core.py"
    text = core.read_text()
    if text.count(OLD_CALL) != 1:
        raise SystemExit(f"--before: its core.py has no single {OLD_CALL!r} to patch")
    core.write_text(text.replace(OLD_CALL, SE_CALL))
    return into


def _report(tree: Path, mode: str, results: Path, out: Path) -> dict[str, Any]:
    """``--report-only`` by the code in ``tree`` on a copy of ``results``."""
    out.mkdir(parents=True)
    shutil.copy(results, out / "results.jsonl")
    subprocess.run([sys.executable, str(tree / "benchmarks" / "reproduce"), f"--{mode}",
                    "--report-only", "--out", str(out)], cwd=tree, check=False,
                   env={**_environment(), "PYTHONPATH": str(tree)}, capture_output=True)
    return json.loads((out / "report.json").read_text())


def _environment() -> dict[str, str]:
    import os

    return dict(os.environ)


def _counts(row: dict[str, Any]) -> dict[str, int]:
    out = {k: int(row.get(k, 0)) for k in COUNTS}
    if "explained" not in row:  # the old summary: explained = worse − unexplained
        out["explained"] = int(row.get("worse", 0)) - int(row.get("unexplained", 0))
    out["compared"] = sum(out[k] for k in ("within", "better", "worse", "uninformative"))
    return out


def _total(rows: list[dict[str, int]]) -> dict[str, int]:
    return {k: sum(r[k] for r in rows) for k in rows[0]} if rows else {}


def compare(before: str, modes: list[str]) -> dict[str, Any]:
    """Both summaries per mode (see the module's docstring)."""
    head = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--", "benchmarks/reproduce",
                      ":(exclude)benchmarks/reproduce/results"))
    document: dict[str, Any] = {
        "before": {"code": _git("rev-parse", before),
                   "rule": "paper spread ⊕ our seeds' sd; one row per setting of ours; any "
                           "why string marks a worse row explained"},
        "after": {"code": head + (" + uncommitted changes" if dirty else ""),
                  "rule": "paper spread ⊕ the standard error of our mean; uninformative rows; "
                          "one row per paper cell; explained only by a counter-run at the "
                          "paper's setting that is within"},
        "modes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = _tree_at(before, Path(tmp) / "before")
        se_tree = _se_only(old_tree, Path(tmp) / "se-only")
        for mode in modes:
            results = RESULTS / mode / "results.jsonl"
            cells_commit = _git("log", "-1", "--format=%H %aI", "--", str(results))
            old = _report(old_tree, mode, results, Path(tmp) / f"old-{mode}")
            new = _report(ROOT, mode, results, Path(tmp) / f"new-{mode}")
            se_only = {r["section"]: r for r in _report(
                se_tree, mode, results, Path(tmp) / f"se-{mode}")["summary"]}
            try:
                committed = json.loads(_git("show", f"{before}:{results.relative_to(ROOT).parent}"
                                                    "/report.json"))["summary"]
            except (subprocess.CalledProcessError, json.JSONDecodeError, KeyError):
                committed = []
            by_name = {r["section"]: r for r in old["summary"]}
            sections = []
            for row in new["summary"]:
                sections.append({"section": row["section"], "title": row["title"],
                                 "before": _counts(by_name.get(row["section"], {})),
                                 "se_only": _counts(se_only.get(row["section"], {})),
                                 "after": _counts(row)})
            document["modes"][mode] = {
                "cells": str(results.relative_to(ROOT)), "cells_commit": cells_commit,
                "cells_count": sum(r["cells"] for r in new["summary"]),
                "failed_cells": sum(r["failed_cells"] for r in new["summary"]),
                "sections": sections,
                "total": {k: _total([s[k] for s in sections])
                          for k in ("before", "se_only", "after")},
                "committed_report_summary": [
                    {"section": r["section"], **_counts(r)} for r in committed]}
    return document


def markdown(document: dict[str, Any]) -> str:
    """One table per mode: each section's counts before → after."""
    keys = ("within", "better", "worse", "uninformative", "not comparable", "explained",
            "unexplained", "not_counted")
    lines = []
    for mode, body in document["modes"].items():
        lines += [f"### {mode} (cells: {body['cells']} at {body['cells_commit']}; "
                  f"{body['cells_count']} cells, {body['failed_cells']} not run or failed)",
                  "", "| section | " + " | ".join(k.replace("_", " ") for k in keys) + " |",
                  "|---" * (len(keys) + 1) + "|"]
        for s in [*body["sections"], {"section": "**total**", **body["total"]}]:
            lines.append(f"| {s['section']} | " + " | ".join(
                f"{s['before'][k]} → {s['after'][k]}" for k in keys) + " |")
        lines += ["", "within rows under the old rule → with only the standard error changed: "
                  + ", ".join(f"{s['section']} {s['before']['within']} → "
                              f"{s['se_only']['within']}" for s in body["sections"])
                  + f" (total {body['total']['before']['within']} → "
                    f"{body['total']['se_only']['within']})", ""]
    lines.append("Before: " + document["before"]["rule"] + f" (code {document['before']['code'][:12]}). "
                 "After: " + document["after"]["rule"] + f" (code {document['after']['code'][:12]}). "
                 "explained / unexplained split the worse rows; not counted: rows of other "
                 "settings of ours shown beside the row of their paper cell.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="0347b5d",
                        help="the commit whose code applies the old rule (default 0347b5d, "
                             "the branch point of issue 40's rule)")
    parser.add_argument("--modes", nargs="+", choices=("full", "quick"),
                        default=["full", "quick"], help="which committed runs to read")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results"
                        / "reproduce_rule_before_after.json",
                        help="where to write the JSON")
    args = parser.parse_args(argv)
    document = compare(args.before, args.modes)
    args.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(markdown(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
