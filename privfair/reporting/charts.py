"""Inline SVG pieces shared by the reports: text that fits, a layered role graph, and the
privacy ledger grouped by stage (issue 25.5).

Everything here is drawing only: it receives public, post-DP inputs (declared roles, a
DP-selected structure or released graph, ledger entries) and returns markup.

* Labels never overflow their box: a label longer than its slot is shortened with an
  ellipsis in the middle (``education_num…_category``), keeping both ends, and the full names
  go to a table under the drawing. Widths are estimated from the font size with a generous
  per-character width, so a wide glyph run still fits.
* Graphs are drawn in layers, one column per role (protected → admissible → free →
  outcome); a node is a box holding its label, edges join the boxes' sides, and an edge
  inside one column is an arc that bows into the gap left of it, never through a box.
* A ledger of hundreds of steps (PrivPC charges one per test) is drawn as one bar per stage
  (``PrivPC level 1``, ``AIM measure``) with its step count, not one bar per step.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

ROLE_COLOURS = {
    "protected": "#d95f02",
    "admissible": "#1b9e77",
    "outcome": "#7570b3",
    "free": "#9e9e9e",
}
#: The order of the layers, left to right.
ROLE_ORDER = ("protected", "admissible", "free", "outcome")

#: Estimated width of one character as a share of the font size (wider than the average
#: sans-serif glyph, so estimates err on the side of room).
CHAR_WIDTH = 0.62


def text_width(text: str, size: float) -> float:
    """Estimated rendered width of ``text`` at font ``size`` (px)."""
    return len(text) * size * CHAR_WIDTH


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis in the middle (both ends kept)."""
    text = str(text)
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"
    head = (limit - 1 + 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def svg(width: float, height: float, body: Sequence[str], *, label: str) -> str:
    return (f"<svg class='chart' role='img' aria-label='{html.escape(label)}' "
            f"viewBox='0 0 {width:.0f} {height:.0f}' width='{width:.0f}' "
            f"height='{height:.0f}'>{''.join(body)}</svg>")


def text(x: float, y: float, value: str, *, size: int = 11, anchor: str = "start",
         extra: str = "", full: str | None = None) -> str:
    """An SVG text; ``full`` (the unshortened label) becomes its tooltip."""
    tip = f"<title>{html.escape(full)}</title>" if full and full != value else ""
    return (f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}'"
            f"{extra}>{tip}{html.escape(value)}</text>")


def nice_max(value: float) -> float:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(value))
    return next(m * step for m in (1, 2, 2.5, 5, 10) if m * step >= value)


# --- layered role graph -------------------------------------------------------------------


def role_of(nodes: Sequence[str], roles: Mapping[str, Sequence[str]]) -> dict[str, str]:
    out = dict.fromkeys(nodes, "free")
    for role in ("protected", "admissible", "outcome"):
        for a in roles.get(role, ()) or ():
            if a in out:
                out[a] = role
    return out


#: Longest label drawn in full in a graph (characters); longer ones are shortened.
GRAPH_LABEL = 24


