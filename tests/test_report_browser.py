"""Issue 25.5: every report kind, rendered in a real headless browser, keeps its text in its
boxes (slow: a dozen releases and a chromium start per page).

One generated 1,000-row table with a 42-character column name is released as a table (MST
with TOT, and AIM), a GAN, a model and a causal graph, the packaged edge list as node
embeddings, and evaluated; each page goes through :mod:`browser_check` (chromium
``--dump-dom`` with an injected check, and ``--screenshot``). The model card is Markdown: it
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

    shots = tmp_path / "screenshots"
    shots.mkdir()
    problems = {}
    for kind, page in pages.items():
        problems[kind] = overflow(page, tmp_path / "checked")
        png = screenshot(page, shots / f"{kind.split()[0]}-{len(problems)}.png")
        assert png.stat().st_size > 10_000, kind  # something was drawn
    assert problems == {kind: [] for kind in pages}, json.dumps(problems, indent=1,
                                                                 ensure_ascii=False)
