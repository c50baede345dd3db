"""Self-contained HTML report of a release.

Everything drawn here is post-DP: the privacy ledger (public accounting), the selected model
structure (chosen by DP mechanisms), and the one-way marginals of the *synthetic* table. The
report never receives the private data or any true count, so it can be published next to the
synthetic table.

Charts are matplotlib PNGs, base64-inlined, so the file opens offline with no JavaScript.
matplotlib is imported inside the functions (it costs ~1 s) and used through the object API
(``Figure`` + Agg canvas), which keeps no global pyplot state and is safe in worker threads.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

ROLE_COLOURS = {
    "protected": "#d95f02",
    "admissible": "#1b9e77",
    "outcome": "#7570b3",
    "free": "#9e9e9e",
}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;color:#222;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .6rem;
text-align:left;font-size:.92rem}th{background:#f5f5f5}
.pass{color:#1b7a3a;font-weight:600}.fail{color:#b00020;font-weight:600}
.note{color:#555;font-size:.9rem}img{max-width:100%;height:auto}
code{background:#f3f3f3;padding:0 .2rem;border-radius:3px}
"""


def _png(fig: Any, *, tight: bool = True) -> str:
    """Render a matplotlib Figure to a base64 ``data:`` URI."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight" if tight else None)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def ledger_chart(entries: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal bar chart of ρ charged by each ledger step (PNG data URI)."""
    from matplotlib.figure import Figure

    names = [str(e["name"]) for e in entries] or ["(nothing charged)"]
    rhos = [float(e["rho"]) for e in entries] or [0.0]
    fig = Figure(figsize=(7.5, 0.35 * len(names) + 1.2))
    ax = fig.add_subplot()
    ax.barh(range(len(names)), rhos, color="#4c72b0")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ρ (zCDP) charged")
    ax.set_title("Privacy ledger: ρ by step")
    return _png(fig)


def structure_chart(attributes: Sequence[str], edges: Sequence[Sequence[str]],
                    roles: Mapping[str, Sequence[str]]) -> str:
    """The selected tree, nodes coloured by fairness role (PNG data URI)."""
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    graph = nx.Graph()
    graph.add_nodes_from(attributes)
    graph.add_edges_from(tuple(e) for e in edges)
    pos = nx.kamada_kawai_layout(graph) if len(graph) > 2 else nx.circular_layout(graph)
    role_of = dict.fromkeys(attributes, "free")
    for role in ("protected", "admissible", "outcome"):
        for a in roles.get(role, ()):
            role_of[a] = role
    fig = Figure(figsize=(7.5, 5.5))
    ax = fig.add_subplot()
    for a, b in graph.edges:
        ax.plot([pos[a][0], pos[b][0]], [pos[a][1], pos[b][1]], color="#888", zorder=1)
    for a in graph.nodes:
        ax.scatter([pos[a][0]], [pos[a][1]], s=900, color=ROLE_COLOURS[role_of[a]], zorder=2,
                   edgecolors="white")
        ax.annotate(a, pos[a], ha="center", va="center", fontsize=7, zorder=3,
                    xytext=(0, -22), textcoords="offset points")
    ax.legend(handles=[Patch(color=c, label=r) for r, c in ROLE_COLOURS.items()],
              loc="upper left", fontsize=8, frameon=False)
    ax.set_axis_off()
    ax.margins(0.15)
    ax.set_title("Selected structure (2-way marginals measured)")
    return _png(fig)


def marginal_charts(synthetic: pd.DataFrame,
                    labels: Mapping[str, Sequence[Any]] | None = None) -> str:
    """Grid of one-way bar charts of the synthetic table (PNG data URI)."""
    from matplotlib.figure import Figure

    columns = list(synthetic.columns)
    ncols = 3
    nrows = max(1, math.ceil(len(columns) / ncols))
    fig = Figure(figsize=(11, 2.9 * nrows))
    for k, column in enumerate(columns):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        counts = synthetic[column].astype("object").value_counts(dropna=False)
        order = list(labels[column]) if labels and column in labels else sorted(
            counts.index, key=str)
        order += [v for v in counts.index if v not in order]
        values = [int(counts.get(v, 0)) for v in order]
        ax.bar(range(len(order)), values, color="#4c72b0")
        ticks = [str(v)[:14] for v in order]
        if len(order) <= 20:
            ax.set_xticks(range(len(order)), ticks, rotation=60, ha="right", fontsize=6)
        else:
            ax.set_xticks([])
            ax.set_xlabel(f"{len(order)} categories", fontsize=7)
        ax.set_title(column, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    # Fixed spacing: tight_layout/bbox "tight" measure every tick label, which costs more
    # than drawing the grid itself.
    fig.subplots_adjust(left=0.06, right=0.98, top=1 - 0.35 / nrows, bottom=0.9 / (2.9 * nrows),
                        hspace=0.95, wspace=0.25)
    return _png(fig, tight=False)


def _kv_table(rows: Mapping[str, Any]) -> str:
    body = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
        for k, v in rows.items()
    )
    return f"<table>{body}</table>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return "—" if value is None else str(value)


