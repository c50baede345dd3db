"""The public pages of a graph release: the CPDAG drawing and ``report.html``.

Post-processing only: everything drawn comes from the release's manifest (the released graph,
the roles audit, the ledger), never from the data.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from privfair.causal.graph import CausalGraph
from privfair.reporting.charts import (
    full_names_table,
    layered_graph_svg,
    ledger_svg,
    ledger_tables,
)
from privfair.reporting.report import (
    CSS,
    column_names,
    kv_table,
    policy_counts_section,
)


def graph_chart(graph: CausalGraph, roles: Mapping[str, Any],
                flagged: list[list[str]], names: Mapping[str, str] | None = None) -> str:
    """The CPDAG in layers by role (protected → admissible → free → outcome): arrows,
    plain lines for undirected edges, flagged paths in red; inline SVG, then the full names
    of the labels it shortened."""
    red = {frozenset(pair) for path in flagged for pair in zip(path, path[1:], strict=False)}
    drawing, cut = layered_graph_svg(
        list(graph.nodes), roles, directed=list(graph.edges),
        undirected=list(graph.undirected), flagged=red, label="causal graph", names=names,
        title="Released causal graph (CPDAG); red: protected→outcome paths avoiding every "
              "admissible attribute")
    return drawing + full_names_table(cut)


def graph_report(manifest: Mapping[str, Any]) -> str:
    """Self-contained HTML report of a graph release (post-DP content only)."""
    graph = CausalGraph.from_dict(manifest["graph"])
    flagged = manifest["roles_audit"]["unblocked_paths"]
    g = manifest["guarantee"]
    audit = ("<p class='pass'>Every protected→outcome path passes through an admissible "
             "attribute.</p>" if not flagged else
             "<p class='fail'>Paths from a protected attribute to an outcome that avoid every "
             "admissible attribute:</p><ul>" + "".join(
                 f"<li><code>{html.escape(' → '.join(path))}</code></li>" for path in flagged)
             + "</ul>")
    edge_rows = "".join(f"<tr><td>{html.escape(u)}</td><td>→</td><td>{html.escape(v)}</td></tr>"
                        for u, v in graph.edges) + "".join(
        f"<tr><td>{html.escape(u)}</td><td>–</td><td>{html.escape(v)}</td></tr>"
        for u, v in graph.undirected)
    names = column_names(manifest)
    drawing = graph_chart(graph, manifest["roles"], flagged, names)
    ledger = manifest["ledger"]
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(manifest['dataset'])} {manifest['version']} causal graph</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Causal graph: {html.escape(manifest['dataset'])} {manifest['version']} "
        f"({manifest['method']})</h1>",
        f"<p>({g['epsilon']:g}, {g['delta']:g})-DP; ρ reserved {g['rho_reserved']:.6g}, "
        f"spent {g['spent']['rho']:.6g}. Neighbours: add/remove one row.</p>",
        "<h2>Graph</h2>", drawing,
        f"<table><tr><th>from</th><th></th><th>to</th></tr>{edge_rows}</table>",
        "<h2>Roles audit</h2>", audit,
        "<h2>Search</h2>", kv_table(manifest["search"]),
        "<h2>Input</h2>",
        policy_counts_section((manifest.get("validation") or {}).get("input") or {}, names),
        "<h2>Privacy ledger</h2>", ledger_tables(ledger), ledger_svg(ledger),
        "</body></html>"])
