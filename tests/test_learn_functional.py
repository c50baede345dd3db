import inspect

import numpy as np
import pytest
from scipy import optimize, stats

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import BudgetExceededError
from privfair.learn.functional import (
    DEFAULT_SETTING,
    FAIRNESS_SETTINGS,
    PAPER_SETTING,
    FunctionalLogisticRegression,
    NoisyObjective,
    minimise,
    noise_scales,
    noisy_objective,
)


def _one_hot_rows(rng, n):
    """Rows of two one-hot blocks of sizes 2 and 3, plus an intercept: ||x||_1 = 3."""
    a = rng.integers(0, 2, n)
    b = rng.integers(0, 3, n)
    x = np.zeros((n, 6))
    x[np.arange(n), a] = 1
    x[np.arange(n), 2 + b] = 1
    x[:, 5] = 1
    return x


def _ledger(eps=1000.0):
    return PrivacyLedger(epsilon_budget=eps, delta=1e-6, accounting="rdp")


def test_functional_mechanism_noise_is_laplace_at_the_calibrated_scale():
    rng = np.random.default_rng(1)
    x = _one_hot_rows(rng, 50)
    y = rng.integers(0, 2, 50).astype(float)
    s = rng.integers(0, 2, 50).astype(float)
    eps = 2.0
    exact_linear = (0.5 - y) @ x
    exact_quadratic = x.T @ x / 8
    linear_noise, quadratic_noise = [], []
    for seed in range(300):
        objective, scales, _ = noisy_objective(
            x, y, s, epsilon=eps, variant="privlr", row_l1_bound=3, ledger=_ledger(),
            rng=np.random.default_rng(seed))
        linear_noise.append(objective.linear - exact_linear)
        quadratic_noise.append(np.diag(objective.quadratic - exact_quadratic))
    b = (3 / 2 + 9 / 8) / eps  # add/remove: Δ = B/2 + B²/8 with B = 3
    assert scales.coefficients == pytest.approx(b)
    pooled = np.concatenate(linear_noise)
    assert stats.kstest(pooled, stats.laplace(scale=b).cdf).pvalue > 0.01
    # Diagonal entries are (N + Nᵀ)/2 = N_ll: Laplace with the same scale.
    diag = np.concatenate(quadratic_noise)
    assert stats.kstest(diag, stats.laplace(scale=b).cdf).pvalue > 0.01


def test_pflr_star_linear_noise_variance_includes_the_noisy_shift():
    # The signed term: the coefficients' noise is centred at α μ̃.
    rng = np.random.default_rng(2)
    x = _one_hot_rows(rng, 40)
    y = rng.integers(0, 2, 40).astype(float)
    s = rng.integers(0, 2, 40).astype(float)
    centre, alpha = 0.4, 0.7
    exact = (0.5 - y) @ x + alpha * (s - centre) @ x
    draws = np.array([
        noisy_objective(x, y, s, epsilon=1.0, variant="pflr-star", row_l1_bound=3,
                        ledger=_ledger(), rng=np.random.default_rng(seed), alpha=alpha,
                        centre=centre, fairness_term="signed")[0].linear - exact
        for seed in range(1000)])
    scales = noise_scales(epsilon=1.0, variant="pflr-star", row_l1_bound=3, centre=centre,
                          alpha=alpha)
    assert scales.shift == pytest.approx(0.6 * 3 / 0.5)
    # Erratum §9.8: Var = 2 b_f² + 2 (α b_g)², not 2 b_f².
    expected = 2 * scales.coefficients**2 + 2 * (alpha * scales.shift) ** 2
    assert np.var(draws) == pytest.approx(expected, rel=0.08)


