"""DP tabular GANs over a contract's codes: dpgan, FairGAN, FairGAN+ and CFGAN (torch).

This module is long on purpose: the four GAN variants share one training loop and differ
in a few adversary terms; splitting them would hide those differences across files.

Privacy (spec §10): only D1, the discriminator that sees real rows, reads private data, and it
is trained with DP-SGD (Poisson sampling, per-sample clipping, Gaussian noise; optionally
DPSGD-F's per-group bounds). The generator learns only through D1, and every fairness
adversary (FairGAN's D2, FairGAN+'s D3 and classifier (the paper's η), CFGAN's D²) is fed generated rows
only, so they are post-processing and cost no budget. The exception is the paper's own
setting (``setting="xu2021"``), where FairGAN+'s η and D3 also learn from real rows as the
paper's L and V3 do (and ACGAN's classifier, a benchmark baseline): their per-row gradients on
D1's Poisson batch are clipped jointly with D1's and noised in the same charged step. The
marginals that condition the generator, P(S) and P(Y), come from one Gaussian measurement of
the (S, Y) counts. :func:`fit_gan_non_private` trains the same GANs without any of this, for
the benchmarks' ε = ∞ rows only; its generators are marked and the release refuses them.

Anchors: DP-SGD's noise on D1 alone leaves the generator with too weak a signal at ε ≤ 10 on
Adult (it collapses to a few modes). The generator is therefore also pulled towards noisy
pair marginals (every (X, Y), and for the fairness-blind dpgan every (X, S) and (S, Y)),
measured with the Gaussian mechanism from a share of the budget. Only the outcome's pairs are
anchored for the fair methods, so their adversaries are free to remove S's dependences.

Discrete outputs are hard Gumbel-softmax samples (straight-through), so no autoencoder is
pre-trained on real data. Losses are binary/categorical cross-entropy with log(1 − D) for
fake rows (erratum §9 item 6); the generator uses the non-saturating form −log D1(fake).
FairGAN+'s classifier loss is the full cross-entropy and its V3 is computed on generated rows
(erratum §9 item 7, resolved towards privacy), or on real and generated rows under ``xu2021``.
"""

from __future__ import annotations

import functools
import io
import json
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from privfair.core.accounting import RDP_ORDERS, joint_noise_multiplier
from privfair.core.domain import Domain
from privfair.core.errors import BudgetExceededError
from privfair.core.mechanisms import SubsampledGaussian, gaussian_mechanism, subsampled_gaussian
from privfair.generative.calibration import (
    MARGINAL_SHARE,
    Limit,
    anchor_pairs,
    count_rho,
    gan_small_n,
    noise_multiplier_on_ledger,
)
from privfair.generative.dag import CausalDAG, CausalGraphError, parse_dag
from privfair.generative.dpsgd import (
    GhostBatch,
    GroupClipping,
    clip_factors,
    ghost_batch,
    noisy_sum,
)
from privfair.generative.nets import (
    OneHotLayout,
    gumbel_from_uniform,
    hard_gumbel_softmax,
    mlp,
    torch_generator,
    uniform_draws,
)

__all__ = ["BASELINE_GAN_METHODS", "GAN_METHODS", "GAN_SETTINGS", "FittedGAN", "GANConfig",
           "fair_attributes", "fit_gan", "fit_gan_non_private"]

from privfair.generative import GAN_METHODS

BASELINE_GAN_METHODS: tuple[str, ...] = ("acgan",)
"""Methods a :class:`GANConfig` takes for comparisons (benchmarks, evaluation) that no release
offers: ``acgan`` is Xu's fairness-blind baseline of Tables 6.1/6.2 (§6.4.1.1)."""

GAN_SETTINGS: tuple[str, ...] = ("privfair", "xu2021")
"""Named settings: ``privfair`` (the project's defaults, tuned for few DP steps) and ``xu2021``
(the dissertation's choices, ch. 6-7: λ = μ = 1, the adversaries' V2/V3/J2 as sums of one
expectation per group, no anchors, and FairGAN+'s V3 and likelihood on real x)."""

_CLASSIFIER_FAIRNESS = ("dp", "eo", "eop")
_EFFECTS = ("te", "se", "ce")

Progress = Callable[[int, int, Mapping[str, float]], None]

# Settings whose default depends on the method, or on (method, effect) for CFGAN; a ``None``
# field takes these (benchmarks/results/gan_fairgan_tuning.jsonl, cfgan_table71_*.json).
_METHOD_DEFAULTS: dict[str, dict[str, float]] = {
    "fairgan": {"fairness_weight": 16.0, "generator_ema": 0.99},
    "cfgan:te": {"fairness_weight": 16.0}}
_DEFAULTS: dict[str, float | str] = {"fairness_weight": 4.0, "generator_ema": 0.0,
                                     "fairness_expectation": "pooled",
                                     "classifier_weight": 1.0, "classifier_rows": "generated",
                                     "anchor_weight": 2.0}
# The dissertation's settings (Xu 2021 §6.3 "λ = μ = 1", §7.3 "λ = 1 unless stated"; V3 and
# L take x from P_data; no anchor marginals), filled before the method defaults when
# ``setting="xu2021"``.
_SETTING_DEFAULTS: dict[str, dict[str, float | str]] = {
    "xu2021": {"fairness_weight": 1.0, "classifier_weight": 1.0, "anchor_weight": 0.0,
               "fairness_expectation": "per_group"},
    "xu2021:fairgan-plus": {"classifier_rows": "real_and_generated", "v3_rows": "real"}}
_CLASSIFIER_ROWS = ("generated", "real_and_generated")
_FAIRNESS_EXPECTATIONS = ("pooled", "per_group")
_V3_ROWS = ("generated", "real", "real_and_generated")


