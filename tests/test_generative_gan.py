"""DP GAN synthesizers (torch, CPU, tiny models and data)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import GAN_TOY_DOMAIN, gan_toy_table  # noqa: E402

from privfair.core.accounting import PrivacyLedger  # noqa: E402
from privfair.core.domain import Domain  # noqa: E402
from privfair.core.errors import BudgetExceededError  # noqa: E402
from privfair.core.mechanisms import scaled_noise, subsampled_gaussian  # noqa: E402
from privfair.generative import gan  # noqa: E402
from privfair.generative.calibration import subsampled_gaussian_epsilon  # noqa: E402
from privfair.generative.dag import CausalGraphError  # noqa: E402
from privfair.generative.dpsgd import (  # noqa: E402
    GroupClipping,
    clip_factors,
    clipped_sum,
    ghost_batch,
    noisy_gradient,
    per_sample_gradients,
    per_sample_norms,
)
from privfair.generative.nets import mlp  # noqa: E402

DOMAIN = Domain(tuple(GAN_TOY_DOMAIN), tuple(GAN_TOY_DOMAIN.values()))
DAG = {"edges": [["s", "m"], ["m", "y"], ["s", "y"], ["a", "y"], ["a", "c"]]}


@pytest.fixture(scope="module")
def table():
    return gan_toy_table()


def tiny(method: str, **kw) -> gan.GANConfig:
    base = {"method": method, "epochs": 2, "batch_size": 80, "noise_dim": 8, "hidden": 16,
            "discriminator_hidden": 16, "node_noise_dim": 4, "node_hidden": 8,
            "device": "cpu"}
    base.update(kw)
    return gan.GANConfig(**base)


def fit(table, method="fairgan", *, seed=0, sigma=1.0, **kw):
    ledger = PrivacyLedger(epsilon_budget=50.0, delta=1e-6)
    result = gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                         rng=np.random.default_rng(seed), config=tiny(method, **kw),
                         dag=DAG if method == "cfgan" else None, noise_multiplier=sigma)
    return result, ledger


def test_clipped_per_sample_gradients_are_bounded_and_summed():
    g = torch.Generator().manual_seed(0)
    net = mlp([6, 5, 1], generator=g, leaky=True)
    x = torch.randn(32, 6, generator=g) * 10
    loss = lambda out: torch.nn.functional.binary_cross_entropy_with_logits(  # noqa: E731
        out, torch.ones_like(out))
    grads = per_sample_gradients(net, loss, x)
    norms = per_sample_norms(grads)
    bound = 0.05
    assert float(norms.max()) > bound  # the test clips something
    factors = clip_factors(norms, torch.full_like(norms, bound))
    clipped_norms = per_sample_norms(
        {k: v * factors.view(-1, *([1] * (v.dim() - 1))) for k, v in grads.items()})
    assert float(clipped_norms.max()) <= bound * (1 + 1e-5)
    # Rows under the bound are untouched.
    small = norms <= bound
    assert torch.allclose(clipped_norms[small], norms[small])
    # Per-sample gradients agree with autograd on one row.
    net.zero_grad()
    loss(net(x[:1])).sum().backward()
    first = {k: p.grad for k, p in net.named_parameters()}
    for k, v in grads.items():
        assert torch.allclose(v[0], first[k], atol=1e-6)
    # The clipped sum is the sum of the clipped rows; the private gradient adds the layer's
    # noise σ·C (scaled down to nothing here) and divides by the expected batch size.
    summed = clipped_sum(grads, factors)
    noise = subsampled_gaussian(ledger=PrivacyLedger(epsilon_budget=100.0, delta=1e-6),
                                name="t", noise_multiplier=1.0, sample_rate=0.5, steps=1,
                                sensitivity=bound)
    with scaled_noise(1e-9):
        total = noisy_gradient(grads, factors, noise=noise, clip_bound=bound,
                               expected_batch=16.0, generator=g)
    for k, v in grads.items():
        manual = (v * factors.view(-1, *([1] * (v.dim() - 1)))).sum(0)
        assert torch.allclose(summed[k], manual, atol=1e-6)
        assert torch.allclose(total[k], manual / 16.0, atol=1e-6)


def test_ghost_clipping_matches_per_sample_gradients():
    """D1's norms and clipped sums without per-sample gradients equal the vmap reference."""
    g = torch.Generator().manual_seed(1)
    net = mlp([7, 9, 5, 1], generator=g, leaky=True)
    x = torch.randn(40, 7, generator=g) * 3
    row_loss = lambda out: torch.nn.functional.binary_cross_entropy_with_logits(  # noqa: E731
        out[:, 0], torch.zeros_like(out[:, 0]), reduction="none")
    reference = per_sample_gradients(net, lambda out: row_loss(out).sum(), x)
    batch = ghost_batch(net, row_loss, x)
    assert torch.allclose(batch.norms, per_sample_norms(reference), rtol=1e-5, atol=1e-6)
    factors = clip_factors(batch.norms, torch.full_like(batch.norms, 0.1))
    assert float((batch.norms * factors).max()) <= 0.1 * (1 + 1e-5)
    total = batch.weighted_sum(factors)
    assert set(total) == {k for k, _ in net.named_parameters()}
    for k, v in reference.items():
        manual = torch.tensordot(factors, v, dims=1)
        assert torch.allclose(total[k], manual, rtol=1e-4, atol=1e-6)
    # No parameter gradient is left behind by the norm pass.
    assert all(p.grad is None for p in net.parameters())


