"""Issue 35 (a publisher's day, round two): what a published report, model card and catalog
say must match what they show: the catalog's ``fair`` column, the model card's verdict and
cost, the noisy policy counts, the draft's review note, and the charts."""

from __future__ import annotations

from privfair.release.kinds import release_table as run_release
from privfair.release.table.plan import ReleaseParams
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
    _table(toy_contract, toy_parquet, tmp_path)
    row, = list_releases(tmp_path / "releases")
    assert row["fairness_claimed"] is False
    assert fairness_label(row) == "not claimed"


def test_fairness_label_of_claimed_and_old_rows():
    assert fairness_label({"fairness_passed": True, "fairness_claimed": True}) == "yes"
    assert fairness_label({"fairness_passed": False, "fairness_claimed": True}) == "no"
    assert fairness_label({"fairness_passed": True, "fairness_claimed": False}) \
        == "not claimed"
    # a row from a catalog written before the column existed keeps its old reading
    assert fairness_label({"fairness_passed": True, "fairness_claimed": None}) == "yes"


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
    assert count_reading(900.4, 187.0).startswith("about 900 rows (2σ range 526 to 1,274)")
    page = policy_counts_section(record, {"age": "Age in years"})
    card = "\n".join(policy_counts_lines(record))
    for text in (page, card):
        assert "-305" not in text and "−305" not in text and "355.2" not in text
        assert "noisy by design" in text and "187" in text
        assert text.count("within noise of 0") == 2
    assert "Age in years (age)" in page


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
