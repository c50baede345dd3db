"""The public pages of a graph release: the CPDAG drawing and ``report.html``.

Post-processing only: everything drawn comes from the release's manifest (the released graph,
the roles audit, the ledger), never from the data.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from privfair.causal.graph import CausalGraph
from privfair.reporting.report import CSS, ROLE_COLOURS, kv_table, ledger_chart, png


def graph_chart(graph: CausalGraph, roles: Mapping[str, Any],
                flagged: list[list[str]]) -> str:
    """The CPDAG: arrows, plain lines for undirected edges, flagged paths in red (data URI)."""
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Patch

    skeleton = nx.Graph()
    skeleton.add_nodes_from(graph.nodes)
    skeleton.add_edges_from(tuple(e) for e in graph.skeleton())
    pos = nx.kamada_kawai_layout(skeleton) if len(skeleton) > 2 else \
        nx.circular_layout(skeleton)
    role_of = dict.fromkeys(graph.nodes, "free")
    for role in ("protected", "admissible", "outcome"):
        for a in roles.get(role, ()):
            role_of[a] = role
    red = {frozenset(pair) for path in flagged for pair in zip(path, path[1:], strict=False)}
    fig = Figure(figsize=(8, 6))
    ax = fig.add_subplot()
    for u, v in (*graph.edges, *graph.undirected):
        directed = (u, v) in set(graph.edges)
        ax.add_patch(FancyArrowPatch(
            pos[u], pos[v], arrowstyle="-|>" if directed else "-", mutation_scale=14,
            shrinkA=14, shrinkB=14, zorder=1,
            color="#c62828" if frozenset((u, v)) in red else "#777",
            linewidth=2.0 if frozenset((u, v)) in red else 1.2))
    for a in graph.nodes:
        ax.scatter([pos[a][0]], [pos[a][1]], s=700, color=ROLE_COLOURS[role_of[a]], zorder=2,
                   edgecolors="white")
        ax.annotate(a, pos[a], ha="center", va="center", fontsize=7, zorder=3,
                    xytext=(0, -20), textcoords="offset points")
    ax.legend(handles=[Patch(color=c, label=r) for r, c in ROLE_COLOURS.items()],
              loc="upper left", fontsize=8, frameon=False)
    ax.set_axis_off()
    ax.margins(0.15)
    ax.set_title("Released causal graph (CPDAG); red: protected→outcome paths avoiding "
                 "every admissible attribute", fontsize=9)
    return png(fig)


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
    drawing = graph_chart(graph, manifest["roles"], flagged)
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(manifest['dataset'])} {manifest['version']} causal graph</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Causal graph: {html.escape(manifest['dataset'])} {manifest['version']} "
        f"({manifest['method']})</h1>",
        f"<p>({g['epsilon']:g}, {g['delta']:g})-DP; ρ reserved {g['rho_reserved']:.6g}, "
        f"spent {g['spent']['rho']:.6g}. Neighbours: add/remove one row.</p>",
        "<h2>Graph</h2>", f"<img alt='causal graph' src='{drawing}'>",
        f"<table><tr><th>from</th><th></th><th>to</th></tr>{edge_rows}</table>",
        "<h2>Roles audit</h2>", audit,
        "<h2>Search</h2>", kv_table(manifest["search"]),
        "<h2>Privacy ledger</h2>", f"<img alt='ledger' src='{ledger_chart(manifest['ledger'])}'>",
        "</body></html>"])