def test_discrete_noise_reaches_the_gan_counts(table):
    """--discrete-noise is not ignored by GAN releases: the (S, Y) counts get the exact
    discrete Gaussian, so the measured counts are integers."""
    ledger = PrivacyLedger(epsilon_budget=50.0, delta=1e-6)
    result = gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                         rng=np.random.default_rng(0), config=tiny("dpgan", epochs=1),
                         noise_multiplier=1.0, discrete_noise=True)
    assert result.privacy["marginals"]["mechanism"] == "discrete gaussian"
    assert ledger.entries[0].mechanism == "discrete-gaussian"
    marginals = np.asarray(result.marginals["s"]) * result.expected_rows
    # Discrete noise on integer counts: P(S) times the noisy total is a whole number.
    assert np.allclose(marginals, np.round(marginals), atol=1e-6)
    plain = gan.fit_gan(table, DOMAIN, protected="s", outcome="y",
                        ledger=PrivacyLedger(epsilon_budget=50.0, delta=1e-6),
                        rng=np.random.default_rng(0), config=tiny("dpgan", epochs=1),
                        noise_multiplier=1.0)
    # exact noise is the default (issue 41.2): the float Gaussian only when asked for
    assert plain.privacy["marginals"]["mechanism"] == "discrete gaussian"


def _count_noise(sigma1: float) -> object:
    """The layer's DPSGD-F noise with counts of noise ``sigma1`` (gradients σ = 1)."""
    return subsampled_gaussian(ledger=PrivacyLedger(epsilon_budget=1e3, delta=1e-6), name="t",
                               noise_multiplier=1.0, sample_rate=0.5, steps=20,
                               sensitivity=10.0, count_noise_multiplier=sigma1)


def test_group_clipping_bounds_are_clamped():
    clipping = GroupClipping(base=1.0, groups=2, cap=3.0)
    norms = torch.tensor([5.0, 5.0, 5.0, 0.1, 0.1, 0.1])
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    with scaled_noise(1e-9):  # the counts without noise
        bounds = clipping.bounds(norms, group, expected_batch=6.0, noise=_count_noise(1.0),
                                 generator=torch.Generator().manual_seed(0))
    # Group 0 has all its rows clipped, group 1 none: 1 + (1 / 0.5) = 3; 1 + 0 = 1.
    assert bounds.tolist() == pytest.approx([3.0, 1.0])
    noisy = GroupClipping(base=1.0, groups=2, cap=10.0)
    loud = _count_noise(50.0)
    for seed in range(20):
        b = noisy.bounds(norms, group, expected_batch=6.0, noise=loud,
                         generator=torch.Generator().manual_seed(seed))
        assert bool(torch.all(b >= 1.0)) and bool(torch.all(b <= 10.0))


