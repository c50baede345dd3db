import math

import numpy as np
import pytest
from scipy import stats

from privfair.core.accounting import (
    PrivacyLedger,
    joint_noise_multiplier,
    rdp_epsilon,
    subsampled_gaussian_rdp,
)
from privfair.core.errors import BudgetExceededError
from privfair.core.mechanisms import subsampled_gaussian

torch = pytest.importorskip("torch")

from privfair.learn.dpsgd import (  # noqa: E402
    SGDSettings,
    _build,
    _factors,
    backprop,
    clip_factors,
    group_clip_bounds,
    per_sample_gradients,
    poisson_batch,
    train,
    weighted_gradient_sum,
)


def _data(n=400, d=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(np.float32)
    groups = rng.integers(0, 2, n)
    logit = 4 * (x[:, 0] - 0.5) + 2 * (x[:, 1] - 0.5) + 0.5 * groups
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return x, y, groups


@pytest.mark.parametrize("hidden", [(), (5,), (4, 3)])
def test_closed_form_per_sample_gradients_match_vmap(hidden):
    x, y, _ = _data(30)
    params = _build(6, hidden, torch.Generator().manual_seed(1))
    if not hidden:
        params = {k: torch.randn(v.shape, generator=torch.Generator().manual_seed(2))
                  for k, v in params.items()}
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    reference = per_sample_gradients(params, xs, ys)
    flat = torch.cat([g.reshape(30, -1) for g in reference.values()], dim=1)
    norms, cache = backprop(params, xs, ys)
    torch.testing.assert_close(norms, flat.norm(dim=1), rtol=1e-5, atol=1e-6)
    factors = torch.rand(30, generator=torch.Generator().manual_seed(3))
    sums = weighted_gradient_sum(cache, factors)
    for name, g in reference.items():
        torch.testing.assert_close(sums[name], torch.einsum("i,i...->...", factors, g),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["dpsgd", "dpsgd-f", "naive"])
def test_clipped_per_sample_norms_are_bounded(method):
    x, y, groups = _data(200)
    x = x * 8  # large inputs, so many gradients exceed the bound
    params = _build(6, (4,), torch.Generator().manual_seed(0))
    xs, ys, gs = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(groups)
    settings = SGDSettings(method=method, sample_rate=0.5, steps=1, expected_batch_size=100.0,
                           clip=0.5, clip_cap=2.0)
    norms, _ = backprop(params, xs, ys)
    assert (norms > 0.5).float().mean() > 0.3
    bounds_seen = []
    noise = subsampled_gaussian(ledger=PrivacyLedger(epsilon_budget=1e3, delta=1e-6),
                                **settings.mechanism_arguments(groups=2))
    noise_bound, factors = _factors(settings, norms, gs, 2, 100.0,
                                    torch.Generator().manual_seed(0), bounds_seen, noise)
    clipped = factors * norms
    if method == "dpsgd":
        assert noise_bound == 0.5 and torch.all(clipped <= 0.5 + 1e-6)
    else:
        per_group = bounds_seen[0]  # C^k for DPSGD-F, C0 θ^k for Naïve
        floor = 0.5 if method == "dpsgd-f" else 0.0
        assert torch.all(per_group >= floor - 1e-6) and torch.all(per_group <= 2.0 + 1e-6)
        assert noise_bound == pytest.approx(float(per_group.max()))
        # Every sample's contribution to the sum is within the bound the noise scales with.
        assert torch.all(clipped <= noise_bound + 1e-5)
        if method == "dpsgd-f":
            assert torch.all(clipped <= per_group[gs] + 1e-6)


def test_poisson_batch_sizes_are_binomial():
    generator = torch.Generator().manual_seed(0)
    n, q = 300, 0.05
    sizes = np.array([poisson_batch(n, q, generator).numel() for _ in range(3000)])
    binomial = stats.binom(n, q)
    edges = [0, 9, 11, 13, 14, 15, 16, 17, 18, 20, 22, n + 1]
    observed = np.histogram(sizes, bins=edges)[0]
    expected = np.diff(binomial.cdf(np.array(edges) - 1)) * sizes.size
    assert stats.chisquare(observed, expected).pvalue > 0.01
    # Indices are distinct rows (sampling without replacement within a step).
    batch = poisson_batch(n, 0.5, generator)
    assert batch.unique().numel() == batch.numel()


def test_group_clip_bounds_follow_the_formula_and_are_clamped():
    bounds = group_clip_bounds(torch.tensor([30.0, 10.0]), torch.tensor([70.0, 90.0]),
                               expected_batch_size=200.0, clip=1.0, cap=10.0)
    # m̃ = 40: C^k = 1 + (m^k/b^k)/(40/200).
    torch.testing.assert_close(bounds, torch.tensor([1 + 0.3 / 0.2, 1 + 0.1 / 0.2]))
    wild = group_clip_bounds(torch.tensor([-5.0, 0.4, 50.0]), torch.tensor([-3.0, -2.0, 0.0]),
                             expected_batch_size=2560.0, clip=0.5, cap=5.0)
    assert torch.all(torch.isfinite(wild))
    assert torch.all(wild >= 0.5) and torch.all(wild <= 5.0)
    assert wild[0] == 0.5 and wild[2] == 5.0
    assert torch.all(clip_factors(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 1.0]))
                     == torch.tensor([1.0, 0.5]))


