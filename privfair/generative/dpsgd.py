"""DP-SGD gradients for the discriminator that sees real rows (torch).

Per-sample gradients come from ``torch.func`` (``vmap`` of ``grad`` over a functional call),
each is clipped to L2 norm C (or to a per-group bound C^k, DPSGD-F, Xu Alg. 7), the clipped
gradients are summed and Gaussian noise N(0, σ² C_max² I) is added. The sum is divided by the
*expected* Poisson batch size b (erratum §9 item 10: 1/b, not b̃/b), which is public.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

# One DP-SGD clipping rule for models and discriminators (DPSGD-F's bounds included).
from privfair.learn.dpsgd import clip_factors, group_clip_bounds

__all__ = ["GroupClipping", "clip_factors", "noisy_gradient", "per_sample_gradients",
           "per_sample_norms"]


def per_sample_gradients(module: nn.Module, loss: Callable[[torch.Tensor], torch.Tensor],
                         x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradient of ``loss(module(x_i))`` for every row ``x_i``: ``{name: (b, *shape)}``."""
    params = {k: v.detach() for k, v in module.named_parameters()}

    def one(p: dict[str, torch.Tensor], row: torch.Tensor) -> torch.Tensor:
        return loss(functional_call(module, p, (row.unsqueeze(0),))).sum()

    return vmap(grad(one), in_dims=(None, 0))(params, x)


def per_sample_norms(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """L2 norm of each row's whole gradient (all parameters together)."""
    return torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))


@dataclass(frozen=True)
class GroupClipping:
    """DPSGD-F's adaptive per-group bounds from noisy counts of clipped rows (Xu Alg. 7).

    C^k = C0 · (1 + (m̃^k / b̃^k) / (m̃ / b)), where m̃^k, õ^k are the noisy clipped and
    unclipped counts of group k (noise σ1, L2 sensitivity 1: a row is in exactly one count),
    b the expected batch size. Noisy counts are clamped at 0, b̃^k and m̃ floored at 1 and
    C^k capped at ``cap`` · C0 (all post-processing, spec §8.2).
    """

    base: float
    count_noise: float
    groups: int
    cap: float = 10.0

    def bounds(self, norms: torch.Tensor, group: torch.Tensor, *, expected_batch: float,
               generator: torch.Generator) -> torch.Tensor:
        clipped = norms > self.base
        counts = torch.stack([
            torch.stack([(clipped & (group == k)).sum(), (~clipped & (group == k)).sum()])
            for k in range(self.groups)]).to(torch.float64)
        noise = torch.randn(counts.shape, generator=generator, device=counts.device,
                            dtype=torch.float64)
        noisy = counts + self.count_noise * noise
        return group_clip_bounds(noisy[:, 0], noisy[:, 1],
                                 expected_batch_size=max(expected_batch, 1.0), clip=self.base,
                                 cap=self.cap * self.base).to(norms.dtype)


def noisy_gradient(grads: dict[str, torch.Tensor], factors: torch.Tensor, *,
                   noise_multiplier: float, clip_bound: float, expected_batch: float,
                   generator: torch.Generator) -> dict[str, torch.Tensor]:
    """(Σ_i factor_i · g_i + N(0, σ² C² I)) / b for every parameter.

    The clipped sum is one contraction over the batch, so the clipped per-sample gradients are
    never materialised.
    """
    out = {}
    for k, g in grads.items():
        noise = torch.randn(g.shape[1:], generator=generator, device=g.device, dtype=g.dtype)
        total = torch.tensordot(factors.to(g.dtype), g, dims=1)
        out[k] = (total + noise_multiplier * clip_bound * noise) / expected_batch
    return out
