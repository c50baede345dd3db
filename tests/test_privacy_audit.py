"""Issue 10, "Prove it": the empirical privacy audit (few trials here; the full audit is
``privfair audit`` / benchmarks/privacy_audit.py)."""

from __future__ import annotations

import math
import string

import numpy as np
import pytest

from privfair.evaluation.audit import (
    MECHANISMS,
    audit_cathist,
    clopper_pearson,
    epsilon_lower_bound,
    run_all,
)


def test_clopper_pearson_hand_values() -> None:
    # 0 of n: upper bound 1 - (alpha/2)**(1/n); n of n: lower bound (alpha/2)**(1/n).
    assert clopper_pearson(0, 100, alpha=0.05) == pytest.approx((0.0, 1 - 0.025 ** 0.01))
    assert clopper_pearson(100, 100, alpha=0.05) == pytest.approx((0.025 ** 0.01, 1.0))
    low, high = clopper_pearson(50, 100, alpha=0.05)
    assert low == pytest.approx(0.3983, abs=1e-4) and high == pytest.approx(0.6017, abs=1e-4)


def test_epsilon_lower_bound_grows_with_evidence_and_honours_delta() -> None:
    assert epsilon_lower_bound(500, 500, 1000, delta=0.0) == 0.0
    weak = epsilon_lower_bound(100, 300, 1000, delta=0.0)
    strong = epsilon_lower_bound(1000, 3000, 10_000, delta=0.0)
    assert 0 < weak < strong < math.log(3)
    assert epsilon_lower_bound(1000, 3000, 10_000, delta=0.25) == 0.0  # p' - delta <= p


def _random_word_cathist(counts, *, universe_values, tolerance, epsilon, rng) -> set[str]:
    """CatHist as the pipeline ran it before issue 10: threshold tau on noisy active counts,
    outside labels as random 12-letter words instead of values of the declared universe."""
    from privfair.domains.cathist import cathist_threshold, outside_probability

    n = len(universe_values)
    tau = cathist_threshold(epsilon=epsilon, domain_size=n, tolerance=tolerance)
    noisy = {k: v + rng.laplace(0, 1 / epsilon) for k, v in counts.items()}
    letters = np.array(list(string.ascii_lowercase))
    k = rng.binomial(n, outside_probability(domain_size=n, tolerance=tolerance))
    words = {"".join(w) for w in letters[rng.integers(0, 26, size=(k, 12))]}
    return {c for c, v in noisy.items() if v >= tau} | words


def test_cathist_audit_catches_random_word_outside_draws_and_passes_the_fix() -> None:
    """The audit's CatHist figure: the old outside-draw rule fails it, today's passes."""
    before = audit_cathist(trials=400, release=_random_word_cathist)
    assert before.hits_d == 0 and not before.passed and before.epsilon_lower_bound > 3
    after = audit_cathist(trials=400)
    assert after.passed and after.hits_d > 40


def test_every_mechanism_stays_under_its_claim_at_low_trial_counts() -> None:
    names = [n for n in MECHANISMS if n != "end-to-end"]
    results = run_all(names=names, scale=0.02)
    assert [r.mechanism for r in results] == [
        "gaussian marginals", "gaussian marginals (discrete)", "selection exponential mechanism",
        "DP quantiles (dp_bins)", "CatHist", "AIM round (select + measure)"]
    for r in results:
        assert r.passed, r
        assert r.trials == max(10, round(MECHANISMS[_key(r.mechanism)][1] * 0.02))
    with pytest.raises(ValueError, match="unknown"):
        run_all(names=["nope"])


def _key(mechanism: str) -> str:
    return {"gaussian marginals": "gaussian", "gaussian marginals (discrete)": "gaussian-discrete",
            "selection exponential mechanism": "selection",
            "DP quantiles (dp_bins)": "quantiles", "CatHist": "cathist",
            "AIM round (select + measure)": "aim-round"}[mechanism]


def test_audit_command_prints_the_table(capsys) -> None:
    from privfair.cli import main

    assert main(["audit", "--mechanism", "selection", "--scale", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "claimed eps" in out and "selection exponential mechanism" in out