def layered_graph_svg(nodes: Sequence[str], roles: Mapping[str, Sequence[str]], *,
                      undirected: Sequence[Sequence[str]] = (),
                      directed: Sequence[Sequence[str]] = (),
                      flagged: set[frozenset[str]] | None = None,
                      title: str, label: str) -> tuple[str, dict[str, str]]:
    """A layered drawing of a graph over columns with roles (inline SVG).

    Returns the SVG and ``{shortened label: full name}`` for the labels that were cut (for
    the table of full names under the drawing).
    """
    flagged = flagged or set()
    nodes = list(dict.fromkeys(nodes))
    role = role_of(nodes, roles)
    layers = [[a for a in nodes if role[a] == r] for r in ROLE_ORDER]
    layers = [layer for layer in layers if layer]
    size, box_h, row = 11, 18.0, 28.0
    shown = {a: shorten(a, GRAPH_LABEL) for a in nodes}
    cut = {shown[a]: a for a in nodes if shown[a] != a}
    margin, gap, top = 20.0, 70.0, 60.0
    x, spans = margin + gap / 2, []
    for layer in layers:  # each layer: a column of boxes as wide as its widest label
        w = max(text_width(shown[a], size) for a in layer) + 16
        spans.append((x, w))
        x += w + gap
    width = max(x - gap / 2 + margin, 420.0, text_width(title, 13) + 2 * margin)
    tallest = max((len(layer) for layer in layers), default=1)
    height = top + row * tallest + 16
    box: dict[str, tuple[float, float, float]] = {}  # left, centre y, width
    for (lx, w), layer in zip(spans, layers, strict=True):
        offset = top + row * (tallest - len(layer)) / 2 + row / 2
        for k, a in enumerate(layer):
            box[a] = (lx, offset + k * row, w)
    body = [
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
        "markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
        "fill='context-stroke'/></marker></defs>",
        text(width / 2, 18, title, size=13, anchor="middle")]
    legend_x = margin
    for r in ROLE_ORDER:
        body.append(f"<rect x='{legend_x:.1f}' y='32' width='10' height='10' rx='2' "
                    f"fill='{ROLE_COLOURS[r]}'/>")
        body.append(text(legend_x + 14, 41, r, size=10))
        legend_x += 14 + text_width(r, 10) + 18
    edges = [(tuple(e)[:2], False) for e in undirected] + [(tuple(e)[:2], True)
                                                          for e in directed]
    layer_of = {a: k for k, layer in enumerate(layers) for a in layer}
    long_edges = [e for e, _ in edges if e[0] in box and e[1] in box
                  and abs(layer_of[e[0]] - layer_of[e[1]]) > 1]
    if long_edges:  # lanes under every box for edges that skip a layer
        height += 10 * len(long_edges) + 6
    lanes = iter(range(len(long_edges)))
    for (a, b), arrow in edges:
        if a not in box or b not in box:
            continue
        red = frozenset((a, b)) in flagged
        stroke = "#c62828" if red else "#8a8a8a"
        attrs = (f" fill='none' stroke='{stroke}' stroke-width='{2.2 if red else 1.2}'"
                 + (" marker-end='url(#arrow)'" if arrow else ""))
        (ax, ay, aw), (bx, by, bw) = box[a], box[b]
        if ax == bx:  # same layer: an arc from the boxes' left sides, bowing into the gap
            cx = ax - min(12 + 0.3 * abs(by - ay), gap - 8)
            body.append(f"<path d='M{ax:.1f},{ay:.1f} Q{cx:.1f},{(ay + by) / 2:.1f} "
                        f"{bx:.1f},{by:.1f}'{attrs}/>")
            continue
        if ax > bx:  # drawn left to right; the arrow keeps its direction
            (ax, ay, aw), (bx, by, bw) = (bx, by, bw), (ax, ay, aw)
            attrs = attrs.replace("marker-end", "marker-start")
        if abs(layer_of[a] - layer_of[b]) > 1:  # skips a layer: down the gap, along a
            lane = top + row * tallest + 8 + 10 * next(lanes)  # lane under the boxes, up
            x1, x2 = ax + aw + gap / 3, bx - gap / 3
            body.append(f"<path d='M{ax + aw:.1f},{ay:.1f} H{x1:.1f} V{lane:.1f} H{x2:.1f} "
                        f"V{by:.1f} H{bx:.1f}'{attrs} stroke-linejoin='round'/>")
            continue
        body.append(f"<path d='M{ax + aw:.1f},{ay:.1f} C{ax + aw + gap / 2:.1f},{ay:.1f} "
                    f"{bx - gap / 2:.1f},{by:.1f} {bx:.1f},{by:.1f}'{attrs}/>")
    for a in nodes:
        lx, cy, w = box[a]
        colour = ROLE_COLOURS[role[a]]
        body.append(f"<rect x='{lx:.1f}' y='{cy - box_h / 2:.1f}' width='{w:.1f}' "
                    f"height='{box_h:.0f}' rx='4' fill='white' stroke='{colour}' "
                    f"stroke-width='2'><title>{html.escape(a)} ({role[a]})</title></rect>")
        body.append(f"<rect x='{lx:.1f}' y='{cy - box_h / 2:.1f}' width='5' "
                    f"height='{box_h:.0f}' fill='{colour}'/>")
        body.append(text(lx + 9, cy + 4, shown[a], size=size, full=a))
    return svg(width, height, body, label=label), cut


def full_names_table(cut: Mapping[str, str]) -> str:
    """The full names of the labels a drawing shortened (empty when none was)."""
    if not cut:
        return ""
    rows = "".join(f"<tr><td>{html.escape(s)}</td><td>{html.escape(f)}</td></tr>"
                   for s, f in cut.items())
    return ("<table class='names'><tr><th>label in the drawing</th><th>full name</th></tr>"
            f"{rows}</table>")


# --- the ledger by stage ------------------------------------------------------------------

_STEP_NUMBER = re.compile(r"\s+(?:round\s+)?\d+(?:\s*/\s*\d+)?$", re.IGNORECASE)


