"""The self-contained ``report.html`` and the ``report.json`` behind it."""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from .core import NOT_RUN, VERDICTS

COLOURS = {"within": "#d8f0d8", "better": "#cfe3ff", "worse": "#f8d4d4",
           "uninformative": "#fff0c0", "not comparable": "#eeeeee"}
#: The rule every verdict follows, as report.html states it.
RULE = ("Each paper cell is one row: where several settings of ours face one paper cell, the "
        "row is the one at the paper's setting and the others are shown beside it "
        "(<i>other settings</i>), never counted; a cell printed in two tables is one row. "
        "Verdict: <i>within</i> the paper's spread (its sd, or the metric's stated tolerance "
        "when it reports none, shown in each row's reason) combined with the standard error "
        "of our mean over seeds (sd/√n, not our sd); <i>better</i> / <i>worse</i> outside "
        "it; <i>uninformative</i> when the compared outputs are identical across the methods "
        "the row compares, or its classifier predicts one class, in every run (it tests "
        "nothing, whatever its number); <i>not comparable</i> when either side has no "
        "number. A worse row is <i>explained</i> only by a measured counter-run in this "
        "report, at the paper's setting (e.g. the paper's accounting), that is itself within "
        "the paper's spread; otherwise it is worse, unexplained, and its reason says what the "
        "counter-run found. Notes in a row's reason never explain it.")
#: Header of the paper_accounting column unless a section names its own.
ACCOUNTING_LABEL = "paper accounting (paper's analysis, not our guarantee)"
WARNING = ("Evaluation output, not a release: every number here reads the real embedded data "
           "and is not privacy-protected.")


def summary(sections: list[dict[str, Any]], *, report_code: str | None = None
            ) -> list[dict[str, Any]]:
    """Verdict counts, failed cells, wall time and how many of the section's finished cells
    ran under the section's code at the report (its ``code``, else ``report_code``:
    ``at_report_code``), per section.

    One row per paper cell (the rows as :func:`~benchmarks.reproduce.core.one_row_per_paper_cell`
    leaves them). ``explained`` / ``unexplained`` split the ``worse`` rows by whether a
    counter-run at the paper's setting is within (the ``explained`` mark of
    :func:`~benchmarks.reproduce.core.compare_row`); ``not_counted`` is the rows of ours
    shown beside another row of the same paper cell; ``unchecked`` the compared rows whose
    runs did not record whether their outputs are trivial.
    """
    out = []
    for s in sections:
        counts = Counter(r["verdict"] for r in s["rows"])
        worse = [r for r in s["rows"] if r["verdict"] == "worse"]
        out.append({"section": s["name"], "title": s["title"],
                    **{v: counts.get(v, 0) for v in VERDICTS},
                    "explained": sum(bool(r.get("explained")) for r in worse),
                    "unexplained": sum(not r.get("explained") for r in worse),
                    "not_counted": sum(len(r.get("other_settings", ())) + len(r.get("also_as", ()))
                                       for r in s["rows"]),
                    "unchecked": sum(r.get("informative") == "unchecked" for r in s["rows"]),
                    "cells": s.get("cells", 0),
                    "failed_cells": sum(f["error"] != NOT_RUN for f in s["failed"]),
                    "not_run_cells": sum(f["error"] == NOT_RUN for f in s["failed"]),
                    "at_report_code": s.get("cells_code", {}).get(
                        s.get("code") or report_code or "", 0),
                    "wall_s": round(s.get("wall_s", 0.0), 1)})
    return out


