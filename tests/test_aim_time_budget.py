"""AIM's time budget (issue 15): out of time, one final round spends the rest of ρ."""

from __future__ import annotations

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.synth.aim import candidate_cliques, run_aim
from privfair.synth.measure import count_marginals


def test_zero_time_budget_still_spends_everything_in_one_final_round():
    rng = np.random.default_rng(0)
    domain = Domain(("a", "b", "c"), (3, 2, 4))
    data = {"a": rng.integers(0, 3, 2000), "b": rng.integers(0, 2, 2000),
            "c": rng.integers(0, 4, 2000)}
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    ledger = PrivacyLedger(rho_budget=1.0)
    result = run_aim(tables, domain, rho=0.3, rng=np.random.default_rng(1), ledger=ledger,
                     max_iters=50, final_max_iters=200, max_time_s=0.0)
    assert len(result.rounds) == 1
    assert ledger.spent == pytest.approx(0.3, rel=1e-9)
    # the final round's σ is the one the whole remaining budget (0.9 of it) buys
    remaining = 0.3 - ledger.entries[0].rho
    assert result.rounds[0].sigma == pytest.approx(np.sqrt(1 / (2 * 0.9 * remaining)))
    assert result.model.total > 0


def test_first_admissible_pick_samples_the_mechanism_restricted_to_admissible_ones():
    from privfair.synth.aim import exponential_first_admissible

    scores = np.array([0.0, 1.0, 2.0, 3.0])
    allowed = {0, 2}
    rng = np.random.default_rng(5)
    ledger = PrivacyLedger(rho_budget=1e6)
    calls = []

    def admissible(i):
        calls.append(i)
        return i in allowed

    picks = []
    for _ in range(4000):
        calls.clear()
        index, examined = exponential_first_admissible(
            scores, admissible, epsilon=2.0, sensitivity=1.0, rng=rng, ledger=ledger,
            name="pick")
        assert calls[-1] == index and examined == len(calls)  # stops at the first success
        picks.append(index)
    weights = np.exp(2.0 * scores[[0, 2]] / 2)
    expected = weights / weights.sum()
    observed = np.bincount(picks, minlength=4)[[0, 2]] / len(picks)
    assert set(picks) <= allowed
    # 4000 draws: standard error < 0.008; 4 of them is a generous bound
    np.testing.assert_allclose(observed, expected, atol=0.032)
    assert len(ledger.entries) == 4000 and ledger.entries[0].mechanism == "exponential"


def test_release_with_a_time_budget_ends_after_one_round_with_the_budget_spent(
        toy_contract, toy_parquet, tmp_path):
    import json

    from privfair.core.accounting import zcdp_rho
    from privfair.pipeline.runner import run_release

    final = run_release({"contract": str(toy_contract), "data": str(toy_parquet),
                         "epsilon": 1.0, "delta": 1e-9, "method": "aim",
                         "max_time_s": 1e-9, "out": str(tmp_path / "releases"),
                         "work_dir": str(tmp_path / "work"), "max_iters": 200})
    ledger = json.loads((final / "manifest.json").read_text())["ledger"]
    assert [e["name"] for e in ledger] == ["AIM initial one-way marginals",
                                           "AIM select round 1", "AIM measure round 1"]
    assert sum(e["rho"] for e in ledger) == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-9))
