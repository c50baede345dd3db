"""Issue 35 (a publisher's day, round two): what a published report, model card and catalog
say must match what they show: the catalog's ``fair`` column, the model card's verdict and
cost, the noisy policy counts, the draft's review note, and the charts."""

from __future__ import annotations

from privfair.release.run import release_table as run_release
from privfair.release.tabular.plan import ReleaseParams
from privfair.store.catalog import fairness_label, list_releases


def _table(toy_contract, toy_parquet, tmp_path, **kw):
    base = {"contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 1.0,
            "delta": 1e-9, "method": "mst", "max_iters": 50, "seed": 3,
            "insecure_seed": True, "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work")}
    return run_release(ReleaseParams(**(base | kw)))


# --- 35.2: the catalog tells "not claimed" from passed and failed -------------------------


def test_the_catalog_says_not_claimed_for_a_method_that_promises_no_fairness(
        toy_contract, toy_parquet, tmp_path):
    folder = _table(toy_contract, toy_parquet, tmp_path)
    row, = list_releases(tmp_path / "releases")
    assert row["fairness_claimed"] is False
    assert fairness_label(row) == "not claimed"
    assert "not claimed by this method" in (folder / "report.html").read_text()


def test_fairness_label_of_claimed_and_old_rows():
    assert fairness_label({"fairness_passed": True, "fairness_claimed": True}) == "yes"
    assert fairness_label({"fairness_passed": False, "fairness_claimed": True}) == "no"
    assert fairness_label({"fairness_passed": True, "fairness_claimed": False}) \
        == "not claimed"
    # a row from a catalog written before the column existed keeps its old reading
    assert fairness_label({"fairness_passed": True, "fairness_claimed": None}) == "yes"



def test_releases_list_shows_no_row_count_for_a_model_or_graph(tmp_path, capsys, monkeypatch):
    """Issue 35's walk: a model's and a graph's catalog rows hold n_rows 0, which
    ``releases list`` printed as 0 rows; a table's rows are still shown."""
    from privfair import cli
    from privfair.release import checks
    from privfair.store import catalog

    base = {"dataset": "loans", "published_at": "t", "epsilon": 1.0, "delta": 1e-6,
            "fairness_passed": False, "fairness_claimed": True}
    rows = [base | {"version": "v1", "method": "mst", "n_rows": 2999, "path": "loans/v1"},
            base | {"version": "v2", "method": "model:dpsgd", "n_rows": 0, "path": "loans/v2"},
            base | {"version": "v3", "method": "graph:privpc", "n_rows": 0, "path": "loans/v3"}]
    monkeypatch.setattr(catalog, "list_releases", lambda store, dataset: rows)
    monkeypatch.setattr(checks, "check_catalog_file", lambda store: None)
    assert cli.main(["releases", "list", "--out", str(tmp_path)]) == 0
    lines = {line.split("│")[2].strip(): line for line in capsys.readouterr().out.splitlines()
             if line.startswith("│")}
    assert " 2999 " in lines["v1"]
    for version in ("v2", "v3"):
        cells = [cell.strip() for cell in lines[version].split("│")]
        assert cells[7] == "-" and "0" not in cells[7]
    assert catalog.rows_label({"method": "embedding:dpne", "n_rows": 0}) == "-"

# --- 35.4: noisy policy counts with their noise and a reading -----------------------------


def test_noisy_policy_counts_are_never_shown_as_negative_counts_and_say_their_noise():
    from privfair.reporting.model_card import policy_counts_lines
    from privfair.reporting.noisy import count_estimate, count_reading
    from privfair.reporting.report import policy_counts_section

    record = {"policies": {"age": {"out_of_domain": "clamp", "nulls": "drop"}},
              "touched_rows": [{"column": "installment_rate", "action": "dropped",
                                "noisy_count": 355.2},
                               {"column": "age", "action": "clamped", "noisy_count": -305.0},
                               {"column": "amount", "action": "dropped",
                                "noisy_count": 900.4}],
              "noise": {"mechanism": "gaussian", "sigma": 187.0}}
    assert count_estimate(-305.0) == 0 and count_estimate(355.2) == 355
    assert count_reading(355.2, 187.0).startswith("within noise of 0")
    assert count_reading(-305.0, 187.0).startswith("within noise of 0")
    assert count_reading(-900.0, 187.0).startswith("within noise of 0")  # far below 0 too
    assert count_reading(900.4, 187.0).startswith("about 900 rows (2σ range 526 to 1,274)")
    page = policy_counts_section(record, {"age": "Age in years"})
    card = "\n".join(policy_counts_lines(record))
    for text in (page, card):
        assert "-305" not in text and "−305" not in text and "355.2" not in text
        assert "noisy by design" in text and "187" in text
        assert text.count("within noise of 0") == 2
    assert "Age in years (age)" in page
    # the card's Markdown table keeps its columns: no stray pipe in a cell
    rows = [line for line in card.splitlines() if line.startswith("| installment_rate")]
    assert len(rows) == 1 and rows[0].count("|") == 5