@dataclass(frozen=True)
class GANConfig:
    """Settings of a GAN fit; everything here is public and goes into the manifest.

    Parameters
    ----------
    method : {"dpgan", "fairgan", "fairgan-plus", "cfgan", "acgan"}
        ``dpgan`` is FairGAN without D2 (fairness-blind, conditional on S). ``acgan`` (a
        baseline, not offered by the release) is Xu's ACGAN (§6.4.1.1): G(z | y, s) with y
        and s drawn *independently* from the noisy P(Y) and P(S), aiming at
        P_G(X | Y, S) = P_data(X | Y, S) (the paper's words): D1 sees (x, y, s) as
        FairGAN+'s does, and the auxiliary classifier is the logistic regression η of y
        from x, trained on real rows (inside D1's DP-SGD step) and generated ones. It is
        FairGAN+ without D2 and D3. (An auxiliary head for s on x alone, an earlier reading,
        makes G maximise how well x predicts s: its Adult rows had BER .013 against the
        paper's .196 and the real rows' .154.)
    setting : {"privfair", "xu2021"}
        Whose choices fill the knobs left as None: ``privfair`` (the defaults below) or
        ``xu2021``, the dissertation's (λ = μ = 1, no anchor marginals; for FairGAN+
        ``classifier_rows = "real_and_generated"``). Knobs passed explicitly win over either.
    epochs : int
        Passes over the data in expectation (steps = epochs / q).
    batch_size : int
        Expected Poisson batch size b; the sampling rate is q = b / n̂ with n̂ the noisy count.
    fairness_weight : float, optional
        λ, the weight of D2 (FairGAN, FairGAN+) or D² (CFGAN). By default 16 for FairGAN and
        CFGAN's total effect, 4 for the others; 1 under ``setting="xu2021"``. With ~1,200 generator
        steps (the defaults on Adult), λ = 1 leaves the non-private FairGAN at RD(D) = .22,
        λ = 4 at .11 and λ = 16 (with ``generator_ema`` .99) at .02
        (benchmarks/results/gan_fairgan_tuning.jsonl). CFGAN(TE) on the binarised Adult
        leaves TE at .08 with λ = 4 and .02 with λ = 16; CFGAN(SE) removes the indirect
        effect at λ = 4 already, and λ = 16 doubles its χ² (cfgan_table71_*.json).
    fairness_loss : {"minimax", "capped"}
        What G maximises against D2 (and CFGAN's D²). ``minimax`` is the papers' game: the
        adversary's cross-entropy, which is unbounded, so G can win by making the adversary
        confidently *wrong* and the two oscillate. ``capped`` caps G's gain at the entropy of
        the prior (the noisy P(S), or 1/2 for CFGAN's s⁺/s⁻ streams), min(CE, H(prior)):
        once the adversary does no better than the prior, fooling it further earns nothing.
        Same fair fixed point; on Adult it kept utility but left RD(D) higher at equal λ
        (benchmarks/results/gan_fairgan_tuning.jsonl), so it is not the default.
    fairness_expectation : {"pooled", "per_group"}, optional
        How the fairness adversaries' log-likelihoods (FairGAN's and FairGAN+'s V2, FairGAN+'s
        V3, CFGAN's J2) average over the groups of S. ``pooled`` (the privfair default): one
        mean over the batch, so each group counts by its share (a third for Adult's women).
        ``per_group`` (``xu2021``): the papers' sum of one expectation per group,
        E_{S=1}[log D] + E_{S=0}[log(1 − D)] (Xu Eq. 6.2, 6.5-6.7, 7.x), each row weighted
        by 1/P(S = its s) with the (noisy) P(S) that conditions the generator, or 1 per
        interventional stream for CFGAN: every group counts fully, and the sum is about twice
        the pooled mean. One protected attribute only.
    adversary_steps : int
        Updates of the fairness adversaries (D2, and D3 for FairGAN+; CFGAN's D²) per
        generator step, each on a fresh generated batch. They see generated rows only, so
        extra steps cost no budget; a stronger adversary gives G a truer fairness signal.
    classifier_weight : float, optional
        μ, the weight of D3 (FairGAN+); 1 in both settings.
    classifier_rows : {"generated", "real_and_generated"}, optional
        Which rows FairGAN+'s classifier η and its fairness discriminator D3 learn from.
        ``generated`` (the privfair default): generated rows only, so η and D3 are
        post-processing and cost no budget. ``real_and_generated`` (``xu2021``): the paper's
        V3 takes x from the real data (§6.3) and its likelihood L from both; here η's and
        D3's gradients on each real Poisson batch are clipped *jointly with D1's* (one per-row
        norm over D1 ⊕ η ⊕ D3) and noised by the same DP-SGD step, so the charge is D1's,
        unchanged; the generated-row terms stay as in ``generated``.
    v3_rows : {"generated", "real", "real_and_generated"}, optional
        Which rows FairGAN+'s V3 (D3's game with η) is played on; by default those of
        ``classifier_rows``. ``real`` under ``xu2021``: the paper's V3 takes x ~ P(X | Y, S),
        the data (where its L names P_data and P_G apart), so D3 and η's −μ·V3 term see the
        real batch alone (inside D1's DP-SGD step). On generated rows, whose ŷ is drawn
        independently of s, D3 finds nothing and is pulled towards the prior, which dilutes
        its game on real rows. Reading real rows needs ``classifier_rows="real_and_generated"``.
    classifier_fairness : {"dp", "eo", "eop"}
        FairGAN+'s notion for its classifier: demographic parity, equalised odds, equal opportunity.
    effect : {"te", "se", "ce"}
        CFGAN's criterion: total effect, path-specific effect, counterfactual effect.
    redlining : tuple of str
        CFGAN ``se``: the redlining set R (indirect discrimination); empty means the direct
        path S → Y only.
    context : tuple of str
        CFGAN ``ce``: the context attributes O.
    constrained : tuple of str
        Protected attributes the fairness adversaries constrain besides ``protected`` (the
        one the generator is conditioned on): FairGAN's D2 and FairGAN+'s D3 get one head per
        attribute, CFGAN one D² per attribute (each binary), so no protected attribute is
        left an ordinary feature. Empty: ``protected`` only (the contract's
        ``fairness.protected``, by default every ``roles.protected``, is passed by the release).
    max_grad_norm : float
        Clipping bound C (C0 of DPSGD-F).
    group_clipping : bool
        DPSGD-F per-group bounds over the protected attribute's groups.
    count_noise_ratio : float
        DPSGD-F: σ1 = ratio · σ for the clipped counts.
    marginal_share : float
        Share of the ledger's remaining ε spent on the anchor counts (the (S, Y) counts and
        the anchor marginals), measured with the Gaussian mechanism before DP-SGD.
    anchor_weight : float, optional
        2 by default, 0 under ``xu2021`` (the papers' GANs have no anchors). Weight of the
        anchor loss: the generator's batch marginals against the noisy anchor
        marginals (mean TVD). 0 measures the (S, Y) counts only. The anchors are every
        (X, Y) pair, and for the fairness-blind ``dpgan`` also every (X, S) pair and
        (S, Y); the fair methods leave S's dependences to their adversaries.
    generator_ema : float, optional
        By default .99 for FairGAN (whose λ = 16 makes the game oscillate) and 0 for the
        others. 0 releases G's own weights; a decay d in (0, 1) releases their exponential moving
        average over generator steps (w̄ ← d·w̄ + (1 − d)·w), which damps the adversarial
        oscillation. Post-processing of G's (already DP) weights: no budget.
    patience, plateau_tol, min_epochs :
        Early stop when the generated one-way marginals move less than ``plateau_tol`` (TVD)
        for ``patience`` epochs in a row, after ``min_epochs``.
    device : str
        ``"auto"`` (CUDA when present, else CPU), ``"cpu"`` or ``"cuda"``.
    """

    method: str = "fairgan"
    setting: str = "privfair"
    epochs: int = 15
    batch_size: int = 500
    learning_rate: float = 3e-4
    noise_dim: int = 64
    hidden: int = 128
    discriminator_hidden: int = 64
    max_grad_norm: float = 1.0
    group_clipping: bool = False
    count_noise_ratio: float = 10.0
    fairness_weight: float | None = None
    fairness_loss: str = "minimax"
    fairness_expectation: str | None = None
    adversary_steps: int = 1
    classifier_weight: float | None = None
    classifier_rows: str | None = None
    v3_rows: str | None = None
    classifier_fairness: str = "dp"
    effect: str = "te"
    redlining: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    constrained: tuple[str, ...] = ()
    node_noise_dim: int = 8
    node_hidden: int = 64
    temperature: float = 0.5
    marginal_share: float = MARGINAL_SHARE
    anchor_weight: float | None = None
    generator_ema: float | None = None
    patience: int = 3
    plateau_tol: float = 0.005
    min_epochs: int = 5
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.setting not in GAN_SETTINGS:
            raise ValueError(f"setting must be one of {list(GAN_SETTINGS)}, "
                             f"got {self.setting!r}")
        for key in (self.setting, f"{self.setting}:{self.method}"):
            for name, value in _SETTING_DEFAULTS.get(key, {}).items():
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        for key in (self.method, f"{self.method}:{self.effect}"):
            for name, value in _METHOD_DEFAULTS.get(key, {}).items():
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        for name, value in _DEFAULTS.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        object.__setattr__(self, "redlining", tuple(self.redlining))
        object.__setattr__(self, "context", tuple(self.context))
        object.__setattr__(self, "constrained", tuple(self.constrained))
        if len(set(self.constrained)) != len(self.constrained):
            raise ValueError(f"constrained: an attribute is listed twice: {self.constrained}")
        if self.method not in GAN_METHODS + BASELINE_GAN_METHODS:
            raise ValueError(f"method must be one of {list(GAN_METHODS + BASELINE_GAN_METHODS)}"
                             f", got {self.method!r}")
        if self.classifier_rows not in _CLASSIFIER_ROWS:
            raise ValueError(f"classifier_rows must be one of {list(_CLASSIFIER_ROWS)}, "
                             f"got {self.classifier_rows!r}")
        if self.v3_rows is None:
            object.__setattr__(self, "v3_rows", self.classifier_rows)
        if self.v3_rows not in _V3_ROWS:
            raise ValueError(f"v3_rows must be one of {list(_V3_ROWS)}, got {self.v3_rows!r}")
        if self.v3_rows != "generated" and self.classifier_rows != "real_and_generated":
            raise ValueError(f"v3_rows={self.v3_rows!r} reads real rows: it needs "
                             "classifier_rows='real_and_generated'")
        if self.classifier_fairness not in _CLASSIFIER_FAIRNESS:
            raise ValueError(f"classifier_fairness must be one of {list(_CLASSIFIER_FAIRNESS)}"
                             f", got {self.classifier_fairness!r}")
        if self.fairness_loss not in ("minimax", "capped"):
            raise ValueError(f"fairness_loss must be 'minimax' or 'capped', "
                             f"got {self.fairness_loss!r}")
        if self.fairness_expectation not in _FAIRNESS_EXPECTATIONS:
            raise ValueError(f"fairness_expectation must be one of "
                             f"{list(_FAIRNESS_EXPECTATIONS)}, got {self.fairness_expectation!r}")
        if self.fairness_expectation == "per_group" and self.fairness_loss == "capped":
            raise ValueError("fairness_expectation='per_group' takes fairness_loss='minimax' "
                             "(the cap is the pooled prior's entropy)")
        if self.effect not in _EFFECTS:
            raise ValueError(f"effect must be one of {list(_EFFECTS)}, got {self.effect!r}")
        for name in ("epochs", "batch_size", "noise_dim", "hidden", "discriminator_hidden",
                     "node_noise_dim",
                     "node_hidden", "patience", "min_epochs", "adversary_steps"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("learning_rate", "max_grad_norm", "count_noise_ratio", "temperature"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("fairness_weight", "classifier_weight", "plateau_tol", "anchor_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= _filled(self.generator_ema, "generator_ema") < 1:
            raise ValueError(f"generator_ema must be in [0, 1), got {self.generator_ema!r}")
        if not 0 < self.marginal_share < 1:
            raise ValueError(f"marginal_share must be in (0, 1), got {self.marginal_share!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["redlining"] = list(self.redlining)
        out["context"] = list(self.context)
        out["constrained"] = list(self.constrained)
        return out


def _filled(value: float | None, name: str) -> float:
    """A :class:`GANConfig` knob given as None (the method's default), as ``__post_init__``
    filled it in."""
    if value is None:
        raise ValueError(f"GANConfig.{name}: no value and no default")
    return value


def fair_attributes(config: GANConfig, protected: str) -> tuple[str, ...]:
    """The protected attributes a GAN's fairness terms constrain: the conditioning one first."""
    return (protected, *(a for a in config.constrained if a != protected))


def _head(stem: str, attribute: str, protected: str) -> str:
    """An adversary's name: ``D2`` for the conditioning attribute (as before there were
    several), ``D2:<attribute>`` for each other constrained one."""
    return stem if attribute == protected else f"{stem}:{attribute}"


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


# --- generators ------------------------------------------------------------------------


class ConditionalGenerator(nn.Module):
    """G(z, c): an MLP from noise and the one-hot conditioning attributes to the others."""

    def __init__(self, layout: OneHotLayout, conditioned: tuple[str, ...], *, noise_dim: int,
                 hidden: int, temperature: float, generator: torch.Generator) -> None:
        super().__init__()
        self.layout = layout
        self.conditioned = conditioned
        self.outputs = tuple(a for a in layout.domain if a not in conditioned)
        self.noise_dim = noise_dim
        self.temperature = temperature
        cond_width = sum(layout.domain.size(a) for a in conditioned)
        self.widths = tuple(layout.domain.size(a) for a in self.outputs)
        self.body = mlp([noise_dim + cond_width, hidden, hidden, sum(self.widths)],
                        generator=generator)

    def forward(self, condition: Mapping[str, torch.Tensor], *, generator: torch.Generator
                ) -> dict[str, torch.Tensor]:
        first = condition[self.conditioned[0]]
        n, device = first.shape[0], first.device
        z = torch.randn((n, self.noise_dim), generator=generator, device=device)
        logits = self.body(torch.cat([z] + [condition[a] for a in self.conditioned], dim=1))
        gumbel = gumbel_from_uniform(torch.cat(
            uniform_draws(n, self.widths, generator=generator, device=device), dim=1))
        values = dict(condition)
        start = 0
        for a, size in zip(self.outputs, self.widths, strict=True):
            values[a] = hard_gumbel_softmax(logits[:, start:start + size],
                                            gumbel[:, start:start + size],
                                            temperature=self.temperature)
            start += size
        return values


class CausalGenerator(nn.Module):
    """CFGAN's generator: one sub-network per node of the DAG, run in topological order.

    The same sub-networks and the same exogenous noise serve the observational graph (G¹) and
    every interventional stream (G²), as in Xu §7.2.3.
    """

    def __init__(self, layout: OneHotLayout, dag: CausalDAG, *, noise_dim: int, hidden: int,
                 temperature: float, generator: torch.Generator) -> None:
        super().__init__()
        self.layout = layout
        self.dag = dag
        self.noise_dim = noise_dim
        self.temperature = temperature
        size = layout.domain.size
        # parents looked up once: run() visits every node several times a step
        self.parents = {v: dag.parents(v) for v in dag.nodes}
        self.nets = nn.ModuleDict({
            _key(v): mlp([noise_dim + sum(size(p) for p in self.parents[v]), hidden, size(v)],
                         generator=generator)
            for v in dag.nodes})

    def exogenous(self, n: int, *, generator: torch.Generator, device: torch.device
                  ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        # each node's normal then uniform draws in turn (the stream of one draw each), the
        # uniforms turned into Gumbel noise together
        z, widths, uniform = {}, [], []
        for v in self.dag.nodes:
            z[v] = torch.randn((n, self.noise_dim), generator=generator, device=device)
            widths.append(self.layout.domain.size(v))
            uniform.extend(uniform_draws(n, widths[-1:], generator=generator, device=device))
        gumbel = gumbel_from_uniform(torch.cat(uniform, dim=1)).split(widths, dim=1)
        return {v: (z[v], g) for v, g in zip(self.dag.nodes, gumbel, strict=True)}

    def run(self, noise: Mapping[str, tuple[torch.Tensor, torch.Tensor]], *,
            fixed: Mapping[str, torch.Tensor] | None = None,
            parent_value: Callable[[str, str, dict[str, torch.Tensor]], torch.Tensor]
            | None = None) -> dict[str, torch.Tensor]:
        values: dict[str, torch.Tensor] = {}
        for v in self.dag.nodes:
            if fixed is not None and v in fixed:
                values[v] = fixed[v]
                continue
            z, gumbel = noise[v]
            parents = [parent_value(p, v, values) if parent_value else values[p]
                       for p in self.parents[v]]
            logits = self.nets[_key(v)](torch.cat([z, *parents], dim=1))
            values[v] = hard_gumbel_softmax(logits, gumbel, temperature=self.temperature)
        return values


def _key(attribute: str) -> str:
    # ModuleDict keys may not contain dots.
    return "n" + attribute.encode().hex()


# --- the fitted artefact -----------------------------------------------------------------


@dataclass
class FittedGAN:
    """A trained generator and what is needed to sample from it (all post-noise).

    ``privacy`` holds the DP-SGD parameters (σ, C, q, steps, steps run) and the marginal
    measurement's σ; ``marginals`` the noisy P(S) and P(Y) that condition sampling;
    ``anchors`` the noisy pair marginals (normalised) the generator was pulled towards, kept
    so that the release can score the generator against the independence model of the same
    DP outputs (issue 42.1).
    """

    config: GANConfig
    domain: Domain
    protected: str
    outcome: str
    marginals: dict[str, list[float]]
    expected_rows: int
    privacy: dict[str, Any]
    dag: CausalDAG | None
    generator_state: dict[str, np.ndarray]
    classifier_state: dict[str, np.ndarray] | None = None
    history: list[dict[str, float]] = field(default_factory=list)
    anchors: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    #: Set when the small-n rule chose the independence model instead of training
    #: (:func:`gan_small_n`): each attribute's noisy one-way marginal; no generator.
    independence: dict[str, list[float]] | None = None

    @property
    def non_private(self) -> bool:
        """True for :func:`fit_gan_non_private`'s generators: no DP guarantee, never released."""
        return bool(self.privacy.get("non_private", False))

    def _generator(self, device: torch.device) -> nn.Module:
        init = torch.Generator().manual_seed(0)
        net = _build_generator(self.config, OneHotLayout(self.domain), self.dag,
                               self.protected, self.outcome, init)
        net.load_state_dict({k: torch.as_tensor(v) for k, v in self.generator_state.items()})
        return net.to(device).eval()

    def sample(self, n: int, *, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` synthetic rows as integer code columns (domain order)."""
        if not (isinstance(n, int | np.integer) and n >= 0):
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if self.independence is not None:  # the small-n rule's model: columns on their own
            return {a: rng.choice(self.domain.size(a), size=int(n),
                                  p=np.asarray(self.independence[a])).astype(np.int64)
                    for a in self.domain}
        device = _device(self.config.device)
        gen = torch_generator(rng, device)
        net = self._generator(device)
        layout = OneHotLayout(self.domain)
        parts = []
        with torch.no_grad():
            for start in range(0, int(n), 8192):
                m = min(8192, int(n) - start)
                values = _generate(net, self.config, self.domain, self.protected, self.outcome,
                                   self.marginals, m, gen, device)
                parts.append(torch.cat([values[a] for a in self.domain], dim=1))
        rows = torch.cat(parts) if parts else torch.zeros((0, layout.width))
        return layout.decode(rows)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the weights, as JSON-ready values (for the manifest)."""
        return {"config": self.config.to_dict(), "domain": self.domain.to_dict(),
                "protected": self.protected, "outcome": self.outcome,
                "marginals": self.marginals, "expected_rows": self.expected_rows,
                "privacy": self.privacy, "dag": self.dag.to_dict() if self.dag else None,
                "history": self.history, "independence": self.independence}

    def to_bytes(self) -> bytes:
        """One ``.npz`` (weights, and the rest as a JSON string entry); no pickle."""
        arrays = {f"g/{k}": v for k, v in self.generator_state.items()}
        if self.classifier_state is not None:
            arrays.update({f"classifier/{k}": v for k, v in self.classifier_state.items()})
        pairs = list(self.anchors)
        arrays.update({f"anchor/{k}": np.asarray(self.anchors[p], dtype=float)
                       for k, p in enumerate(pairs)})
        arrays["meta"] = np.array(json.dumps({**self.to_dict(),
                                              "anchor_order": [list(p) for p in pairs]}))
        buffer = io.BytesIO()
        # mypy matches **arrays against savez's `allow_pickle: bool`; the keys are g/…,
        # classifier/…
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        return buffer.getvalue()

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> FittedGAN:
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            gen = {k[2:]: data[k] for k in data.files if k.startswith("g/")}
            # "eta/": files written before the classifier's rename (issue 33.5)
            classifier = {k.partition("/")[2]: data[k] for k in data.files
                          if k.startswith(("classifier/", "eta/"))} or None
            anchors = {(str(a), str(b)): np.asarray(data[f"anchor/{k}"])
                       for k, (a, b) in enumerate(meta.get("anchor_order", []))}
        dag = meta["dag"]
        return cls(config=GANConfig(**meta["config"]), domain=Domain.from_dict(meta["domain"]),
                   protected=meta["protected"], outcome=meta["outcome"],
                   marginals=meta["marginals"], expected_rows=meta["expected_rows"],
                   privacy=meta["privacy"],
                   dag=CausalDAG(nodes=tuple(dag["nodes"]),
                                 edges=tuple(tuple(e) for e in dag["edges"]),
                                 oriented=tuple(tuple(e)
                                                for e in dag["oriented_from_undirected"]))
                   if dag else None,
                   generator_state=gen, classifier_state=classifier,
                   history=meta["history"], anchors=anchors,
                   independence=meta.get("independence"))


def _conditioned(config: GANConfig, protected: str, outcome: str) -> tuple[str, ...]:
    # FairGAN+ and ACGAN draw s and y independently from the noisy marginals (Xu §6.3, §6.4.1.1)
    if config.method in ("fairgan-plus", "acgan"):
        return (protected, outcome)
    return (protected,)


def _build_generator(config: GANConfig, layout: OneHotLayout, dag: CausalDAG | None,
                     protected: str, outcome: str, generator: torch.Generator) -> nn.Module:
    if config.method == "cfgan":
        assert dag is not None
        return CausalGenerator(layout, dag, noise_dim=config.node_noise_dim,
                               hidden=config.node_hidden, temperature=config.temperature,
                               generator=generator)
    return ConditionalGenerator(layout, layout.domain.canonical(
        _conditioned(config, protected, outcome)), noise_dim=config.noise_dim,
        hidden=config.hidden, temperature=config.temperature, generator=generator)


def _draw_onehot(probs: list[float], n: int, gen: torch.Generator,
                 device: torch.device) -> torch.Tensor:
    p = torch.as_tensor(probs, dtype=torch.float32, device=device)
    index = torch.multinomial(p, n, replacement=True, generator=gen) if n else \
        torch.zeros(0, dtype=torch.long, device=device)
    return F.one_hot(index, len(probs)).to(torch.float32)


def _generate(net: nn.Module, config: GANConfig, domain: Domain, protected: str,
              outcome: str, marginals: Mapping[str, list[float]], n: int,
              gen: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Observational rows: G¹ for CFGAN, G(z | s) or G(z | y, s) otherwise."""
    if isinstance(net, CausalGenerator):
        return net.run(net.exogenous(n, generator=gen, device=device))
    condition = {a: _draw_onehot(marginals[a], n, gen, device)
                 for a in _conditioned(config, protected, outcome)}
    return net(condition, generator=gen)


# --- training -----------------------------------------------------------------------------


def _check_inputs(config: GANConfig, domain: Domain, protected: str, outcome: str,
                  dag: Any) -> CausalDAG | None:
    for name, value in (("protected", protected), ("outcome", outcome)):
        if value not in domain:
            raise ValueError(f"{name}: attribute {value!r} is not in the declared domain")
    if protected == outcome:
        raise ValueError("protected and outcome must be different attributes")
    for name in ("redlining", "context", "constrained"):
        unknown = [a for a in getattr(config, name) if a not in domain]
        if unknown:
            raise ValueError(f"{name}: attributes {unknown} are not in the declared domain")
    if outcome in config.constrained:
        raise ValueError(f"constrained: the outcome {outcome!r} is not a protected attribute")
    if config.fairness_expectation == "per_group" and len(fair_attributes(config,
                                                                          protected)) > 1:
        raise ValueError("constrained: fairness_expectation='per_group' weights the groups of "
                         f"the protected attribute {protected!r} alone; constrain no other")
    if config.method != "cfgan":
        return None
    if dag is None:
        raise CausalGraphError(
            "cfgan needs a causal graph over the contract's attributes (causal_graph)")
    fair = fair_attributes(config, protected)
    for attribute in fair:
        if domain.size(attribute) != 2:
            raise ValueError(f"cfgan: protected attribute {attribute!r} must be binary "
                             f"(s+ = code 1, s- = code 0), it has {domain.size(attribute)} "
                             f"codes")
    parsed = parse_dag(dag, domain, protected=fair, outcome=(outcome,))
    if config.effect == "ce" and not config.context:
        raise ValueError("cfgan effect 'ce' needs context attributes (context)")
    return parsed


@dataclass
class _Adversary:
    net: nn.Sequential
    optimiser: torch.optim.Optimizer
    outputs: int


def _adam(module: nn.Module, lr: float) -> torch.optim.Optimizer:
    # foreach: one multi-tensor update instead of a Python loop over the parameters (CFGAN's
    # generator has 44); the same arithmetic per element, bit for bit on the CPU
    # (benchmarks/gan_cell_speed.py, tests/test_gan_speed.py)
    return torch.optim.Adam(module.parameters(), lr=lr, betas=(0.5, 0.9), foreach=True)


class _Trainer:
    """One fit. Only :meth:`d1_private_step` reads ``self._real``."""

    def __init__(self, config: GANConfig, domain: Domain, protected: str, outcome: str,
                 dag: CausalDAG | None, marginals: dict[str, list[float]],
                 gen: torch.Generator, device: torch.device, expected_batch: float,
                 anchors: Mapping[tuple[str, str], np.ndarray] | None = None) -> None:
        self.config, self.domain, self.dag = config, domain, dag
        self.anchors = {pair: torch.as_tensor(p, dtype=torch.float32, device=device)
                        for pair, p in (anchors or {}).items()}
        self.protected, self.outcome = protected, outcome
        self.marginals = marginals
        self.gen, self.device = gen, device
        self.layout = layout = OneHotLayout(domain)
        self.expected_batch = expected_batch
        # Parameters are initialised on the CPU from a seed drawn from the run's generator,
        # so a CPU fit and a GPU fit start from the same weights.
        init = torch.Generator().manual_seed(
            int(torch.randint(2**62, (1,), generator=gen, device=device).item()))
        self.generator = _build_generator(config, layout, dag, protected, outcome,
                                          init).to(device)
        d = config.discriminator_hidden
        s_size, y_size = domain.size(protected), domain.size(outcome)
        self.x_only = layout.columns([a for a in domain if a not in (protected, outcome)])
        # column lists as index tensors, built once (index_select copies the same entries)
        self.x_only_index = torch.tensor(self.x_only, dtype=torch.long, device=device)
        # ACGAN's auxiliary classifier of y is the logistic regression η (Xu §6.4.1.1), below;
        # its D1 is the conditional one of the other methods (P_G(X|Y,S) = P_data(X|Y,S)).
        self.acgan = config.method == "acgan"
        self.d1 = mlp([layout.width, d, d, 1], generator=init, leaky=True).to(device)
        self.g_opt = _adam(self.generator, config.learning_rate)
        self.ema = ({k: v.detach().clone() for k, v in self.generator.state_dict().items()}
                    if _filled(config.generator_ema, "generator_ema") > 0 else None)
        self.d1_opt = _adam(self.d1, config.learning_rate)
        self.fair = fair_attributes(config, protected)
        # D2 sees neither protected attribute it constrains: one head per attribute, each
        # asked to find its attribute in the generated (X, Y) alone.
        self.not_s = layout.columns([a for a in domain if a not in self.fair])
        self.not_s_index = torch.tensor(self.not_s, dtype=torch.long, device=device)
        # the per_group weights' P(S), clamped as group_weights needs it
        self.protected_prior = torch.as_tensor(
            marginals[protected], dtype=torch.float32, device=device).clamp_min(1e-3)
        # FairGAN+ under xu2021, and ACGAN: η (and FairGAN+'s D3) also learn from real rows,
        # inside D1's DP-SGD step; their noisy gradients wait here for the next public step.
        self.classifier_reads_real = self.acgan or (
            config.method == "fairgan-plus" and config.classifier_rows == "real_and_generated")
        self.d3_attributes = self.fair if config.method == "fairgan-plus" else ()
        # where FairGAN+'s V3 is played: the real batch (inside DP-SGD), generated rows, both
        self.v3_real = self.classifier_reads_real and config.v3_rows != "generated"
        self.v3_generated = config.v3_rows != "real"
        self.private_grads: dict[str, dict[str, torch.Tensor]] = {}
        self.adversaries: dict[str, _Adversary] = {}

        def adversary(name: str, width: int, out: int, hidden: int) -> None:
            net = mlp([width, hidden, out], generator=init, leaky=True).to(device)
            self.adversaries[name] = _Adversary(net, _adam(net, config.learning_rate), out)

        if config.method in ("fairgan", "fairgan-plus"):
            adversary("D2", len(self.not_s), s_size, d)
        if config.method in ("fairgan-plus", "acgan"):
            self.classifier = seeded_linear(len(self.x_only), y_size, init).to(device)
            self.classifier_opt = _adam(self.classifier, config.learning_rate * 5)
        if config.method == "fairgan-plus":
            d3_in = y_size + (y_size if config.classifier_fairness != "dp" else 0)
            adversary("D3", d3_in, s_size, 32)
        if config.method == "cfgan":
            width = y_size + (len(layout.columns(config.context)) if config.effect == "ce"
                              else 0)
            adversary("D2", width, 1, 32)
        self.path_edges = {a: (dag.path_edges(a, outcome, through=config.redlining or None)
                               if dag is not None and config.effect == "se" else frozenset())
                           for a in self.fair} if config.method == "cfgan" else {}
        # the other constrained attributes' heads come after, so one attribute trains as before
        for attribute in self.fair[1:]:
            size = domain.size(attribute)
            if config.method in ("fairgan", "fairgan-plus"):
                adversary(f"D2:{attribute}", len(self.not_s), size, d)
            if config.method == "fairgan-plus":
                adversary(f"D3:{attribute}", d3_in, size, 32)
            if config.method == "cfgan":
                adversary(f"D2:{attribute}", width, 1, 32)

    # -- private side ------------------------------------------------------------------

    @staticmethod
    def d1_row_loss(*, real: bool) -> Callable[[torch.Tensor], torch.Tensor]:
        """D1's loss per row, the rows labelled real or fake."""
        target = 1.0 if real else 0.0

        def loss(logit: torch.Tensor) -> torch.Tensor:
            return F.binary_cross_entropy_with_logits(
                logit[:, 0], torch.full_like(logit[:, 0], target), reduction="none")

        return loss

    def d1_private_step(self, real: torch.Tensor, group: torch.Tensor, *, sample_rate: float,
                        expected_batch: float, noise: SubsampledGaussian | None,
                        clipping: GroupClipping | None) -> None:
        """One DP-SGD step of D1 on a Poisson batch of ``real``; ``noise`` (the layer's,
        charged for every step) noises its clipped gradient sum and, with ``clipping``,
        the per-group counts. With ``classifier_rows="real_and_generated"`` the same step
        also gives η's and D3's gradients on the batch: each row's D1 ⊕ η ⊕ D3 gradient is
        clipped as one vector, so one noisy sum of it is one Gaussian release, the charged one.

        ``noise=None`` is :func:`fit_gan_non_private`'s plain minibatch gradient: no clipping,
        no noise."""
        cfg = self.config
        mask = torch.rand(real.shape[0], generator=self.gen, device=self.device) < sample_rate
        batch = real[mask]
        parts = {"D1": ghost_batch(self.d1, self.d1_row_loss(real=True), batch)}
        if self.classifier_reads_real:
            parts.update(self.classifier_batches(batch))
        norms = torch.sqrt(functools.reduce(operator.add,
                                            (part.norms.pow(2) for part in parts.values())))
        clip = cfg.max_grad_norm
        if noise is None:
            factors = torch.ones_like(norms)
        else:
            if clipping is None:
                bounds = torch.full_like(norms, cfg.max_grad_norm)
            else:
                batch_group = group[mask]
                per_group = clipping.bounds(norms, batch_group, expected_batch=expected_batch,
                                            noise=noise, generator=self.gen)
                bounds, clip = per_group[batch_group], float(per_group.max())
            factors = clip_factors(norms, bounds)
        private: dict[str, dict[str, torch.Tensor]] = {}
        for key, part in parts.items():
            total = part.weighted_sum(factors)
            private[key] = ({k: g / expected_batch for k, g in total.items()} if noise is None
                            else noisy_sum(total, noise=noise, clip_bound=clip,
                                           expected_batch=expected_batch, generator=self.gen))
        fake_n = max(1, round(expected_batch))
        with torch.no_grad():
            fake = self.rows(self.generate(fake_n))
        # Generated rows are public, but their gradients are clipped to the same bound as the
        # real ones: with the real side clipped and the fake side not, D1 learns mostly to
        # push every row down and the generator's signal collapses.
        fake_batch = ghost_batch(self.d1, self.d1_row_loss(real=False), fake)
        fake_sum = fake_batch.weighted_sum(
            torch.ones_like(fake_batch.norms) if noise is None else
            clip_factors(fake_batch.norms, torch.full_like(fake_batch.norms, clip)))
        self.d1_opt.zero_grad(set_to_none=True)
        for name, p in self.d1.named_parameters():
            p.grad = private["D1"][name] + fake_sum[name] / fake_n
        self.d1_opt.step()
        self.private_grads = {key: grads for key, grads in private.items() if key != "D1"}

    def classifier_batches(self, batch: torch.Tensor) -> dict[str, GhostBatch]:
        """Per-row gradients on real rows of η (the paper's L on real x, minus μ·V3 for
        FairGAN+; ACGAN's auxiliary classifier loss) and of each D3 head (V3), for
        :meth:`d1_private_step` to clip and noise with D1's."""
        cfg, span = self.config, self.layout.span
        x = batch.index_select(1, self.x_only_index)
        y_onehot = batch[:, span(self.outcome)]
        y = y_onehot.argmax(1)
        mode = cfg.classifier_fairness
        # equal opportunity: V3 on the positive rows only
        keep = ((y == y_onehot.shape[1] - 1).to(x.dtype) if mode == "eop"
                else torch.ones_like(x[:, 0]))
        heads = [(_head("D3", a, self.protected), batch[:, span(a)].argmax(1))
                 for a in (self.d3_attributes if self.v3_real else ())]
        weight = _filled(cfg.classifier_weight, "classifier_weight")

        def d3_input(probs: torch.Tensor) -> torch.Tensor:
            return probs if mode == "dp" else torch.cat([probs, y_onehot], dim=1)

        def classifier_loss(logits: torch.Tensor) -> torch.Tensor:
            loss = F.cross_entropy(logits, y, reduction="none")
            d3_in = d3_input(torch.softmax(logits, dim=1))
            for name, s in heads:
                loss = loss - weight * keep * self.group_weights(s) * F.cross_entropy(
                    self.adversaries[name].net(d3_in), s, reduction="none")
            return loss

        out = {"classifier": ghost_batch(self.classifier, classifier_loss, x)}
        with torch.no_grad():
            d3_in = d3_input(torch.softmax(self.classifier(x), dim=1))
        for name, s in heads:
            def d3_loss(logit: torch.Tensor, s: torch.Tensor = s) -> torch.Tensor:
                return keep * self.group_weights(s) * F.cross_entropy(logit, s,
                                                                      reduction="none")

            out[name] = ghost_batch(self.adversaries[name].net, d3_loss, d3_in)
        return out

    def add_private_grads(self, key: str, module: nn.Module) -> bool:
        """Add the real rows' noisy gradient of ``module`` (left by the last D1 step) to
        its ``.grad``; False when there is none and no generated-row gradient either."""
        grads = self.private_grads.pop(key, None)
        if grads is not None:
            for name, p in module.named_parameters():
                p.grad = grads[name] if p.grad is None else p.grad + grads[name]
        return any(p.grad is not None for p in module.parameters())

    # -- generated side only -------------------------------------------------------------

    def generate(self, n: int) -> dict[str, torch.Tensor]:
        return _generate(self.generator, self.config, self.domain, self.protected,
                         self.outcome, self.marginals, n, self.gen, self.device)

    def rows(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([values[a] for a in self.domain], dim=1)

    def fairness_terms(self, n: int) -> tuple[dict[str, torch.Tensor], list[tuple[str,
                                              torch.Tensor, torch.Tensor]]]:
        """Generated observational values and (adversary, input, target) triples, all built
        from generator output."""
        cfg = self.config
        if cfg.method == "cfgan":
            return self._cfgan_terms(n)
        values = self.generate(n)
        terms: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        if cfg.method in ("fairgan", "fairgan-plus"):
            rows = self.rows(values).index_select(1, self.not_s_index)
            for attribute in self.fair:
                terms.append((_head("D2", attribute, self.protected), rows,
                              values[attribute].argmax(1)))
        return values, terms

    def _cfgan_terms(self, n: int) -> tuple[dict[str, torch.Tensor],
                                            list[tuple[str, torch.Tensor, torch.Tensor]]]:
        cfg, net = self.config, self.generator
        assert isinstance(net, CausalGenerator)
        noise = net.exogenous(n, generator=self.gen, device=self.device)
        observed = net.run(noise)
        s_plus = torch.zeros((n, 2), device=self.device)
        s_plus[:, 1] = 1
        s_minus = 1 - s_plus
        terms = []
        for attribute in self.fair:
            if cfg.effect == "se":
                reference = net.run(noise, fixed={attribute: s_minus})
                edges = self.path_edges[attribute]

                def along(p: str, v: str, vals: dict[str, torch.Tensor],
                          edges: frozenset[tuple[str, str]] = edges,
                          ref: dict[str, torch.Tensor] = reference) -> torch.Tensor:
                    return vals[p] if (p, v) in edges else ref[p]

                plus = net.run(noise, fixed={attribute: s_plus}, parent_value=along)
                minus = reference
            else:
                plus = net.run(noise, fixed={attribute: s_plus})
                minus = net.run(noise, fixed={attribute: s_minus})
            y_plus, y_minus = plus[self.outcome], minus[self.outcome]
            if cfg.effect == "ce":
                context = torch.cat([observed[a] for a in self.domain.canonical(cfg.context)],
                                    dim=1)
                y_plus = torch.cat([y_plus, context], dim=1)
                y_minus = torch.cat([y_minus, context], dim=1)
            inputs = torch.cat([y_plus, y_minus])
            target = torch.cat([torch.ones(n, device=self.device),
                                torch.zeros(n, device=self.device)])
            terms.append((_head("D2", attribute, self.protected), inputs, target))
        return observed, terms

    def group_weights(self, target: torch.Tensor, *, streams: bool = False) -> torch.Tensor:
        """Per-row weights of an adversary's log-likelihood: 1 (``pooled``), or under
        ``per_group`` 1/P(S = s) with the conditioning P(S) (public: noisy or generator
        input), 2 for CFGAN's two equal interventional ``streams``, so that the batch mean is
        the sum of the groups' own means."""
        if self.config.fairness_expectation != "per_group":
            return torch.ones(target.shape[0], device=target.device)
        if streams:
            return torch.full((target.shape[0],), 2.0, device=target.device)
        return 1.0 / self.protected_prior[target]

    def _adversary_loss(self, name: str, inputs: torch.Tensor,
                        target: torch.Tensor) -> torch.Tensor:
        out = self.adversaries[name].net(inputs)
        if out.shape[1] == 1:
            rows = F.binary_cross_entropy_with_logits(out[:, 0], target.to(out.dtype),
                                                      reduction="none")
            return (rows * self.group_weights(target, streams=True)).mean()
        rows = F.cross_entropy(out, target, reduction="none")
        return (rows * self.group_weights(target)).mean()

    def _prior_entropy(self, name: str, target: torch.Tensor | None = None) -> torch.Tensor:
        """Cross-entropy of an adversary that can only say the prior."""
        adversary = self.adversaries[name]
        if adversary.outputs == 1:  # CFGAN's D²: s⁺ vs s⁻ streams, 1/2 each
            return torch.tensor(math.log(2.0), device=self.device)
        if ":" in name and target is not None:  # another constrained attribute: its share
            # in the generated batch (public: generator output)
            counts = torch.bincount(target, minlength=adversary.outputs).to(torch.float32)
            prior = counts / counts.sum().clamp_min(1.0)
        else:
            prior = torch.as_tensor(self.marginals[self.protected], dtype=torch.float32,
                                    device=self.device)
        return -(prior * torch.log(prior.clamp_min(1e-12))).sum()

    def _d3_terms(self, values: Mapping[str, torch.Tensor], classifier_probs: torch.Tensor,
                  attribute: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        s = values[attribute].argmax(1)
        y = values[self.outcome]
        mode = self.config.classifier_fairness
        if mode == "dp":
            return classifier_probs, s
        inputs = torch.cat([classifier_probs, y], dim=1)
        if mode == "eop":
            keep = y.argmax(1) == y.shape[1] - 1
            if not bool(keep.any()):
                return None
            return inputs[keep], s[keep]
        return inputs, s

    def public_step(self) -> float:
        """Adversaries, η and G, on generated rows only; returns G's loss."""
        cfg = self.config
        n = max(1, round(self.expected_batch))
        for _ in range(cfg.adversary_steps - 1):
            with torch.no_grad():
                _, extra = self.fairness_terms(n)
            for name, inputs, target in extra:
                adv = self.adversaries[name]
                adv.optimiser.zero_grad(set_to_none=True)
                self._adversary_loss(name, inputs, target).backward()
                adv.optimiser.step()
        values, terms = self.fairness_terms(n)
        for name, inputs, target in terms:
            adv = self.adversaries[name]
            adv.optimiser.zero_grad(set_to_none=True)
            self._adversary_loss(name, inputs.detach(), target).backward()
            adv.optimiser.step()
        x_hat = self.rows(values).index_select(1, self.x_only_index)
        y_idx = values[self.outcome].argmax(1)
        if cfg.method in ("fairgan-plus", "acgan"):
            self.classifier_opt.zero_grad(set_to_none=True)
            probs = torch.softmax(self.classifier(x_hat.detach()), dim=1)
            classifier_loss = F.nll_loss(torch.log(probs + 1e-12), y_idx)
            fixed = {k: v.detach() for k, v in values.items()}
            weight = _filled(cfg.classifier_weight, "classifier_weight")
            for attribute in (self.d3_attributes if self.v3_generated else ()):
                d3 = self._d3_terms(fixed, probs, attribute)
                if d3 is not None:
                    classifier_loss = classifier_loss - weight * self._adversary_loss(
                        _head("D3", attribute, self.protected), *d3)
            classifier_loss.backward()
            self.add_private_grads("classifier", self.classifier)
            self.classifier_opt.step()
            probs = torch.softmax(self.classifier(x_hat.detach()), dim=1).detach()
            for attribute in self.d3_attributes:
                d3 = self._d3_terms(fixed, probs, attribute) if self.v3_generated else None
                name = _head("D3", attribute, self.protected)
                adv = self.adversaries[name]
                adv.optimiser.zero_grad(set_to_none=True)
                if d3 is not None:
                    self._adversary_loss(name, *d3).backward()
                if self.add_private_grads(name, adv.net):
                    adv.optimiser.step()
        self.g_opt.zero_grad(set_to_none=True)
        rows = self.rows(values)
        # non-saturating −log D1(fake)
        g_loss = self.d1_row_loss(real=True)(self.d1(rows)).mean()
        for name, inputs, target in terms:
            if cfg.fairness_loss == "capped":
                gain = torch.minimum(self._adversary_loss(name, inputs, target),
                                     self._prior_entropy(name, target))
                g_loss = g_loss - _filled(cfg.fairness_weight, "fairness_weight") * gain
            else:
                g_loss = g_loss - _filled(cfg.fairness_weight, "fairness_weight") * (
                    self._adversary_loss(name, inputs, target))
        if cfg.method in ("fairgan-plus", "acgan"):  # η(x̂) should predict G's own y
            g_loss = g_loss + F.cross_entropy(self.classifier(x_hat), y_idx)
        anchor_weight = _filled(cfg.anchor_weight, "anchor_weight")
        if self.anchors and anchor_weight > 0:
            g_loss = g_loss + anchor_weight * self.anchor_loss(values)
        g_loss.backward()
        self.g_opt.step()
        if self.ema is not None:
            with torch.no_grad():
                for name, value in self.generator.state_dict().items():
                    if value.dtype.is_floating_point:
                        self.ema[name].lerp_(
                            value, 1.0 - _filled(cfg.generator_ema, "generator_ema"))
                    else:
                        self.ema[name].copy_(value)
        # Gradients of the discriminators from G's step are discarded by their zero_grad.
        return float(g_loss.detach())

    def anchor_loss(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Mean TVD between the batch's pair marginals and the noisy anchors (the hard rows'
        joint, with the straight-through gradient of the relaxed samples)."""
        n = next(iter(values.values())).shape[0]
        total = torch.zeros((), device=self.device)
        for (a, b), target in self.anchors.items():
            joint = values[a].T @ values[b] / n
            total = total + 0.5 * (joint - target).abs().sum()
        return total / len(self.anchors)

    def epoch_score(self, n: int = 4096) -> dict[str, float]:
        """What the training history records of the current generator, all post-noise: the
        mean TVD of its pair marginals to the noisy anchors and, for FairGAN and FairGAN+,
        the risk difference of its own generated rows."""
        with torch.no_grad():
            values = self.generate(n)
            out: dict[str, float] = {}
            if self.anchors:
                out["anchor_tvd"] = float(self.anchor_loss(values))
            if self.config.method in ("fairgan", "fairgan-plus"):
                s = values[self.protected].argmax(1)
                positive = values[self.outcome][:, -1]
                rates = [float(positive[s == k].mean()) for k in range(values[
                    self.protected].shape[1]) if bool((s == k).any())]
                out["generated_rd"] = max(rates) - min(rates) if rates else 0.0
        return out

    def marginal_snapshot(self, n: int = 2048) -> np.ndarray:
        with torch.no_grad():
            rows = self.rows(self.generate(n))
        return rows.mean(0).cpu().numpy()


def seeded_linear(width: int, out: int, generator: torch.Generator) -> nn.Sequential:
    return mlp([width, out], generator=generator)


def _measure_counts(codes: Mapping[str, np.ndarray], domain: Domain, *, ledger: Any,
                    rng: np.random.Generator, share: float, discrete: bool,
                    protected: str, outcome: str, pairs: tuple[tuple[str, str], ...]
                    ) -> tuple[dict[str, list[float]], dict[tuple[str, str], np.ndarray],
                               float, float]:
    """P(S), P(Y), n̂ and the anchor marginals, from Gaussian measurements of the (S, Y)
    counts and of each anchor pair's counts (one mechanism each, one σ for all)."""
    from privfair.core.accounting import gaussian_sigma

    measured = [(protected, outcome)] + [p for p in pairs if p != (protected, outcome)]
    rho = count_rho(ledger, share)
    sigma = gaussian_sigma(rho=rho / len(measured), sensitivity=1.0)

    def counts(a: str, b: str) -> np.ndarray:
        joint = np.zeros((domain.size(a), domain.size(b)), dtype=np.int64)
        np.add.at(joint, (codes[a], codes[b]), 1)
        noisy = gaussian_mechanism(joint, sigma=sigma, sensitivity=1.0, rng=rng,
                                   ledger=ledger, discrete=discrete,
                                   name=(f"GAN conditioning: counts of ({a}, {b})"
                                         if (a, b) == (protected, outcome)
                                         else f"GAN anchor: counts of ({a}, {b})"))
        return np.clip(noisy, 0.0, None)

    def normalise(v: np.ndarray) -> np.ndarray:
        return v / v.sum() if v.sum() > 0 else np.full(v.shape, 1.0 / v.size)

    sy = counts(protected, outcome)
    n_hat = max(float(sy.sum()), 1.0)
    anchors = {pair: normalise(counts(*pair)) for pair in measured[1:]}
    if (protected, outcome) in pairs:
        anchors[(protected, outcome)] = normalise(sy)
    marginals = {protected: normalise(sy.sum(1)).tolist(),
                 outcome: normalise(sy.sum(0)).tolist()}
    return marginals, anchors, n_hat, sigma


def dpsgd_schedule(config: GANConfig, *, rows: float) -> tuple[float, int]:
    """D1's Poisson rate q = min(1, batch/rows) and its number of steps (epochs × ⌈1/q⌉)."""
    sample_rate = min(1.0, config.batch_size / max(float(rows), 1.0))
    return sample_rate, config.epochs * max(1, math.ceil(1 / sample_rate))


def dpsgd_charges(config: GANConfig, *, sample_rate: float, steps: int,
                  sigma: float) -> list[dict[str, Any]]:
    """The ledger charges (``spend_subsampled_gaussian`` arguments) of D1's DP-SGD at σ."""
    if not config.group_clipping:
        return [{"name": "GAN D1 gradients (DP-SGD)", "noise_multiplier": sigma,
                 "sample_rate": sample_rate, "steps": steps,
                 "sensitivity": config.max_grad_norm}]
    # DPSGD-F: the gradient sum (noise σC, sensitivity C ≤ cap·C0) and the clipped counts
    # (noise σ1 = ratio·σ, sensitivity 1) come from the same Poisson batch: one subsampled
    # Gaussian at σ_eff = (σ⁻² + σ1⁻²)^(−1/2), recorded with noise σC (issue 21.5).
    ratio = config.count_noise_ratio
    bound = GroupClipping.cap * config.max_grad_norm
    return [{"name": "GAN D1 gradients and clipped counts (DPSGD-F, one subsampled "
                     "Gaussian)",
             "noise_multiplier": joint_noise_multiplier(sigma, ratio * sigma),
             "sample_rate": sample_rate, "steps": steps,
             "sensitivity": bound * math.sqrt(1 + ratio**-2)}]


def dpsgd_calibration(ledger: Any, config: GANConfig, *, rows: float,
                      limit: Limit | None = None) -> tuple[float, float, int]:
    """D1's σ, Poisson rate q and steps T at the noisy row count ``rows``: q and T from
    :func:`dpsgd_schedule`, σ the smallest that ``ledger`` (holding the run's charges so far)
    accepts and, with a ``limit``, that keeps the run's whole curve under it at every order.

    q and T follow the noisy count, so the curve charged is the run's own for that count; the
    ``limit`` of a release is its declared curve, fixed before any read, which bounds the
    curve whichever count was drawn (the proof: :mod:`privfair.release.kinds.gan.stages`).
    Taking the σ the ledger alone allows, whose curve converts to ε at its own best order,
    is no proof: the supremum over the counts converts to more (issue 41.3)."""
    sample_rate, steps = dpsgd_schedule(config, rows=rows)

    def charges(sigma: float) -> list[dict[str, Any]]:
        return dpsgd_charges(config, sample_rate=sample_rate, steps=steps, sigma=sigma)

    return noise_multiplier_on_ledger(ledger, charges=charges, limit=limit), sample_rate, steps


def _fallback_rho(ledger: Any, limit: Limit | None) -> float:
    """The largest ρ (to 0.1%) a Gaussian measurement may still spend: the ledger accepts it
    and, with ``limit``, the run's curve stays at or below the declared one at every order."""
    from privfair.core.accounting import LedgerEntry

    state = ledger.state_dict()

    def fits(rho: float) -> bool:
        book = type(ledger).from_state_dict(state)
        try:
            book.spend(LedgerEntry("trial", "gaussian", 1.0, rho=rho))
        except BudgetExceededError:
            return False
        return limit is None or limit(book.rdp()) <= 1.0

    lo, hi = 0.0, 1.0
    while fits(hi) and hi < 1e6:
        lo, hi = hi, hi * 4
    for _ in range(60):
        if hi - lo <= 1e-3 * hi:
            break
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    if lo <= 0:
        raise BudgetExceededError("the GAN's small-n fallback: nothing left for the one-way "
                                  "marginals; raise epsilon")
    return lo


def _independence_fallback(columns: Mapping[str, np.ndarray], domain: Domain, *,
                           config: GANConfig, protected: str, outcome: str, ledger: Any,
                           rng: np.random.Generator, limit: Limit | None, discrete: bool,
                           marginals: dict[str, list[float]],
                           anchors: Mapping[tuple[str, str], np.ndarray], n_hat: float,
                           dag: CausalDAG | None, rule: dict[str, Any]) -> FittedGAN:
    """The rest of the run's budget on every attribute's one-way counts (the Gaussian
    mechanism, one σ for all), instead of DP-SGD: the independence model of the same charged
    run. Its curve stays under the declared one (``limit``) like DP-SGD's would."""
    from privfair.core.accounting import gaussian_sigma

    rho = _fallback_rho(ledger, limit) * (1 - 1e-6)
    sigma = gaussian_sigma(rho=rho / len(domain), sensitivity=1.0)
    one_way: dict[str, list[float]] = {}
    for a in domain:
        counts = np.bincount(columns[a], minlength=domain.size(a)).astype(float)
        noisy = np.clip(gaussian_mechanism(
            counts, sigma=sigma, sensitivity=1.0, rng=rng, ledger=ledger, discrete=discrete,
            name=f"independence (GAN small-n rule): counts of {a}"), 0.0, None)
        one_way[a] = (noisy / noisy.sum() if noisy.sum() > 0
                      else np.full(domain.size(a), 1.0 / domain.size(a))).tolist()
    privacy = {"dp_sgd": None, "small_n": {**rule, "one_way_sigma": sigma, "one_way_rho": rho}}
    return FittedGAN(config=config, domain=domain, protected=protected, outcome=outcome,
                     marginals=marginals, expected_rows=round(n_hat), privacy=privacy, dag=dag,
                     generator_state={}, anchors={p: np.asarray(v, dtype=float)
                                                  for p, v in anchors.items()},
                     independence=one_way)


def fit_gan(codes: Mapping[str, np.ndarray], domain: Domain, *, protected: str, outcome: str,
            ledger: Any, rng: np.random.Generator, config: GANConfig | None = None,
            dag: Any = None, noise_multiplier: float | None = None,
            discrete_noise: bool = True, progress: Progress | None = None,
            limit: Limit | None = None, small_n_rule: bool = False) -> FittedGAN:
    """Train a DP GAN on integer codes and return the post-noise generator.

    Parameters
    ----------
    codes : mapping of str to ndarray
        The private table as integer code columns over ``domain``.
    domain : Domain
        The declared domain (from the contract).
    protected, outcome : str
        S and Y.
    ledger : PrivacyLedger
        Charged, in this order, for the (S, Y) counts and each anchor pair's counts
        (Gaussian mechanism), then for DP-SGD (``spend_subsampled_gaussian``; with DPSGD-F the
        gradients and the clipped counts of one batch are one charge at σ_eff), all before D1
        sees a row.
    rng : numpy.random.Generator
        Seeds the torch Generator of every draw.
    config : GANConfig
    dag : networkx.DiGraph or mapping, optional
        CFGAN's causal graph (required for ``cfgan``).
    noise_multiplier : float, optional
        σ for DP-SGD; by default the smallest σ the ledger's remaining budget allows (and
        ``limit``, when given).
    discrete_noise : bool
        Exact discrete Gaussian noise for the (S, Y) counts (``--discrete-noise``). DP-SGD's
        gradient noise stays floating-point Gaussian: gradients are not integers.
    progress : callable, optional
        Called after each epoch with ``(epoch, epochs, {"generator_loss", "marginal_shift",
        ...})`` plus the epoch scores (``anchor_tvd``, ``generated_rd``); all are functions of
        post-noise quantities only.
    limit : callable, optional
        A further bound on the run's whole Rényi curve (on ``RDP_ORDERS``): ``limit(curve)``
        is its cost over what it may cost, ≤ 1 fits. A release passes
        :func:`~privfair.release.kinds.gan.stages.curve_limit` of its declared curve, fixed
        from public inputs before any read: whatever the noisy count, the curve of the run
        stays at or below it at every order, which is what makes the declared curve a valid
        bound of the whole run (the proof is in :mod:`privfair.release.kinds.gan.stages`).
        Checked for the counts before they are drawn (refused with nothing drawn), then σ is
        calibrated to it.
    small_n_rule : bool
        Apply :func:`gan_small_n` once the counts are drawn: when the noisy pair marginals
        cannot carry signal at the noisy row count, spend the rest of the budget on the
        one-way marginals and return the independence model (``independence`` set, no
        generator) instead of training (a release's default; issue 42.1).
    """
    config = config or GANConfig()
    parsed_dag = _check_inputs(config, domain, protected, outcome, dag)
    if not hasattr(ledger, "spend_subsampled_gaussian"):
        raise TypeError("ledger: a PrivacyLedger with spend_subsampled_gaussian is needed")
    columns = {a: domain.check_column(a, np.asarray(codes[a]), where="GAN training data")
               for a in domain}
    pairs = anchor_pairs(domain, protected, outcome, config.method) \
        if _filled(config.anchor_weight, "anchor_weight") > 0 else ()
    if limit is not None:  # the counts and nothing else must leave DP-SGD some room
        before = ledger.rdp() + count_rho(ledger, config.marginal_share) * np.asarray(RDP_ORDERS)
        if limit(before) >= 1.0:
            raise BudgetExceededError(
                f"the GAN's counts alone would cost {limit(before):.3g} times what the run may "
                "spend next to the dataset's lifetime ledger, leaving nothing for DP-SGD; "
                "nothing was drawn for them: raise epsilon")
    marginals, anchors, n_hat, marginal_sigma = _measure_counts(
        columns, domain, ledger=ledger, rng=rng, share=config.marginal_share,
        discrete=discrete_noise, protected=protected, outcome=outcome, pairs=pairs)
    if small_n_rule:
        measured = tuple(dict.fromkeys([(protected, outcome), *pairs]))
        rule = gan_small_n(n_hat, domain, measured, marginal_sigma)
        if rule["fallback"]:
            fitted = _independence_fallback(
                columns, domain, config=config, protected=protected, outcome=outcome,
                ledger=ledger, rng=rng, limit=limit, discrete=discrete_noise,
                marginals=marginals, anchors=anchors, n_hat=n_hat, dag=parsed_dag, rule=rule)
            fitted.privacy["marginals"] = {
                "mechanism": "discrete gaussian" if discrete_noise else "gaussian",
                "sigma": marginal_sigma, "attributes": [protected, outcome],
                "anchor_pairs": [list(p) for p in pairs]}
            return fitted
    if noise_multiplier is None:
        sigma, sample_rate, steps = dpsgd_calibration(ledger, config, rows=n_hat, limit=limit)
    else:
        sigma = noise_multiplier
        sample_rate, steps = dpsgd_schedule(config, rows=n_hat)

    def charges(sigma: float) -> list[dict[str, Any]]:
        return dpsgd_charges(config, sample_rate=sample_rate, steps=steps, sigma=sigma)

    # The layer charges what charges(σ) planned: the same multiplier (σ_eff with DPSGD-F's
    # counts) and steps, so the same Rényi curve.
    noise = subsampled_gaussian(
        ledger=ledger, name=charges(sigma)[0]["name"], noise_multiplier=sigma,
        sample_rate=sample_rate, steps=steps,
        sensitivity=(GroupClipping.cap * config.max_grad_norm if config.group_clipping
                     else config.max_grad_norm),
        count_noise_multiplier=(config.count_noise_ratio * sigma if config.group_clipping
                                else None))

    fitted = _train(config, domain, protected=protected, outcome=outcome, dag=parsed_dag,
                    columns=columns, marginals=marginals, anchors=anchors, n_hat=n_hat,
                    rng=rng, noise=noise, sample_rate=sample_rate, steps=steps,
                    progress=progress)
    fitted.privacy["dp_sgd"].update(
        noise_multiplier=sigma,
        count_noise_multiplier=(config.count_noise_ratio * sigma if config.group_clipping
                                else None))
    fitted.privacy["marginals"] = {
        "mechanism": "discrete gaussian" if discrete_noise else "gaussian",
        "sigma": marginal_sigma, "attributes": [protected, outcome],
        "anchor_pairs": [list(p) for p in pairs]}
    if small_n_rule:
        fitted.privacy["small_n"] = rule
    return fitted


def fit_gan_non_private(codes: Mapping[str, np.ndarray], domain: Domain, *, protected: str,
                        outcome: str, rng: np.random.Generator,
                        config: GANConfig | None = None, dag: Any = None,
                        progress: Progress | None = None) -> FittedGAN:
    """Train the same GAN **without differential privacy**, for evaluation only.

    The papers' GANs are not private (Xu 2021 ch. 6-7); a benchmark row at ε = ∞ compares
    like with like only when nothing is clipped or noised. Here the (S, Y) counts and the
    anchors are exact, D1 (and, under ``classifier_rows="real_and_generated"``, η and D3)
    take plain minibatch gradients on the same Poisson batches, and no ledger is touched.
    The result is marked ``privacy["non_private"] = True`` (:attr:`FittedGAN.non_private`),
    and the release refuses to sample it.
    """
    config = config or GANConfig()
    parsed_dag = _check_inputs(config, domain, protected, outcome, dag)
    if config.group_clipping:
        raise ValueError("group_clipping: DPSGD-F's per-group clipping has no meaning "
                         "without DP (fit_gan_non_private clips nothing)")
    columns = {a: domain.check_column(a, np.asarray(codes[a]), where="GAN training data")
               for a in domain}
    pairs = anchor_pairs(domain, protected, outcome, config.method) \
        if _filled(config.anchor_weight, "anchor_weight") > 0 else ()

    def normalise(v: np.ndarray) -> np.ndarray:
        return v / v.sum() if v.sum() > 0 else np.full(v.shape, 1.0 / v.size)

    def joint(a: str, b: str) -> np.ndarray:
        out = np.zeros((domain.size(a), domain.size(b)), dtype=np.float64)
        np.add.at(out, (columns[a], columns[b]), 1.0)
        return out

    sy = joint(protected, outcome)
    marginals = {protected: normalise(sy.sum(1)).tolist(),
                 outcome: normalise(sy.sum(0)).tolist()}
    anchors = {pair: normalise(joint(*pair)) for pair in pairs}
    n_hat = max(float(sy.sum()), 1.0)
    sample_rate, steps = dpsgd_schedule(config, rows=n_hat)
    fitted = _train(config, domain, protected=protected, outcome=outcome, dag=parsed_dag,
                    columns=columns, marginals=marginals, anchors=anchors, n_hat=n_hat,
                    rng=rng, noise=None, sample_rate=sample_rate, steps=steps,
                    progress=progress)
    fitted.privacy = {
        "non_private": True,
        "warning": "NOT differentially private: trained on exact counts and unclipped, "
                   "un-noised gradients (evaluation only; no release may use it)",
        "training": {k: v for k, v in fitted.privacy["dp_sgd"].items()
                     if k not in ("noise_multiplier", "max_grad_norm", "group_clipping",
                                  "count_noise_multiplier")},
        "marginals": {"mechanism": "exact", "attributes": [protected, outcome],
                      "anchor_pairs": [list(p) for p in pairs]}}
    return fitted


def _train(config: GANConfig, domain: Domain, *, protected: str, outcome: str,
           dag: CausalDAG | None, columns: Mapping[str, np.ndarray],
           marginals: dict[str, list[float]], anchors: Mapping[tuple[str, str], np.ndarray],
           n_hat: float, rng: np.random.Generator, noise: SubsampledGaussian | None,
           sample_rate: float, steps: int, progress: Progress | None) -> FittedGAN:
    """The training loop shared by :func:`fit_gan` (``noise``: the charged DP-SGD noise) and
    :func:`fit_gan_non_private` (``noise=None``)."""
    steps_per_epoch = steps // config.epochs
    expected_batch = sample_rate * n_hat
    device = _device(config.device)
    gen = torch_generator(rng, device)
    trainer = _Trainer(config, domain, protected, outcome, dag, marginals, gen, device,
                       expected_batch, anchors)
    layout = trainer.layout
    real = layout.encode(columns).to(device)
    group = torch.from_numpy(np.array(columns[protected], dtype=np.int64)).to(device)
    clipping = (GroupClipping(base=config.max_grad_norm, groups=domain.size(protected))
                if config.group_clipping and noise is not None else None)
    history: list[dict[str, float]] = []
    previous = trainer.marginal_snapshot()
    calm = 0
    steps_run = 0
    for epoch in range(1, config.epochs + 1):
        g_losses = []
        for _ in range(steps_per_epoch):
            trainer.d1_private_step(real, group, sample_rate=sample_rate,
                                    expected_batch=expected_batch, noise=noise,
                                    clipping=clipping)
            g_losses.append(trainer.public_step())
            steps_run += 1
        current = trainer.marginal_snapshot()
        shift = _max_block_tvd(previous, current, layout)
        previous = current
        info = {"epoch": float(epoch), "generator_loss": float(np.mean(g_losses)),
                "marginal_shift": shift, **trainer.epoch_score()}
        history.append(info)
        if progress is not None:
            progress(epoch, config.epochs, info)
        calm = calm + 1 if shift < config.plateau_tol else 0
        if epoch >= config.min_epochs and calm >= config.patience:
            break
    del real
    generator_state = (_copy_state(trainer.generator) if trainer.ema is None
                       else {k: v.detach().cpu().clone() for k, v in trainer.ema.items()})
    classifier = getattr(trainer, "classifier", None)
    classifier_state = _copy_state(classifier) if classifier is not None else None
    real_readers = ["D1"] + (["classifier", *(_head("D3", a, protected)
                                              for a in trainer.d3_attributes
                                              if trainer.v3_real)]
                             if trainer.classifier_reads_real else [])
    privacy = {
        "dp_sgd": {"noise_multiplier": None, "max_grad_norm": config.max_grad_norm,
                   "sample_rate": sample_rate, "steps": steps, "steps_run": steps_run,
                   "expected_batch_size": expected_batch,
                   "group_clipping": config.group_clipping,
                   "count_noise_multiplier": None,
                   "sampling": "Poisson", "trained_on_real_rows": real_readers,
                   "released_weights": ("moving average (decay "
                                        f"{config.generator_ema})" if trainer.ema is not None
                                        else "last step")},
    }
    return FittedGAN(
        config=config, domain=domain, protected=protected, outcome=outcome,
        marginals=marginals, expected_rows=round(n_hat), privacy=privacy, dag=dag,
        generator_state={k: v.numpy() for k, v in generator_state.items()},
        classifier_state=({k: v.numpy() for k, v in classifier_state.items()}
                          if classifier_state is not None else None),
        history=history, anchors={p: np.asarray(v, dtype=float) for p, v in anchors.items()})


def _copy_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _max_block_tvd(a: np.ndarray, b: np.ndarray, layout: OneHotLayout) -> float:
    return max(0.5 * float(np.abs(a[layout.span(x)] - b[layout.span(x)]).sum())
               for x in layout.domain)

