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
                      title: str, label: str,
                      names: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """A layered drawing of a graph over columns with roles (inline SVG); past
    :data:`MATRIX_EDGES` edges, an adjacency matrix instead (:func:`adjacency_matrix_svg`:
    a drawing of dozens of crossing curves cannot be read, issue 35.6).

    ``names`` maps a column to the label its contract declares (drawn instead of the code).
    Returns the SVG and ``{shortened label: full name}`` for the labels that were cut (for
    the table of full names under the drawing).
    """
    flagged = flagged or set()
    nodes = list(dict.fromkeys(nodes))
    if len(undirected) + len(directed) > MATRIX_EDGES:
        return adjacency_matrix_svg(nodes, roles, undirected=undirected, directed=directed,
                                    flagged=flagged, title=title, label=label, names=names)
    role = role_of(nodes, roles)
    layers = [[a for a in nodes if role[a] == r] for r in ROLE_ORDER]
    layers = [layer for layer in layers if layer]
    size, box_h, row = 11, 18.0, 28.0
    shown, cut = display_names(nodes, names, GRAPH_LABEL)
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


#: More edges than this and a graph is drawn as an adjacency matrix.
MATRIX_EDGES = 30


def display_names(nodes: Sequence[str], names: Mapping[str, str] | None,
                  limit: int) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's drawn label (its declared label, else its name, shortened to ``limit``)
    and ``{drawn label: full name}`` for those that were cut or relabelled."""
    names = names or {}
    shown, cut = {}, {}
    for a in nodes:
        full = names.get(a) or a
        shown[a] = shorten(full, limit)
        if shown[a] != a:
            cut[shown[a]] = full if full == a else f"{full} ({a})"
    return shown, cut


def adjacency_matrix_svg(nodes: Sequence[str], roles: Mapping[str, Sequence[str]], *,
                         undirected: Sequence[Sequence[str]] = (),
                         directed: Sequence[Sequence[str]] = (),
                         flagged: set[frozenset[str]] | None = None,
                         title: str, label: str,
                         names: Mapping[str, str] | None = None
                         ) -> tuple[str, dict[str, str]]:
    """A graph as an adjacency matrix, rows and columns ordered by role: a grey cell on both
    sides of the diagonal for an undirected edge, a blue cell at (row = from, column = to) for
    a directed one, red for a flagged edge. Readable at any number of edges."""
    flagged = flagged or set()
    role = role_of(nodes, roles)
    order = [a for r in ROLE_ORDER for a in nodes if role[a] == r]
    shown, cut = display_names(order, names, GRAPH_LABEL)
    size, cell = 10, 14.0
    label_w = max(text_width(shown[a], size) for a in order) + 14
    # column labels are rotated -60°: their height is their width · sin 60°
    top = 56 + label_w * 0.87 + 6
    left = 10 + label_w
    n = len(order)
    width = max(left + n * cell + 20, text_width(title, 13) + 20, 420.0)
    height = top + n * cell + 30
    at = {a: k for k, a in enumerate(order)}
    body = [text(width / 2, 18, title, size=13, anchor="middle")]
    legend = [("#8a8a8a", "undirected (both cells)"), ("#4c72b0", "directed: row → column"),
              ("#c62828", "flagged")]
    x = 10.0
    for colour, name in legend:
        body.append(f"<rect x='{x:.1f}' y='30' width='10' height='10' fill='{colour}'/>")
        body.append(text(x + 14, 39, name, size=10))
        x += 14 + text_width(name, 10) + 18
    for a in order:
        k = at[a]
        colour = ROLE_COLOURS[role[a]]
        y = top + k * cell
        body.append(f"<rect x='{left - 6:.1f}' y='{y + 2:.1f}' width='4' height='{cell - 4:.1f}'"
                    f" fill='{colour}'/>")
        body.append(text(left - 9, y + cell * 0.75, shown[a], size=size, anchor="end",
                         full=a))
        cx = left + k * cell + cell / 2
        body.append(text(cx, top - 6, shown[a], size=size, full=a,
                         extra=f" transform='rotate(-60 {cx:.1f} {top - 6:.1f})'"))
        body.append(f"<rect x='{left + k * cell:.1f}' y='{y:.1f}' width='{cell:.1f}' "
                    f"height='{cell:.1f}' fill='#f3f3f3'/>")  # the diagonal
    body.append(f"<rect x='{left:.1f}' y='{top:.1f}' width='{n * cell:.1f}' "
                f"height='{n * cell:.1f}' fill='none' stroke='#bbb'/>")
    cells = [(a, b, False) for a, b in (tuple(e)[:2] for e in undirected)]
    cells += [(a, b, True) for a, b in (tuple(e)[:2] for e in directed)]
    for a, b, arrow in cells:
        if a not in at or b not in at:
            continue
        colour = ("#c62828" if frozenset((a, b)) in flagged else
                  "#4c72b0" if arrow else "#8a8a8a")
        pairs = [(a, b)] if arrow else [(a, b), (b, a)]
        for r, c in pairs:
            body.append(f"<rect x='{left + at[c] * cell + 1:.1f}' y='{top + at[r] * cell + 1:.1f}'"
                        f" width='{cell - 2:.1f}' height='{cell - 2:.1f}' fill='{colour}'>"
                        f"<title>{html.escape(r)} {'→' if arrow else '–'} {html.escape(c)}"
                        "</title></rect>")
    body.append(text(10, height - 10, f"{n} columns, {len(cells)} edges: drawn as a matrix "
                     f"(more than {MATRIX_EDGES} edges)", size=10))
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


# --- line charts: every series on its own axis range, distinguishable, empty panels said ---

#: Series styles, in order: a colour, a marker shape and a dash pattern each, so that two
#: lines drawn on top of each other stay distinguishable (issue 35.6).
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                  "#e377c2", "#7f7f7f")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "down")
DASHES = ("", "7 3", "2 3", "9 3 2 3", "4 2 1 2", "12 4")


def series_style(k: int) -> dict[str, str]:
    """The ``k``-th series' colour, marker and dash pattern (combinations never repeat within
    ``len(MARKERS) * len(DASHES)`` series)."""
    return {"colour": SERIES_COLOURS[k % len(SERIES_COLOURS)],
            "marker": MARKERS[k % len(MARKERS)],
            "dash": DASHES[(k + k // len(MARKERS)) % len(DASHES)]}


def marker_svg(shape: str, x: float, y: float, colour: str, r: float = 3.5) -> str:
    """One point marker (filled shape, or a cross) centred at (x, y)."""
    fill = f" fill='{colour}' stroke='{colour}'"
    if shape == "square":
        return f"<rect x='{x - r:.1f}' y='{y - r:.1f}' width='{2 * r:.1f}' height='{2 * r:.1f}'{fill}/>"
    if shape in ("triangle", "down"):
        s = -1 if shape == "triangle" else 1
        return (f"<path d='M{x:.1f},{y + s * r * 1.2:.1f} L{x - r * 1.1:.1f},{y - s * r * 0.8:.1f}"
                f" L{x + r * 1.1:.1f},{y - s * r * 0.8:.1f} Z'{fill}/>")
    if shape == "diamond":
        return (f"<path d='M{x:.1f},{y - r * 1.2:.1f} L{x + r:.1f},{y:.1f} L{x:.1f},"
                f"{y + r * 1.2:.1f} L{x - r:.1f},{y:.1f} Z'{fill}/>")
    if shape == "cross":
        return (f"<path d='M{x - r:.1f},{y - r:.1f} L{x + r:.1f},{y + r:.1f} M{x - r:.1f},"
                f"{y + r:.1f} L{x + r:.1f},{y - r:.1f}' stroke='{colour}' stroke-width='2'/>")
    return f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{r:.1f}'{fill}/>"


def axis_range(values: Sequence[float]) -> tuple[float, float]:
    """A padded [low, high] holding every finite value (a flat series gets a band)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    pad = (high - low) * 0.08 or (abs(high) * 0.1 or 1.0)
    return low - pad, high + pad