def test_fit_charges_the_ledger_before_training(table):
    result, ledger = fit(table, "dpgan", sigma=None)
    names = [e.name for e in ledger.entries]
    # dpgan anchors every (X, Y) and (X, S) pair and (S, Y): DOMAIN has three X.
    anchors = [f"GAN anchor: counts of ({x}, {t})" for t in ("y", "s") for x in "amc"]
    assert names == ["GAN conditioning: counts of (s, y)", *anchors,
                     "GAN D1 gradients (DP-SGD)"]
    assert result.privacy["marginals"]["anchor_pairs"] == (
        [[x, "y"] for x in "amc"] + [[x, "s"] for x in "amc"] + [["s", "y"]])
    # One σ for every count measurement; together they spend marginal_share of ε.
    assert len({e.sigma for e in ledger.entries[:-1]}) == 1
    dp = result.privacy["dp_sgd"]
    entry = ledger.entries[-1]
    assert (entry.sample_rate, entry.steps) == (dp["sample_rate"], dp["steps"])
    assert entry.sigma == pytest.approx(dp["noise_multiplier"] * dp["max_grad_norm"])
    assert dp["steps_run"] <= dp["steps"]
    # σ was calibrated to use (almost all of) the budget.
    assert 0.99 * 50.0 < ledger.epsilon_spent() <= 50.0
    # DP-SGD alone, on the ledger's grid (at ε 50 its orders below 2 matter)
    from privfair.core.accounting import rdp_epsilon, subsampled_gaussian_rdp

    alone = rdp_epsilon(rdp=subsampled_gaussian_rdp(
        noise_multiplier=dp["noise_multiplier"], sample_rate=dp["sample_rate"],
        steps=dp["steps"]), delta=1e-6)[0]
    assert alone < ledger.epsilon_spent()
    # dp-accounting on its integer orders: never below the ledger's grid
    assert subsampled_gaussian_epsilon(noise_multiplier=dp["noise_multiplier"],
                                       sample_rate=dp["sample_rate"], steps=dp["steps"],
                                       delta=1e-6) >= alone * (1 - 1e-9)


def test_fair_methods_anchor_only_the_outcome_pairs(table):
    """FairGAN's generator is not pulled back towards the real (X, S) dependences its
    adversary removes: only (X, Y) pairs are anchors; anchor_weight 0 measures none."""
    result, ledger = fit(table, "fairgan", sigma=2.0)
    assert result.privacy["marginals"]["anchor_pairs"] == [[x, "y"] for x in "amc"]
    result, ledger = fit(table, "fairgan", sigma=2.0, anchor_weight=0.0)
    assert result.privacy["marginals"]["anchor_pairs"] == []
    assert [e.name for e in ledger.entries] == ["GAN conditioning: counts of (s, y)",
                                                "GAN D1 gradients (DP-SGD)"]


def test_anchor_loss_is_the_mean_tvd_of_the_pair_marginals():
    trainer = gan._Trainer(tiny("dpgan"), DOMAIN, "s", "y", None,
                           {"s": [0.5, 0.5], "y": [0.5, 0.5]}, torch.Generator(),
                           torch.device("cpu"), 4.0,
                           anchors={("a", "y"): np.full((3, 2), 1 / 6),
                                    ("s", "y"): np.array([[1.0, 0.0], [0.0, 0.0]])})
    eye = torch.eye(3)
    values = {"a": eye[[0, 0, 1, 2]], "y": torch.eye(2)[[0, 1, 0, 1]],
              "s": torch.eye(2)[[0, 0, 0, 0]]}
    # (a, y): batch joint [[.25,.25],[.25,0],[0,.25]] vs uniform 1/6: TVD = 1/3.
    # (s, y): batch [[.5,.5],[0,0]] vs [[1,0],[0,0]]: TVD = 1/2.
    assert float(trainer.anchor_loss(values)) == pytest.approx((1 / 3 + 1 / 2) / 2)


def test_budget_too_small_is_refused(table):
    ledger = PrivacyLedger(epsilon_budget=0.05, delta=1e-6)
    with pytest.raises(BudgetExceededError):
        gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                    rng=np.random.default_rng(0), config=tiny("dpgan"), noise_multiplier=0.3)


def test_group_clipping_charges_gradients_and_counts_as_one_subsampled_gaussian(table):
    """Issue 21.5: D1's gradients (σ) and clipped counts (σ1 = 10 σ) of one Poisson batch are
    one subsampled Gaussian at σ_eff = (σ⁻² + σ1⁻²)^(−1/2), not two."""
    from privfair.core.accounting import subsampled_gaussian_rdp

    result, ledger = fit(table, "fairgan", group_clipping=True, sigma=2.0)
    joint = ledger.entries[-1]
    assert joint.name == "GAN D1 gradients and clipped counts (DPSGD-F, one subsampled Gaussian)"
    assert not any("clipped counts" in e.name for e in ledger.entries[:-1])
    sigma_eff = (2.0**-2 + 20.0**-2) ** -0.5
    assert joint.sigma / joint.sensitivity == pytest.approx(sigma_eff)
    assert joint.sigma == pytest.approx(2.0 * 10.0 * 1.0)  # σ · cap · C0 (tiny C0 = 1)
    np.testing.assert_allclose(joint.rdp_curve(), subsampled_gaussian_rdp(
        noise_multiplier=sigma_eff, sample_rate=joint.sample_rate, steps=joint.steps))
    assert result.privacy["dp_sgd"]["count_noise_multiplier"] == pytest.approx(20.0)