@pytest.mark.parametrize(("method", "counts", "per_step"), [
    ("dpsgd-f", "clipped/unclipped counts per group", 1 + 2 * 2),
    ("naive", "batch counts per group", 1 + 2)])
def test_gradients_and_counts_of_one_batch_are_one_subsampled_gaussian(method, counts,
                                                                        per_step):
    """Issue 21.5: the gradient sum and the group counts share one Poisson batch, so they
    are one subsampled Gaussian at σ_eff = (σ⁻² + σ1⁻²)^(−1/2), not two independently
    sampled ones (whose amplified curves add to less than the truth)."""
    n = 36_177
    q, steps = 256 / n, 20 * n // 256
    settings = SGDSettings(method=method, sample_rate=q, steps=steps,
                           expected_batch_size=256.0, noise_multiplier=1.0, clip=0.5)
    ledger = PrivacyLedger(epsilon_budget=4.0, delta=1e-6, conversion="classic")
    entries = settings.ledger_entries(groups=2)
    ledger.check_entries(*entries)
    for entry in entries:
        ledger.spend(entry)
    assert [e.name for e in ledger.entries] == [
        f"{method} gradients and {counts} (one subsampled Gaussian)"]
    (entry,) = ledger.entries
    sigma_eff = (1.0**-2 + 10.0**-2) ** -0.5  # σ = 1, σ1 = 10 σ
    assert sigma_eff == pytest.approx(0.9950371902)
    # Noise σ C on the gradient (C = clip_cap = 5); the multiplier the curve uses is σ_eff.
    assert entry.sigma == pytest.approx(5.0)
    assert entry.sigma / entry.sensitivity == pytest.approx(sigma_eff)
    assert entry.queries == steps * per_step and entry.steps == steps
    one = subsampled_gaussian_rdp(noise_multiplier=sigma_eff, sample_rate=q, steps=steps)
    np.testing.assert_allclose(entry.rdp_curve(), one)
    expected, _ = rdp_epsilon(rdp=one, delta=1e-6, conversion="classic")
    assert ledger.epsilon_spent() == pytest.approx(expected, rel=1e-9)
    # Hand-checked value (RDP accountant, classic conversion, best order 8); the old
    # two-query accounting said 3.100 + ~0.008 and the gradient alone is 3.1000.
    assert ledger.epsilon_spent() == pytest.approx(3.12496, abs=1e-4)
    gradient_only = SGDSettings(method="dpsgd", sample_rate=q, steps=steps,
                                expected_batch_size=256.0, noise_multiplier=1.0, clip=0.5)
    old = PrivacyLedger(epsilon_budget=4.0, delta=1e-6, conversion="classic")
    for e in gradient_only.ledger_entries(groups=2):
        old.spend(e)
    assert old.epsilon_spent() == pytest.approx(3.1000, abs=1e-3)
    assert ledger.epsilon_spent() > old.epsilon_spent() + 0.02


def test_joint_noise_multiplier():
    assert joint_noise_multiplier(1.0, 10.0) == pytest.approx(1 / math.sqrt(1.01))
    assert joint_noise_multiplier(2.0, 2.0) == pytest.approx(math.sqrt(2.0))
    assert joint_noise_multiplier(3.0) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        joint_noise_multiplier(1.0, 0.0)


def test_over_budget_run_is_refused_before_reading_anything():
    x, y, groups = _data(100)
    settings = SGDSettings(method="dpsgd", sample_rate=0.5, steps=50, expected_batch_size=50.0,
                           noise_multiplier=0.5)
    ledger = PrivacyLedger(epsilon_budget=1.0, delta=1e-6)
    generator = torch.Generator().manual_seed(0)
    before = generator.get_state()
    with pytest.raises(BudgetExceededError):
        train(x, y, groups, settings=settings, n_groups=2, ledger=ledger, generator=generator)
    assert ledger.entries == ()
    assert torch.equal(generator.get_state(), before)


@pytest.mark.parametrize("method", ["sgd", "dpsgd", "dpsgd-f", "naive"])
def test_training_learns_and_is_reproducible_with_a_seeded_generator(method):
    x, y, groups = _data(2000, seed=1)
    settings = SGDSettings(method=method, sample_rate=0.1, steps=150, expected_batch_size=200.0,
                           noise_multiplier=1.0, clip=1.0, learning_rate=2.0,
                           weight_decay=0.0)

    def run():
        ledger = PrivacyLedger(epsilon_budget=50.0, delta=1e-6)
        return train(x, y, groups, settings=settings, n_groups=2, ledger=ledger,
                     generator=torch.Generator().manual_seed(7))

    net = run()
    accuracy = (net.predict(x) == y).mean()
    assert accuracy > 0.7
    np.testing.assert_array_equal(net.weights["layer0.weight"], run().weights["layer0.weight"])
    if method in ("dpsgd-f", "naive"):
        assert len(net.group_clip_trace) == 15 and len(net.group_clip_trace[0]) == 2


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "adam"}, "method"),
    ({"sample_rate": 0.0}, "sample_rate"),
    ({"steps": 0}, "steps"),
    ({"clip": -1.0}, "clip"),
    ({"clip_cap": 0.1}, "clip_cap"),
    ({"hidden": (0,)}, "hidden"),
])
def test_bad_settings_refused(kwargs, match):
    args = {"method": "dpsgd", "sample_rate": 0.1, "steps": 10,
            "expected_batch_size": 10.0} | kwargs
    with pytest.raises(ValueError, match=match):
        SGDSettings(**args)


