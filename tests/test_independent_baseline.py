"""The DP independence baseline (``--method independent``, issue 15)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privfair.core.accounting import zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.synth.synthesizer import FairSynthesizer

SIZES = {"sex": 2, "age": 4, "edu": 3, "income": 2}
ROLES = Roles(protected=("sex",), admissible=("edu",), outcome=("income",))


def _codes(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    edu = np.clip(sex + rng.integers(0, 2, n), 0, 2)
    income = (rng.random(n) < 0.2 + 0.3 * (edu == 2)).astype(np.int64)
    return pd.DataFrame({"sex": sex, "age": rng.integers(0, 4, n), "edu": edu,
                         "income": income})


def test_whole_budget_goes_to_one_way_marginals():
    domain = Domain(tuple(SIZES), tuple(SIZES.values()))
    fitted = {m: FairSynthesizer(domain=domain, roles=ROLES, epsilon=1.0, delta=1e-6,
                                 method=m).fit(_codes(), rng=np.random.default_rng(1))
              for m in ("independent", "mst")}
    baseline = fitted["independent"]
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    assert [e.name for e in baseline.ledger_.entries] == ["one-way marginals"]
    assert baseline.ledger_.spent == pytest.approx(rho)
    assert baseline.structure_.edges == () and baseline.structure_.fairness.passed
    # three times MST's one-way budget: noise scale sqrt(3) times smaller, exactly
    sigma = {m: f.ledger_.entries[0].sigma for m, f in fitted.items()}
    assert sigma["mst"] / sigma["independent"] == pytest.approx(np.sqrt(3))
    # the model is a product of its one-way marginals
    assert all(len(clique) == 1 for clique in baseline.model_.tree.cliques)
    manifest = json.loads(json.dumps(baseline.manifest(), default=float))
    assert manifest["method"]["budget_split"] == {"one_way": rho, "select": 0.0,
                                                  "measure": 0.0}


def test_release_with_the_baseline_charges_one_step(toy_contract, toy_parquet, tmp_path):
    from privfair.pipeline.runner import run_release

    final = run_release({"contract": str(toy_contract), "data": str(toy_parquet),
                         "epsilon": 1.0, "delta": 1e-9, "method": "independent",
                         "out": str(tmp_path / "releases"), "work_dir": str(tmp_path / "work"),
                         "max_iters": 200})
    manifest = json.loads((final / "manifest.json").read_text())
    assert [e["name"] for e in manifest["ledger"]] == ["one-way marginals"]
    assert manifest["ledger"][0]["rho"] == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-9))
    assert manifest["structure"]["edges"] == [] and manifest["fairness_check"]["passed"]
    assert manifest["method"]["name"] == "independent"