def ticks(low: float, high: float, count: int = 4) -> list[float]:
    """About ``count`` round tick values inside [low, high]."""
    span = high - low
    step = 10 ** math.floor(math.log10(span / count)) if span > 0 else 1.0
    step = next(m * step for m in (1, 2, 2.5, 5, 10) if span / (m * step) <= count)
    first = math.ceil(low / step) * step
    return [first + k * step for k in range(int((high - first) / step + 1e-9) + 1)]


def legend_svg(labels: Sequence[str], *, width: float = 900.0) -> str:
    """A legend of series (colour, marker, dash), wrapped over rows."""
    body, x, y = [], 10.0, 16.0
    for k, name in enumerate(labels):
        style = series_style(k)
        w = 44 + text_width(name, 11) + 18
        if x + w > width - 10 and x > 10:
            x, y = 10.0, y + 20
        body.append(f"<line x1='{x:.1f}' y1='{y - 4:.1f}' x2='{x + 30:.1f}' y2='{y - 4:.1f}' "
                    f"stroke='{style['colour']}' stroke-width='2' "
                    f"stroke-dasharray='{style['dash']}'/>")
        body.append(marker_svg(style["marker"], x + 15, y - 4, style["colour"]))
        body.append(text(x + 36, y, name, size=11))
        x += w
    return svg(width, y + 10, body, label="legend")