# --- 35.5: a draft's review note is never published ---------------------------------------


def test_a_drafts_review_note_stays_out_of_the_description_and_the_reports(tmp_path):
    import yaml

    from privfair.contracts.tools import draft_contract
    from privfair.reporting.report import public_description

    data = tmp_path / "credit.csv"
    data.write_text("age,sex\n30,f\n41,m\n52,f\n")
    doc = yaml.safe_load(draft_contract(data))
    assert "review" not in doc["description"].lower()
    # a contract drafted by an earlier version still carries the note: reports drop it
    assert public_description("Draft from credit.csv; review every domain before a "
                              "release.") == ""
    assert public_description("German credit, 1994.") == "German credit, 1994."


# --- 35.1: the model card's verdict agrees with what it shows, and it says why it costs ---


def _card_manifest(metrics, *, trivial, probe):
    return {"dataset": "credit", "version": "v1", "model": "pflr",
            "guarantee": {"epsilon": 1.0, "delta": 1e-6,
                          "spent": {"epsilon": 1.0, "conversion": "balle2020",
                                    "neighbours": "add/remove one row"}},
            "lifetime": {"epsilon_budget": 10.0, "delta_budget": 1e-7, "rho_reserved": 0.1},
            "ledger": [{"name": "functional mechanism (PFLR)", "mechanism": "laplace",
                        "epsilon": 0.95, "rho": 0.45},
                       {"name": "held-out confusion matrices per group",
                        "mechanism": "gaussian", "sigma": 7.5, "rho": 0.009}],
            "trivial": trivial, "prediction_probe": probe, "metrics": metrics,
            "features": {"outcome": "credit_risk", "positive": "good", "group": "sex",
                         "encoding": "one-hot", "names": ["a", "b"]}}


def test_the_model_card_takes_triviality_from_the_model_not_from_noisy_counts():
    from privfair.release.kinds.model.evaluation import noisy_metrics
    from privfair.reporting.model_card import model_card

    # The model predicts both classes, but the noisy counts of held-out rows predicted
    # negative are within the noise of 0: no TRIVIAL verdict, no fairness verdict either.
    noisy = [[[3.0, 60.0], [-2.0, 50.0]], [[1.0, 70.0], [4.0, 80.0]]]
    metrics = noisy_metrics(noisy, ("female", "male"), sigma=7.5, epsilon=1.0, delta=1e-6)
    assert metrics["trivial"] is False and metrics["within_noise_of_zero"] == ["negative"]
    assert metrics["fair"] is False
    probe = {"constant": None, "positive_share": 0.62, "how": "exact, from the weights"}
    card = model_card(_card_manifest(metrics, trivial=False, probe=probe))
    assert "trivial" not in card.lower() and "Warning" not in card
    assert "cannot tell whether the model ever predicts it" in card
    assert "62.0 % of probe inputs positive" in card
    assert "sigma = 7.5 rows" in card and "clipped" in card
    # ...while a model that predicts one class for every input says so, whatever the counts
    probe = {"constant": 1, "positive_share": 1.0, "constant_class": "good",
             "how": "exact, from the weights"}
    metrics = noisy_metrics(noisy, ("female", "male"), sigma=7.5, epsilon=1.0, delta=1e-6,
                            constant=1)
    card = model_card(_card_manifest(metrics, trivial=True, probe=probe))
    assert "trivial (predicts one class): it predicts 'good' for every input" in card
    assert "not called fair: the model predicts one class" in card
    assert "their noisy counts hold noise only" in card


