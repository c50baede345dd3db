"""Audits of the mechanisms a model release and a GAN release use: the functional mechanism
(PrivLR, PFLR, PFLR*), DP-SGD and DPSGD-F (``learn.dpsgd.train``), and the private step
of the GAN's discriminator D1 (``generative.gan``, ghost clipping).

The gradient audits use *gradient canaries* in the style of Nasr et al. (2021): a row whose
clipped gradient is known in advance, so the noisy update's projection on it is the
likelihood-ratio statistic of a Gaussian mechanism. DP-SGD puts many canaries in one
training run, as Steinke, Nasr and Jagielski (2023) do: each canary lives on its own input
coordinate, which no other row touches, so with the clipping active the coordinates'
updates are independent and each canary is one independent trial (the draw checks that the
clipping stayed active). The full-batch runs (``sample_rate = 1``) are Gaussian mechanisms,
audited by a Gaussian-DP fit of the canaries' weights. At ``sample_rate`` q < 1 one step is
audited (its output is the whole mechanism: a canary's weight is N(0, σ²) when excluded and
(1 − q) N(0, σ²) + q N(1, σ²) when included); the fit estimates the q and σ the trainer
actually used (95 % limits) and bounds ε by the exact privacy profile of that one-step
Poisson-subsampled Gaussian (:func:`subsampled_gaussian_epsilon`), so a rate stated below the
one the sampler used fails.

torch is imported inside the functions.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.evaluation.audit.core import (
    GDP_DELTA,
    AuditResult,
    Draw,
    audit_mechanism,
    claimed_epsilon,
    fit_audit,
    fresh_ledger,
    gdp_fit,
)
from privfair.evaluation.audit.tables import GAUSSIAN_DELTA, looped

__all__ = ["audit_d1_step", "audit_dpsgd", "audit_dpsgd_f", "audit_functional",
           "subsampled_gaussian_delta", "subsampled_gaussian_epsilon"]


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch on one thread (a decorator too) for the audits' tiny models: handing each small
    product to a second thread costs more than the product (a D1 step: 0.75 ms on one, 5 ms on
    two)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# --- the functional mechanism (PrivLR, PFLR, PFLR*) -----------------------------------------

#: PFLR*'s public knob for the audit: the shift's share of ε (the release default, 1/2).
#: With the absolute term (the default) PFLR* releases the shift μ̃ and the coefficients
#: (λ1, Λ2) separately, each with its own Laplace scale, and both are part of the objective
#: the model minimises, so the audit reads all three coordinates the row moves.
PFLR_STAR_SHARE = 0.5


#: The exact-float event: an exact value of the statistic counts only if it occurs at least
#: this often in the calibration runs (a value seen once says nothing about the fresh ones).
EXACT_FLOAT_MIN_COUNT = 10


def _exact_float_draw(draw: Draw) -> Draw:
    """The exact-float event on ``draw``'s statistic (Mironov 2012's attack on floating-point
    noise): its first call, the audit's calibration runs, counts how often each exact float
    value occurs on D and on D′; every run is then scored by the log ratio of those counts
    (½ added to each; 0 for a value seen fewer than :data:`EXACT_FLOAT_MIN_COUNT` times), so
    the threshold event the audit picks is a set of exact values, fixed before the fresh runs.
    """
    table: dict[float, float] = {}
    learned = False

    def score(values: np.ndarray) -> np.ndarray:
        return np.array([table.get(v, 0.0) for v in values.tolist()], dtype=np.float64)

    def run(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        nonlocal learned
        on_d, on_n = draw(n, rng)
        if not learned:
            count_d, count_n = Counter(on_d.tolist()), Counter(on_n.tolist())
            table.update({v: math.log((count_n[v] + 0.5) / (count_d[v] + 0.5))
                          for v in count_d | count_n
                          if count_d[v] + count_n[v] >= EXACT_FLOAT_MIN_COUNT})
            learned = True
        return score(on_d), score(on_n)

    return run


def audit_functional(*, trials: int, seed: int = 10, variant: str = "pflr",
                     epsilon: float = 1.0, event: str = "llr",
                     objective: Callable[..., Any] | None = None) -> AuditResult:
    """The functional mechanism's released polynomial (``learn.functional.noisy_objective``;
    the model's weights are its minimiser, post-processing).

    Rows are one-hot over 2 features (``row_l1_bound`` 1) with a public centre 1/2. D′
    adds the row x = e₀, y = 0, s = 1, which moves the linear coefficient 0 by
    1/2 (+ α/2 for PFLR*'s signed term), PFLR's fairness coefficient 0 (its absolute term,
    the default: μ released with the coefficients) by 1/2 and the quadratic entry (0, 0) by
    1/8: together the whole L1 sensitivity. All get Laplace noise of one scale (discrete, on a
    grid: the module docstring of ``learn.functional``), so the log-likelihood ratio
    is ``Σ |z − μ_D| − |z − μ_D′|`` over those coefficients (μ_D read from the mechanism
    with ε = 10⁵: its polynomial to within 1e-5). Control: ε doubled.

    ``event="exact-float"`` audits the same statistic with the exact-float event
    (:func:`_exact_float_draw`): sets of exact float values rather than a threshold, which
    catch noise whose low-order bits depend on the data. The statistic is the exact float
    value either way, never rounded. ``objective`` replaces ``noisy_objective`` (same
    signature; tests pass the floating-point Laplace release it replaced).
    """
    from privfair.learn.functional import noisy_objective

    if event not in ("llr", "exact-float"):
        raise ValueError(f"event must be 'llr' or 'exact-float', got {event!r}")
    release_objective = noisy_objective if objective is None else objective

    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    s = np.array([0.0, 1.0, 0.0, 1.0])
    x_n = np.vstack([x, [1.0, 0.0]])
    y_n, s_n = np.append(y, 0.0), np.append(s, 1.0)
    star = variant == "pflr-star"
    # The exact-float event audits PFLR* in the signed form the float reference implements
    # (tests/test_float_leak.py): little of ε on the shift and a small α keep its noise
    # (α · Lap(Δ_g/ε_g)) from blurring the coefficients' float residue.
    signed = star and event == "exact-float"
    knobs: dict[str, Any] = {"variant": variant, "row_l1_bound": 1.0, "centre": 0.5,
                             "alpha": 0.05 if signed else 0.3,
                             "fairness_share": (0.1 if signed else PFLR_STAR_SHARE) if star
                             else 0.5}
    if signed:
        knobs["fairness_term"] = "signed"

    def release(neighbour: bool, eps: float, rng: np.random.Generator,
                ledger: PrivacyLedger) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates the row moves and the inverse Laplace scale of each."""
        args = (x_n, y_n, s_n) if neighbour else (x, y, s)
        released, scales, _ = release_objective(*args, epsilon=eps, ledger=ledger, rng=rng,
                                                **knobs)
        if star and not signed and released.shift is not None:
            # μ̃ is its own release at its own scale: the LLR weighs each by 1 / scale. (A
            # replacement ``objective`` without μ̃, the old float path, falls to the sum.)
            return (np.array([released.linear[0], released.quadratic[0, 0],
                              released.shift[0]]),
                    np.array([1 / scales.coefficients] * 2 + [1 / scales.shift]))
        # One release, one scale: the plain sum is the LLR. PFLR's absolute term: μ̃ is part
        # of the same release (same grid, same scale); PFLR*'s signed μ̃ only centres it.
        fairness = [] if star or released.fairness is None else [released.fairness[0]]
        values = np.array([released.linear[0], *fairness, released.quadratic[0, 0]])
        return values, np.ones_like(values)

    exact = [release(n, 1e5, np.random.default_rng(0), fresh_ledger())[0]
             for n in (False, True)]

    def make(noise: float) -> Draw:
        def trial(neighbour: bool, rng: np.random.Generator) -> float:
            z, weight = release(neighbour, epsilon / noise, rng, fresh_ledger())
            # Exact: the released values are on a grid, so the float residue of the clipped
            # ratio depends on nothing but the grid point (with float Laplace noise it did).
            return float(np.sum(weight * (np.abs(z - exact[0]) - np.abs(z - exact[1]))))

        draw = looped(trial)
        return _exact_float_draw(draw) if event == "exact-float" else draw

    label = {"privlr": "PrivLR", "pflr": "PFLR", "pflr-star": "PFLR*"}[variant]
    claim = claimed_epsilon(lambda ledger: release(True, epsilon, np.random.default_rng(0),
                                                   ledger), delta=1e-9)
    return audit_mechanism(
        make, mechanism=f"functional mechanism ({label})"
        + (", exact-float event" if event == "exact-float" else ""),
        claimed_epsilon=claim, delta=0.0,
        trials=trials, seed=seed,
        neighbours="one-hot rows over 2 features, public centre 1/2; D' adds x = e0, y = 0, "
                   "s = 1",
        statistic=("exact-float log ratio (calibration counts) of the Laplace log-likelihood "
                   "ratio" if event == "exact-float" else
                   "Laplace log-likelihood ratio of the coefficients the row moves"
                   + (", each weighed by 1 / its scale" if star else "")),
        notes=(f"fairness_share {PFLR_STAR_SHARE}: the shift and the coefficients, two "
               "releases, both in the objective" if star else ""))


# --- DP-SGD: many gradient canaries in one run ----------------------------------------------


def subsampled_gaussian_delta(sample_rate: float, sigma: float, epsilon: float) -> float:
    """δ(ε) of one Poisson-subsampled Gaussian step (sensitivity 1, noise σ), add or remove:
    the larger hockey-stick divergence between P = (1 − q) N(0, σ²) + q N(1, σ²) and
    Q = N(0, σ²), either way. The log-likelihood ratio ln(1 − q + q e^{(x − ½)/σ²}) is
    increasing in x, so each divergence is a tail beyond one point, in closed form."""
    from scipy.stats import norm

    q, gamma = sample_rate, math.exp(epsilon)
    x = sigma**2 * math.log((gamma - 1 + q) / q) + 0.5  # P's density = γ × Q's beyond x
    remove = (1 - q) * norm.sf(x / sigma) + q * norm.sf((x - 1) / sigma) - gamma * norm.sf(
        x / sigma)
    add = 0.0
    if 1 / gamma > 1 - q:  # Q's density = γ × P's below y
        y = sigma**2 * math.log((1 / gamma - 1 + q) / q) + 0.5
        add = norm.cdf(y / sigma) - gamma * ((1 - q) * norm.cdf(y / sigma)
                                             + q * norm.cdf((y - 1) / sigma))
    return float(max(remove, add, 0.0))


def subsampled_gaussian_epsilon(sample_rate: float, sigma: float, delta: float) -> float:
    """The smallest ε with :func:`subsampled_gaussian_delta` ≤ ``delta`` (0 when q = 0)."""
    from scipy.optimize import brentq

    if sample_rate <= 0 or subsampled_gaussian_delta(sample_rate, sigma, 0.0) <= delta:
        return 0.0
    high = 1.0
    while subsampled_gaussian_delta(sample_rate, sigma, high) > delta:
        high *= 2
    return float(brentq(lambda e: subsampled_gaussian_delta(sample_rate, sigma, e) - delta,
                        0.0, high, xtol=1e-10))


def subsampled_fit(scores_d: np.ndarray, scores_n: np.ndarray,
                   delta: float) -> tuple[float, str]:
    """ε lower bound of a one-step subsampled Gaussian from canary weights (in units of the
    canary's clipped gradient): q̂ = the mean shift, σ̂ = the excluded canaries' spread; q at
    its 97.5 % lower limit and σ at its 97.5 % upper limit (95 % together), then the exact
    profile (:func:`subsampled_gaussian_epsilon`)."""
    from scipy.stats import chi2, norm

    n_d, n_n = scores_d.size, scores_n.size
    q_hat = float(scores_n.mean() - scores_d.mean())
    z = float(norm.ppf(0.975))
    q_low = min(1.0, q_hat - z * math.sqrt(scores_n.var(ddof=1) / n_n
                                          + scores_d.var(ddof=1) / n_d))
    var_d = float(scores_d.var(ddof=1))
    sigma_high = math.sqrt((n_d - 1) * var_d / float(chi2.ppf(0.025, n_d - 1)))
    if q_low <= 0 or sigma_high <= 0:
        return 0.0, f"subsampled fit: q {q_hat:.4g} (lower {q_low:.4g}), sigma {var_d**.5:.4g}"
    bound = subsampled_gaussian_epsilon(q_low, sigma_high, delta)
    return bound, (f"subsampled fit: q {q_hat:.4g} (lower {q_low:.4g}), sigma "
                   f"{math.sqrt(var_d):.4g} (upper {sigma_high:.4g})")


def _sgd_claim(settings: Any, *, delta: float) -> float:
    """ε at ``delta`` that the ledger records for a ``learn.dpsgd.train`` run."""
    def charge(ledger: PrivacyLedger) -> None:
        for entry in settings.ledger_entries(groups=1):
            ledger.spend(entry)

    return claimed_epsilon(charge, delta=delta)


#: Canary feature value: its gradient (σ(z) − 1)·(M e_k, 1) has norm ≥ C whenever σ(−z) ≥
#: C / M, i.e. for |z| up to ln(M / C) ≈ 6.9, so clipping makes it exactly C·e_k (to 1e-6).
CANARY_SCALE = 1000.0


def _canary_run(*, settings: Any, canaries: int, base: np.ndarray, base_y: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One DP-SGD training run with ``canaries`` gradient canaries, half of them included.

    Returns the scores (the canaries' own weights) of the excluded and the included ones.
    """
    import torch

    from privfair.learn.dpsgd import train

    n0, d0 = base.shape
    included = rng.permutation(canaries) < canaries // 2
    rows = np.zeros((n0 + int(included.sum()), d0 + canaries), dtype=np.float32)
    rows[:n0, :d0] = base
    rows[np.arange(n0, rows.shape[0]), d0 + np.flatnonzero(included)] = CANARY_SCALE
    labels = np.concatenate([base_y, np.ones(int(included.sum()))])
    groups = np.zeros(rows.shape[0], dtype=np.int64)
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    net = train(rows, labels, groups, settings=settings, n_groups=1,
                ledger=fresh_ledger(delta=GAUSSIAN_DELTA), generator=generator)
    weights = net.weights["layer0.weight"][0].astype(np.float64)
    bias = float(net.weights["layer0.bias"][0])
    logits = weights[d0:] * CANARY_SCALE + bias
    if np.max(np.abs(logits)) > 5:
        raise RuntimeError("canary audit: a canary's logit left [-5, 5], so its clipping may "
                           "have lapsed; lower the learning rate")
    # Gradient descent moves a canary's weight by +lr·C/b per step it is in the batch.
    scores = weights[d0:] * settings.expected_batch_size / (settings.lr * settings.clip)
    return scores[~included], scores[included]


@one_torch_thread()
def audit_dpsgd(*, trials: int, seed: int = 11, noise_multiplier: float = 2.0,
                steps: int = 4, canaries: int = 2000, sample_rate: float = 1.0,
                delta: float = GDP_DELTA) -> AuditResult:
    """DP-SGD (``learn.dpsgd.train``, method ``dpsgd``, logistic regression), full batch
    by default, audited by a Gaussian-DP fit; ``sample_rate`` < 1 audits one step of
    Poisson subsampling (``steps`` must be 1: each canary then moves by 1 with probability
    q, plus the same noise), bounded by the exact profile of the q and σ the runs show
    (:func:`subsampled_fit`) against the ledger's amplified claim.

    Each run trains on 40 ordinary rows plus half of ``canaries`` gradient canaries (a row
    with value M on a coordinate of its own, label 1). A canary's weight moves only by its
    own clipped gradient and that coordinate's noise, so its final weight (in units of
    lr·C/b) is ``steps`` + N(0, steps·σ²) if included and N(0, steps·σ²) if not: the
    Gaussian mechanism the accountant charges, observed once per canary. With 4 steps at
    σ = 2, ρ = 1/2 as for the other Gaussian audits. Control: σ halved.
    """
    from privfair.learn.dpsgd import SGDSettings

    if sample_rate < 1 and steps != 1:
        raise ValueError("a subsampled DP-SGD audit observes one step: pass steps=1")

    base_rng = np.random.default_rng(99)
    base = np.eye(2, dtype=np.float32)[base_rng.integers(0, 2, size=40)]
    base_y = base_rng.integers(0, 2, size=40).astype(np.float64)

    def settings(noise: float) -> Any:
        return SGDSettings(method="dpsgd", sample_rate=sample_rate, steps=steps,
                           expected_batch_size=sample_rate * (40 + canaries / 2),
                           noise_multiplier=noise_multiplier * noise, clip=1.0,
                           learning_rate=0.01, weight_decay=0.0)

    def make(noise: float) -> Draw:
        config = settings(noise)

        def draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
            out_d: list[np.ndarray] = []
            out_n: list[np.ndarray] = []
            while sum(map(len, out_d)) < n:
                d, nb = _canary_run(settings=config, canaries=canaries, base=base,
                                    base_y=base_y, rng=rng)
                out_d.append(d)
                out_n.append(nb)
            return np.concatenate(out_d)[:n], np.concatenate(out_n)[:n]

        return draw

    subsampled = sample_rate < 1
    return fit_audit(
        make, subsampled_fit if subsampled else gdp_fit,
        mechanism="DP-SGD (learn.dpsgd, gradient canaries)"
        + (f", q = {sample_rate:g}" if subsampled else ""),
        claimed_epsilon=_sgd_claim(settings(1.0), delta=delta),
        delta=delta, trials=trials, seed=seed,
        neighbours=f"40 rows plus {canaries} canaries per run, half included; each canary "
                   "is one trial",
        statistic="canary's own weight / (lr C / b)",
        notes=f"{steps} steps at q = {sample_rate:g}, sigma {noise_multiplier}; "
              f"{math.ceil(trials / (canaries // 2))} runs per draw",
        label="subsampled-gaussian" if subsampled else "gdp")


@one_torch_thread()
def audit_dpsgd_f(*, trials: int, seed: int = 12, noise_multiplier: float = 1.0,
                  delta: float = GDP_DELTA) -> AuditResult:
    """DPSGD-F (``learn.dpsgd.train``, method ``dpsgd-f``), one full-batch step, one group.

    One canary per run: the group's bound C¹ comes from noisy counts of the batch (the
    canary among them), so canaries in one run would share it. The canary's weight is
    normalised by the bound the run used (the public ``group_clip_trace``): in those
    units it is 1 + N(0, σ²) if included and N(0, σ²) if not. The claim composes the
    gradient release and the counts (σ₁ = 10 σ). Control: both σ halved.
    """
    import torch

    from privfair.learn.dpsgd import SGDSettings, train

    base_rng = np.random.default_rng(98)
    base = np.zeros((30, 3), dtype=np.float32)
    base[np.arange(30), base_rng.integers(0, 2, size=30)] = 1.0
    base_y = base_rng.integers(0, 2, size=30).astype(np.float64)
    canary = np.array([[0.0, 0.0, CANARY_SCALE]], dtype=np.float32)

    def settings(noise: float) -> Any:
        return SGDSettings(method="dpsgd-f", sample_rate=1.0, steps=1,
                           expected_batch_size=30.0,
                           noise_multiplier=noise_multiplier * noise, clip=1.0,
                           learning_rate=0.01, weight_decay=0.0)

    def make(noise: float) -> Draw:
        config = settings(noise)

        def trial(neighbour: bool, rng: np.random.Generator) -> float:
            rows = np.vstack([base, canary]) if neighbour else base
            labels = np.append(base_y, 1.0) if neighbour else base_y
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            net = train(rows, labels, np.zeros(len(rows), dtype=np.int64), settings=config,
                        n_groups=1, ledger=fresh_ledger(delta=delta), generator=generator)
            bound = net.group_clip_trace[0][0]
            weight = float(net.weights["layer0.weight"][0, 2])
            return weight * config.expected_batch_size / (config.lr * bound)

        return looped(trial)

    return audit_mechanism(
        make, mechanism="DPSGD-F (learn.dpsgd, gradient canary)",
        claimed_epsilon=_sgd_claim(settings(1.0), delta=delta),
        delta=delta, trials=trials, seed=seed,
        neighbours="30 rows in one group; D' adds a canary on a coordinate of its own",
        statistic="canary's weight / (lr C^1 / b)",
        notes=f"one full-batch step, sigma {noise_multiplier}, count sigma 10 x", fit="gdp")


# --- the GAN's D1 -----------------------------------------------------------------------------


def _d1_trainer(*, noise_dim: int = 4) -> Any:
    """A dpgan trainer over 3 binary attributes whose D1 stays fixed and whose generated
    batch is constant (both public), so each ``d1_private_step`` is one trial."""
    import torch

    from privfair.core.domain import Domain
    from privfair.generative.gan import GANConfig, _Trainer

    domain = Domain(("s", "x", "y"), (2, 2, 2))
    config = GANConfig(method="dpgan", discriminator_hidden=8, hidden=8, noise_dim=noise_dim,
                       max_grad_norm=1e-3, device="cpu")
    trainer = _Trainer(config, domain, "s", "y", None, {"s": [0.5, 0.5]},
                       torch.Generator().manual_seed(0), torch.device("cpu"), 8.0)
    fixed = trainer.generate(8)
    # The generated half of D1's step is public; a constant one leaves only the noise.
    # A stand-in for the method on this one trainer (mypy refuses assigning to a method).
    trainer.generate = lambda n: {k: v[:n] for k, v in fixed.items()}  # type: ignore[method-assign]
    trainer.d1_opt = torch.optim.SGD(trainer.d1.parameters(), lr=0.0)
    return trainer


@one_torch_thread()
def audit_d1_step(*, trials: int, seed: int = 13, noise_multiplier: float = 1.0,
                  delta: float = GDP_DELTA) -> AuditResult:
    """One private step of the GAN's discriminator D1 (``_Trainer.d1_private_step``: ghost
    clipping, ``noisy_sum``), full batch, with D1's weights held fixed.

    D has 8 one-hot rows, D′ adds a ninth. With the clipping bound C = 1e-3 every row's
    gradient is clipped, so the canary's contribution is exactly C·ĝ, ĝ its gradient's unit
    direction at the fixed weights, and the projection of D1's gradient on ĝ (in units of
    C / b) is a constant plus 1 if included, plus N(0, σ²). One step at σ = 1 is
    ρ = 1/2. Control: σ halved.
    """
    import torch

    trainer = _d1_trainer()
    codes = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 0], [1, 1, 1],
                      [0, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 0]])
    canary_codes = np.array([[1, 1, 1]])
    encode = trainer.layout.encode
    real = encode({a: codes[:, k] for k, a in enumerate(trainer.domain.attributes)})
    canary = encode({a: canary_codes[:, k] for k, a in enumerate(trainer.domain.attributes)})
    real_n = torch.cat([real, canary])
    group = torch.zeros(len(real_n), dtype=torch.long)
    params = list(trainer.d1.parameters())
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        trainer.d1(canary)[:, 0], torch.ones(1))
    direction = torch.autograd.grad(loss, params)
    # reduce, not sum(): the same additions in the same order, without sum()'s int start
    norm = torch.sqrt(functools.reduce(operator.add, (g.pow(2).sum() for g in direction)))
    clip = trainer.config.max_grad_norm
    if norm <= clip:
        raise RuntimeError("D1 audit: the canary's gradient is below the clipping bound")
    unit = [g / norm for g in direction]
    expected_batch = 8.0

    from privfair.core.mechanisms import subsampled_gaussian

    def layer_noise(sigma: float, ledger: PrivacyLedger) -> Any:
        # The layer's noise for D1's steps, as the GAN's training charges it.
        return subsampled_gaussian(ledger=ledger, name="D1", noise_multiplier=sigma,
                                   sample_rate=1.0, steps=1, sensitivity=clip)

    def make(noise: float) -> Draw:
        # One charge covers every trial of this draw: the audit's ledger is not the
        # release's, and a trial is one step.
        step_noise = layer_noise(noise_multiplier * noise, fresh_ledger(delta=delta))

        def trial(neighbour: bool, rng: np.random.Generator) -> float:
            trainer.gen.manual_seed(int(rng.integers(2**62)))
            trainer.d1_private_step(real_n if neighbour else real, group, sample_rate=1.0,
                                    expected_batch=expected_batch, noise=step_noise,
                                    clipping=None)
            projection = sum(float((p.grad * u).sum()) for p, u in zip(params, unit,
                                                                        strict=True))
            return projection * expected_batch / clip

        return looped(trial)

    def charge(ledger: PrivacyLedger) -> None:
        layer_noise(noise_multiplier, ledger)

    return audit_mechanism(
        make, mechanism="GAN D1 private step (ghost clipping)",
        claimed_epsilon=claimed_epsilon(charge, delta=delta), delta=delta, trials=trials,
        seed=seed, neighbours="8 one-hot rows; D' adds a ninth (the canary)",
        statistic="D1 gradient projected on the canary's gradient / (C / b)",
        notes="D1's weights fixed and its generated batch constant (public parts), "
              "sample rate 1", fit="gdp")
