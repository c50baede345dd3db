"""Issue 32 item 6 (finding 4): a test seed is refused once any charged run used it.

At main, a seed used by a run that drew noise but published nothing (an infeasible TOT) was
accepted again by a new run, and resuming the first run then published a second release with
identical noise; the resumed manifest said ``insecure_seed.used: false``.
"""

from __future__ import annotations

import json

import pytest

from privfair.contracts.schema import load_contract
from privfair.core.errors import PrivfairError
from privfair.release.kinds.table import kind as table_kind
from privfair.release.resume import resume_release
from privfair.release.run import release_table
from privfair.release.tabular import stages as shared_stages
from privfair.store.files import StoreError
from privfair.store.registry import read_lifetime_ledger


def _request(contract, data, tmp_path, **kw):
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "mst", "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work"), "max_iters": 50, **kw}


@pytest.fixture
def seeded_failed_run(toy_contract, toy_parquet, tmp_path, monkeypatch):
    """A run with a fixed seed that drew noise and published nothing (TOT infeasible)."""
    def infeasible(*args, **kwargs):
        raise PrivfairError("TOT infeasible: no map meets the discrimination constraint")

    with monkeypatch.context() as m:
        m.setattr(shared_stages, "fairness_transform", infeasible)
        with pytest.raises(PrivfairError, match="infeasible"):
            release_table(_request(toy_contract, toy_parquet, tmp_path, seed=7,
                                   insecure_seed=True))
    (pending,) = read_lifetime_ledger(None, load_contract(toy_contract)).pending
    assert pending["state"] == "spent, not published" and pending["seed_fingerprint"]
    return pending


def test_a_seed_of_a_charged_unpublished_run_is_refused(seeded_failed_run, toy_contract,
                                                        toy_parquet, tmp_path):
    with pytest.raises(StoreError, match="charged run made with this seed"):
        release_table(_request(toy_contract, toy_parquet, tmp_path, seed=7, insecure_seed=True))
    book = read_lifetime_ledger(None, load_contract(toy_contract))
    assert [p["run_id"] for p in book.pending] == [seeded_failed_run["run_id"]]
    assert book.releases == []  # refused before anything was reserved or drawn
    # another seed is fine
    release_table(_request(toy_contract, toy_parquet, tmp_path, seed=8, insecure_seed=True))


def test_resume_records_the_seed_policy_of_the_run_that_drew_the_noise(seeded_failed_run,
                                                                       tmp_path):
    folder = resume_release(table_kind.TABLE, seeded_failed_run["run_id"], {},
                            work_dir=tmp_path / "work")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["insecure_seed"] == {"used": True,
                                         "fingerprint": seeded_failed_run["seed_fingerprint"]}
    assert manifest["seed_policy"].startswith("INSECURE")


def test_resume_with_a_seed_another_run_used_is_refused(seeded_failed_run, toy_contract,
                                                        toy_parquet, tmp_path):
    release_table(_request(toy_contract, toy_parquet, tmp_path, seed=9, insecure_seed=True))
    with pytest.raises(StoreError, match="release made with this seed"):
        resume_release(table_kind.TABLE, seeded_failed_run["run_id"],
                       {"seed": 9, "insecure_seed": True}, work_dir=tmp_path / "work")
