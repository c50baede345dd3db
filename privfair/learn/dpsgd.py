"""DP-SGD, DPSGD-F and the Naïve reweighting baseline (Xu 2021, ch. 9; Alg. 1, 7, 8).

All three take Poisson-sampled batches (each row joins a step's batch independently with
probability ``q``; the RDP accountant assumes it), clip per-sample gradients and add Gaussian
noise to their sum.

Per-sample gradients: the models are ReLU MLPs (logistic regression has no hidden layer), so
row ``i``'s gradient for a linear layer is the outer product ``δ_i a_iᵀ`` of its back-propagated
error and its input. Its norm is ``‖δ_i‖ ‖a_i‖`` and the clipped sum is ``(f ⊙ δ)ᵀ A``, so the
per-sample gradients are never materialised (the "ghost clipping" of Goodfellow 2015 / Li et
al. 2022). Chosen by speed (``benchmarks/dpsgd_speed.py``, Adult, b = 256, one thread): a
whole privfair step takes less time than ``torch.func.vmap(grad(...))`` needs for the
per-sample gradients alone (about 2.4 ms), and an epoch runs several times faster than opacus's
``PrivacyEngine`` (``GradSampleModule`` hooks) on the same model. :func:`per_sample_gradients`
keeps the ``vmap`` form as the reference the tests compare against.

* ``dpsgd`` (Alg. 1): one clipping bound ``C0``; ``G = (Σ clip(g_i, C0) + N(0, σ²C0²))/b``.
* ``dpsgd-f`` (Alg. 7): per step, the numbers of clipped (``m^k``) and unclipped (``o^k``)
  samples of each group are released with ``N(0, σ1²)`` (one sample is in one count: L2
  sensitivity 1), and group ``k`` is clipped at ``C^k = C0 (1 + (m̃^k/b̃^k) / (m̃/b))``. The
  sum gets noise ``N(0, σ²C²)`` with ``C = max_k C^k``.
* ``naive`` (Alg. 8): group sizes ``b̃^k = b^k + N(0, σ1²)``; samples of group ``k`` are
  reweighted by ``θ^k = (b/K)/b̃^k`` after clipping at ``C0``; the noise uses ``C = C0 max θ^k``.
* ``sgd``: the non-private reference (same batches, no clipping, no noise, no ledger).

Both noisy releases of a step (gradient sum and group counts) are answered on the same Poisson
batch, so they are one subsampled Gaussian with ``σ_eff = (σ⁻² + σ1⁻²)^(−1/2)`` (issue 21.5).
``b`` is the *expected* batch size ``q n``, a public number the caller supplies (spec §8.2: the
ratio's denominator is nominal, not a noisy total).

Errata and fixes (spec §8.2, §9 item 10):

* Alg. 7 line 20 prints ``G = (b̃/b)(Σ ḡ + noise)``; we use ``1/b`` as Alg. 1 and Alg. 8 do.
* Noisy counts can be negative or tiny, which makes ``C^k`` negative or explosive. Counts are
  clamped at 0, ``b̃^k ≥ 1`` and ``m̃ ≥ 1``, and ``C^k ∈ [C0, clip_cap]`` (post-processing). The
  ledger's entry records ``clip_cap`` as the gradient's largest sensitivity; the noise always
  scales with the ``C`` actually used, so the multiplier ``σ`` is what the accountant sees.

Randomness comes from an explicit ``torch.Generator``; torch is imported inside the functions,
so importing this module does not import torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from privfair.core.accounting import LedgerEntry, PrivacyLedger
from privfair.core.mechanisms import SubsampledGaussian, subsampled_gaussian

Method = Literal["sgd", "dpsgd", "dpsgd-f", "naive"]
METHODS: tuple[str, ...] = ("sgd", "dpsgd", "dpsgd-f", "naive")


@dataclass(frozen=True)
class SGDSettings:
    """Hyper-parameters of one training run (all public).

    Attributes
    ----------
    method : {"dpsgd", "dpsgd-f", "naive", "sgd"}
    sample_rate : float
        Poisson sampling rate q.
    steps : int
        Number of steps T.
    expected_batch_size : float
        ``b = q n`` with a public (or DP) ``n``; the gradient average divides by it.
    noise_multiplier : float
        σ (σ2 in Alg. 7): gradient-noise std over the clipping bound.
    clip : float
        Base clipping bound C0.
    count_noise_multiplier : float or None
        σ1 for the group counts of ``dpsgd-f``/``naive``; default ``10 σ`` (the dissertation's).
    clip_cap : float or None
        Largest per-group bound (``dpsgd-f``) or ``C0 max θ^k`` (``naive``); default ``10 C0``.
    learning_rate : float or None
        Default ``1/√T`` (the dissertation's Adult setting).
    weight_decay : float
        L2 regularisation added to the noisy gradient (post-processing).
    hidden : tuple of int
        Hidden layer widths; ``()`` is logistic regression.
    """

    method: Method
    sample_rate: float
    steps: int
    expected_batch_size: float
    noise_multiplier: float = 1.0
    clip: float = 0.5
    count_noise_multiplier: float | None = None
    clip_cap: float | None = None
    learning_rate: float | None = None
    weight_decay: float = 0.01
    hidden: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not 0 < self.sample_rate <= 1:
            raise ValueError(f"sample_rate must be in (0, 1], got {self.sample_rate!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")
        for name in ("expected_batch_size", "noise_multiplier", "clip"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if self.clip_cap is not None and self.clip_cap < self.clip:
            raise ValueError(f"clip_cap must be >= clip ({self.clip}), got {self.clip_cap!r}")
        if any(int(h) < 1 for h in self.hidden):
            raise ValueError(f"hidden: expected positive layer widths, got {self.hidden!r}")

    @property
    def sigma_counts(self) -> float:
        return (10 * self.noise_multiplier if self.count_noise_multiplier is None
                else self.count_noise_multiplier)

    @property
    def cap(self) -> float:
        return 10 * self.clip if self.clip_cap is None else self.clip_cap

    @property
    def lr(self) -> float:
        return 1 / math.sqrt(self.steps) if self.learning_rate is None else self.learning_rate

    def mechanism_arguments(self, *, groups: int) -> dict[str, Any]:
        """Keyword arguments of :func:`privfair.core.mechanisms.subsampled_gaussian` for a
        run (not for ``sgd``, which draws no noise).

        ``dpsgd-f`` and ``naive`` release the gradient sum (noise ``σ C``, sensitivity ``C``)
        and the per-group counts (noise ``σ1``, sensitivity 1) of the *same* Poisson batch:
        one subsampled Gaussian with ``σ_eff = (σ⁻² + σ1⁻²)^(−1/2)``, recorded as one entry
        (sensitivity ``C √(1 + (σ/σ1)²)``, noise ``σ C``), not two independently sampled ones.
        """
        if self.method == "sgd":
            raise ValueError("method 'sgd' draws no noise")
        common = {"noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate,
                  "steps": self.steps}
        if self.method == "dpsgd":
            return {**common, "name": f"{self.method} gradients", "sensitivity": self.clip}
        counts = ("clipped/unclipped counts per group" if self.method == "dpsgd-f"
                  else "batch counts per group")
        per_step = 1 + (2 * groups if self.method == "dpsgd-f" else groups)
        return {**common, "name": f"{self.method} gradients and {counts} (one subsampled "
                                  "Gaussian)",
                "sensitivity": self.cap, "count_noise_multiplier": self.sigma_counts,
                "queries": self.steps * per_step}

    def ledger_entries(self, *, groups: int) -> list[LedgerEntry]:
        """What a run costs, as the entries it will record (none for ``sgd``): the entry of
        :func:`privfair.core.mechanisms.subsampled_gaussian` for
        :meth:`mechanism_arguments`."""
        from privfair.core.mechanisms import subsampled_gaussian_entry

        if self.method == "sgd":
            return []
        return [subsampled_gaussian_entry(**self.mechanism_arguments(groups=groups))]

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "sample_rate": self.sample_rate, "steps": self.steps,
                "expected_batch_size": self.expected_batch_size,
                "noise_multiplier": self.noise_multiplier, "clip": self.clip,
                "count_noise_multiplier": self.sigma_counts, "clip_cap": self.cap,
                "learning_rate": self.lr, "weight_decay": self.weight_decay,
                "hidden": list(self.hidden)}


#: Xu (2021) §9.5.1.2-9.5.1.3, the census datasets (Adult, Dutch): logistic regression, batch
#: b = 256, noise σ = 1 (σ1 = 10σ for the counts), clipping bound C = C0 = 0.5, learning rate
#: 1/√T, L2 regularisation 0.01, 20 epochs, δ = 1e-6. The bound is set for the dissertation's
#: inputs (:func:`privfair.contracts.scaled_features.xu2021_adult`, ‖x‖ ≈ 2.1 on Adult), not
#: for privfair's one-hot rows (‖x‖ = √13 ≈ 3.6 on Adult), which it clips far more often.
XU2021_CENSUS = {"batch_size": 256, "noise_multiplier": 1.0, "clip": 0.5, "weight_decay": 0.01,
                 "epochs": 20, "delta": 1e-6}
#: Xu (2021) §9.5.1.2-9.5.1.3, MNIST: b = 256, σ = 0.8, C = 1, learning rate 0.01, 60 epochs.
XU2021_MNIST = {"batch_size": 256, "noise_multiplier": 0.8, "clip": 1.0, "learning_rate": 0.01,
                "epochs": 60, "delta": 1e-6}


def xu2021_census_settings(method: Method, *, train_rows: int, steps: int,
                           clip: float | None = None) -> SGDSettings:
    """The dissertation's census setting (:data:`XU2021_CENSUS`) for ``steps`` steps over
    ``train_rows`` rows (public sizes: q = 256/n, learning rate 1/√steps); ``clip``
    overrides the paper's C = 0.5."""
    paper = XU2021_CENSUS
    return SGDSettings(method=method, sample_rate=paper["batch_size"] / train_rows,
                       steps=steps, expected_batch_size=float(paper["batch_size"]),
                       noise_multiplier=paper["noise_multiplier"],
                       clip=paper["clip"] if clip is None else clip,
                       learning_rate=1 / math.sqrt(steps), weight_decay=paper["weight_decay"])


class LastEpochGroupMetrics:
    """Xu (2021) Table 9.3's per-group "average loss" and "average gradient norm at the last
    training epoch", as a :func:`train` monitor.

    At each step of the last epoch (the last ``round(1/q)`` steps), for each group ``k`` with
    rows in the batch, it takes the parameters the step starts from and records the group's
    mean loss and the norm of the group's average gradient ``‖G_B^k‖ = ‖(1/b^k) Σ_i g_i^k‖``
    (§9.3.2's ``G_B^k``: raw per-row loss gradients, before clipping and noise, without the
    L2 term); the results average these over the epoch's batches. The mean per-row norm
    ``(1/b^k) Σ_i ‖g_i^k‖`` is kept beside it (``row_gradient_norm``): it is a different,
    larger quantity (each row's norm, not the norm of their average).

    It reads private rows without noise: an evaluation diagnostic, never part of a release.
    """

    def __init__(self, settings: SGDSettings, *, n_groups: int) -> None:
        self.first_step = max(0, settings.steps - max(1, round(1 / settings.sample_rate)))
        self.n_groups = n_groups
        self.sums = np.zeros((n_groups, 3))
        self.batches = np.zeros(n_groups, dtype=np.int64)

    def __call__(self, step: int, params: dict[str, Any], x: Any, y: Any, groups: Any) -> None:
        import torch

        if step < self.first_step:
            return
        with torch.no_grad():
            norms, cache = backprop(params, x, y)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                _logit(params, x), y, reduction="none")
            for k in range(self.n_groups):
                rows = groups == k
                count = int(rows.sum())
                if not count:
                    continue
                mean = weighted_gradient_sum(cache, rows.to(norms.dtype) / count)
                norm = math.sqrt(sum(float(g.pow(2).sum()) for g in mean.values()))
                self.sums[k] += (float(loss[rows].mean()), norm, float(norms[rows].mean()))
                self.batches[k] += 1

    def result(self) -> list[dict[str, float]]:
        """Per group (code order): ``loss``, ``gradient_norm`` (the paper's) and
        ``row_gradient_norm``, averaged over the last epoch's batches (nan if none)."""
        out = []
        for k in range(self.n_groups):
            mean = self.sums[k] / self.batches[k] if self.batches[k] else np.full(3, np.nan)
            out.append({"loss": float(mean[0]), "gradient_norm": float(mean[1]),
                        "row_gradient_norm": float(mean[2])})
        return out


@dataclass
class TrainedNetwork:
    """Weights of a trained model as numpy arrays (names ``layer{i}.weight``/``.bias``) and
    the public trace of the run (per-group clipping bounds, from noisy counts only)."""

    weights: dict[str, np.ndarray]
    settings: SGDSettings
    group_clip_trace: list[list[float]] = field(default_factory=list)

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        return forward(self.weights, np.asarray(x, dtype=np.float32))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return (self.decision_function(x) > 0).astype(np.int64)


def forward(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Logit of every row, in numpy (prediction needs no torch)."""
    layers = sum(1 for k in weights if k.endswith(".weight"))
    h = x
    for i in range(layers):
        h = h @ weights[f"layer{i}.weight"].T + weights[f"layer{i}.bias"]
        if i < layers - 1:
            h = np.maximum(h, 0.0)
    return h[:, 0]


def poisson_batch(n: int, sample_rate: float, generator: Any) -> Any:
    """Indices of a Poisson-sampled batch: each of ``n`` rows joins with prob. ``sample_rate``."""
    import torch

    return torch.nonzero(torch.rand(n, generator=generator) < sample_rate).flatten()


def clip_factors(norms: Any, bounds: Any) -> Any:
    """Per-sample factors ``min(1, C_i/‖g_i‖)`` (0-norm gradients keep factor 1)."""
    import torch

    return torch.clamp(bounds / torch.clamp(norms, min=1e-12), max=1.0)


def group_clip_bounds(clipped: Any, unclipped: Any, *, expected_batch_size: float,
                      clip: float, cap: float) -> Any:
    """DPSGD-F's bounds ``C^k = C0 (1 + (m̃^k/b̃^k)/(m̃/b))`` from noisy counts, clamped.

    Noisy counts are clamped at 0, ``b̃^k ≥ 1``, ``m̃ ≥ 1``; ``C^k`` is kept in
    ``[clip, cap]``. All post-processing of the released counts.
    """
    import torch

    m = torch.clamp(clipped, min=0.0)
    o = torch.clamp(unclipped, min=0.0)
    b_k = torch.clamp(m + o, min=1.0)
    m_total = torch.clamp(m.sum(), min=1.0)
    bounds = clip * (1 + (m / b_k) / (m_total / expected_batch_size))
    return torch.clamp(bounds, min=clip, max=cap)


def _build(dimension: int, hidden: tuple[int, ...], generator: Any) -> dict[str, Any]:
    import torch

    sizes = [dimension, *hidden, 1]
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        bound = 1 / math.sqrt(fan_in)
        if i == len(sizes) - 2 and not hidden:
            # Logistic regression starts at w = 0, the usual convex starting point.
            params[f"layer{i}.weight"] = torch.zeros(fan_out, fan_in)
        else:
            params[f"layer{i}.weight"] = (torch.rand(fan_out, fan_in, generator=generator)
                                          * 2 - 1) * bound
        params[f"layer{i}.bias"] = torch.zeros(fan_out)
    return params


def _logit(params: dict[str, Any], x: Any) -> Any:
    import torch

    layers = len(params) // 2
    h = x
    for i in range(layers):
        h = torch.nn.functional.linear(h, params[f"layer{i}.weight"], params[f"layer{i}.bias"])
        if i < layers - 1:
            h = torch.relu(h)
    return h[..., 0]


def per_sample_gradients(params: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
    """Gradient of each row's logistic loss, stacked on a leading batch axis."""
    import torch
    from torch.func import grad, vmap

    def loss(p: dict[str, Any], xi: Any, yi: Any) -> Any:
        return torch.nn.functional.binary_cross_entropy_with_logits(
            _logit(p, xi.unsqueeze(0)), yi.unsqueeze(0))

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def backprop(params: dict[str, Any], x: Any, y: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """Per-sample gradient norms of the logistic loss, and each layer's ``(inputs, errors)``.

    Row ``i``'s gradient of layer ``l`` is ``δ_i^l (a_i^l)ᵀ`` for the weight and ``δ_i^l`` for the
    bias, so ``‖g_i‖² = Σ_l ‖δ_i^l‖² (‖a_i^l‖² + 1)``.
    """
    import torch

    layers = len(params) // 2
    inputs, pre = [], []
    h = x
    for i in range(layers):
        inputs.append(h)
        z = torch.nn.functional.linear(h, params[f"layer{i}.weight"], params[f"layer{i}.bias"])
        pre.append(z)
        h = torch.relu(z) if i < layers - 1 else z
    delta = (torch.sigmoid(h) - y.unsqueeze(1))  # d loss / d logit, shape (b, 1)
    cache: list[tuple[Any, Any]] = [(inputs[0], delta)] * layers
    squared = torch.zeros(x.shape[0], dtype=x.dtype)
    for i in reversed(range(layers)):
        cache[i] = (inputs[i], delta)
        squared = squared + delta.pow(2).sum(1) * (inputs[i].pow(2).sum(1) + 1)
        if i:
            delta = (delta @ params[f"layer{i}.weight"]) * (pre[i - 1] > 0).to(x.dtype)
    return squared.sqrt(), cache


def weighted_gradient_sum(cache: list[tuple[Any, Any]], factors: Any) -> dict[str, Any]:
    """``Σ_i f_i g_i`` for every parameter, from :func:`backprop`'s cache."""
    out = {}
    for i, (inputs, delta) in enumerate(cache):
        weighted = delta * factors.unsqueeze(1)
        out[f"layer{i}.weight"] = weighted.T @ inputs
        out[f"layer{i}.bias"] = weighted.sum(0)
    return out


def train(x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, settings: SGDSettings,
          n_groups: int, ledger: PrivacyLedger | None, generator: Any,
          progress: Any = None, monitor: Any = None) -> TrainedNetwork:
    """Train with ``settings``; the whole cost is charged to ``ledger`` before the first step.

    Parameters
    ----------
    x, y, groups : ndarray
        Features, labels in {0, 1} and group codes in ``range(n_groups)``.
    settings : SGDSettings
    n_groups : int
        Number of groups K (from the contract, never from the data).
    ledger : PrivacyLedger or None
        Charged before any private read; None only for ``sgd``.
    generator : torch.Generator
        Source of batches and noise.
    progress : callable, optional
        Called with the fraction of steps done.
    monitor : callable, optional
        Called at every step, before the update, as ``monitor(step, params, x, y, groups)``
        with the parameters (torch tensors) and the step's batch. It reads private rows
        without noise: an evaluation diagnostic such as :class:`LastEpochGroupMetrics`, never
        part of a release.
    """
    import torch

    if not isinstance(generator, torch.Generator):
        raise TypeError("generator: expected a torch.Generator")
    # Copies: torch needs writable arrays (pandas hands out read-only views).
    x_np = np.array(x, dtype=np.float32)
    if x_np.ndim != 2:
        raise ValueError(f"X: expected a 2-d array, got {x_np.ndim} dimensions")
    n = x_np.shape[0]
    groups_np = np.array(groups, dtype=np.int64)
    if np.asarray(y).shape != (n,) or groups_np.shape != (n,):
        raise ValueError("y and groups: expected one value per row of X")
    if n_groups < 1 or (n and (groups_np.min() < 0 or groups_np.max() >= n_groups)):
        raise ValueError(f"groups: expected codes in range({n_groups})")
    noise = None
    if settings.method != "sgd":
        if ledger is None:
            raise ValueError(f"ledger: {settings.method} needs a ledger to charge")
        # Every step's noise, charged once before the first private read.
        noise = subsampled_gaussian(ledger=ledger,
                                    **settings.mechanism_arguments(groups=n_groups))
    xs = torch.from_numpy(x_np)
    ys = torch.from_numpy(np.array(y, dtype=np.float32))
    gs = torch.from_numpy(groups_np)
    params = _build(x_np.shape[1], tuple(int(h) for h in settings.hidden), generator)
    b = float(settings.expected_batch_size)
    trace: list[list[float]] = []
    epoch_steps = max(1, round(1 / settings.sample_rate))
    epoch_bounds: list[Any] = []
    for step in range(settings.steps):
        batch = poisson_batch(n, settings.sample_rate, generator)
        if monitor is not None:
            monitor(step, params, xs[batch], ys[batch], gs[batch])
        norms, cache = backprop(params, xs[batch], ys[batch])
        noise_bound, factors = _factors(settings, norms, gs[batch], n_groups, b, generator,
                                        epoch_bounds, noise)
        update = {}
        for name, summed in weighted_gradient_sum(cache, factors).items():
            if noise is not None:
                summed = noise.add_gradient_noise(summed, generator=generator,
                                                  sensitivity=noise_bound)
            # Erratum §9.10: the average divides by b, not b̃/b.
            update[name] = summed / b + settings.weight_decay * params[name]
        params = {k: v - settings.lr * update[k] for k, v in params.items()}
        if (step + 1) % epoch_steps == 0 or step + 1 == settings.steps:
            if epoch_bounds:
                trace.append(torch.stack(epoch_bounds).mean(dim=0).tolist())
                epoch_bounds = []
            if progress is not None:
                progress((step + 1) / settings.steps)
    weights = {k: v.detach().numpy().astype(np.float32) for k, v in params.items()}
    return TrainedNetwork(weights, settings, trace)


def _factors(settings: SGDSettings, norms: Any, batch_groups: Any, n_groups: int, b: float,
             generator: Any, epoch_bounds: list[Any],
             noise: SubsampledGaussian | None) -> tuple[float, Any]:
    """(bound C the noise scales with, per-sample factors multiplying the raw gradients)."""
    import torch

    if settings.method == "sgd":
        return 0.0, torch.ones_like(norms)
    c0 = settings.clip
    if settings.method == "dpsgd":
        return c0, clip_factors(norms, torch.full_like(norms, c0))
    if noise is None:
        raise ValueError(f"{settings.method}: the group counts need the layer's noise")
    one_hot = torch.nn.functional.one_hot(batch_groups, n_groups).to(norms.dtype)
    if settings.method == "dpsgd-f":
        over = (norms > c0).to(norms.dtype)
        noisy = noise.add_count_noise(torch.stack([over @ one_hot, (1 - over) @ one_hot]),
                                      generator=generator)
        bounds = group_clip_bounds(noisy[0], noisy[1],
                                   expected_batch_size=b, clip=c0, cap=settings.cap)
        epoch_bounds.append(bounds)
        return float(bounds.max()), clip_factors(norms, one_hot @ bounds)
    counts = noise.add_count_noise(one_hot.sum(dim=0), generator=generator)
    theta = (b / n_groups) / torch.clamp(counts, min=1.0)
    theta = torch.clamp(theta, max=settings.cap / c0)
    epoch_bounds.append(c0 * theta)
    weights = one_hot @ theta
    return c0 * float(theta.max()), weights * clip_factors(norms, torch.full_like(norms, c0))
