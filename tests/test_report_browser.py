"""Issue 25.5: every report kind, rendered in a real headless browser, keeps its text in its
boxes (slow: a dozen releases and a chromium start per page).

One generated 1,000-row table with a 42-character column name is released as a table (MST
with TOT, and AIM), a GAN, a model and a causal graph, the packaged edge list as node
embeddings, evaluated as a grid and one release scored (``evaluate --release``); each page
goes through :mod:`browser_check` (chromium
``--dump-dom`` with an injected check for overflow, overlap, series outside their axes,
empty panels and look-alike series, and ``--screenshot``). The model card is Markdown: it
is converted to HTML with the reports' style first (:func:`browser_check.markdown_html`).

Debian's package: ``apt-get install -y chromium`` (``.ci/run`` installs it). Without a
chromium binary the test is skipped with that reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_check import chromium, markdown_html, overflow, reviewed_credit, screenshot
from kind_cases import edge_list_example

from privfair.cli import main

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None, reason="no chromium binary on PATH (Debian: "
                       "apt-get install -y chromium; .ci/run installs it)"),
]


SEEDS = iter(range(10, 100))


def released(capsys, *argv: str) -> Path:
    """Publish with the CLI (a new test seed each time: one seed is refused twice)."""
    code = main([str(a) for a in argv] + ["--seed", str(next(SEEDS)), "--insecure-seed"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    return Path(out.strip().splitlines()[-1])


def test_every_report_kind_fits_its_boxes_in_chromium(tmp_path, capsys):
    data, contract, _ = reviewed_credit(tmp_path)
    common = ["--contract", contract, "--data", data, "--epsilon", "2", "--out", tmp_path / "releases", "--work-dir",
              tmp_path / "work", "--no-prefect"]
    table = [*common, "--delta", "1e-7"]
    pages: dict[str, Path] = {}
    pages["table (mst + TOT)"] = released(
        capsys, "release", *table, "--method", "mst", "--fairness", "tot") / "report.html"
    pages["table (aim)"] = released(
        capsys, "release", *table, "--method", "aim", "--max-time", "5") / "report.html"
    pages["gan"] = released(
        capsys, "release", *table, "--method", "dpgan", "--gan-epochs", "1") / "report.html"
    card = released(capsys, "train", *common, "--delta", "1e-6", "--model", "pflr",
                    ) / "model_card.md"
    pages["model"] = tmp_path / "model_card.html"
    pages["model"].write_text(markdown_html(card.read_text(), title="model card"))
    pages["graph"] = released(capsys, "discover", *common, "--delta", "1e-6", "--method",
                              "privpc") / "report.html"
    edges_contract, edges = edge_list_example()
    pages["embedding"] = released(
        capsys, "embed", "--contract", edges_contract, "--data", edges, "--epsilon", "2",
        "--delta", "1e-6", "--dim", "4", "--out",
        tmp_path / "releases", "--work-dir", tmp_path / "work", "--no-prefect") / "report.html"
    assert main(["evaluate", "--contract", str(contract), "--data", str(data), "--methods",
                 "mst", "--epsilons", "2", "--seeds", "1", "--etas", "0.1", "--classifiers",
                 "logistic", "--out", str(tmp_path / "evaluations"), "--no-prefect"]) == 0
    capsys.readouterr()
    pages["evaluation"] = next((tmp_path / "evaluations").rglob("report.html"))
    # issue 35.6: evaluate --release writes a report beside score.json
    assert main(["evaluate", "--release", str(pages["table (mst + TOT)"].parent), "--data",
                 str(data), "--contract", str(contract), "--out",
                 str(tmp_path / "scores")]) == 0
    capsys.readouterr()
    pages["evaluation (release)"] = next((tmp_path / "scores").rglob("report.html"))

    shots = tmp_path / "screenshots"
    shots.mkdir()
    problems = {}
    for kind, page in pages.items():
        problems[kind] = overflow(page, tmp_path / "checked")
        png = screenshot(page, shots / f"{kind.split()[0]}-{len(problems)}.png")
        assert png.stat().st_size > 10_000, kind  # something was drawn
    assert problems == {kind: [] for kind in pages}, json.dumps(problems, indent=1,
                                                                 ensure_ascii=False)


def test_the_browser_check_finds_each_defect_in_a_broken_page(tmp_path):
    """Each detection of :mod:`browser_check` fails on a page made to have that defect, and a
    page drawn by the reports' own chart code passes (issue 35.7)."""
    from privfair.reporting.charts import line_panel_svg
    from privfair.reporting.report import CSS, training_svg

    good_series = [{"label": "mst", "x": [1, 2], "y": [0.1, 0.2]},
                   {"label": "aim", "x": [1, 2], "y": [0.1, 0.2]}]
    good = (line_panel_svg(good_series, title="good panel", x_label="ε")
            + line_panel_svg([{"label": "mst", "x": [1, 2], "y": [None, None]}],
                             title="empty, said why", x_label="ε",
                             empty_reason="undefined here")
            + training_svg([{"epoch": 1, "generator_loss": -3.0, "marginal_shift": 0.1},
                            {"epoch": 2, "generator_loss": 5.0, "marginal_shift": 0.001}]))

    def page(name: str, body: str) -> Path:
        path = tmp_path / f"{name}.html"
        path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><style>{CSS}"
                        f"</style></head><body>{body}</body></html>")
        return path

    def chart(label: str, inner: str) -> str:
        return (f"<svg class='chart' role='img' aria-label='{label}' viewBox='0 0 300 200' "
                f"width='300' height='200'><rect data-plot='1' x='40' y='20' width='240' "
                f"height='140' fill='none' stroke='#999'/>{inner}</svg>")

    off_axis = chart("off", "<g data-series='loss'><polyline points='50,30 150,90 250,400' "
                     "fill='none' stroke='blue'/></g>")
    empty = chart("blank", "")
    alike = chart("alike", "".join(
        f"<g data-series='{n}'><polyline points='50,50 250,60' stroke='red' fill='none'/>"
        f"<circle cx='50' cy='50' r='3'/></g>" for n in ("mst", "aim")))
    wide = "<p style='white-space:nowrap'>" + "x" * 400 + "</p>"
    found = {name: overflow(page(name, body), tmp_path / "checked") for name, body in
             {"good": good, "off": off_axis, "empty": empty, "alike": alike,
              "wide": wide}.items()}
    assert found["good"] == []
    assert found["off"] == ["series-out:off:loss"]
    assert found["empty"] == ["empty-panel:blank"]
    assert found["alike"] == ["series-alike:alike:mst|aim"]
    assert "page" in found["wide"]