def _badge(passed: bool | None) -> str:
    if passed is None:
        return '<span class="note">not run</span>'
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def _columns_section(manifest: Mapping[str, Any]) -> str:
    """The dataset's and each column's description, label and released name (public)."""
    notes = manifest.get("columns") or []
    if not notes:
        return ""
    about = manifest.get("contract", {}).get("description") or ""
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(n.get(k) or ''))}</td>" for k in
                         ("released_as", "label", "type", "description")) + "</tr>"
        for n in notes)
    return ("<h2>Columns</h2>" + (f"<p>{html.escape(about)}</p>" if about else "")
            + "<table><tr><th>column</th><th>label</th><th>type</th><th>description</th>"
            f"</tr>{rows}</table>")


def _data_docs_links(output: Mapping[str, Any]) -> str:
    """Links to the output-side Data Docs and the contract's GX suites (relative paths)."""
    links = [(output.get("data_docs"), "Great Expectations Data Docs of the synthetic table")]
    links += [(path, f"GX suite ({side})") for side, path in
              sorted((output.get("suites") or {}).items())]
    items = "".join(f"<li><a href='{html.escape(str(href))}'>{html.escape(text)}</a></li>"
                    for href, text in links if href)
    return f"<ul>{items}</ul>" if items else ""


def build_report(manifest: Mapping[str, Any], synthetic: pd.DataFrame, *,
                 labels: Mapping[str, Sequence[Any]] | None = None) -> str:
    """Render the release report as one self-contained HTML page.

    Parameters
    ----------
    manifest : mapping
        The release manifest (see :func:`privfair.pipeline.manifest.build_manifest`); post-DP only.
    synthetic : DataFrame
        The synthetic table with declared labels.
    labels : mapping, optional
        Declared label order per column, used to order the bars.
    """
    g = manifest["guarantee"]
    method = manifest["method"]
    structure = manifest["structure"]
    fairness = manifest["fairness_check"]
    roles = manifest.get("roles", {})
    validation = manifest.get("validation", {})
    ledger = manifest.get("ledger", [])
    attributes = list(manifest.get("domain", {}).get("attributes", [])) or list(synthetic.columns)
    title = f"{manifest['dataset']} {manifest['version']}"

    ledger_rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(e.get(k)))}</td>" for k in
                         ("name", "mechanism", "rho", "sigma", "epsilon", "queries")) + "</tr>"
        for e in ledger
    )
    violations = "".join(
        f"<li>{html.escape(v['protected'])} → {html.escape(v['outcome'])} via "
        f"{html.escape(' – '.join(v['path']))}</li>" for v in fairness.get("violations", [])
    )
    edges = ", ".join(f"{a}–{b}" for a, b in structure.get("edges", []))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>privfair release {html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>privfair release: {html.escape(title)}</h1>",
        f"<p class='note'>Published {html.escape(str(manifest.get('published_at', '')))}. "
        "Every number and chart in this report is computed from differentially private "
        "outputs (noisy measurements, DP-selected structure, or the synthetic table); "
        "none comes from the private data.</p>",
        _columns_section(manifest),
        "<h2>Guarantee</h2>",
        _kv_table({
            "(ε, δ)-DP": f"ε = {g['epsilon']:.6g}, δ = {g['delta']:.3g}",
            "zCDP ρ": g["rho"],
            "ρ spent by this release": g.get("spent", {}).get("rho"),
            "neighbouring datasets": g.get("spent", {}).get("neighbours", "add/remove one row"),
            "accounting": g.get("spent", {}).get("accounting", "zCDP"),
            "dataset lifetime ρ spent after this release":
                manifest.get("lifetime", {}).get("rho_spent_after"),
            "dataset lifetime ρ budget": manifest.get("lifetime", {}).get("rho_budget"),
        }),
        "<h2>Method</h2>",
        _kv_table({
            "method": method.get("name"),
            "budget split (ρ)": method.get("budget_split"),
            "discrete Gaussian noise": method.get("discrete_noise"),
            "rare-category compression": method.get("compress"),
            "estimation": method.get("estimation"),
            "estimated total (noisy)": method.get("estimated_total"),
            "sampling": manifest.get("sampling"),
            "seed policy": manifest.get("seed_policy"),
            "fairness transform": manifest.get("fairness_transform", {}).get("name"),
            "contract fingerprint": manifest.get("contract", {}).get("fingerprint"),
            "code version": manifest.get("code_version"),
        }),
        "<h2>Structure and fairness check</h2>",
        f"<p>Edges: {html.escape(edges) or '—'}</p>",
        f"<p>Justifiable fairness ({html.escape(fairness.get('criterion', ''))}): "
        f"{_badge(fairness.get('passed'))}</p>",
        f"<ul>{violations}</ul>" if violations else "",
        f"<img alt='structure graph' src='{structure_chart(attributes, structure.get('edges', []), roles)}'>",  # noqa: E501
        "<h2>Validation</h2>",
        _kv_table({
            "input (contract, private side)": "PASS" if validation.get("input", {}).get(
                "passed") else "FAIL",
            "output (synthetic table)": "PASS" if validation.get("output", {}).get(
                "passed") else "FAIL",
        }),
        _data_docs_links(validation.get("output", {})),
        "<h2>Privacy ledger</h2>",
        "<table><tr><th>step</th><th>mechanism</th><th>ρ</th><th>σ</th><th>ε</th>"
        f"<th>queries</th></tr>{ledger_rows}</table>",
        f"<img alt='ledger chart' src='{ledger_chart(ledger)}'>",
        "<h2>One-way marginals of the synthetic table</h2>",
        f"<img alt='synthetic marginals' src='{marginal_charts(synthetic, labels)}'>",
        "</body></html>",
    ]
    return "\n".join(parts)
