"""Issue 34.3: utility per protected group, and per-group fitting under parallel composition."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from privfair.core.accounting import zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.evaluation.per_group import per_group_figures, per_group_svg, size_bucket
from privfair.evaluation.score_release import write_release_score
from privfair.synth.per_group import PARALLEL_STEP, PerGroupSynthesizer

DOMAIN = Domain.from_dict({"g": 3, "x1": 4, "x2": 3, "y": 2})
ROLES = Roles.from_dict({"protected": ["g"], "admissible": [], "outcome": ["y"]})
LABELS = {"g": ["big-a", "big-b", "tiny"]}


def planted(n: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """Groups 0 and 1 large, group 2 about 2 %; y follows x1 (x1 >= 2 -> 1) with 5 % noise."""
    g = rng.choice(3, size=n, p=[0.6, 0.38, 0.02])
    x1 = rng.integers(0, 4, size=n)
    x2 = (x1 + rng.integers(0, 2, size=n)) % 3
    y = ((x1 >= 2) ^ (rng.random(n) < 0.05)).astype(np.int64)
    return pd.DataFrame({"g": g, "x1": x1, "x2": x2, "y": y})


@pytest.fixture(scope="module")
def figures() -> dict:
    rng = np.random.default_rng(0)
    train, test = planted(4000, rng=rng), planted(1500, rng=rng)
    synthetic = train.copy()
    worse = synthetic["g"].to_numpy() == 1
    # Group 1 made worse on purpose: its x2 scrambled and its outcome always favourable.
    synthetic.loc[worse, "x2"] = rng.integers(0, 3, size=int(worse.sum()))
    synthetic.loc[worse, "y"] = 1
    return per_group_figures(synthetic, real_train=train, real_test=test, domain=DOMAIN,
                             roles=ROLES, labels=LABELS, classifier="logistic", seed=0)


def test_the_group_made_worse_is_worse_and_the_others_are_not(figures):
    a, b, tiny = figures["attributes"]["g"]
    assert [a["group"], b["group"], tiny["group"]] == LABELS["g"]
    # Marginal error of the group's own rows: group b's 2-way TVD is large, a's is zero.
    assert a["tvd2"] == pytest.approx(0.0, abs=1e-12)
    assert b["tvd2"] > 0.2
    # A classifier trained on the synthetic table is wrong on group b's real rows only.
    assert a["synthetic"]["accuracy"] > 0.9
    assert b["synthetic"]["accuracy"] < 0.65
    assert b["real"]["accuracy"] > 0.9
    assert b["synthetic"]["tpr"] > 0.9 and b["synthetic"]["fpr"] > 0.8
    assert a["synthetic"]["tpr"] > 0.9 and a["synthetic"]["fpr"] < 0.1


def test_a_small_group_is_shown_with_its_size_bucket(figures):
    tiny = figures["attributes"]["g"][2]
    assert tiny["train_rows"] == "50-199 rows" and tiny["test_rows"] == "< 50 rows"
    assert tiny["synthetic"]["accuracy"] is not None
    assert size_bucket(49) == "< 50 rows" and size_bucket(50) == "50-199 rows"
    assert size_bucket(10_000) == ">= 10,000 rows"


def test_score_json_has_the_section_and_the_report_has_the_plot(figures, tmp_path):
    record = {"dataset": "planted", "version": 1, "tvd1": 0.1, "per_group": figures}
    folder = write_release_score(record, tmp_path / "scores")
    score = json.loads((folder / "score.json").read_text())
    assert score["per_group"]["attributes"]["g"][1]["group"] == "big-b"
    assert score["per_group"]["not_privacy_protected"] is True
    page = (folder / "report.html").read_text()
    assert "aria-label='utility per protected group'" in page
    assert "big-b" in page and "50-199 rows" in page and "NOT privacy-protected" in page
    svg = per_group_svg(figures)
    assert svg.count("<rect") == 3 * (1 + 3 * 2)  # per group: a TVD bar, 3 metrics x 2 models


def test_per_group_fitting_is_charged_once_under_parallel_composition():
    rng = np.random.default_rng(1)
    data = planted(3000, rng=rng)
    synth = PerGroupSynthesizer(domain=DOMAIN, roles=ROLES, epsilon=1.0, delta=1e-9,
                                column="g", method="mst", min_group_rows=200.0)
    synth.fit(data, rng=np.random.default_rng(2))
    rho = zcdp_rho(epsilon=1.0, delta=1e-9)
    # Two large groups get a model each; the tiny one (~60 rows) goes to the rest part.
    assert [p.codes for p in synth.parts_] == [(0,), (1,), (2,)]
    # Each part spent the whole model share on its own rows ...
    for ledger in synth.part_ledgers_:
        assert ledger.spent == pytest.approx(0.95 * rho, rel=1e-9)
    # ... and the shared ledger holds the declared cost: counts + the largest part, not the sum.
    assert synth.ledger_.spent == pytest.approx(rho, rel=1e-9)
    names = [e.name for e in synth.ledger_.entries]
    assert names == ["per-group counts (g)", PARALLEL_STEP]
    assert math.fsum(lg.spent for lg in synth.part_ledgers_) > rho  # composing would not fit
    sample = synth.sample(1000, rng=np.random.default_rng(3))
    assert len(sample) == 1000 and set(sample.columns) == set(DOMAIN)
    assert 0.5 < float(np.mean(sample["g"] == 0)) < 0.7


def test_per_group_fitting_refuses_bad_settings_before_reading():
    with pytest.raises(ValueError, match="column: 'x1' is not a protected column"):
        PerGroupSynthesizer(domain=DOMAIN, roles=ROLES, epsilon=1.0, delta=1e-9, column="x1")
    with pytest.raises(ValueError, match="count_share"):
        PerGroupSynthesizer(domain=DOMAIN, roles=ROLES, epsilon=1.0, delta=1e-9, column="g",
                            count_share=1.0)


def test_the_evaluation_grid_record_and_report_carry_the_per_group_figures():
    from privfair.evaluation.evaluate import evaluate_synthetic, trade_off_report

    rng = np.random.default_rng(4)
    train, test = planted(2000, rng=rng), planted(800, rng=rng)
    synthetic = train.copy()
    synthetic.loc[synthetic["g"] == 1, "y"] = 1
    record = evaluate_synthetic(synthetic, real_train=train, real_test=test, domain=DOMAIN,
                                roles=ROLES, privileged={"g": 0}, classifiers=("logistic",),
                                tvd_orders=(1, 2), per_group=True, labels=LABELS)
    section = json.loads(record["per_group"])  # a string: the results table stays flat
    b = section["attributes"]["g"][1]
    assert b["group"] == "big-b" and b["synthetic"]["fpr"] > 0.8 and b["real"]["fpr"] < 0.2
    rows = [{"dataset": "planted", "method": "mst", "epsilon": e, "seed": 0, "eta": None,
             **record} for e in (1.0, 4.0)]
    page = trade_off_report(pd.DataFrame(rows))
    assert page.count("aria-label='utility per protected group'") == 1  # smallest ε only
    assert "mst, ε = 1, seed 0" in page and "big-b (200-999 rows)" in page
