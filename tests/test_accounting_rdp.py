import json
import math

import numpy as np
import pytest

from privfair.core.accounting import (
    LEGACY_RDP_ORDERS,
    RDP_ORDERS,
    LedgerEntry,
    PrivacyLedger,
    gaussian_rho,
    pure_dp_rdp,
    rdp_epsilon,
    subsampled_gaussian_rdp,
    zcdp_epsilon,
    zcdp_rdp,
)
from privfair.core.errors import BudgetExceededError

# Spec §8.6: Xu (2021) ch. 9 settings, delta = 1e-6, b = 256, T = floor(epochs * n / 256),
# and the epsilon the dissertation prints (its number of decimals is the precision we test).
DISSERTATION_ROWS = [
    ("balanced MNIST", 60_000, 60, 0.8, "6.23"),
    ("unbalanced MNIST", 54_649, 60, 0.8, "6.55"),
    ("Adult original", 36_177, 20, 1.0, "3.1"),
    ("Adult balanced", 22_400, 20, 1.0, "3.99"),
    ("Dutch original", 48_336, 20, 1.0, "2.66"),
    ("Dutch unbalanced", 32_000, 20, 1.0, "3.29"),
]


@pytest.mark.parametrize("setting, n_train, epochs, sigma, printed", DISSERTATION_ROWS)
def test_dissertation_epsilons_reproduced_with_classic_conversion(
        setting, n_train, epochs, sigma, printed):
    ledger = PrivacyLedger(epsilon_budget=100.0, delta=1e-6, conversion="classic")
    entry = ledger.spend_subsampled_gaussian(
        name=setting, noise_multiplier=sigma, sample_rate=256 / n_train,
        steps=epochs * n_train // 256, sensitivity=1.0)
    decimals = len(printed.split(".")[1])
    guarantee = ledger.guarantee()
    assert guarantee["conversion"] == "classic"
    assert round(guarantee["epsilon"], decimals) == float(printed)
    assert entry.mechanism == "subsampled-gaussian"
    assert (entry.sigma, entry.sample_rate, entry.steps) == (sigma, 256 / n_train,
                                                            epochs * n_train // 256)
    # The tighter conversion is strictly smaller here (5.60 for balanced MNIST, spec §8.6).
    tight = rdp_epsilon(rdp=ledger.rdp(), delta=1e-6, conversion="balle2020")[0]
    assert tight < guarantee["epsilon"] - 0.2


@pytest.mark.parametrize("q, sigma, steps", [(0.01, 1.0, 100), (256 / 60_000, 0.8, 14_062),
                                             (0.2, 3.0, 7), (1.0, 2.0, 5)])
def test_dp_accounting_curve_matches_opacus(q, sigma, steps):
    rdp_analysis = pytest.importorskip("opacus.accountants.analysis.rdp")
    # Every third integer order of the grid and the large ones (opacus's series is slow in
    # Python); below 2 the two series differ (the module docstring of core.accounting).
    orders = [*LEGACY_RDP_ORDERS[:250:3], *LEGACY_RDP_ORDERS[-6:]]
    ours = subsampled_gaussian_rdp(noise_multiplier=sigma, sample_rate=q, steps=steps,
                                   orders=orders)
    theirs = rdp_analysis.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    eps_theirs, _ = rdp_analysis.get_privacy_spent(orders=orders, rdp=theirs, delta=1e-5)
    # opacus converts with the Balle et al. 2020 bound.
    assert rdp_epsilon(rdp=ours, orders=orders, delta=1e-5)[0] == pytest.approx(eps_theirs,
                                                                                 rel=1e-9)


def test_pure_dp_curve_is_randomized_response_and_below_the_zcdp_bound():
    eps = 0.7
    alpha = np.asarray(RDP_ORDERS)
    curve = pure_dp_rdp(epsilon=eps)
    p = math.exp(eps) / (1 + math.exp(eps))
    q = 1 - p
    # Rényi divergence of randomized response, computed directly for small orders.
    small = alpha <= 40
    direct = np.log(p**alpha[small] * q**(1 - alpha[small])
                    + q**alpha[small] * p**(1 - alpha[small])) / (alpha[small] - 1)
    np.testing.assert_allclose(curve[small], direct, rtol=1e-10)
    assert np.all(curve <= np.minimum(eps, alpha * eps**2 / 2) + 1e-12)
    assert curve[-1] == pytest.approx(eps, rel=1e-2)  # tends to eps as alpha grows


def test_zcdp_curve_converts_close_to_cks_and_never_below_it():
    rho = 0.05
    grid_eps = rdp_epsilon(rdp=zcdp_rdp(rho=rho), delta=1e-9)[0]
    cks = zcdp_epsilon(rho=rho, delta=1e-9)
    # Same bound; the grid can only miss the continuous optimum by a little.
    assert cks - 1e-9 <= grid_eps <= cks * 1.001
    classic = rdp_epsilon(rdp=zcdp_rdp(rho=rho), delta=1e-9, conversion="classic")[0]
    assert classic > grid_eps


def test_rdp_step_refused_before_recording_when_over_budget():
    ledger = PrivacyLedger(epsilon_budget=3.0, delta=1e-6, conversion="classic")
    with pytest.raises(BudgetExceededError, match="epsilon to 3.1"):
        ledger.spend_subsampled_gaussian(name="adult", noise_multiplier=1.0,
                                         sample_rate=256 / 36_177, steps=2826)
    assert ledger.entries == ()
    # The same steps fit a budget of 3.2, and then no zCDP step of any size is left.
    roomy = PrivacyLedger(epsilon_budget=3.2, delta=1e-6, conversion="classic")
    roomy.spend_subsampled_gaussian(name="adult", noise_multiplier=1.0,
                                    sample_rate=256 / 36_177, steps=2826)
    with pytest.raises(BudgetExceededError, match="budget exceeded"):
        roomy.check(0.03)
    roomy.check(1e-3)


def test_rho_budget_implies_epsilon_budget_for_rdp_entries():
    rho_budget = 0.5
    ledger = PrivacyLedger(rho_budget=rho_budget, delta=1e-6)
    assert ledger.epsilon_budget == pytest.approx(zcdp_epsilon(rho=rho_budget, delta=1e-6))
    ledger.spend(LedgerEntry("marginals", "gaussian", 1.0, rho=0.2, sigma=1.58))
    with pytest.raises(BudgetExceededError):
        ledger.spend_subsampled_gaussian(name="sgd", noise_multiplier=0.5, sample_rate=0.05,
                                         steps=2000)
    assert len(ledger.entries) == 1
    entry = ledger.spend_subsampled_gaussian(name="sgd", noise_multiplier=2.0,
                                             sample_rate=0.01, steps=200, sensitivity=0.5)
    assert entry.sigma == pytest.approx(1.0)
    # Amplification by subsampling: the composed epsilon is far below the ρ-sum's epsilon.
    composed = ledger.epsilon_spent()
    assert composed < zcdp_epsilon(rho=ledger.spent, delta=1e-6)
    alone = PrivacyLedger(rho_budget=rho_budget, delta=1e-6)
    alone.spend(LedgerEntry("marginals", "gaussian", 1.0, rho=0.2, sigma=1.58))
    assert composed > alone.epsilon_spent()
    assert ledger.guarantee()["accounting"].startswith("Renyi DP")


def test_laplace_entries_compose_with_their_tight_pure_dp_curve():
    ledger = PrivacyLedger(epsilon_budget=5.0, delta=1e-6)
    ledger.spend(LedgerEntry("counts", "laplace", 1.0, rho=0.5**2 / 2, epsilon=0.5))
    ledger.spend_subsampled_gaussian(name="sgd", noise_multiplier=1.0, sample_rate=0.01,
                                     steps=100)
    expected = pure_dp_rdp(epsilon=0.5) + subsampled_gaussian_rdp(
        noise_multiplier=1.0, sample_rate=0.01, steps=100)
    np.testing.assert_allclose(ledger.rdp(), expected)


def test_rdp_ledger_state_round_trips_through_json(tmp_path):
    ledger = PrivacyLedger(epsilon_budget=4.0, delta=1e-6, conversion="classic")
    ledger.spend(LedgerEntry("counts", "gaussian", 1.0, rho=gaussian_rho(sigma=10.0,
                                                                        sensitivity=1.0)))
    ledger.spend_subsampled_gaussian(name="sgd", noise_multiplier=1.0, sample_rate=0.01,
                                     steps=500, sensitivity=0.5)
    path = tmp_path / "ledger.json"
    ledger.save(path)
    state = json.loads(path.read_text())
    assert state["rdp_orders"] == list(RDP_ORDERS)
    assert state["entries"][1]["steps"] == 500 and state["entries"][1]["sample_rate"] == 0.01
    assert "rdp" not in state["entries"][0]  # zCDP entries keep their old shape
    loaded = PrivacyLedger.load(path)
    assert loaded.entries == ledger.entries
    assert loaded.conversion == "classic"
    assert loaded.epsilon_spent() == pytest.approx(ledger.epsilon_spent())


def test_zcdp_only_ledger_unchanged():
    ledger = PrivacyLedger(rho_budget=1.0, delta=1e-9)
    ledger.spend(LedgerEntry("a", "gaussian", 1.0, rho=0.3, sigma=1.3))
    guarantee = ledger.guarantee()
    assert guarantee["accounting"] == "zCDP, tight CKS conversion to (epsilon, delta)"
    assert guarantee["epsilon"] == zcdp_epsilon(rho=0.3, delta=1e-9)
    assert "rdp_orders" not in ledger.state_dict()


@pytest.mark.parametrize("kwargs, match", [
    ({"noise_multiplier": 0.0}, "noise_multiplier"),
    ({"noise_multiplier": float("nan")}, "noise_multiplier"),
    ({"sample_rate": 0.0}, "sample_rate"),
    ({"sample_rate": 1.5}, "sample_rate"),
    ({"steps": 0}, "steps"),
    ({"steps": 2.5}, "steps"),
    ({"sensitivity": -1.0}, "sensitivity"),
])
def test_bad_subsampled_gaussian_arguments_refused(kwargs, match):
    ledger = PrivacyLedger(epsilon_budget=10.0, delta=1e-6)
    args = {"name": "x", "noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 10} | kwargs
    with pytest.raises(ValueError, match=match):
        ledger.spend_subsampled_gaussian(**args)
    assert ledger.entries == ()


def test_ledger_arguments_refused():
    with pytest.raises(ValueError, match="rho_budget or epsilon_budget"):
        PrivacyLedger(delta=1e-6)
    with pytest.raises(ValueError, match="epsilon_budget needs delta"):
        PrivacyLedger(epsilon_budget=1.0)
    with pytest.raises(ValueError, match="conversion"):
        PrivacyLedger(rho_budget=1.0, conversion="tight")
    with pytest.raises(ValueError, match="needs delta"):
        PrivacyLedger(rho_budget=1.0).spend_subsampled_gaussian(
            name="x", noise_multiplier=1.0, sample_rate=0.01, steps=10)


def test_rdp_accounting_counts_pure_dp_steps_with_their_tight_curve():
    big = LedgerEntry("coefficients", "laplace", 1.0, rho=50.0**2 / 2, epsilon=50.0)
    # In zCDP, rho = eps²/2 = 1250 is far over the rho an (eps=60, 1e-6) budget allows...
    with pytest.raises(BudgetExceededError):
        PrivacyLedger(epsilon_budget=60.0, delta=1e-6).spend(big)
    # ...but as a Rényi curve a 50-DP step costs at most 50 + log(1/delta)/(alpha - 1).
    ledger = PrivacyLedger(epsilon_budget=60.0, delta=1e-6, accounting="rdp")
    with pytest.raises(BudgetExceededError, match="spent 0 |0 is spent"):
        ledger.check_entries(big, big)
    ledger.check_entries(big)
    assert ledger.entries == ()  # checking records nothing
    ledger.spend(big)
    assert ledger.epsilon_spent() == 50.0  # pure steps: never more than the sum of their ε
    with pytest.raises(BudgetExceededError):
        ledger.check_entries(LedgerEntry("more", "laplace", 1.0, rho=55.0, epsilon=10.5))
    assert PrivacyLedger.from_state_dict(ledger.state_dict()).uses_rdp


def test_pure_dp_steps_fill_an_epsilon_budget_exactly():
    ledger = PrivacyLedger(epsilon_budget=1.0, delta=1e-6, accounting="rdp")
    for _ in range(4):
        ledger.spend(LedgerEntry("quarter", "laplace", 1.0, rho=0.25**2 / 2, epsilon=0.25))
    assert ledger.epsilon_spent() == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        ledger.spend(LedgerEntry("more", "laplace", 1.0, rho=0.01**2 / 2, epsilon=0.01))
    # With a Gaussian step in the mix, only the composed curve counts.
    mixed = PrivacyLedger(epsilon_budget=5.0, delta=1e-6, accounting="rdp")
    mixed.spend(LedgerEntry("quarter", "laplace", 1.0, rho=0.25**2 / 2, epsilon=0.25))
    mixed.spend(LedgerEntry("g", "gaussian", 1.0, rho=0.01))
    expected = rdp_epsilon(rdp=pure_dp_rdp(epsilon=0.25) + zcdp_rdp(rho=0.01), delta=1e-6)[0]
    assert mixed.epsilon_spent() == pytest.approx(expected)
