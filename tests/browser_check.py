"""Render a report in headless chromium and list the text that does not fit its box.

Used by ``tests/test_report_browser.py`` (issue 25.5) and runnable by hand:

    python tests/browser_check.py REPORT.html [SCREENSHOT.png]

A copy of the page gets a small script that, once the page has loaded, marks ``<body>`` with
``data-overflow``: one entry per problem, among

* ``page``: the document is wider than the window (something sticks out sideways);
* ``clip:<tag>``: an element whose content is wider than its box (``scrollWidth >
  clientWidth + 1``) and whose overflow is not visible (the text is cut);
* ``out:<tag>``: an element that ends right of ``<body>``'s box;
* ``svg-out:<text>``: an SVG text outside its drawing (cut by the viewBox);
* ``svg-overlap:<a>|<b>``: two horizontal SVG texts of one drawing that overlap;
* ``series-out:<chart>:<series>``: a data series drawn outside its axes (``data-plot``);
* ``empty-panel:<chart>``: axes with no series drawn and no word on why (``data-empty``);
* ``series-alike:<chart>:<a>|<b>``: two series of one chart with the same dash pattern and
  marker (one hides the other where they overlap);
* ``empty-img:<alt>``: an image that did not load.

``chromium --headless --dump-dom`` prints the DOM after the script ran. Markdown (the model
card) is turned into HTML first by :func:`markdown_html`, a converter for the subset the
model card uses (headings, paragraphs, bold, pipe tables).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

WINDOW = "1280,2400"

CHECK = r"""
<script>
window.addEventListener('load', function () {
  var problems = [];
  var name = function (el) {
    var t = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
    return el.tagName.toLowerCase() + ':' + t;
  };
  if (document.documentElement.scrollWidth > window.innerWidth + 1) problems.push('page');
  var body = document.body.getBoundingClientRect();
  document.querySelectorAll('body *').forEach(function (el) {
    if (el.closest('svg') || el.closest('script')) return;
    var style = getComputedStyle(el);
    if (style.display === 'none' || el.closest('details:not([open]) > :not(summary)')) return;
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 &&
        style.overflowX !== 'visible') problems.push('clip:' + name(el));
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > body.right + 1) problems.push('out:' + name(el));
  });
  document.querySelectorAll('svg').forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var texts = Array.prototype.slice.call(svg.querySelectorAll('text'));
    var rects = texts.map(function (t) { return t.getBoundingClientRect(); });
    texts.forEach(function (t, i) {
      var r = rects[i];
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
          r.bottom > box.bottom + 1) problems.push('svg-out:' + name(t));
    });
    var flat = texts.map(function (t) { return !t.getAttribute('transform'); });
    for (var i = 0; i < texts.length; i++) {
      for (var j = i + 1; j < texts.length; j++) {
        if (!flat[i] || !flat[j]) continue;
        var a = rects[i], b = rects[j];
        var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 2) problems.push('svg-overlap:' + name(texts[i]) + '|' + name(texts[j]));
      }
    }
  });
  // Charts (issue 35.6): a series drawn outside its axes, a panel with axes and nothing in
  // them that does not say why, two series of one panel that look alike, an image that did
  // not load.
  document.querySelectorAll('svg').forEach(function (svg) {
    var chart = svg.getAttribute('aria-label') || 'svg';
    var plot = svg.querySelector('[data-plot]');
    var series = Array.prototype.slice.call(svg.querySelectorAll('[data-series]'));
    if (plot) {
      var p = plot.getBoundingClientRect();
      series.forEach(function (g) {
        var r = g.getBoundingClientRect();
        if (r.width + r.height > 0 && (r.left < p.left - 5 || r.right > p.right + 5 ||
            r.top < p.top - 5 || r.bottom > p.bottom + 5))
          problems.push('series-out:' + chart + ':' + g.getAttribute('data-series'));
      });
      var drawn = series.filter(function (g) {
        var r = g.getBoundingClientRect(); return r.width + r.height > 0; });
      if (!drawn.length && !svg.querySelector('[data-empty]'))
        problems.push('empty-panel:' + chart);
    }
    var seen = {};
    series.forEach(function (g) {
      var line = g.querySelector('polyline, line');
      var mark = g.querySelector('circle, rect, path');
      var look = (line ? (line.getAttribute('stroke-dasharray') || 'solid') : 'none') + '|' +
        (mark ? mark.tagName + (mark.getAttribute('d') || '').replace(/[-\d.,\s]+/g, '') : '');
      if (seen[look]) problems.push('series-alike:' + chart + ':' + seen[look] + '|' +
                                    g.getAttribute('data-series'));
      else seen[look] = g.getAttribute('data-series');
    });
  });
  document.querySelectorAll('img').forEach(function (img) {
    if (!img.naturalWidth) problems.push('empty-img:' + (img.getAttribute('alt') || ''));
  });
  document.body.setAttribute('data-overflow', JSON.stringify(problems));
});
</script>
"""


def walk_module():
    """``benchmarks/publisher_walk.py`` as a module (its generated credit table and the
    publisher's review of a draft, shared with the walk)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "publisher_walk", Path(__file__).resolve().parents[1] / "benchmarks/publisher_walk.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reviewed_credit(folder: Path) -> tuple[Path, Path, str]:
    """The walk's 1,000-row credit table, its draft from ``contract draft`` and the
    publisher's review (roles, budget, the proposed ``tot:`` block adopted): ``(data,
    contract, the draft's text before the review)``."""
    from privfair.cli import main

    walk = walk_module()
    data, contract = folder / "credit.csv", folder / "credit.yaml"
    walk.credit_table().to_csv(data, index=False)
    assert main(["contract", "draft", "--data", str(data), "--out", str(contract)]) == 0
    drafted = contract.read_text()
    walk.review(contract, protected=["sex"], admissible=[walk.LONG, "amount"],
                outcome="credit_risk", tot_features=["duration", "age"])
    return data, contract, drafted


def chromium() -> str | None:
    """The headless browser: Debian's ``chromium`` (or another Chromium build on PATH)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    binary = chromium()
    if binary is None:
        raise RuntimeError("no chromium binary on PATH")
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--disable-dev-shm-usage", f"--window-size={WINDOW}", "--virtual-time-budget=5000",
         *args], capture_output=True, text=True, timeout=120, check=False)


def markdown_html(markdown: str, *, title: str = "report") -> str:
    """HTML of the Markdown subset the model card uses, styled like the HTML reports."""
    from privfair.reporting.report import CSS

    def inline(s: str) -> str:
        s = html.escape(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        return re.sub(r"`(.+?)`", r"<code>\1</code>", s)

    out, para, lines = [], [], markdown.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("|"):
            rows = []
            while k < len(lines) and lines[k].startswith("|"):
                cells = [c.strip() for c in lines[k].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                k += 1
            head, *rest = rows
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
                       + "</tr>" + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r)
                                           + "</tr>" for r in rest) + "</table>")
            continue
        heading = re.match(r"(#{1,6}) (.*)", line)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif line.strip():
            para.append(inline(line))
        if (not line.strip() or heading) and para:
            out.append("<p>" + " ".join(para) + "</p>")
            para = []
        k += 1
    if para:
        out.append("<p>" + " ".join(para) + "</p>")
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(out) + "</body></html>")


def overflow(page: Path, work: Path) -> list[str]:
    """The problems chromium finds on ``page`` (see the module docstring)."""
    import json

    work.mkdir(parents=True, exist_ok=True)
    copy = work / f"{page.stem}-checked.html"
    text = page.read_text(encoding="utf-8")
    text = text.replace("</body>", CHECK + "</body>") if "</body>" in text else text + CHECK
    copy.write_text(text, encoding="utf-8")
    done = _browser("--dump-dom", copy.resolve().as_uri())
    found = re.search(r"<body[^>]*data-overflow=\"([^\"]*)\"", done.stdout)
    if found is None:
        raise RuntimeError(f"chromium did not run the check on {page} (exit {done.returncode}):"
                           f" {done.stderr[-1500:]}")
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, png: Path) -> Path:
    """A full-window PNG of ``page``."""
    done = _browser(f"--screenshot={png.resolve()}", page.resolve().as_uri())
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot of {page}: {done.stderr[-1500:]}")
    return png


if __name__ == "__main__":
    target = Path(sys.argv[1])
    if target.suffix == ".md":
        converted = target.with_suffix(".html")
        converted.write_text(markdown_html(target.read_text()), encoding="utf-8")
        target = converted
    print("\n".join(overflow(target, Path("/tmp/browser-check"))) or "no overflow")
    if len(sys.argv) > 2:
        print(screenshot(target, Path(sys.argv[2])))
