"""The dissertation's GAN settings as settings of the library (issue 40): ``setting="xu2021"``
(λ = μ = 1, FairGAN+'s η and D3 on real rows through DP-SGD), the ACGAN baseline with
independent priors, and the non-private path that only evaluation may use (torch, CPU, tiny)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import GAN_TOY_DOMAIN, gan_toy_table  # noqa: E402

from privfair.core.accounting import PrivacyLedger  # noqa: E402
from privfair.core.domain import Domain  # noqa: E402
from privfair.core.errors import ReleaseInputError  # noqa: E402
from privfair.generative import gan  # noqa: E402

DOMAIN = Domain(tuple(GAN_TOY_DOMAIN), tuple(GAN_TOY_DOMAIN.values()))


@pytest.fixture(scope="module")
def table():
    return gan_toy_table()


def tiny(method: str, **kw) -> gan.GANConfig:
    base = {"method": method, "epochs": 2, "batch_size": 80, "noise_dim": 8, "hidden": 16,
            "discriminator_hidden": 16, "device": "cpu"}
    return gan.GANConfig(**{**base, **kw})


def fit(table, config, *, seed=0):
    ledger = PrivacyLedger(epsilon_budget=50.0, delta=1e-6)
    fitted = gan.fit_gan(table, DOMAIN, protected="s", outcome="y", ledger=ledger,
                         rng=np.random.default_rng(seed), config=config, noise_multiplier=1.0)
    return fitted, ledger


def test_xu2021_setting_is_the_papers_weights_and_rows():
    paper = gan.GANConfig(method="fairgan", setting="xu2021")
    assert (paper.fairness_weight, paper.classifier_rows, paper.anchor_weight) == (
        1.0, "generated", 0.0)
    assert gan.GANConfig(method="fairgan").fairness_weight == 16.0
    plus = gan.GANConfig(method="fairgan-plus", setting="xu2021")
    assert (plus.fairness_weight, plus.classifier_weight, plus.classifier_rows) == (
        1.0, 1.0, "real_and_generated")
    default = gan.GANConfig(method="fairgan-plus")
    assert (default.fairness_weight, default.classifier_rows, default.anchor_weight) == (
        4.0, "generated", 2.0)
    assert gan.GANConfig(method="cfgan", setting="xu2021").fairness_weight == 1.0
    # an explicit knob wins over the setting
    assert gan.GANConfig(method="fairgan", setting="xu2021",
                         fairness_weight=3.0).fairness_weight == 3.0
    assert gan.GANConfig(method="fairgan-plus", setting="xu2021").to_dict()["setting"] == "xu2021"
    with pytest.raises(ValueError, match="setting must be one of"):
        gan.GANConfig(setting="paper")
    with pytest.raises(ValueError, match="classifier_rows must be one of"):
        gan.GANConfig(method="fairgan-plus", classifier_rows="real")


def _spy_ghost_batches(monkeypatch):
    """Every (module, input) that a per-row (DP-SGD) gradient is taken of."""
    calls = []
    original = gan.ghost_batch

    def spy(module, row_loss, x):
        calls.append((module, x.detach().clone()))
        return original(module, row_loss, x)

    monkeypatch.setattr(gan, "ghost_batch", spy)
    return calls


def _spy_trainer(monkeypatch):
    trainers = []
    original = gan._Trainer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        trainers.append(self)

    monkeypatch.setattr(gan._Trainer, "__init__", init)
    return trainers


def test_paper_setting_trains_d3_and_the_classifier_on_real_rows_inside_dpsgd(
        table, monkeypatch):
    """Under xu2021, η and D3 take per-row gradients on D1's real Poisson batch (the paper's
    V3 on real x), noised by the same charged step; the default keeps them off real rows."""
    calls = _spy_ghost_batches(monkeypatch)
    trainers = _spy_trainer(monkeypatch)
    noised = []
    original_sum = gan.noisy_sum

    def noisy_sum(total, **kwargs):
        noised.append((sorted(total), kwargs["clip_bound"]))
        return original_sum(total, **kwargs)

    monkeypatch.setattr(gan, "noisy_sum", noisy_sum)
    paper, paper_ledger = fit(table, tiny("fairgan-plus", setting="xu2021"))
    trainer = trainers[-1]
    real_rows = {tuple(r) for r in trainer.layout.encode(table).tolist()}
    d3 = trainer.adversaries["D3"].net
    steps = paper.privacy["dp_sgd"]["steps_run"]
    # per step: D1 on the real batch, then η on its x, then D3 on η's output; then D1's fake side
    by_module = {"d1": [], "classifier": [], "d3": []}
    for module, x in calls:
        key = ("d1" if module is trainer.d1 else "classifier" if module is trainer.classifier
               else "d3" if module is d3 else None)
        by_module[key].append(x)
    assert len(by_module["classifier"]) == len(by_module["d3"]) == steps > 0
    real_batches = by_module["d1"][0::2]
    assert len(real_batches) == steps
    for batch, x, d3_in in zip(real_batches, by_module["classifier"], by_module["d3"],
                               strict=True):
        assert {tuple(r) for r in batch.tolist()} <= real_rows
        assert torch.equal(x, batch[:, trainer.x_only])
        assert d3_in.shape == (batch.shape[0], 2)  # softmax(η(x)) of the real batch
    # D1's, η's and D3's sums of one step are noised at one clipping bound
    assert [keys for keys, _ in noised[:3]] == [
        sorted(dict(trainer.d1.named_parameters())), ["0.bias", "0.weight"],
        sorted(dict(d3.named_parameters()))]
    assert len({bound for _, bound in noised}) == 1
    assert paper.privacy["dp_sgd"]["trained_on_real_rows"] == ["D1", "classifier", "D3"]

    calls.clear()
    # (no anchors on either side, so that the D1 charges line up)
    default, default_ledger = fit(table, tiny("fairgan-plus", anchor_weight=0.0))
    trainer = trainers[-1]
    assert all(module is trainer.d1 for module, _ in calls)
    assert default.privacy["dp_sgd"]["trained_on_real_rows"] == ["D1"]
    # the joint clipping keeps the charge: the same entries, the same Rényi curve
    assert [e.name for e in paper_ledger.entries] == [e.name for e in default_ledger.entries]
    np.testing.assert_allclose(paper_ledger.rdp(), default_ledger.rdp())


def test_real_row_classifier_gradient_is_the_papers_l_minus_mu_v3(table):
    """Without noise (the non-private path), η's step on a real batch is the mean gradient of
    CE(η(x), y) − μ·w(s)·CE(D3(η(x)), s), and D3's of w(s)·CE(D3(η(x)), s), with the
    per-group weight w(s) = 1/P(S = s)."""
    config = tiny("fairgan-plus", setting="xu2021", classifier_weight=0.7)
    trainer = gan._Trainer(config, DOMAIN, "s", "y", None, {"s": [0.5, 0.5], "y": [0.6, 0.4]},
                           torch.Generator().manual_seed(0), torch.device("cpu"), 80.0)
    real = trainer.layout.encode(table)
    state = trainer.gen.get_state()
    trainer.d1_private_step(real, torch.as_tensor(table["s"]), sample_rate=0.2,
                            expected_batch=80.0, noise=None, clipping=None)
    mask = torch.rand(real.shape[0], generator=torch.Generator().set_state(state)) < 0.2
    batch = real[mask]
    x = batch[:, trainer.x_only]
    y = batch[:, trainer.layout.span("y")].argmax(1)
    s = batch[:, trainer.layout.span("s")].argmax(1)
    d3 = trainer.adversaries["D3"].net
    logits = trainer.classifier(x)
    # xu2021's V3 is per group: each row weighted by 1/P(S = s), here 1/0.5
    adversary = (2.0 * torch.nn.functional.cross_entropy(d3(torch.softmax(logits, 1)), s,
                                                         reduction="none")).sum()
    loss = torch.nn.functional.cross_entropy(logits, y, reduction="sum") - 0.7 * adversary
    expected = torch.autograd.grad(loss, list(trainer.classifier.parameters()))
    for (name, _), want in zip(trainer.classifier.named_parameters(), expected, strict=True):
        torch.testing.assert_close(trainer.private_grads["classifier"][name], want / 80.0)
    d3_loss = (2.0 * torch.nn.functional.cross_entropy(
        d3(torch.softmax(logits.detach(), 1)), s, reduction="none")).sum()
    expected = torch.autograd.grad(d3_loss, list(d3.parameters()))
    for (name, _), want in zip(d3.named_parameters(), expected, strict=True):
        torch.testing.assert_close(trainer.private_grads["D3"][name], want / 80.0)


def test_acgan_draws_y_and_s_independently_and_is_no_release_method(table):
    fitted, _ = fit(table, tiny("acgan"))
    rows = fitted.sample(6000, rng=np.random.default_rng(1))
    s, y = rows["s"], rows["y"]
    rd = y[s == 1].mean() - y[s == 0].mean()
    real_rd = table["y"][table["s"] == 1].mean() - table["y"][table["s"] == 0].mean()
    assert real_rd > 0.3 and abs(rd) < 0.05  # independent priors: RD(D) ≈ 0 by construction
    assert fitted.classifier_state is not None  # its auxiliary classifier of y: an LR η
    assert fitted.privacy["dp_sgd"]["trained_on_real_rows"] == ["D1", "classifier"]
    assert "acgan" not in gan.GAN_METHODS and "acgan" in gan.BASELINE_GAN_METHODS


def test_non_private_path_draws_no_noise_clips_nothing_and_the_release_refuses_it(
        table, monkeypatch, tmp_path, toy_contract):
    def forbidden(*args, **kwargs):
        raise AssertionError("the non-private path called a DP step")

    for name in ("gaussian_mechanism", "subsampled_gaussian", "noisy_sum", "clip_factors"):
        monkeypatch.setattr(gan, name, forbidden)
    torch_normal = torch.normal

    def normal(*args, **kwargs):
        raise AssertionError("noise drawn")

    monkeypatch.setattr(torch, "normal", normal)
    fitted = gan.fit_gan_non_private(table, DOMAIN, protected="s", outcome="y",
                                     rng=np.random.default_rng(0),
                                     config=tiny("fairgan-plus", setting="xu2021"))
    monkeypatch.setattr(torch, "normal", torch_normal)
    assert fitted.non_private and fitted.privacy["non_private"] is True
    assert fitted.privacy["training"]["trained_on_real_rows"] == ["D1", "classifier", "D3"]
    # the conditioning marginals are the exact ones
    assert fitted.marginals["s"] == pytest.approx(np.bincount(table["s"]) / len(table["s"]))
    with pytest.raises(ValueError, match="group_clipping"):
        gan.fit_gan_non_private(table, DOMAIN, protected="s", outcome="y",
                                rng=np.random.default_rng(0),
                                config=tiny("fairgan", group_clipping=True))

    from privfair.contracts.schema import load_contract
    from privfair.release.kinds.gan.stages import sample_gan
    from privfair.store.files import write_artefact

    path = tmp_path / "g.npz"
    fitted.save(path)
    assert gan.FittedGAN.load(path).non_private
    ref = write_artefact(tmp_path / "artefacts", "gan-generator", fitted.to_bytes(), "npz")
    with pytest.raises(ReleaseInputError, match="fit_gan_non_private"):
        sample_gan(ref, load_contract(toy_contract), tmp_path / "artefacts", n_rows=10,
                   delta=1e-6, seed=0)
    assert not list((tmp_path / "artefacts").glob("synthetic-codes*"))


def test_acgan_discriminator_sees_x_y_and_s_and_has_no_head_for_s(table):
    """Xu's ACGAN matches P_G(X | Y, S) to P_data(X | Y, S): D1 is the conditional one (the
    full row in, one real/fake logit out); an auxiliary head predicting s from x alone would
    make G maximise how well x tells s (Adult: BER .013 against the paper's .196)."""
    config = tiny("acgan", setting="xu2021")
    trainer = gan._Trainer(config, DOMAIN, "s", "y", None, {"s": [0.5, 0.5], "y": [0.6, 0.4]},
                           torch.Generator().manual_seed(0), torch.device("cpu"), 80.0)
    linears = [m for m in trainer.d1 if isinstance(m, torch.nn.Linear)]
    assert linears[0].in_features == trainer.layout.width
    assert linears[-1].out_features == 1
    # D1's verdict on a row changes with its s alone (it sees s)
    rows = trainer.layout.encode(table)[:50]
    flipped = rows.clone()
    span = trainer.layout.span("s")
    flipped[:, span] = rows[:, span].flip(1)
    assert not torch.allclose(trainer.d1(rows), trainer.d1(flipped))


def test_per_group_expectation_weights_each_group_by_its_inverse_share(table):
    """xu2021's V2/V3 are sums of one expectation per group of S (Xu Eq. 6.2): each row's
    log-likelihood weighted by 1/P(S = s), so a group with a quarter of the rows counts as
    much as the rest; CFGAN's two equal streams are summed (weight 2). The default pools."""
    assert gan.GANConfig(method="fairgan", setting="xu2021").fairness_expectation == "per_group"
    assert gan.GANConfig(method="fairgan").fairness_expectation == "pooled"
    marginals = {"s": [0.25, 0.75], "y": [0.6, 0.4]}

    def trainer(setting):
        return gan._Trainer(tiny("fairgan-plus", setting=setting), DOMAIN, "s", "y", None,
                            marginals, torch.Generator().manual_seed(0), torch.device("cpu"),
                            80.0)

    paper, default = trainer("xu2021"), trainer("privfair")
    target = torch.tensor([0, 0, 1, 1, 1, 1, 1, 1])
    inputs = torch.randn(8, len(paper.not_s), generator=torch.Generator().manual_seed(1))
    default.adversaries["D2"].net.load_state_dict(paper.adversaries["D2"].net.state_dict())
    rows = torch.nn.functional.cross_entropy(paper.adversaries["D2"].net(inputs), target,
                                             reduction="none")
    per_group = (rows[:2].sum() / 0.25 + rows[2:].sum() / 0.75) / 8
    torch.testing.assert_close(paper._adversary_loss("D2", inputs, target), per_group)
    torch.testing.assert_close(default._adversary_loss("D2", inputs, target), rows.mean())
    # with the batch's shares equal to P(S) the weighted mean is the sum of the group means
    torch.testing.assert_close(per_group, rows[:2].mean() + rows[2:].mean())
    with pytest.raises(ValueError, match="per_group"):
        gan.GANConfig(method="fairgan", setting="xu2021", fairness_loss="capped")
    with pytest.raises(ValueError, match="per_group"):
        gan.fit_gan_non_private(table, DOMAIN, protected="s", outcome="y",
                                rng=np.random.default_rng(0),
                                config=tiny("fairgan", setting="xu2021", constrained=("a",)))


def test_paper_v3_is_played_on_real_rows_only(table, monkeypatch):
    """xu2021's FairGAN+ plays V3 on the real batch (x ~ P(X | Y, S)) alone: D3 and η's
    −μ·V3 term take no generated-row step; η's likelihood L still reads both."""
    config = tiny("fairgan-plus", setting="xu2021")
    assert (config.classifier_rows, config.v3_rows) == ("real_and_generated", "real")
    assert gan.GANConfig(method="fairgan-plus").v3_rows == "generated"
    trainers = _spy_trainer(monkeypatch)
    seen = []
    original = gan._Trainer._d3_terms

    def spy(self, *args, **kwargs):
        seen.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(gan._Trainer, "_d3_terms", spy)
    fitted, _ = fit(table, config)
    assert trainers[-1].v3_real and not trainers[-1].v3_generated
    assert seen == []  # no V3 term on generated rows
    assert fitted.privacy["dp_sgd"]["trained_on_real_rows"] == ["D1", "classifier", "D3"]
    fit(table, tiny("fairgan-plus", setting="xu2021", v3_rows="real_and_generated"))
    assert seen  # both: the generated-row terms are back
    with pytest.raises(ValueError, match="v3_rows"):
        gan.GANConfig(method="fairgan-plus", v3_rows="real")