def summary_markdown(document: dict[str, Any], *, link: str = "report.html") -> str:
    """The summary as a Markdown table (``summary.md``; docs/results.md quotes it).

    Parameters
    ----------
    document : dict
        The report's document (``report.json``).
    link : str
        Where the report is, relative to the Markdown's reader: each section links to its
        anchor there.

    Returns
    -------
    str
        One row per section: verdict counts, cells, failed cells and the cells' seconds.
    """
    lines = ["| section | " + " | ".join(VERDICTS)
             + " | worse, explained by a counter-run | worse, unexplained | not counted "
               "(other settings) | cells | cells run at this report's code | failed "
               "| not run | cell s |",
             "|---" * (len(VERDICTS) + 9) + "|"]
    for row in document["summary"]:
        lines.append(f"| [{row['title']}]({link}#{row['section']}) | "
                     + " | ".join(str(row.get(v, 0)) for v in VERDICTS)
                     + f" | {row.get('explained', 0)} | {row.get('unexplained', 0)}"
                       f" | {row.get('not_counted', 0)} | {row['cells']}"
                       f" | {row.get('at_report_code', 0)}"
                       f" | {row['failed_cells']} | {row.get('not_run_cells', 0)}"
                       f" | {row['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def status_markdown(document: dict[str, Any]) -> str:
    """Cells and failed cells per section, as Markdown: what the Prefect artifact shows.

    No verdict and no metric: those read the real rows, so they stay in the report's files
    (a label does not make a number private, and Prefect keeps artifacts in its database).
    """
    lines = ["| section | cells | failed | not run |", "|---|---|---|---|"]
    lines += [f"| {row['title']} | {row['cells']} | {row['failed_cells']}"
              f" | {row.get('not_run_cells', 0)} |"
              for row in document["summary"]]
    return "\n".join(lines) + "\n"


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return ""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return html.escape(str(value))
    if not math.isfinite(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"


def _provenance_html(provenance: dict[str, Any] | None) -> str:
    if not provenance:
        return ""
    text = f" Report written by code {html.escape(str(provenance.get('report_code')))}"
    cells = provenance.get("cells")
    if isinstance(cells, dict) and "commit" in cells:
        text += (f"; its cells are reused as committed in {html.escape(cells['commit'][:12])} "
                 f"({html.escape(cells['date'])}), not re-run")
    elif isinstance(cells, dict):
        text += f"; its cells: {html.escape(cells.get('from', ''))}"
    return text + "."


def _beside_html(row: dict[str, Any]) -> str:
    """Other settings of ours that face the row's paper cell, and the tables that print it
    too: shown, not counted."""
    parts = []
    if row.get("also_as"):
        parts.append("also compared as: " + html.escape("; ".join(row["also_as"])))
    for other in row.get("other_settings", ()):
        parts.append(f"other setting (not counted): {html.escape(other['setting'])}: "
                     f"{_num(other['ours'])} ± se {_num(other.get('ours_se'))} "
                     f"({other['n']}), {other['verdict']}")
    return "".join(f"<br><i>{p}</i>" for p in parts)


def write(out: Path, document: dict[str, Any]) -> None:
    """Write ``report.json``, ``report.html`` and ``summary.md`` into ``out``."""
    (out / "report.json").write_text(json.dumps(document, indent=1, default=str))
    (out / "summary.md").write_text(summary_markdown(document))
    parts = ["<!doctype html><meta charset='utf-8'><title>privfair: the papers reproduced"
             "</title><style>body{font:14px sans-serif;max-width:1200px;margin:2em auto}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
             "padding:2px 6px;font-size:12px}th{background:#f4f4f4}.why{color:#555}"
             "</style>",
             "<h1>privfair: every paper table, reproduced</h1>",
             f"<p><b>{WARNING}</b></p>",
             f"<p>Mode <code>{document['mode']}</code>, generated {document['generated']}, "
             f"{document['cells_wall_s']:.0f} s of cells (this invocation "
             f"{document['wall_s']:.0f} s; cells already in results.jsonl are reused). "
             + _provenance_html(document.get("provenance")) + "</p>",
             f"<p>{RULE} <i>paper accounting</i> is the same code run at the paper's own "
             "neighbouring relation and sensitivity: the paper's analysis, not our "
             "guarantee.</p>",
             "<h2>Summary</h2><table><tr><th>section</th>"
             + "".join(f"<th>{v}</th>" for v in VERDICTS)
             + "<th>worse, explained by a counter-run</th><th>worse, unexplained</th>"
               "<th>not counted (other settings)</th><th>cells</th>"
               "<th>cells run at this report's code</th><th>failed</th><th>not run</th>"
               "<th>wall s</th></tr>"]
    for row in document["summary"]:
        parts.append(f"<tr><td><a href='#{row['section']}'>{html.escape(row['title'])}</a></td>"
                     + "".join(f"<td>{row.get(v, 0)}</td>" for v in VERDICTS)
                     + f"<td>{row.get('explained', 0)}</td><td>{row.get('unexplained', 0)}</td>"
                       f"<td>{row.get('not_counted', 0)}</td><td>{row['cells']}</td>"
                       f"<td>{row.get('at_report_code', 0)}</td>"
                       f"<td>{row['failed_cells']}</td><td>{row.get('not_run_cells', 0)}</td>"
                       f"<td>{row['wall_s']}</td></tr>")
    parts.append("</table>")
    for s in document["sections"]:
        parts.append(f"<h2 id='{s['name']}'>{html.escape(s['title'])}</h2>"
                     f"<p>Source: {html.escape(s['source'])}</p>")
        for note in s["notes"]:
            parts.append(f"<p class='why'>{html.escape(note)}</p>")
        for plot in s["plots"]:
            parts.append(f"<figure><img src='data:image/png;base64,{plot['png']}'>"
                         f"<figcaption>{html.escape(plot['title'])}</figcaption></figure>")
        accounting = any("paper_accounting" in r for r in s["rows"])
        parts.append("<table><tr><th>setting</th><th>metric</th><th>paper</th><th>ours "
                     "(mean ± sd, standard error, n)</th>"
                     + (f"<th>{html.escape(s.get('accounting_label', ACCOUNTING_LABEL))}</th>"
                        if accounting else "")
                     + "<th>verdict</th><th>why</th><th>source</th></tr>")
        for r in s["rows"]:
            paper = _num(r["paper"]) + (f" ± {_num(r['paper_sd'])}" if r["paper_sd"]
                                        is not None else "")
            ours = (f"{_num(r['ours'])} ± {_num(r['ours_sd'])}, se {_num(r.get('ours_se'))} "
                    f"({r['n']})")
            pa = ""
            if accounting:
                pa = (f"<td>{_num(r['paper_accounting'])} ± {_num(r['paper_accounting_sd'])}"
                      f" ({r['paper_accounting_verdict']})</td>"
                      if "paper_accounting" in r else "<td></td>")
            word = r["verdict"] + (" (explained by counter-run)" if r.get("explained") else "")
            parts.append(
                f"<tr><td>{html.escape(r['setting'])}</td><td>{html.escape(r['metric'])}</td>"
                f"<td>{paper}</td><td>{ours}</td>{pa}"
                f"<td style='background:{COLOURS[r['verdict']]}'>{word}</td>"
                f"<td class='why'>{html.escape(r['why'])}{_beside_html(r)}</td>"
                f"<td class='why'>{html.escape(r['source'] or '')}</td></tr>")
        parts.append("</table>")
        if s["failed"]:
            parts.append("<p><b>Failed cells:</b></p><ul>" + "".join(
                f"<li>{html.escape(f['id'])}: {html.escape(str(f['error']))}</li>"
                for f in s["failed"]) + "</ul>")
    (out / "report.html").write_text("\n".join(parts))
