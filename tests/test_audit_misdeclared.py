"""Issue 41: the audit tests declarations, not only draws.

A broken version declares a sensitivity (or DP-SGD's sampling rate) below its true value and
calibrates its noise to that declaration; the layer's draws then match what it records, so
the noise tests pass. The ε audits compare the ledger's claim with a bound fitted to the
released outputs alone: each broken version must fail ``audit --quick``, naming the
mechanism, and the real code must pass (tests/test_audit_mechanisms.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.mechanisms import (
    exponential_mechanism,
    gaussian_mechanism,
    misdeclared,
    recorded_queries,
    subsampled_gaussian_entry,
)
from privfair.evaluation.audit import MECHANISMS, MISDECLARATIONS, run_audit
from privfair.evaluation.audit.core import gdp_epsilon, gdp_fit, gdp_mu_lower_bound
from privfair.evaluation.audit.models import (
    subsampled_fit,
    subsampled_gaussian_delta,
    subsampled_gaussian_epsilon,
)

#: aim-round runs run_aim 4 000 times (a minute on 2 busy cores); selection private_kruskal
#: 8 000 times (about 30 s).
SLOW = {"aim-measure", "selection"}


# --- the statistics ----------------------------------------------------------------------


def test_gdp_epsilon_hand_values_and_monotone() -> None:
    # mu = 1 at delta 0.05: Phi(-e + 1/2) - e^e Phi(-e - 1/2) = 0.05 at e = 1.5689.
    assert gdp_epsilon(1.0, 0.05) == pytest.approx(1.5689, abs=1e-3)
    assert gdp_epsilon(1.0, 1e-9) == pytest.approx(6.1739, abs=1e-3)
    assert gdp_epsilon(0.0, 1e-9) == 0.0
    assert gdp_epsilon(0.5, 1e-6) < gdp_epsilon(1.0, 1e-6) < gdp_epsilon(2.0, 1e-6)
    assert math.isfinite(gdp_epsilon(1e6, 1e-9))  # a noiseless control, no overflow


def test_gdp_mu_lower_bound_covers_the_true_mu() -> None:
    """Over 200 seeded fits of N(0, 4) against N(2, 4) (mu = 1, 2 000 runs each), the 95 %
    lower limit is under 1 about 95 % of the time, and mu-hat within 3 standard errors."""
    rng = np.random.default_rng(0)
    below, hats = 0, []
    for _ in range(200):
        mu, low = gdp_mu_lower_bound(rng.normal(0, 2, 2000), rng.normal(2, 2, 2000))
        below += low <= 1.0
        hats.append(mu)
    assert 0.90 <= below / 200 <= 0.99
    assert abs(np.mean(hats) - 1.0) < 0.01 and 0.025 < np.std(hats) < 0.04


def test_subsampled_profile_at_rate_1_is_the_gaussian_one() -> None:
    """One step at q = 1 is the Gaussian mechanism with mu = 1/sigma."""
    for sigma in (0.7, 1.0, 2.0):
        for eps in (0.5, 2.0):
            assert subsampled_gaussian_delta(1.0, sigma, eps) == pytest.approx(
                gdp_epsilon_delta(1 / sigma, eps), abs=1e-12)
    assert subsampled_gaussian_epsilon(1.0, 1.0, 1e-9) == pytest.approx(
        gdp_epsilon(1.0, 1e-9), abs=1e-6)
    # Subsampling amplifies: q = 1/2 is below q = 1, above q = 1/4.
    e = [subsampled_gaussian_epsilon(q, 1.5, 1e-9) for q in (0.25, 0.5, 1.0)]
    assert e[0] < e[1] < e[2]


def gdp_epsilon_delta(mu: float, eps: float) -> float:
    from privfair.evaluation.audit.core import gdp_delta

    return gdp_delta(mu, eps)


def test_subsampled_fit_recovers_q_and_bounds_below_the_exact_epsilon() -> None:
    rng = np.random.default_rng(3)
    n, q, sigma = 20_000, 0.5, 1.5
    off = rng.normal(0, sigma, n)
    on = rng.normal(0, sigma, n) + (rng.random(n) < q)
    bound, found = subsampled_fit(off, on, 1e-9)
    exact = subsampled_gaussian_epsilon(q, sigma, 1e-9)
    assert 0.85 * exact < bound < exact, found
    # The rate halved (a sampler at q/2) gives a bound under the exact epsilon of q/2 too.
    half = rng.normal(0, sigma, n) + (rng.random(n) < q / 2)
    assert subsampled_fit(off, half, 1e-9)[0] < subsampled_gaussian_epsilon(q / 2, sigma,
                                                                            1e-9)


def test_gdp_fit_of_a_gaussian_mechanism_reaches_09_of_the_ledger_claim() -> None:
    """The Gaussian mechanism at rho = 1/2 (mu = 1): the ledger claims 6.47 at 1e-9; 20 000
    runs per side fit mu within 2 % and bound epsilon at >= 0.9 of the claim."""
    ledger = PrivacyLedger(rho_budget=1e12, delta=1e-9, accounting="rdp")
    rng = np.random.default_rng(5)
    values = np.zeros((20_000, 1))
    d = gaussian_mechanism(values, sigma=1.0, sensitivity=1.0, rng=rng, ledger=ledger,
                           name="t")[:, 0]
    n = gaussian_mechanism(values + 1, sigma=1.0, sensitivity=1.0, rng=rng,
                           ledger=PrivacyLedger(rho_budget=1e12), name="t")[:, 0]
    claim = ledger.epsilon_spent(1e-9)
    bound, _ = gdp_fit(d, n, 1e-9)
    assert 0.9 * claim < bound < claim


# --- the hook --------------------------------------------------------------------------------


def test_misdeclared_gaussian_records_what_it_draws_at_the_same_rho() -> None:
    """A Gaussian whose caller declared half its sensitivity: the ledger records sigma/2 and
    sensitivity/2 (the same rho) and the draws are at sigma/2, so a test of draws against
    the declared scale passes; other names are untouched."""
    values = np.zeros(20_000)
    real, wrong = PrivacyLedger(rho_budget=1e12), PrivacyLedger(rho_budget=1e12)
    gaussian_mechanism(values, sigma=2.0, sensitivity=1.0, rng=np.random.default_rng(0),
                       ledger=real, name="AIM measure round 1")
    with misdeclared("AIM measure", 0.5), recorded_queries() as queries:
        out = gaussian_mechanism(values, sigma=2.0, sensitivity=1.0,
                                 rng=np.random.default_rng(0), ledger=wrong,
                                 name="AIM measure round 1")
        other = gaussian_mechanism(values, sigma=2.0, sensitivity=1.0,
                                   rng=np.random.default_rng(0), ledger=wrong, name="x")
    (entry, untouched) = wrong.entries
    assert entry.rho == pytest.approx(real.entries[0].rho)
    # float answers go through the exact grid, whose sigma and sensitivity grow by < 1e-6
    # (Δ' = Δ + g⌈√m⌉, σ' = σΔ'/Δ: issue 41.2)
    assert (entry.sigma, entry.sensitivity) == (pytest.approx(1.0, rel=1e-5),
                                                pytest.approx(0.5, rel=1e-5))
    assert queries[0].scale == pytest.approx(1.0, rel=1e-5)
    assert np.std(out) == pytest.approx(1.0, rel=0.02)
    assert untouched.sigma == pytest.approx(2.0, rel=1e-5)
    assert np.std(other) == pytest.approx(2.0, rel=0.02)


def test_misdeclared_selection_and_sample_rate() -> None:
    scores = np.array([0.0, 4.0])
    picks = {}
    for f in (1.0, 0.5):
        rng = np.random.default_rng(1)
        with misdeclared("select edge", f):
            picks[f] = np.mean([exponential_mechanism(
                scores, epsilon=1.0, sensitivity=1.0, rng=rng,
                ledger=PrivacyLedger(rho_budget=1e12), name="select edge 1/1")
                for _ in range(4000)])
    # P(pick 1) = sigmoid(eps * 4 / (2 * sensitivity)): 0.881 declared right, 0.982 at half.
    assert picks[1.0] == pytest.approx(0.881, abs=0.02)
    assert picks[0.5] == pytest.approx(0.982, abs=0.01)
    with misdeclared("dpsgd gradients", 0.5):
        entry = subsampled_gaussian_entry(name="dpsgd gradients", noise_multiplier=1.0,
                                          sample_rate=0.4, steps=3, sensitivity=1.0)
    assert entry.sample_rate == pytest.approx(0.2)
    with pytest.raises(ValueError, match="factor"), misdeclared("x", 0.0):
        pass


# --- the audits catch each broken version ----------------------------------------------------


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k
                                 for k in MISDECLARATIONS])
def test_quick_audit_catches_each_misdeclaration(key: str) -> None:
    """Each declaration at its factor (half; the policy counts 0.7): its ε audit at the
    quick trial count bounds ε above the ledger's claim (a violation), naming the
    mechanism; the same audit of the real code passes (test_audit_mechanisms)."""
    case = MISDECLARATIONS[key]
    report = run_audit(names=[case.audit], quick=True, noise_only=False,
                       misdeclare={key: case.factor})
    (result,) = report.results
    assert result.verdict == "VIOLATION", result
    assert result.epsilon_lower_bound > result.claimed_epsilon
    assert not report.passed
    assert any(c.startswith(result.mechanism) for c in report.caught), report.caught
    # The noise tests do not see it: draws match the misdeclared scale.
    assert all(r.ok for r in report.noise), [r.status for r in report.noise]


def test_audit_command_misdeclared_policy_counts_exits_1(capsys) -> None:
    from privfair.cli import main

    args = ["audit", "--quick", "--mechanism", "policy-counts"]
    assert main([*args, "--misdeclare", "policy-counts=0.7"]) == 1
    out = capsys.readouterr().out
    assert "audit FAILED at --scale-noise 1 --misdeclare policy-counts=0.7" in out
    assert "policy counts (release.policy_counts) (violation)" in out
    assert main(args) == 0
    assert "audit: ok" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["nope=0.5", "selection", "selection=0", "selection=x",
                                   "selection=1_0", "selection=nan", "selection=1e300"])
def test_audit_command_refuses_a_bad_misdeclare(value: str, capsys) -> None:
    from privfair.cli import main

    assert main(["audit", "--quick", "--misdeclare", value]) == 2
    assert "--misdeclare" in capsys.readouterr().err


def test_registry_names_an_audit_for_every_misdeclaration() -> None:
    for case in MISDECLARATIONS.values():
        assert case.audit in MECHANISMS and 0 < case.factor < 1
