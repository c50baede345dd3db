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
    from privfair.release.run import release_table as run_release

    final = run_release({"contract": str(toy_contract), "data": str(toy_parquet),
                         "epsilon": 1.0, "delta": 1e-9, "method": "aim",
                         "max_time_s": 1e-9, "out": str(tmp_path / "releases"),
                         "work_dir": str(tmp_path / "work"), "max_iters": 200})
    ledger = json.loads((final / "manifest.json").read_text())["ledger"]
    assert [e["name"] for e in ledger] == ["rows touched by the contract's policies",
                                           "AIM initial one-way marginals",
                                           "AIM select round 1", "AIM measure round 1"]
    assert sum(e["rho"] for e in ledger) == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-9))


def test_clock_keeps_the_final_fit_share_and_stops_rounds_before_the_budget(monkeypatch):
    from privfair.synth import aim

    now = [100.0]
    monkeypatch.setattr(aim.time, "monotonic", lambda: now[0])
    clock = aim._Clock(100.0)  # rounds may use 85 s, the final fit the rest
    assert clock.fit_time() == pytest.approx(85.0)
    for _ in range(3):  # three rounds of 20 s
        clock.round_started()
        assert not clock.last_round()
        now[0] += 20.0
        clock.round_ended()
    assert clock.fraction() == pytest.approx(0.6)
    clock.round_started()  # 25 s left for rounds: one more 20 s round fits
    assert not clock.last_round()
    now[0] += 10.0  # 15 s left: the next round would overrun, so it is the last
    assert clock.last_round()
    assert clock.fit_time() == pytest.approx(15.0)
    assert clock.fit_time(final=True) == pytest.approx(30.0)
    now[0] += 60.0  # past the budget: fits still get a few steps
    assert clock.fit_time(final=True) == pytest.approx(aim.MIN_FIT_SHARE * 100.0)
    assert clock.fraction() == 1.0
    unlimited = aim._Clock(None)
    assert not unlimited.last_round() and unlimited.fit_time() is None
    assert unlimited.fraction() == 0.0


def test_progress_is_monotone_and_ends_at_one():
    rng = np.random.default_rng(3)
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    data = {a: rng.integers(0, s, 3000) for a, s in domain.items()}
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    seen = []
    run_aim(tables, domain, rho=0.5, rng=np.random.default_rng(4),
            ledger=PrivacyLedger(rho_budget=1.0), max_iters=30, final_max_iters=60,
            progress=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)


def test_rounds_do_not_depend_on_how_long_counting_takes(monkeypatch):
    """Issue 32.10: AIM's round count is published in the ledger, and counting the candidate
    tables takes time that grows with n, so the time budget starts after counting: a count
    that outlasts the whole budget runs the same rounds as an instant one (it used to leave
    one final round)."""
    import time

    from privfair.core.domain import Roles
    from privfair.synth.synthesizer import FairSynthesizer

    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    rng = np.random.default_rng(6)
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    data = {a: rng.integers(0, s, 3000) for a, s in domain.items()}

    def rounds(counting_s: float) -> tuple[list, list]:
        def counter(cliques):
            now[0] += counting_s  # 30 s outlasts the 20 s budget
            return count_marginals(domain, list(cliques), [data])

        synth = FairSynthesizer(domain=domain, roles=Roles(), epsilon=1.0, delta=1e-9,
                                method="aim", max_time_s=20.0, small_n_fallback=False)
        synth.measure(rng=np.random.default_rng(7), counter=counter)
        assert synth.ledger_.spent == pytest.approx(synth.ledger_.rho_budget, rel=1e-9)
        # the final fit gets what the rounds left, counted from the end of counting
        assert synth.final_fit_time() == pytest.approx(20.0)
        return synth.aim_rounds_, [e.name for e in synth.ledger_.entries]

    slow, instant = rounds(30.0), rounds(0.0)
    assert len(slow[0]) > 1
    assert slow == instant