def test_ledger_charged_epsilon_adds_up_and_refusal_reads_nothing():
    rng = np.random.default_rng(3)
    x = _one_hot_rows(rng, 30)
    y = rng.integers(0, 2, 30).astype(float)
    s = rng.integers(0, 2, 30).astype(float)
    ledger = _ledger(10.0)
    model = FunctionalLogisticRegression(epsilon=1.5, variant="pflr-star", row_l1_bound=3,
                                         rng=np.random.default_rng(0))
    model.fit(x, y, s, ledger=ledger)
    names = [e.name for e in ledger.entries]
    assert names == ["group histogram (fairness centre)", "fairness shift (PFLR*)",
                     "functional mechanism (PFLR*)"]
    assert sum(e.epsilon for e in ledger.entries) == pytest.approx(1.5)
    assert all(e.mechanism == "laplace" for e in ledger.entries)

    small = _ledger(1.0)
    generator = np.random.default_rng(0)
    before = generator.bit_generator.state
    with pytest.raises(BudgetExceededError):
        FunctionalLogisticRegression(epsilon=5.0, variant="pflr", row_l1_bound=3,
                                     rng=generator).fit(x, y, s, ledger=small)
    assert small.entries == ()
    assert generator.bit_generator.state == before  # no noise drawn


def test_spectral_trimming_handles_indefinite_and_negative_quadratics():
    linear = np.array([1.0, -2.0, 0.5])
    quadratic = np.diag([2.0, -1.0, 1e-3])
    w, trimmed = minimise(NoisyObjective(linear, quadratic), trim_floor=0.01)
    assert trimmed == 2
    np.testing.assert_allclose(w, [-0.25, 0.0, 0.0])
    w, trimmed = minimise(NoisyObjective(linear, -np.eye(3)))
    assert trimmed == 3 and np.all(w == 0)
    # Non-symmetric input is symmetrised, never NaN.
    w, _ = minimise(NoisyObjective(linear, np.array([[1.0, 5.0, 0], [-3.0, 1.0, 0],
                                                     [0, 0, 1.0]])))
    assert np.all(np.isfinite(w))


def test_tiny_epsilon_gives_finite_coefficients():
    rng = np.random.default_rng(4)
    x = _one_hot_rows(rng, 200)
    y = rng.integers(0, 2, 200).astype(float)
    s = rng.integers(0, 2, 200).astype(float)
    model = FunctionalLogisticRegression(epsilon=0.01, variant="pflr", row_l1_bound=3,
                                         rng=np.random.default_rng(0))
    model.fit(x, y, s, ledger=_ledger())
    assert np.all(np.isfinite(model.coef_))
    assert set(np.unique(model.predict(x))) <= {0, 1}


def test_fairness_shift_lowers_the_risk_difference():
    # y depends on the group through a proxy feature; three more blocks carry signal.
    rng = np.random.default_rng(5)
    n = 20_000
    s = rng.integers(0, 2, n).astype(float)
    proxy = (rng.random(n) < np.where(s == 1, 0.8, 0.2)).astype(int)
    others = rng.integers(0, 4, (n, 3))
    x = np.zeros((n, 15))
    x[np.arange(n), proxy] = 1
    for j in range(3):
        x[np.arange(n), 2 + 4 * j + others[:, j]] = 1
    x[:, -1] = 1
    logit = -2.5 + 1.5 * proxy + others @ np.array([0.6, 0.4, 0.3])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)

    def risk_difference(variant, alpha):
        model = FunctionalLogisticRegression(epsilon=50.0, variant=variant, row_l1_bound=5,
                                             rng=np.random.default_rng(0), centre=0.5,
                                             alpha=alpha, fairness_term="signed")
        pred = model.fit(x, y, s, ledger=_ledger()).predict(x)
        return pred[s == 1].mean() - pred[s == 0].mean()

    assert risk_difference("privlr", 0.5) > 0.3
    signed = [risk_difference("pflr", alpha) for alpha in (0.1, 0.3, 0.5)]
    assert signed[0] > signed[1] > signed[2]
    assert abs(signed[2]) < 0.05
    assert abs(risk_difference("pflr-star", 0.5)) < 0.05


