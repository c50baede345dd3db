"""Building blocks of the tabular GANs (torch): one-hot layout, seeded MLPs, hard Gumbel-softmax.

Every random draw takes an explicit :class:`torch.Generator`; nothing here touches torch's
global RNG (parameter initialisation included).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from privfair.core.domain import Domain

ModuleT = TypeVar("ModuleT", bound=nn.Module)

__all__ = ["OneHotLayout", "gumbel_from_uniform", "hard_gumbel_softmax", "mlp", "seeded_init_",
           "torch_generator", "uniform_draws"]


def torch_generator(rng: np.random.Generator, device: torch.device) -> torch.Generator:
    """A torch Generator on ``device`` seeded from ``rng``."""
    return torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))


@dataclass(frozen=True)
class OneHotLayout:
    """Where each attribute's one-hot block sits in a row vector (domain order)."""

    domain: Domain

    @property
    def width(self) -> int:
        return sum(self.domain.sizes)

    def span(self, attribute: str) -> slice:
        start = sum(self.domain.sizes[:self.domain.position(attribute)])
        return slice(start, start + self.domain.size(attribute))

    def columns(self, attributes: Sequence[str]) -> list[int]:
        """Column indices of the blocks of ``attributes`` (in domain order)."""
        out: list[int] = []
        for a in self.domain.canonical(attributes):
            s = self.span(a)
            out.extend(range(s.start, s.stop))
        return out

    def encode(self, codes: Mapping[str, np.ndarray]) -> torch.Tensor:
        """Rows of one-hot blocks (float32) from integer code columns."""
        n = len(np.asarray(codes[self.domain.attributes[0]]))
        out = torch.zeros((n, self.width), dtype=torch.float32)
        rows = torch.arange(n)
        for a in self.domain.attributes:
            col = torch.from_numpy(np.array(codes[a], dtype=np.int64))
            out[rows, self.span(a).start + col] = 1.0
        return out

    def decode(self, rows: torch.Tensor) -> dict[str, np.ndarray]:
        """Integer codes (argmax of each block); always inside the declared domain."""
        rows = rows.detach().cpu()
        return {a: rows[:, self.span(a)].argmax(dim=1).numpy().astype(np.int64)
                for a in self.domain.attributes}


def seeded_init_(module: ModuleT, generator: torch.Generator) -> ModuleT:
    """Re-initialise every Linear layer like torch's default, but from ``generator``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            if layer.bias is not None:
                bound = 1 / math.sqrt(layer.in_features) if layer.in_features else 0.0
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module


def mlp(sizes: Sequence[int], *, generator: torch.Generator, leaky: bool = False) -> nn.Sequential:
    """Linear layers with ReLU (or LeakyReLU 0.2) between them; no normalisation layers, so
    per-sample gradients are well defined."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.LeakyReLU(0.2) if leaky else nn.ReLU())
    return seeded_init_(nn.Sequential(*layers), generator)


def uniform_draws(n: int, widths: Sequence[int], *, generator: torch.Generator,
                  device: torch.device) -> list[torch.Tensor]:
    """U(0, 1) draws of shape (n, w) for each block width w, in turn (the Gumbel noise of a
    generator's outputs: :func:`gumbel_from_uniform`)."""
    return [torch.rand((n, w), generator=generator, device=device) for w in widths]


def gumbel_from_uniform(u: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel draws −log(−log u) from uniform ones (both clamped away from 0).

    Elementwise, so transforming blocks side by side (one call) gives the same numbers as
    one call per block: the generators draw each block's uniforms in turn
    (:func:`uniform_draws`) and transform them together (fewer, larger operations; the
    same draws)."""
    exponential = torch.log(u.clamp_min(1e-10)).neg_().clamp_min_(1e-10)
    return torch.log(exponential).neg_()


def hard_gumbel_softmax(logits: torch.Tensor, gumbel: torch.Tensor, *,
                        temperature: float) -> torch.Tensor:
    """One-hot sample of ``softmax(logits)`` (Gumbel-max) with the relaxed sample's gradient
    (straight-through), so a discriminator sees exact one-hot rows, like the real ones."""
    soft = torch.softmax((logits + gumbel) / temperature, dim=-1)
    index = soft.argmax(dim=-1, keepdim=True)
    hard = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    return hard - soft.detach() + soft