def test_the_model_card_says_what_the_release_costs_against_a_table_and_why():
    from privfair.core.accounting import zcdp_rho
    from privfair.reporting.model_card import model_card

    card = model_card(_card_manifest(None, trivial=False, probe={}))
    budget = zcdp_rho(epsilon=10.0, delta=1e-7)
    table = zcdp_rho(epsilon=1.0, delta=1e-6)
    assert f"({100 * 0.1 / budget:.1f} %)" in card
    assert f"reserves rho = {table:.4g} ({100 * table / budget:.1f} %)" in card
    assert "pure epsilon-DP (Laplace noise" in card and "no use of delta" in card


def test_a_network_is_probed_on_the_contracts_inputs_for_one_class():
    import numpy as np

    from privfair.contracts.model_features import FeatureEncoding
    from privfair.release.kinds.model.predict import probe_inputs, probe_prediction

    encoding = FeatureEncoding((("a", ("x", "y")), ("b", ("u", "v", "w"))), "o", "1", "g",
                               ("F", "M"))
    x, exhaustive = probe_inputs(encoding)
    assert exhaustive and x.shape == (6, 6) and len({tuple(r) for r in x}) == 6
    assert np.all(x[:, :2].sum(axis=1) == 1) and np.all(x[:, 2:5].sum(axis=1) == 1)
    units = np.zeros((2, 6), np.float32)
    units[0, 0] = units[1, 2] = 1.0  # hidden units: a = x, b = u
    hidden = {"layer0.weight": units, "layer0.bias": np.zeros(2, np.float32),
              "layer1.weight": np.ones((1, 2), np.float32),
              "layer1.bias": np.array([-0.5], np.float32)}
    probe = probe_prediction(hidden, encoding)
    # positive when a = x or b = u: negative for a = y with b = v or w (2 of 6 inputs)
    assert probe["constant"] is None and probe["positive_share"] == 4 / 6
    hidden["layer1.bias"] = np.array([-10.0], np.float32)
    assert probe_prediction(hidden, encoding)["constant"] == 0


# --- 35.6: charts readable at any size, series inside their axes, empty panels explained ---


def _points(svg_text):
    """(x, y) of every polyline vertex and circle centre inside data-series groups, and the
    data-plot box (x0, y0, x1, y1)."""
    import re

    box = re.search(r"data-plot='1' x='([\d.]+)' y='([\d.]+)' width='([\d.]+)' "
                    r"height='([\d.]+)'", svg_text)
    x, y, w, h = (float(v) for v in box.groups())
    series = re.findall(r"<g data-series='[^']*'>(.*?)</g>", svg_text)
    points = [tuple(float(v) for v in p.split(",")) for body in series
              for line in re.findall(r"points='([^']*)'", body) for p in line.split()]
    points += [(float(a), float(b)) for body in series
               for a, b in re.findall(r"cx='([-\d.]+)' cy='([-\d.]+)'", body)]
    return (x, y, x + w, y + h), points, len(series)


def test_the_gan_training_chart_draws_both_series_inside_their_axes():
    from privfair.reporting.report import training_svg

    # a loss that goes negative and a shift a thousand times smaller: both stay on the chart
    history = [{"epoch": e, "generator_loss": loss, "marginal_shift": shift}
               for e, loss, shift in ((1, 2.5, 0.004), (2, -1.5, 0.002), (3, -3.0, 0.001))]
    drawing = training_svg(history)
    (x0, y0, x1, y1), points, n = _points(drawing)
    assert n == 2 and len(points) == 9  # 3 + 3 polyline vertices, 3 circle markers
    assert all(x0 <= x <= x1 and y0 <= y <= y1 for x, y in points), points
    assert "left axis" in drawing and "right axis" in drawing


def test_a_large_structure_is_drawn_as_a_matrix_with_declared_labels():
    import itertools

    from privfair.reporting.report import structure_svg

    attrs = [f"c{k}" for k in range(16)]
    edges = list(itertools.combinations(attrs, 2))[:64]
    drawing = structure_svg(attrs, edges, {"protected": ["c0"], "outcome": ["c15"]},
                            {"c1": "Duration in months"})
    assert "drawn as a matrix" in drawing and "<path" not in drawing
    assert drawing.count("<title>c0 – c1</title>") == 1  # an undirected edge: both cells
    assert drawing.count("– c0</title>") + drawing.count("c0 –") >= 2
    assert "Duration in months" in drawing
    small = structure_svg(attrs[:4], edges[:3], {})
    assert "drawn as a matrix" not in small and "<path" in small