@pytest.mark.parametrize("kwargs, match", [
    ({"variant": "zafar"}, "variant"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": float("inf")}, "epsilon"),
    ({"fairness_share": 1.0}, "fairness_share"),
    ({"centre": 1.5}, "centre"),
    ({"fairness_term": "per-record"}, "fairness_term"),
    ({"alpha": float("nan")}, "alpha"),
])
def test_bad_parameters_refused(kwargs, match):
    rng = np.random.default_rng(6)
    x = _one_hot_rows(rng, 10)
    y = rng.integers(0, 2, 10).astype(float)
    s = rng.integers(0, 2, 10).astype(float)
    args = {"epsilon": 1.0, "variant": "pflr-star", "row_l1_bound": 3,
            "rng": np.random.default_rng(0)} | kwargs
    ledger = _ledger()
    with pytest.raises(ValueError, match=match):
        FunctionalLogisticRegression(**args).fit(x, y, s, ledger=ledger)
    assert ledger.entries == ()


def test_rows_outside_the_declared_bound_refused():
    x = np.ones((4, 5))
    with pytest.raises(ValueError, match="row_l1_bound"):
        noisy_objective(x, np.array([0, 1, 0, 1.0]), np.array([0, 1, 1, 0.0]), epsilon=1.0,
                        variant="pflr", row_l1_bound=3, ledger=_ledger(),
                        rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="y and s"):
        noisy_objective(np.zeros((2, 2)), np.array([0, 2.0]), np.array([0, 1.0]),
                        epsilon=1.0, variant="pflr", row_l1_bound=3, ledger=_ledger(),
                        rng=np.random.default_rng(0))


# --- issue 40: the fairness term of Eq. 8.1 ---------------------------------------------------


def _proxy_data(n=20_000, seed=8):
    """Two groups that one block of ``x`` (a 'role', like Adult's husband / wife) predicts
    almost perfectly; ``y`` rises with the role and two more blocks. ``||x||_1 = 4``."""
    rng = np.random.default_rng(seed)
    s = (rng.random(n) < 0.65).astype(float)
    role = np.where(rng.random(n) < 0.9, np.where(s == 1, 0, 1), 2)
    others = rng.integers(0, 3, (n, 2))
    x = np.zeros((n, 10))
    x[np.arange(n), role] = 1
    for j in range(2):
        x[np.arange(n), 3 + 3 * j + others[:, j]] = 1
    x[:, -1] = 1
    logit = -1.8 + 1.6 * (role == 0) + others @ np.array([0.8, 0.6])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return x, y, s


def _scores(model, x, y, s):
    pred = model.predict(x)
    return float(np.mean(pred == y)), float(pred[s == 1].mean() - pred[s == 0].mean())


@pytest.mark.parametrize("variant", ["pflr", "pflr-star"])
def test_paper_fairness_term_reaches_parity_without_overshooting(variant):
    """Non-private limit (ε = 1e6): Eq. 8.1's α = 1 brings |RD| from ≈ 0.45 to below 0.05 at
    an accuracy well above the majority class's; the signed shift at α = 1 (the term before
    issue 40) overshoots into reverse disparity on the same data."""
    x, y, s = _proxy_data()
    majority = max(y.mean(), 1 - y.mean())

    def fit(**knobs):
        model = FunctionalLogisticRegression(epsilon=1e6, variant=variant, row_l1_bound=4,
                                             rng=np.random.default_rng(0), centre=0.65,
                                             **knobs)
        return _scores(model.fit(x, y, s, ledger=_ledger(1e6)), x, y, s)

    acc_lr, rd_lr = fit(alpha=0.0)
    assert rd_lr > 0.3
    acc_default, rd_default = fit()  # the class's defaults: α = 1, absolute
    acc_paper, rd_paper = fit(**FAIRNESS_SETTINGS[PAPER_SETTING].kwargs())
    for acc, rd in ((acc_default, rd_default), (acc_paper, rd_paper)):
        assert abs(rd) < 0.05
        assert acc > majority + 0.04
    acc_signed, rd_signed = fit(alpha=1.0, fairness_term="signed")
    assert rd_signed < -0.15  # the overshoot the absolute term removes


def test_absolute_term_zeroes_the_covariance_when_alpha_allows_it():
    """The fitted w is the exact-penalty minimiser: zero decision-boundary covariance once
    α ≥ |ν₀|, the unpenalised fit at α = 0, and in between the multiplier clipped at α."""
    x, y, s = _proxy_data(n=5_000)
    mu = (s - 0.65) @ x

    def coef(alpha):
        model = FunctionalLogisticRegression(epsilon=1e9, variant="pflr", row_l1_bound=4,
                                             rng=np.random.default_rng(1), centre=0.65,
                                             alpha=alpha)
        return model.fit(x, y, s, ledger=_ledger(1e9)).coef_

    free = coef(0.0)
    assert mu @ free > 100  # the unconstrained fit favours the group s = 1
    for alpha in (1.0, 5.0):
        w = coef(alpha)
        assert abs(mu @ w) < 1e-3 * abs(mu @ free)
    np.testing.assert_allclose(coef(5.0), coef(1.0), atol=1e-6)
    small = coef(0.01)
    assert 0 < mu @ small < mu @ free


def test_minimise_matches_a_generic_convex_solver():
    rng = np.random.default_rng(9)
    a = rng.normal(size=(4, 4))
    quadratic = a @ a.T + 0.5 * np.eye(4)
    linear, direction = rng.normal(size=4), rng.normal(size=4)
    for weight in (0.05, 0.3, 10.0):
        objective = NoisyObjective(linear, quadratic, fairness=direction,
                                   fairness_weight=weight)
        w, trimmed = minimise(objective)
        assert trimmed == 0

        def value(v, weight=weight):
            return linear @ v + v @ quadratic @ v + weight * abs(direction @ v)

        # The same problem made smooth: min q(v) + α t subject to t ≥ ±μᵀv.
        best = optimize.minimize(
            lambda z, weight=weight: linear @ z[:4] + z[:4] @ quadratic @ z[:4] + weight * z[4],
            np.zeros(5), method="SLSQP", options={"ftol": 1e-14, "maxiter": 1000},
            constraints=[{"type": "ineq", "fun": lambda z, sign=sign:
                          z[4] - sign * direction @ z[:4]} for sign in (1, -1)])
        assert value(w) <= value(best.x[:4]) + 1e-9
        np.testing.assert_allclose(w, best.x[:4], atol=1e-5)


def test_absolute_pflr_releases_mu_with_the_coefficients_at_the_rederived_sensitivity():
    rng = np.random.default_rng(10)
    x = _one_hot_rows(rng, 60)
    y = rng.integers(0, 2, 60).astype(float)
    s = rng.integers(0, 2, 60).astype(float)
    ledger = _ledger()
    objective, scales, _ = noisy_objective(x, y, s, epsilon=2.0, variant="pflr",
                                           row_l1_bound=3, ledger=ledger,
                                           rng=np.random.default_rng(0), alpha=0.4,
                                           centre=0.3)
    # Δ = (1/2 + max(c, 1 − c)) B + B²/8 with B = 3, c = 0.3, whatever α.
    delta = (0.5 + 0.7) * 3 + 9 / 8
    assert scales.coefficients == pytest.approx(delta / 2.0, rel=1e-5)
    for alpha in (0.0, 0.4, 3.0):
        assert noise_scales(epsilon=2.0, variant="pflr", row_l1_bound=3, centre=0.3,
                            alpha=alpha).coefficients == pytest.approx(delta / 2.0)
    (entry,) = ledger.entries
    assert entry.queries == 2 * 6 + 36 and entry.sensitivity == pytest.approx(delta, rel=1e-5)
    assert objective.fairness is not None and objective.fairness_weight == 0.4
    assert np.abs(objective.fairness - (s - 0.3) @ x).max() < 40 * scales.coefficients
    # The signed term keeps α in Δ: (1/2 + α · 0.7) B + B²/8.
    assert noise_scales(epsilon=2.0, variant="pflr", row_l1_bound=3, centre=0.3, alpha=0.4,
                        fairness_term="signed").coefficients == pytest.approx(
        ((0.5 + 0.4 * 0.7) * 3 + 9 / 8) / 2.0)


def test_paper_and_default_settings_exist():
    paper = FAIRNESS_SETTINGS[PAPER_SETTING]
    assert (paper.fairness_term, paper.alpha, paper.fairness_share) == ("absolute", 1.0, 0.5)
    defaults = {name: p.default for name, p in
                inspect.signature(FunctionalLogisticRegression).parameters.items()}
    default = FAIRNESS_SETTINGS[DEFAULT_SETTING]
    assert default.kwargs() == {k: defaults[k] for k in default.kwargs()}
    assert FAIRNESS_SETTINGS["signed-shift"].fairness_term == "signed"
    model = FunctionalLogisticRegression(epsilon=1.0, row_l1_bound=3,
                                         rng=np.random.default_rng(0), **paper.kwargs())
    assert model.hyper_parameters()["fairness_term"] == "absolute"