def test_cfgan_refuses_a_cyclic_graph_before_reading_data(table):
    ledger = PrivacyLedger(epsilon_budget=5.0, delta=1e-6)
    with pytest.raises(CausalGraphError, match="cycle"):
        gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                    rng=np.random.default_rng(0), config=tiny("cfgan"),
                    dag={"edges": [["s", "m"], ["m", "s"]]})
    with pytest.raises(CausalGraphError, match="needs a causal graph"):
        gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                    rng=np.random.default_rng(0), config=tiny("cfgan"))
    assert ledger.entries == ()


@pytest.mark.parametrize(("method", "options"), [
    ("dpgan", {}),
    ("fairgan", {}),
    ("fairgan-plus", {"classifier_fairness": "eo"}),
    ("cfgan", {"effect": "se", "redlining": ("m",)}),
    ("cfgan", {"effect": "ce", "context": ("a",)}),
    ("fairgan", {"fairness_loss": "capped", "generator_ema": 0.9}),
    ("cfgan", {"fairness_loss": "capped"}),
])
def test_generated_codes_stay_in_the_domain(table, method, options):
    result, _ = fit(table, method, **options)
    sample = result.sample(300, rng=np.random.default_rng(1))
    DOMAIN.check_codes(sample)
    assert all(len(v) == 300 for v in sample.values())


def test_seeded_training_is_reproducible(table, tmp_path):
    first, _ = fit(table, "fairgan-plus", seed=3)
    second, _ = fit(table, "fairgan-plus", seed=3)
    for k, v in first.generator_state.items():
        np.testing.assert_array_equal(v, second.generator_state[k])
    a = first.sample(200, rng=np.random.default_rng(5))
    b = second.sample(200, rng=np.random.default_rng(5))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    first.save(tmp_path / "gan.npz")
    loaded = gan.FittedGAN.load(tmp_path / "gan.npz")
    c = loaded.sample(200, rng=np.random.default_rng(5))
    for k in a:
        np.testing.assert_array_equal(a[k], c[k])
    assert loaded.classifier_state is not None
    other, _ = fit(table, "fairgan-plus", seed=4)
    assert any(not np.array_equal(v, other.generator_state[k])
               for k, v in first.generator_state.items())


@pytest.mark.parametrize("method", ["fairgan", "fairgan-plus", "cfgan"])
def test_fairness_adversaries_receive_generated_rows_only(table, monkeypatch, method):
    """Every tensor that reaches D2 / D3 / η / D² is the generator's latest output."""
    seen = {"generated": [], "runs": [], "classifier_out": [], "checked": 0}
    original_init = gan._Trainer.__init__
    original_run = gan.CausalGenerator.run

    def run(self, *args, **kwargs):
        out = original_run(self, *args, **kwargs)
        seen["runs"].append({k: v.detach().clone() for k, v in out.items()})
        return out

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        trainer = self

        def on_generator(module, inputs, output):
            seen["generated"].append({k: v.detach().clone() for k, v in output.items()})

        def expect(name, columns):
            def hook(module, inputs):
                x = inputs[0].detach()
                if name == "D3":
                    probs = torch.softmax(seen["classifier_out"][-1], dim=1)
                    assert torch.equal(x[:, :probs.shape[1]], probs)
                elif method == "cfgan":
                    plus, minus = seen["runs"][-2], seen["runs"][-1]
                    assert torch.equal(x, torch.cat([plus["y"], minus["y"]]))
                else:
                    rows = trainer.rows(seen["generated"][-1])
                    assert torch.equal(x, rows[:, columns])
                seen["checked"] += 1
            return hook

        if not isinstance(self.generator, gan.CausalGenerator):
            self.generator.register_forward_hook(on_generator)
        for name, adversary in self.adversaries.items():
            adversary.net.register_forward_pre_hook(expect(name, self.not_s))
        if hasattr(self, "classifier"):
            self.classifier.register_forward_pre_hook(expect("classifier", self.x_only))
            self.classifier.register_forward_hook(
                lambda m, i, out: seen["classifier_out"].append(out.detach().clone()))

    monkeypatch.setattr(gan._Trainer, "__init__", init)
    monkeypatch.setattr(gan.CausalGenerator, "run", run)
    fit(table, method)
    # enough checked passes to mean something; their number follows the noisy row count
    # (q and the step count), so it moved with the exact noise of issue 41.2 (20 here)
    assert seen["checked"] >= 10


