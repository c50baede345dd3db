"""Every audited mechanism, at its quick trial count and fixed seeds: (a) the lower bound
stays within the claimed ε; (b) every negative control (the same library mechanism with
less noise) is caught, its bound above the claimed ε. A test that cannot fail proves
nothing, so (b) is the point."""

from __future__ import annotations

import pytest

from privfair.evaluation.audit import MECHANISMS, audit_dpne, audit_quantiles
from privfair.evaluation.audit.core import Control

QUARTER = Control("quarter noise", 0.25)

#: About a minute each on 2 busy cores (AIM runs run_aim itself; DPNE needs 20 000 runs a
#: side); the rest of the file runs in about a minute.
SLOW = {"end-to-end", "aim-round", "dpne"}

#: Issue 41: the smallest bound/claim ratio each audit must reach at its quick trial count
#: (fixed seeds; measured 0.78-0.94 for the Gaussian-DP and subsampled fits, 0.78-0.88 for
#: these threshold events). A weaker statistic, neighbours that stop being worst-case, or a
#: charge above what the mechanism spends (the median's quantile at sensitivity 1: at most
#: 0.5) fails here. Not listed: the whole release.
TIGHT = {"gaussian": 0.8, "gaussian-discrete": 0.8, "selection": 0.8, "aim-selection": 0.8,
         "aim-round": 0.7, "policy-counts": 0.8, "confusion-counts": 0.8, "dpsgd": 0.8,
         "dpsgd-subsampled": 0.8, "dpsgd-f": 0.8, "d1": 0.8, "cathist": 0.7, "privlr": 0.7,
         "pflr": 0.7, "pflr-star": 0.7, "pflr-floats": 0.7, "lapmech": 0.7,
         "quantiles": 0.7, "privpc": 0.7, "dpne": 0.7}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in MECHANISMS])
def test_mechanism_within_claim_and_every_control_caught(name: str) -> None:
    entry = MECHANISMS[name]
    result = entry.function(trials=entry.quick)
    assert result.trials == entry.quick
    assert 0 <= result.epsilon_lower_bound <= result.claimed_epsilon, result
    assert result.epsilon_lower_bound >= TIGHT.get(name, 0) * result.claimed_epsilon, result
    assert result.controls, "an audit without a negative control proves nothing"
    for control in result.controls:
        assert control.noise < 1
        assert control.epsilon_lower_bound > result.claimed_epsilon, (control, result)
    assert result.verdict == "ok"


def test_gaussian_audit_has_the_noise_removed_control() -> None:
    result = MECHANISMS["gaussian"].function(trials=2000)
    removed = [c for c in result.controls if c.label.startswith("noise removed")]
    # Without noise D and D' never overlap: only the Clopper-Pearson width limits the bound.
    assert removed and removed[0].hits_d == 0 and removed[0].epsilon_lower_bound > 6


def test_dpne_reduced_noise_stays_within_a_claim_above_the_truth() -> None:
    """The audit's finding for DPNE: the worst neighbours found move the output by 5 of the
    Δ = 6 the charge assumes, so noise reduced to 5/6 stays within the claim, and a quarter
    of it is caught."""
    result = audit_dpne(trials=2000, controls=(Control("5/6 noise", 5 / 6), QUARTER))
    reduced, quarter = result.controls
    assert reduced.epsilon_lower_bound <= result.claimed_epsilon < quarter.epsilon_lower_bound


def test_quantile_charged_at_sensitivity_1_falls_below_the_floor(monkeypatch) -> None:
    """The broken version issue 41 fixed: the median declared at sensitivity 1 (twice the
    noise at the same charge) cannot audit above half its claim, under the 0.7 floor."""
    from privfair.domains import quantiles

    real = quantiles.exponential_mechanism

    def at_one(scores, **kwargs):
        return real(scores, **{**kwargs, "sensitivity": 1.0})

    monkeypatch.setattr(quantiles, "exponential_mechanism", at_one)
    result = audit_quantiles(trials=MECHANISMS["quantiles"].quick)
    assert result.epsilon_lower_bound < 0.55 * result.claimed_epsilon, result
