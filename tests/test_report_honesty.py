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