def test_an_empty_panel_says_why_and_overlapping_lines_stay_apart():
    import re

    import numpy as np
    import pandas as pd

    from privfair.evaluation.evaluate import trade_off_report

    rows = [{"dataset": "credit", "method": m, "eta": None, "epsilon": e, "seed": 0,
             "tvd2": 0.07, "logistic_accuracy": 0.66, "logistic_sex_DP": 0.05,
             "logistic_sex_CDP": np.nan, "error": None}
            for m in ("mst", "aim") for e in (1.0, 2.0)]
    page = trade_off_report(pd.DataFrame(rows))
    assert "<img" not in page  # inline SVG: the browser check can read every panel
    empty = re.findall(r"aria-label='([^']*): empty panel'", page)
    assert empty == ["|CDP| of the classifier, mean over protected"]
    assert "no value" in page and "CDP conditions on the" in page  # wrapped in the panel
    # two methods with the same values: different dash patterns and markers, side by side
    panel = page.split("aria-label='average 2-way TVD")[1].split("</svg>")[0]
    dashes = re.findall(r"stroke-dasharray='([^']*)'", panel)
    assert len(dashes) == 2 and dashes[0] != dashes[1]
    assert "<circle" in panel and "<rect x=" in panel.split("data-series='aim'")[1]
    (_, points, _) = _points(panel)
    xs = sorted({round(x, 1) for x, _ in points})
    assert len(xs) == 4  # the same ε drawn 3 px apart for each method


def test_a_gan_report_draws_no_structure():
    import pandas as pd

    from privfair.reporting.report import build_report

    manifest = {"dataset": "d", "version": "v1",
                "guarantee": {"epsilon": 1.0, "delta": 1e-7, "rho": 0.01},
                "structure": {"edges": [], "method": "dpgan"},
                "fairness_check": {"criterion": "statistical parity", "passed": True},
                "method": {"name": "dpgan", "dp_sgd": {"noise_multiplier": 1.0},
                           "training_history": [{"epoch": 1, "generator_loss": 1.0,
                                                 "marginal_shift": 0.1}]},
                "columns": [{"name": "a", "released_as": "a", "label": "Age band"}],
                "ledger": []}
    page = build_report(manifest, pd.DataFrame({"a": ["x", "y", "x"]}))
    assert "Selected structure" not in page and "selects no structure" in page
    assert "Age band" in page  # the marginal's title is the declared label


def test_the_causal_graph_draws_declared_labels():
    from privfair.causal.graph import CausalGraph
    from privfair.release.kinds.causal_graph.report import graph_chart

    graph = CausalGraph.from_dict({"nodes": ["sex", "dur", "y"], "edges": [["sex", "dur"]],
                                   "undirected": [["dur", "y"]]})
    drawing = graph_chart(graph, {"protected": ["sex"], "outcome": ["y"]}, [],
                          {"dur": "Duration in months"})
    assert "Duration in months" in drawing and "Duration in months (dur)" in drawing


def test_a_model_whose_accuracy_is_within_noise_of_the_majority_class_is_warned_about():
    """Issue 42.5: dpsgd-f printed "DP held-out accuracy 0.758 (majority 0.670)" with no
    warning while on all real rows it predicted the majority class; the terminal line and
    the card now say when the noisy counts cannot show the model beats the majority class."""
    from privfair.release.kinds.model.evaluation import noisy_metrics
    from privfair.release.kinds.model.train import MODEL
    from privfair.reporting.model_card import model_card

    # 2 groups x 2 x 2 cells, sigma 7.5, about 270 rows: a margin of 2*7.5*sqrt(8)/270 = 0.157
    close = [[[40.0, 30.0], [20.0, 45.0]], [[38.0, 30.0], [22.0, 45.0]]]
    far = [[[60.0, 10.0], [5.0, 60.0]], [[58.0, 10.0], [7.0, 60.0]]]
    for noisy, beats in ((close, False), (far, True)):
        m = noisy_metrics(noisy, ("female", "male"), sigma=7.5, epsilon=1.0, delta=1e-6)
        assert m["beats_majority_beyond_noise"] is beats
        line = MODEL.outcome({"model": "dpsgd-f", "metrics": m})
        assert ("WARNING: accuracy is within noise" in line) is not beats
        card = model_card(_card_manifest(m, trivial=False, probe={}))
        assert ("Not shown better than always predicting the majority class" in card) \
            is not beats
