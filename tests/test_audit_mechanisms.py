"""Every audited mechanism, at its quick trial count and fixed seeds: (a) the lower bound
stays within the claimed ε; (b) every negative control (the same library mechanism with
less noise) is caught, its bound above the claimed ε. A test that cannot fail proves
nothing, so (b) is the point."""

from __future__ import annotations

import pytest

from privfair.evaluation.audit import MECHANISMS, audit_dpne, audit_quantiles
from privfair.evaluation.audit.core import HALF_NOISE, Control

QUARTER = Control("quarter noise", 0.25)

#: About a minute each on 2 busy cores (AIM runs run_aim itself); the rest of the file runs
#: in about 40 s.
SLOW = {"end-to-end", "aim-round"}

#: Issue 41: the smallest bound/claim ratio each audit must reach at its quick trial count
#: (fixed seeds; measured 0.78-0.94 for the Gaussian-DP and subsampled fits, 0.71-0.81 for
#: these threshold events). A weaker statistic, or neighbours that stop being worst-case,
#: fails here. Not listed: the audits whose charge is conservative for their neighbours
#: (quantiles, DPNE, PrivPC), PFLR*'s blurred shift and the whole release.
TIGHT = {"gaussian": 0.8, "gaussian-discrete": 0.8, "selection": 0.8, "aim-selection": 0.8,
         "aim-round": 0.7, "policy-counts": 0.8, "confusion-counts": 0.8, "dpsgd": 0.8,
         "dpsgd-subsampled": 0.8, "dpsgd-f": 0.8, "d1": 0.8, "cathist": 0.7, "privlr": 0.7,
         "pflr": 0.65, "pflr-floats": 0.65, "lapmech": 0.7}


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


@pytest.mark.parametrize(("audit", "slack"), [(audit_quantiles, HALF_NOISE),
                                              (audit_dpne, Control("3/4 noise", 0.75))])
def test_reduced_noise_stays_within_a_claim_above_the_truth(audit, slack) -> None:
    """The audit's finding for DP quantiles and DPNE: their worst-case neighbours move the
    output by less than the charge assumes (quantiles: half; DPNE: 4 of Δ = 6), so noise
    reduced by that much stays within the claim (which is why their controls take a
    quarter of the noise)."""
    result = audit(trials=2000, controls=(slack, QUARTER))
    reduced, quarter = result.controls
    assert reduced.epsilon_lower_bound <= result.claimed_epsilon < quarter.epsilon_lower_bound