def test_adversary_steps_train_the_adversary_more_often(table, monkeypatch):
    """adversary_steps = k gives D2 k updates per generator step (generated rows only)."""
    steps = {}
    original = gan._Trainer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        counter = steps.setdefault(self.config.adversary_steps, [0])
        self.adversaries["D2"].optimiser.register_step_post_hook(
            lambda *_: counter.__setitem__(0, counter[0] + 1))

    monkeypatch.setattr(gan._Trainer, "__init__", init)
    one, _ = fit(table, "fairgan", adversary_steps=1)
    three, _ = fit(table, "fairgan", adversary_steps=3)
    runs = one.privacy["dp_sgd"]["steps_run"]
    assert runs == three.privacy["dp_sgd"]["steps_run"] > 0
    assert steps[1][0] == runs and steps[3][0] == 3 * runs
    with pytest.raises(ValueError, match="adversary_steps must be an integer >= 1"):
        gan.GANConfig(adversary_steps=0)


def test_capped_gain_stops_at_the_entropy_of_the_prior():
    prior = [0.3, 0.7]
    trainer = gan._Trainer(tiny("fairgan", fairness_loss="capped"), DOMAIN, "s", "y", None,
                           {"s": prior, "y": [0.5, 0.5]}, torch.Generator().manual_seed(0),
                           torch.device("cpu"), 50.0)
    entropy = -sum(p * np.log(p) for p in prior)
    assert float(trainer._prior_entropy("D2")) == pytest.approx(entropy, rel=1e-6)
    cfgan = gan._Trainer(tiny("cfgan", fairness_loss="capped"), DOMAIN, "s", "y",
                         gan.parse_dag(DAG, DOMAIN, protected=("s",), outcome=("y",)),
                         {"s": prior, "y": [0.5, 0.5]}, torch.Generator().manual_seed(0),
                         torch.device("cpu"), 50.0)
    assert float(cfgan._prior_entropy("D2")) == pytest.approx(np.log(2), rel=1e-6)
    with pytest.raises(ValueError, match="fairness_loss must be"):
        gan.GANConfig(fairness_loss="hinge")


def test_generator_ema_releases_the_moving_average_of_the_weights(table, monkeypatch):
    decay = 0.6
    raw = []
    original = gan._Trainer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        raw.append(gan._copy_state(self.generator))
        self.g_opt.register_step_post_hook(
            lambda *_: raw.append(gan._copy_state(self.generator)))

    monkeypatch.setattr(gan._Trainer, "__init__", init)
    result, _ = fit(table, "fairgan", generator_ema=decay)
    assert len(raw) == result.privacy["dp_sgd"]["steps_run"] + 1
    assert result.privacy["dp_sgd"]["released_weights"] == "moving average (decay 0.6)"
    assert all({"anchor_tvd", "generated_rd"} <= set(h) for h in result.history)
    expected = {k: v.double().clone() for k, v in raw[0].items()}
    for state in raw[1:]:
        for k in expected:
            expected[k] = decay * expected[k] + (1 - decay) * state[k].double()
    for k, v in expected.items():
        np.testing.assert_allclose(result.generator_state[k], v.numpy(), rtol=1e-4,
                                   atol=1e-5)
    assert any(not np.allclose(result.generator_state[k], raw[-1][k].numpy())
               for k in expected)
    with pytest.raises(ValueError, match="generator_ema must be in"):
        gan.GANConfig(generator_ema=1.0)
    assert gan.GANConfig(method="fairgan").fairness_weight == 16.0
    assert gan.GANConfig(method="cfgan", effect="te").fairness_weight == 16.0
    assert gan.GANConfig(method="cfgan", effect="se").fairness_weight == 4.0
    assert gan.GANConfig(method="fairgan", fairness_weight=2.0).fairness_weight == 2.0
    assert gan.GANConfig(method="dpgan").generator_ema == 0.0