def line_panel_svg(series: Sequence[Mapping[str, Any]], *, title: str, x_label: str,
                   log_x: bool = False, empty_reason: str = "no value in any cell",
                   width: float = 262.0, height: float = 230.0) -> str:
    """One panel of lines (inline SVG). Each series: ``label``, ``x``, ``y`` and optional
    ``err`` (± bars) and ``style`` index. The y range holds every point and bar, so nothing
    is drawn outside the axes; a panel with no finite value says why instead of staying
    blank. Marked for the browser check: ``data-plot`` (the axes' box), ``data-series`` (one
    group per series), ``data-empty`` (the reason of an empty panel)."""
    title_lines = _wrap(title, int((width - 10) / (10 * CHAR_WIDTH)))[:2]
    left, right, top, bottom = 52.0, 12.0, 40.0, 40.0  # room for two title lines
    pw, ph = width - left - right, height - top - bottom
    body = [text(width / 2, 13 + 13 * k, shorten(line, int((width - 10) / (10 * CHAR_WIDTH))),
                 size=10, anchor="middle", full=title) for k, line in enumerate(title_lines)]
    body += [f"<rect data-plot='1' x='{left:.1f}' y='{top:.1f}' width='{pw:.1f}' "
            f"height='{ph:.1f}' fill='none' stroke='#999'/>"]
    points = [(float(x), float(y), float(e or 0.0)) for s in series
              for x, y, e in zip(s["x"], s["y"], s.get("err") or [0.0] * len(s["x"]),
                                 strict=True)
              if y is not None and math.isfinite(float(y))]
    xs = sorted({float(x) for s in series for x in s["x"]})
    if not points:
        body.append(text(left + pw / 2, top + ph / 2, "no value", size=11, anchor="middle",
                         extra=" data-empty='1' fill='#b00020'"))
        for k, line in enumerate(_wrap(empty_reason, int(pw / (9 * CHAR_WIDTH)))[:4]):
            body.append(text(left + pw / 2, top + ph / 2 + 16 + 13 * k, line, size=9,
                             anchor="middle", extra=" fill='#555'"))
        return svg(width, height, body, label=f"{title}: empty panel")
    low, high = axis_range([y - e for _, y, e in points] + [y + e for _, y, e in points])

    def fx(x: float) -> float:
        lo, hi = (math.log(xs[0]), math.log(xs[-1])) if log_x and xs[0] > 0 else (xs[0], xs[-1])
        v = math.log(x) if log_x and xs[0] > 0 else x
        return left + pw * (0.5 if hi == lo else 0.06 + 0.88 * (v - lo) / (hi - lo))

    def fy(y: float) -> float:
        return top + ph * (1 - (y - low) / (high - low))

    for t in ticks(low, high):
        body.append(f"<line x1='{left - 3:.1f}' y1='{fy(t):.1f}' x2='{left:.1f}' "
                    f"y2='{fy(t):.1f}' stroke='#999'/>")
        body.append(text(left - 5, fy(t) + 3, f"{t:.3g}", size=9, anchor="end"))
    for x in xs:
        body.append(text(fx(x), top + ph + 13, f"{x:g}", size=9, anchor="middle"))
    body.append(text(left + pw / 2, height - 8, x_label, size=10, anchor="middle"))
    for k, s in enumerate(series):
        style = series_style(int(s.get("style", k)))
        errs = s.get("err") or [0.0] * len(s["x"])
        # each series a little to the side of the others, so equal points stay visible
        dodge = (k - (len(series) - 1) / 2) * 3.0
        pts = [(fx(float(x)) + dodge, fy(float(y)), float(e or 0.0), float(y))
               for x, y, e in zip(s["x"], s["y"], errs, strict=True)
               if y is not None and math.isfinite(float(y))]
        group = [f"<g data-series='{html.escape(str(s['label']))}'>"]
        if len(pts) > 1:
            group.append("<polyline points='" + " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in
                                                         pts)
                         + f"' fill='none' stroke='{style['colour']}' stroke-width='1.8' "
                         f"stroke-dasharray='{style['dash']}'/>")
        for x, y, e, v in pts:
            if e > 0:
                group.append(f"<path d='M{x:.1f},{fy(v - e):.1f} V{fy(v + e):.1f} M{x - 3:.1f},"
                             f"{fy(v - e):.1f} h6 M{x - 3:.1f},{fy(v + e):.1f} h6' "
                             f"stroke='{style['colour']}' stroke-width='1'/>")
            group.append(marker_svg(style["marker"], x, y, style["colour"]))
        body.append("".join(group) + "</g>")
    return svg(width, height, body, label=title)


def _wrap(sentence: str, limit: int) -> list[str]:
    lines, line = [], ""
    for word in str(sentence).split():
        if line and len(line) + 1 + len(word) > limit:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines
