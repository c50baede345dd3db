"""One DP-SGD step of the GAN's D1 (with FairGAN+'s η and D3 clipped jointly, ``xu2021``)
against a naive reference: each row's gradient by its own backward pass, clipped and summed in
a Python loop. Pins what the vectorised step (ghost clipping, ``privfair.generative.dpsgd``)
must keep computing: the per-row gradients, the joint clipping bound, and the layer's noise at
σ × C (torch, CPU, tiny)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from conftest import GAN_TOY_DOMAIN, gan_toy_table  # noqa: E402

from privfair.core.accounting import PrivacyLedger  # noqa: E402
from privfair.core.domain import Domain  # noqa: E402
from privfair.core.mechanisms import recorded_queries, subsampled_gaussian  # noqa: E402
from privfair.generative import gan  # noqa: E402
from privfair.generative.dpsgd import ghost_batch  # noqa: E402
from privfair.generative.nets import mlp  # noqa: E402

DOMAIN = Domain(tuple(GAN_TOY_DOMAIN), tuple(GAN_TOY_DOMAIN.values()))
SIGMA, CLIP, RATE, BATCH = 1.3, 3.0, 0.2, 80.0


def naive_row_gradients(module: torch.nn.Module, row_loss, x: torch.Tensor
                        ) -> list[dict[str, torch.Tensor]]:
    """Each row's gradient of ``row_loss`` by its own forward and backward pass."""
    out = []
    for i in range(x.shape[0]):
        module.zero_grad(set_to_none=True)
        row_loss(module(x[i:i + 1]), i).sum().backward()
        out.append({k: p.grad.detach().clone() for k, p in module.named_parameters()})
    module.zero_grad(set_to_none=True)
    return out


def test_vectorised_row_gradients_equal_a_loop_to_1e_6():
    """ghost_batch's per-row norms and any reweighted sum equal the per-row loop's (float64,
    so 1e-6 tests the algebra, not float32 rounding)."""
    g = torch.Generator().manual_seed(3)
    net = mlp([7, 9, 5, 1], generator=g, leaky=True).double()
    x = torch.randn(25, 7, generator=g, dtype=torch.float64) * 3
    target = (torch.rand(25, generator=g) < 0.5).double()

    def row_loss(logit, row=None):  # every row's loss, or row ``row``'s alone
        rows = slice(None) if row is None else slice(row, row + 1)
        return F.binary_cross_entropy_with_logits(logit[:, 0], target[rows], reduction="none")

    batch = ghost_batch(net, row_loss, x)
    rows = naive_row_gradients(net, row_loss, x)
    norms = torch.stack([torch.sqrt(sum(v.pow(2).sum() for v in r.values())) for r in rows])
    torch.testing.assert_close(batch.norms, norms, rtol=0, atol=1e-6)
    factors = torch.rand(25, generator=g, dtype=torch.float64)
    total = batch.weighted_sum(factors)
    for k in total:
        manual = sum(f * r[k] for f, r in zip(factors, rows, strict=True))
        torch.testing.assert_close(total[k], manual, rtol=0, atol=1e-6)


def _step(table, *, noise, monkeypatch):
    """One d1_private_step of FairGAN+ under xu2021 (D1 ⊕ η ⊕ D3 on the real batch); returns
    the trainer, the batch and what each noisy_sum call got and gave."""
    config = gan.GANConfig(method="fairgan-plus", setting="xu2021", epochs=1,
                           batch_size=int(BATCH), noise_dim=8, hidden=16,
                           discriminator_hidden=16, max_grad_norm=CLIP, device="cpu")
    trainer = gan._Trainer(config, DOMAIN, "s", "y", None, {"s": [0.4, 0.6], "y": [0.6, 0.4]},
                           torch.Generator().manual_seed(0), torch.device("cpu"), BATCH)
    real = trainer.layout.encode(table)
    calls = []
    original = gan.noisy_sum

    def spy(total, **kw):
        out = original(total, **kw)
        calls.append(({k: v.detach().clone() for k, v in total.items()},
                      {k: v.detach().clone() for k, v in out.items()}, kw))
        return out

    monkeypatch.setattr(gan, "noisy_sum", spy)
    state = trainer.gen.get_state()
    before = {k: v.detach().clone() for k, v in trainer.d1.state_dict().items()}
    with recorded_queries() as queries:
        trainer.d1_private_step(real, torch.as_tensor(table["s"]), sample_rate=RATE,
                                expected_batch=BATCH, noise=noise, clipping=None)
    mask = torch.rand(real.shape[0], generator=torch.Generator().set_state(state)) < RATE
    trainer.d1.load_state_dict(before)  # the step's Adam update is not under test
    return trainer, real[mask], calls, queries