def ledger_stage(name: str) -> str:
    """The stage a ledger step belongs to: its name without the per-step detail.

    ``"PrivPC level 1, age: removal"`` → ``"PrivPC level 1"``; ``"AIM measure round 12"``
    → ``"AIM measure"``; ``"select edge 3/14"`` → ``"select edge"``.
    """
    stage = str(name).split(":", 1)[0].split(",", 1)[0].strip()
    stage = _STEP_NUMBER.sub("", stage) if not re.search(r"level\s+\d+$", stage) else stage
    return stage or str(name)


def ledger_by_stage(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per stage, in first-seen order: steps, mechanisms, ρ and queries summed."""
    out: dict[str, dict[str, Any]] = {}
    for e in entries:
        stage = ledger_stage(str(e.get("name", "")))
        row = out.setdefault(stage, {"stage": stage, "steps": 0, "mechanisms": [],
                                     "rho": 0.0, "queries": 0, "has_rho": False})
        row["steps"] += 1
        if e.get("mechanism") and e["mechanism"] not in row["mechanisms"]:
            row["mechanisms"].append(str(e["mechanism"]))
        if e.get("rho") is not None:
            row["rho"] += float(e["rho"])
            row["has_rho"] = True
        row["queries"] += int(e.get("queries") or 0)
    return list(out.values())


def ledger_svg(entries: Sequence[Mapping[str, Any]]) -> str:
    """Horizontal bars of ρ charged by stage (inline SVG); a stage of many steps says so."""
    stages = ledger_by_stage(entries)
    if not stages:
        stages = [{"stage": "(nothing charged)", "steps": 0, "rho": 0.0}]
    names = [s["stage"] + (f" ({s['steps']} steps)" if s["steps"] > 1 else "")
             for s in stages]
    rhos = [float(s["rho"]) for s in stages]
    top = nice_max(max(rhos))
    size, bar, width = 10, 20.0, 680.0
    shown = [shorten(n, 40) for n in names]
    left = 10 + max(text_width(s, size) for s in shown) + 8
    plot = width - left - 24
    height = 36 + bar * len(names) + 34
    body = [text(width / 2, 18, "Privacy ledger: ρ by stage", size=13, anchor="middle")]
    for k, (name, label, rho) in enumerate(zip(names, shown, rhos, strict=True)):
        y = 30 + k * bar
        body.append(text(left - 6, y + bar * 0.68, label, size=size, anchor="end",
                         full=name))
        body.append(f"<rect x='{left:.1f}' y='{y + 3:.1f}' width='{plot * rho / top:.1f}' "
                    f"height='{bar - 6:.1f}' fill='#4c72b0'><title>{html.escape(name)}: ρ = "
                    f"{rho:.6g}</title></rect>")
    axis_y = 30 + bar * len(names) + 4
    body.append(f"<line x1='{left:.1f}' y1='{axis_y}' x2='{left + plot:.1f}' y2='{axis_y}' "
                "stroke='#888'/>")
    for tick in (0.0, top / 2, top):
        body.append(text(left + plot * tick / top, axis_y + 14, f"{tick:.3g}", size=9,
                         anchor="middle"))
    body.append(text(left + plot / 2, axis_y + 28, "ρ (zCDP) charged", size=10,
                     anchor="middle"))
    return svg(width, height, body, label="privacy ledger chart")


def ledger_tables(entries: Sequence[Mapping[str, Any]], *,
                  columns: Sequence[tuple[str, str]] = (
                      ("name", "step"), ("mechanism", "mechanism"), ("rho", "ρ"),
                      ("sigma", "σ"), ("epsilon", "ε"), ("queries", "queries"))) -> str:
    """The ledger as a table by stage, with every step in a collapsed table under it."""
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.6g}"
        return "—" if v is None else str(v)

    stages = ledger_by_stage(entries)
    by_stage = "".join(
        f"<tr><td>{html.escape(s['stage'])}</td><td>{s['steps']}</td>"
        f"<td>{html.escape(', '.join(s['mechanisms']))}</td>"
        f"<td>{fmt(s['rho']) if s['has_rho'] else '—'}</td><td>{s['queries']}</td></tr>"
        for s in stages)
    steps = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(e.get(k)))}</td>" for k, _ in columns)
        + "</tr>" for e in entries)
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t in columns)
    return ("<table><tr><th>stage</th><th>steps</th><th>mechanism</th><th>ρ</th>"
            f"<th>queries</th></tr>{by_stage}</table>"
            f"<details><summary>every step ({len(entries)})</summary>"
            f"<table><tr>{head}</tr>{steps}</table></details>")
