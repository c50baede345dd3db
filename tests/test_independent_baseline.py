"""The DP independence baseline (``--method independent``, issue 15)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privfair.core.accounting import zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.release.policy_counts import LEDGER_NAME, POLICY_SHARE
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


def _release(contract, data, tmp_path, *, epsilon: float, method: str) -> dict:
    """Run a toy release (OS-entropy noise) and return its manifest."""
    from privfair.release.run import release_table as run_release

    final = run_release({"contract": str(contract), "data": str(data), "epsilon": epsilon,
                         "delta": 1e-9, "method": method, "out": str(tmp_path / "releases"),
                         "work_dir": str(tmp_path / "work"), "max_iters": 200})
    return json.loads((final / "manifest.json").read_text())


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
    manifest = _release(toy_contract, toy_parquet, tmp_path, epsilon=1.0, method="independent")
    # the rows the contract's policies touched (issue 21.2), then the one measurement
    assert [e["name"] for e in manifest["ledger"]] == [LEDGER_NAME, "one-way marginals"]
    assert manifest["ledger"][1]["rho"] == pytest.approx(
        (1 - POLICY_SHARE) * zcdp_rho(epsilon=1.0, delta=1e-9))
    assert manifest["structure"]["edges"] == [] and manifest["fairness_check"]["passed"]
    assert manifest["method"]["name"] == "independent"


def test_tree_signal_known_value():
    from privfair.synth.synthesizer import tree_signal

    # 2 edges share rho_tree / 2 = 0.01: sigma = sqrt(2 / 0.02) = 10; median pair 4 cells
    signal = tree_signal(1000.0, (2, 2, 2), rho_tree=0.02)
    assert signal.noise_tvd == pytest.approx(10 * np.sqrt(2 / np.pi) * 4 / 2000)
    assert not signal.fallback
    assert tree_signal(10.0, (2, 2, 2), rho_tree=0.02).fallback
    assert not tree_signal(10.0, (2, 2, 2), rho_tree=0.0).fallback  # nothing left to spend


def test_combined_measurements_are_as_accurate_as_one_with_the_summed_rho():
    from privfair.core.accounting import gaussian_sigma
    from privfair.synth.measure import Measurement
    from privfair.synth.synthesizer import combine_measurements

    s1, s2 = gaussian_sigma(rho=0.1, sensitivity=2), gaussian_sigma(rho=0.3, sensitivity=2)
    a = Measurement(("x",), np.array([10.0, 4.0]), np.full(2, s1))
    b = Measurement(("x",), np.array([12.0, 0.0]), np.full(2, s2))
    (c,) = combine_measurements([a], [b])
    np.testing.assert_allclose(c.stddev, gaussian_sigma(rho=0.4, sensitivity=2))
    w1, w2 = 1 / s1 ** 2, 1 / s2 ** 2
    np.testing.assert_allclose(c.values, (w1 * a.values + w2 * b.values) / (w1 + w2))


def test_small_noisy_total_falls_back_to_independence_and_spends_the_whole_budget():
    from privfair.synth.synthesizer import FALLBACK_METHOD, FALLBACK_STEP

    domain = Domain(tuple(SIZES), tuple(SIZES.values()))
    rho = zcdp_rho(epsilon=0.3, delta=1e-6)
    small = FairSynthesizer(domain=domain, roles=ROLES, epsilon=0.3, delta=1e-6,
                            method="prefair-greedy").fit(_codes(300),
                                                         rng=np.random.default_rng(2))
    assert [e.name for e in small.ledger_.entries] == ["one-way marginals", FALLBACK_STEP]
    assert small.ledger_.spent == pytest.approx(rho)
    assert small.structure_.method == FALLBACK_METHOD and small.structure_.edges == ()
    assert small.manifest()["method"]["small_n"]["fallback"] is True
    large = FairSynthesizer(domain=domain, roles=ROLES, epsilon=0.3, delta=1e-6,
                            method="prefair-greedy").fit(_codes(50_000),
                                                         rng=np.random.default_rng(2))
    assert len(large.structure_.edges) == len(SIZES) - 1
    assert large.manifest()["method"]["small_n"]["fallback"] is False


def test_release_falls_back_at_small_epsilon(toy_contract, toy_parquet, tmp_path):
    from privfair.synth.synthesizer import FALLBACK_METHOD, FALLBACK_STEP

    # ε = 0.1: at 0.3 a tree's limit (0.15, issue 34.1) lets one pair of the toy table through
    manifest = _release(toy_contract, toy_parquet, tmp_path, epsilon=0.1,
                        method="prefair-greedy")
    assert [e["name"] for e in manifest["ledger"]] == [LEDGER_NAME, "one-way marginals",
                                                       FALLBACK_STEP]
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(
        zcdp_rho(epsilon=0.1, delta=1e-9))
    assert manifest["structure"]["method"] == FALLBACK_METHOD
    assert manifest["fairness_check"]["passed"]