def _naive_clipped_sums(trainer, batch) -> dict[str, dict[str, torch.Tensor]]:
    """Per-row gradients of D1, η and D3 by a loop; each row's joint vector clipped to C."""
    span = trainer.layout.span
    x = batch[:, trainer.x_only]
    y = batch[:, span("y")].argmax(1)
    s = batch[:, span("s")].argmax(1)
    weight = 1.0 / torch.tensor([0.4, 0.6])[s]  # per_group: 1 / P(S = s)
    d3 = trainer.adversaries["D3"].net

    def d1_loss(logit, i):
        return F.binary_cross_entropy_with_logits(logit[:, 0], torch.ones(1), reduction="none")

    def eta_loss(logits, i):  # the paper's L minus μ·V3 (μ = 1), row i
        adversary = F.cross_entropy(d3(torch.softmax(logits, 1)), s[i:i + 1], reduction="none")
        return F.cross_entropy(logits, y[i:i + 1], reduction="none") - weight[i] * adversary

    with torch.no_grad():
        d3_in = torch.softmax(trainer.classifier(x), 1)

    def d3_loss(logit, i):
        return weight[i] * F.cross_entropy(logit, s[i:i + 1], reduction="none")

    parts = {"D1": naive_row_gradients(trainer.d1, d1_loss, batch),
             "classifier": naive_row_gradients(trainer.classifier, eta_loss, x),
             "D3": naive_row_gradients(d3, d3_loss, d3_in)}
    norms = torch.sqrt(sum(torch.stack([sum(v.pow(2).sum() for v in r.values()) for r in rows])
                           for rows in parts.values()))
    assert float(norms.max()) > CLIP and float(norms.min()) < CLIP  # some clipped, some not
    factors = torch.clamp(CLIP / norms, max=1.0)
    return {key: {k: sum(f * r[k] for f, r in zip(factors, rows, strict=True))
                  for k in rows[0]} for key, rows in parts.items()}


def test_private_step_clips_each_rows_joint_gradient_and_noises_at_sigma_c(monkeypatch):
    table = gan_toy_table(n=200, seed=7)
    ledger = PrivacyLedger(epsilon_budget=1e6, delta=1e-6)
    noise = subsampled_gaussian(ledger=ledger, name="GAN D1 gradients (DP-SGD)",
                                noise_multiplier=SIGMA, sample_rate=RATE, steps=1,
                                sensitivity=CLIP)
    trainer, batch, calls, queries = _step(table, noise=noise, monkeypatch=monkeypatch)
    expected = _naive_clipped_sums(trainer, batch)
    # one noisy sum per part, each at the step's bound C
    assert [kw["clip_bound"] for _, _, kw in calls] == [CLIP] * 3
    exact = {key: total for key, (total, _, _) in zip(("D1", "classifier", "D3"), calls,
                                                      strict=True)}
    for key, sums in expected.items():
        for k, want in sums.items():
            torch.testing.assert_close(exact[key][k], want, rtol=1e-4, atol=1e-6)
    # every draw is the layer's, recorded with sensitivity C and scale σ·C, on the clipped sum
    assert len(queries) == sum(len(s) for s in expected.values())
    assert {(q.name, q.mechanism, q.sensitivity) for q in queries} == {
        ("GAN D1 gradients (DP-SGD)", "subsampled-gaussian", CLIP)}
    assert all(q.scale == pytest.approx(SIGMA * CLIP, rel=1e-12) for q in queries)
    recorded = np.concatenate([q.exact.ravel() for q in queries])
    wanted = np.concatenate([v.numpy().ravel() for key in ("D1", "classifier", "D3")
                             for v in exact[key].values()])
    np.testing.assert_allclose(recorded, wanted, rtol=1e-6, atol=1e-9)
    # the noise actually added: (noisy − exact sum) has sd σ·C (~700 draws: ±10 %)
    drawn = np.concatenate([(out[k] * BATCH - total[k]).numpy().ravel()
                            for total, out, _ in calls for k in total])
    assert drawn.size > 500
    assert abs(drawn.mean()) < 4 * SIGMA * CLIP / np.sqrt(drawn.size)
    assert drawn.std() == pytest.approx(SIGMA * CLIP, rel=0.1)


def test_non_private_step_is_the_plain_mean_gradient(monkeypatch):
    """noise=None (evaluation only): no clipping, no noise, Σ_i g_i / b."""
    table = gan_toy_table(n=200, seed=7)
    trainer, batch, calls, queries = _step(table, noise=None, monkeypatch=monkeypatch)
    assert calls == [] and queries == []
    logits = trainer.classifier(batch[:, trainer.x_only])
    y = batch[:, trainer.layout.span("y")].argmax(1)
    s = batch[:, trainer.layout.span("s")].argmax(1)
    d3 = trainer.adversaries["D3"].net
    adversary = (F.cross_entropy(d3(torch.softmax(logits, 1)), s, reduction="none")
                 / torch.tensor([0.4, 0.6])[s]).sum()
    loss = F.cross_entropy(logits, y, reduction="sum") - adversary
    want = torch.autograd.grad(loss, list(trainer.classifier.parameters()))
    for (name, _), w in zip(trainer.classifier.named_parameters(), want, strict=True):
        torch.testing.assert_close(trainer.private_grads["classifier"][name], w / BATCH)