def test_bad_inputs_refused():
    x, y, groups = _data(20)
    settings = SGDSettings(method="dpsgd", sample_rate=0.1, steps=2, expected_batch_size=2.0)
    with pytest.raises(ValueError, match="groups"):
        train(x, y, groups + 1, settings=settings, n_groups=2, ledger=None,
              generator=torch.Generator())
    with pytest.raises(ValueError, match="ledger"):
        train(x, y, groups, settings=settings, n_groups=2, ledger=None,
              generator=torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        train(x, y, groups, settings=settings, n_groups=2, ledger=None,
              generator=np.random.default_rng(0))


def test_read_only_inputs_are_accepted_without_warnings():
    x, y, groups = _data(100)
    for array in (x, y, groups):
        array.setflags(write=False)  # as pandas' to_numpy() hands them out
    settings = SGDSettings(method="dpsgd", sample_rate=0.2, steps=3, expected_batch_size=20.0)
    net = train(x, y, groups, settings=settings, n_groups=2,
                ledger=PrivacyLedger(epsilon_budget=50.0, delta=1e-6),
                generator=torch.Generator().manual_seed(0))
    assert np.all(np.isfinite(net.weights["layer0.weight"]))


def test_last_epoch_metrics_take_the_norm_of_each_groups_average_gradient():
    from privfair.learn.dpsgd import LastEpochGroupMetrics

    # Group 1: one row, y = 1; group 0: the same x with y = 0 and y = 1, whose gradients
    # cancel. At w = 0 every row has σ = 1/2, loss ln 2 and gradient (σ - y)(x, 1).
    x = np.array([[3.0, 4.0], [1.0, 2.0], [1.0, 2.0]], dtype=np.float32)
    y = np.array([1.0, 0.0, 1.0], dtype=np.float32)
    groups = np.array([1, 0, 0])
    settings = SGDSettings(method="sgd", sample_rate=1.0, steps=1, expected_batch_size=3.0,
                           learning_rate=1e-3)
    monitor = LastEpochGroupMetrics(settings, n_groups=2)
    train(x, y, groups, settings=settings, n_groups=2, ledger=None, monitor=monitor,
          generator=torch.Generator().manual_seed(0))
    female, male = monitor.result()
    assert male["loss"] == pytest.approx(math.log(2)) == female["loss"]
    assert male["gradient_norm"] == pytest.approx(0.5 * math.sqrt(26), rel=1e-6)
    # The paper's norm of the average gradient is 0 where the mean per-row norm is not.
    assert female["gradient_norm"] == pytest.approx(0.0, abs=1e-7)
    assert female["row_gradient_norm"] == pytest.approx(0.5 * math.sqrt(6), rel=1e-6)


def test_last_epoch_metrics_average_the_last_epochs_batches_only():
    from privfair.learn.dpsgd import LastEpochGroupMetrics

    x, y, groups = _data(200)
    settings = SGDSettings(method="sgd", sample_rate=0.25, steps=10, expected_batch_size=50.0)
    monitor = LastEpochGroupMetrics(settings, n_groups=2)
    seen = []
    train(x, y, groups, settings=settings, n_groups=2, ledger=None,
          monitor=lambda step, *rest: (seen.append(step), monitor(step, *rest)),
          generator=torch.Generator().manual_seed(0))
    assert seen == list(range(10)) and monitor.first_step == 6
    np.testing.assert_array_equal(monitor.batches, [4, 4])
    assert all(0 < g["gradient_norm"] < g["row_gradient_norm"] for g in monitor.result())


def test_xu2021_census_settings_are_the_papers():
    from privfair.learn.dpsgd import XU2021_CENSUS, xu2021_census_settings

    settings = xu2021_census_settings("dpsgd-f", train_rows=36_177, steps=2_826)
    assert settings.clip == 0.5 == XU2021_CENSUS["clip"] and settings.noise_multiplier == 1.0
    assert settings.expected_batch_size == 256 and settings.sample_rate == 256 / 36_177
    assert settings.lr == pytest.approx(1 / math.sqrt(2_826)) and settings.weight_decay == 0.01
    assert settings.sigma_counts == 10.0
    assert xu2021_census_settings("dpsgd", train_rows=1000, steps=4, clip=2.0).clip == 2.0
