"""The one mechanism layer (issue 32.1): every mechanism of ``core.mechanisms.MECHANISMS``
charges the ledger with its sensitivity and scale before it draws, shows the audit the exact
answer and the declared scale, and draws at ``noise_factor()`` × that scale."""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import BudgetExceededError
from privfair.core.mechanisms import (
    MECHANISMS,
    exponential_first_admissible,
    exponential_mechanism,
    gaussian_mechanism,
    grid_laplace_mechanism,
    laplace_grid,
    laplace_mechanism,
    recorded_queries,
    row_laplace_mechanism,
    scaled_noise,
    sparse_laplace_histogram,
    subsampled_gaussian,
)

# --- (a) no privacy noise draw and no ledger charge outside the layer ------------------------

ROOT = Path(__file__).resolve().parent.parent
#: Where noise may be drawn and the ledger charged: the layer and the accountant.
LAYER = {"privfair/core/mechanisms.py", "privfair/core/accounting.py"}
#: numpy Generator (and legacy np.random) distributions: any of them can make noise.
NUMPY_DRAWS = {
    "normal", "standard_normal", "laplace", "gumbel", "exponential", "standard_exponential",
    "gamma", "standard_gamma", "logistic", "lognormal", "standard_cauchy", "standard_t",
    "chisquare", "noncentral_chisquare", "f", "noncentral_f", "wald", "weibull", "rayleigh",
    "vonmises", "pareto", "power", "beta", "uniform", "triangular", "binomial",
    "negative_binomial", "poisson", "geometric", "multivariate_normal", "dirichlet"}
#: torch's continuous draws (a uniform one is noise by inverse CDF), scipy's ``rvs``, the
#: standard library's ``random`` distributions and the layer's own samplers.
OTHER_DRAWS = {
    "randn", "randn_like", "normal_", "exponential_", "cauchy_", "log_normal_", "geometric_",
    "rand", "rand_like", "uniform_", "rvs", "gauss", "normalvariate", "expovariate",
    "gammavariate", "lognormvariate", "vonmisesvariate", "weibullvariate", "paretovariate",
    "betavariate", "sample_discrete_gaussian", "sample_discrete_laplace", "sample_row_laplace"}
CHARGES = {"spend", "spend_subsampled_gaussian"}
#: Modules whose functions share a name with a distribution (np.power, math.gamma, ...).
NOT_GENERATORS = {"np", "numpy", "math", "special", "scipy.special"}

#: Randomness that is not privacy noise, and charges that are not a run's: (file, function)
#: → why. A folder (ending in "/") covers every function in it.
ALLOWED: dict[tuple[str, str], str] = {
    ("privfair/causal/simulate.py", "sample_categorical"):
        "simulated data for tests and benchmarks, never a release",
    ("privfair/causal/simulate.py", "sample_linear_gaussian"):
        "simulated data for tests and benchmarks, never a release",
    ("privfair/domains/quantiles.py", "dp_quantile_edges"):
        "the edge is uniform inside the interval the layer's exponential mechanism picked "
        "(the continuous mechanism's base measure, no noise scale)",
    ("privfair/evaluation/classifiers.py", "_train_mlp"):
        "weight initialisation of an evaluation classifier (not privacy-protected)",
    ("privfair/generative/calibration.py", "noise_multiplier_on_ledger.trial"):
        "planning: charges on a copy of the ledger to calibrate sigma; nothing is drawn",
    ("privfair/generative/gan.py", "ConditionalGenerator.forward"):
        "the generator's latent input z (public randomness)",
    ("privfair/generative/gan.py", "CausalGenerator.exogenous"):
        "the causal generator's exogenous inputs (public randomness)",
    ("privfair/generative/gan.py", "_Trainer.d1_private_step"):
        "Poisson batch sampling (the accountant's subsampling, not noise)",
    ("privfair/generative/nets.py", "seeded_init_"): "weight initialisation",
    ("privfair/generative/nets.py", "gumbel_noise"):
        "Gumbel-softmax of the generator's own output (public)",
    ("privfair/embedding/dpne.py", "public_factor"):
        "DPNE's data-independent public factor H",
    ("privfair/learn/dpsgd.py", "poisson_batch"):
        "Poisson batch sampling (the accountant's subsampling, not noise)",
    ("privfair/learn/dpsgd.py", "_build"): "weight initialisation",
    ("privfair/release/kinds/gan/stages.py", "_declared_curve"):
        "planning: the run's declared curve on a scratch ledger; nothing is drawn",
    ("privfair/generative/gan.py", "fit_gan"):
        "planning: the run's own curve on a copy of its ledger, to settle the reservation; "
        "nothing is drawn",
    ("privfair/release/kinds/model/budget.py", "_ledger"):
        "planning: a declared cost on a scratch ledger; nothing is drawn",
    ("privfair/store/backends.py", "run"): "jitter between retries of a transaction",
    ("privfair/synth/per_group.py", "PerGroupSynthesizer.fit"):
        "parallel composition of disjoint parts, charged before any part draws; each part's "
        "noise goes through the layer on its own ledger",
    ("privfair/evaluation/audit/graphs.py", "audit_privpc.charge"):
        "audit: the claim PrivPC's ledger records, composed on a scratch ledger; nothing is "
        "drawn",
    ("privfair/evaluation/audit/models.py", "_sgd_claim.charge"):
        "audit: the claim DP-SGD's ledger records, composed on a scratch ledger; nothing is "
        "drawn",
    ("privfair/evaluation/audit/noise.py", "_dpsgd"):
        "audit: the synthetic features of the audit's own DP-SGD data set (not noise)",
}


def find_draws(source: str) -> Iterator[tuple[str, int, str]]:
    """(enclosing function as ``Class.method``, line, what) of every noise draw or ledger
    charge in ``source``."""
    stack: list[str] = []
    found: list[tuple[str, int, str]] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.AST) -> None:
            stack.append(node.name)
            self.generic_visit(node)
            stack.pop()

        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Attribute(self, node: ast.Attribute) -> None:
            if node.attr == "distributions" and ast.unparse(node.value) == "torch":
                found.append((".".join(stack), node.lineno, "torch.distributions"))
            self.generic_visit(node)

        def visit_Call(self, node: ast.Call) -> None:
            func = node.func
            if isinstance(func, ast.Attribute):
                draw = (func.attr in OTHER_DRAWS | CHARGES
                        or (func.attr in NUMPY_DRAWS
                            and ast.unparse(func.value) not in NOT_GENERATORS))
            else:
                draw = isinstance(func, ast.Name) and func.id in OTHER_DRAWS | CHARGES
            if draw:
                found.append((".".join(stack), node.lineno, ast.unparse(func)))
            self.generic_visit(node)

    Visitor().visit(ast.parse(source))
    return iter(found)


def _allowed(path: str, function: str) -> bool:
    return (path, function) in ALLOWED


def _library() -> Iterator[tuple[str, str]]:
    for file in sorted((ROOT / "privfair").rglob("*.py")):
        yield file.relative_to(ROOT).as_posix(), file.read_text(encoding="utf-8")


def test_no_privacy_noise_draw_or_ledger_charge_outside_the_layer():
    outside = [f"{path}:{line} in {function or '<module>'}: {what}"
               for path, source in _library() if path not in LAYER
               for function, line, what in find_draws(source)
               if not _allowed(path, function)]
    assert not outside, ("privacy noise and ledger charges go through privfair/core/"
                         "mechanisms.py (or, for randomness that is not noise, on ALLOWED "
                         "with the reason):\n" + "\n".join(outside))


def test_every_allowance_is_still_used():
    used = {(path, function) for path, source in _library()
            for function, _, _ in find_draws(source)}
    stale = [key for key in ALLOWED if key not in used]
    assert not stale, f"allowances nothing needs any more (remove them): {stale}"


def test_the_scan_finds_a_draw_or_a_charge_added_anywhere():
    source = (
        "import numpy as np\n"
        "class Release:\n"
        "    def noisy(self, values, rng):\n"
        "        return values + rng.laplace(0.0, 1.0, size=values.shape)\n"
        "def charge(ledger, entry):\n"
        "    ledger.spend(entry)\n"
        "def torch_noise(torch, g):\n"
        "    return torch.normal(0.0, 1.0, size=(3,), generator=g) + g.new_empty(3).normal_()\n"
        "def legacy(x):\n"
        "    return x + np.random.gumbel(size=3) + torch.distributions.Laplace(0, 1).sample()\n"
        "def not_noise(x):\n"
        "    return np.power(x, 2) + math.gamma(x)\n")
    found = {(function, what) for function, _, what in find_draws(source)}
    assert found == {("Release.noisy", "rng.laplace"), ("charge", "ledger.spend"),
                     ("torch_noise", "torch.normal"), ("torch_noise", "g.new_empty(3).normal_"),
                     ("legacy", "np.random.gumbel"), ("legacy", "torch.distributions")}
    # The same draw in a library module fails the scan unless that function is allowed.
    assert not _allowed("privfair/synth/measure.py", "Release.noisy")


# --- (b) each mechanism: charge first, record, draw at the factor ---------------------------


@dataclass(frozen=True)
class Case:
    """One layer mechanism run on a fixed exact answer.

    ``run(ledger, rng)`` calls it once; ``spread(output)`` measures the noise of that output
    (a standard deviation or a mean norm: anything proportional to the drawn scale);
    ``entry_scale(entry)`` reads the declared scale back from the ledger entry.
    """

    mechanism: str
    exact: np.ndarray
    sensitivity: float
    scale: float
    run: Callable[[PrivacyLedger, Any], Any]
    spread: Callable[[Any], float]
    entry_scale: Callable[[Any], float]
    torch: bool = False


ZEROS = np.zeros(20_000)
SPARSE = np.full(5_000, 1_000.0)
ROWS = np.zeros((4_000, 3))


def _gaussian(discrete: bool) -> Case:
    exact = np.zeros(3_000 if discrete else 20_000, dtype=np.int64 if discrete else float)
    return Case(
        "gaussian", exact, 2.0, 3.0,
        lambda ledger, rng: gaussian_mechanism(
            exact, sigma=3.0, sensitivity=2.0, rng=rng, ledger=ledger, name="g",
            discrete=discrete,
            # seeded from the Generator's state, not a draw (nothing may be drawn first)
            discrete_source=random.Random(rng.bit_generator.state["state"]["state"])),
        lambda out: float(np.std(out)), lambda e: e.sigma)


def _exponential(first_admissible: bool) -> Case:
    # Two candidates whose scores differ by 2Δ/ε: P(pick 1) = 1/(1 + e^(−1/f)), whose
    # log-odds measure the drawn Gumbel scale f·2Δ/ε (1 at f = 1, 2 at f = 1/2).
    scores = np.array([0.0, 4.0])

    def one(ledger: PrivacyLedger, rng: np.random.Generator) -> int:
        if first_admissible:
            return exponential_first_admissible(scores, lambda i: True, epsilon=0.5,
                                                sensitivity=1.0, rng=rng, ledger=ledger,
                                                name="e")[0]
        return exponential_mechanism(scores, epsilon=0.5, sensitivity=1.0, rng=rng,
                                     ledger=ledger, name="e")

    def run(ledger: PrivacyLedger, rng: np.random.Generator) -> np.ndarray:
        # One charge on ``ledger``, the rest on their own (a long ledger slows every spend).
        return np.array([one(ledger if i == 0 else PrivacyLedger(rho_budget=1.0), rng)
                         for i in range(8_000)])

    def spread(picks: np.ndarray) -> float:
        p = float(np.mean(picks))
        return 1.0 / math.log(p / (1 - p))  # the Gumbel scale in units of 2Δ/ε·(s1 − s0)

    return Case("exponential", scores, 1.0, 4.0, run, spread,
                lambda e: 2 * e.sensitivity / e.epsilon)


def _subsampled(counts: bool) -> Case:
    exact = np.zeros(20_000)

    def run(ledger: PrivacyLedger, generator: Any) -> Any:
        import torch

        noise = subsampled_gaussian(ledger=ledger, name="sgd", noise_multiplier=1.5,
                                    sample_rate=0.01, steps=10, sensitivity=2.0,
                                    count_noise_multiplier=3.0 if counts else None)
        summed = torch.zeros(20_000, dtype=torch.float64)
        if counts:
            return noise.add_count_noise(summed, generator=generator).numpy()
        return noise.add_gradient_noise(summed, generator=generator).numpy()

    return Case("subsampled-gaussian", exact, 1.0 if counts else 2.0, 3.0, run,
                lambda out: float(np.std(out)),
                (lambda e: 3.0) if counts else (lambda e: e.sigma), torch=True)


GRID = laplace_grid(sensitivity=1.0, epsilon=1.0, coordinates=4_000)
CASES: dict[str, Case] = {
    "gaussian": _gaussian(False),
    "discrete gaussian": _gaussian(True),
    "exponential": _exponential(False),
    "exponential first admissible": _exponential(True),
    "laplace": Case(
        "laplace", ZEROS, 2.0, 4.0,
        lambda ledger, rng: laplace_mechanism(ZEROS, epsilon=0.5, sensitivity=2.0, rng=rng,
                                              ledger=ledger, name="l"),
        lambda out: float(np.std(out)), lambda e: e.sensitivity / e.epsilon),
    "grid laplace": Case(
        "grid-laplace", np.zeros(4_000), float(GRID.sensitivity), GRID.scale,
        lambda ledger, rng: grid_laplace_mechanism(np.zeros(4_000), epsilon=1.0,
                                                   sensitivity=1.0, rng=rng, ledger=ledger,
                                                   name="gl"),
        lambda out: float(np.std(out)), lambda e: GRID.scale),
    "sparse laplace": Case(
        "sparse-laplace", SPARSE, 1.0, 2.0,
        lambda ledger, rng: sparse_laplace_histogram(
            SPARSE, universe_size=10_000, outside_probability=0.25, epsilon=0.5, rng=rng,
            ledger=ledger, name="s", sample_outside=lambda k: list(range(k))),
        lambda out: float(np.std(out.counts)), lambda e: 1 / e.epsilon),
    "row laplace": Case(
        "row-laplace", ROWS, 8.0, 4.0,
        lambda ledger, rng: row_laplace_mechanism(ROWS, epsilon=2.0, sensitivity=8.0,
                                                  rng=rng, ledger=ledger, name="r"),
        lambda out: float(np.linalg.norm(out, axis=1).mean()),
        lambda e: e.sensitivity / e.epsilon),
    "subsampled gaussian gradients": _subsampled(False),
    "subsampled gaussian counts": _subsampled(True),
}


def _source(case: Case, seed: int) -> Any:
    if case.torch:
        import torch

        return torch.Generator().manual_seed(seed)
    return np.random.default_rng(seed)


def _state(source: Any) -> Any:
    return source.get_state() if hasattr(source, "get_state") else source.bit_generator.state


def test_every_mechanism_of_the_inventory_has_a_case():
    assert {case.mechanism for case in CASES.values()} == set(MECHANISMS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_budget_too_small_raises_with_nothing_drawn_or_recorded(name):
    case = CASES[name]
    ledger = PrivacyLedger(rho_budget=1e-12, delta=1e-9)
    source = _source(case, 5)
    before = _state(source)
    with recorded_queries() as queries, pytest.raises(BudgetExceededError):
        case.run(ledger, source)
    state = _state(source)
    assert (bool((state == before).all()) if hasattr(state, "all") else state == before)
    assert ledger.entries == () and queries == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_ledger_and_the_recorder_see_the_declared_sensitivity_and_scale(name):
    case = CASES[name]
    ledger = PrivacyLedger(rho_budget=1e6, delta=1e-9)
    with recorded_queries() as queries:
        case.run(ledger, _source(case, 1))
    entries = ledger.entries
    entry = entries[0]
    assert case.entry_scale(entry) == pytest.approx(case.scale, rel=1e-6)
    if case.mechanism not in ("subsampled-gaussian", "exponential"):
        assert entry.sensitivity == pytest.approx(case.sensitivity, rel=1e-12)
    query = queries[0]
    assert query.mechanism == case.mechanism
    assert query.sensitivity == pytest.approx(case.sensitivity, rel=1e-12)
    assert query.scale == pytest.approx(case.scale, rel=1e-12)
    np.testing.assert_array_equal(query.exact, case.exact)


@pytest.mark.parametrize("name", sorted(CASES))
def test_scaled_noise_halves_the_noise_actually_drawn(name):
    case = CASES[name]
    full = case.spread(case.run(PrivacyLedger(rho_budget=1e6, delta=1e-9), _source(case, 2)))
    with scaled_noise(0.5):
        half = case.spread(case.run(PrivacyLedger(rho_budget=1e6, delta=1e-9),
                                    _source(case, 3)))
    assert full == pytest.approx(case.scale * _unit(case), rel=0.06)
    assert half / full == pytest.approx(0.5, abs=0.05)


def _unit(case: Case) -> float:
    """``spread`` of noise of scale 1: std of N(0, 1), of Laplace(1) and of the grid noise,
    the mean norm Gamma(3, 1) of row noise, and for the exponential mechanism the Gumbel
    scale in units of 2Δ/ε over the score gap of 4 (1/4)."""
    return {"gaussian": 1.0, "subsampled-gaussian": 1.0, "laplace": math.sqrt(2),
            "grid-laplace": math.sqrt(2), "sparse-laplace": math.sqrt(2), "row-laplace": 3.0,
            "exponential": 0.25}[case.mechanism]


def test_sparse_histogram_outside_draws_follow_the_scaled_noise():
    """CatHist's values from outside the active domain stand for empty bins whose noise
    passed τ: under scaled_noise their number and counts follow the scaled noise too."""
    draws = {}
    for factor, seed in ((1.0, 4), (0.5, 6)):
        with scaled_noise(factor):
            out = sparse_laplace_histogram(
                np.zeros(0), universe_size=40_000, outside_probability=0.25, epsilon=0.5,
                rng=np.random.default_rng(seed), ledger=PrivacyLedger(rho_budget=10.0),
                name="s", sample_outside=lambda k: list(range(k)))
        draws[factor] = out
    tau = draws[1.0].threshold
    assert tau == pytest.approx(-math.log(0.5) / 0.5)
    # p = 1/4 at the declared scale; with half the noise ½e^(−τ/(b/2)) = 2p² = 1/8.
    assert len(draws[1.0].outside) == pytest.approx(10_000, rel=0.05)
    assert len(draws[0.5].outside) == pytest.approx(5_000, rel=0.05)
    assert np.mean(draws[1.0].outside_counts - tau) == pytest.approx(2.0, rel=0.05)
    assert np.mean(draws[0.5].outside_counts - tau) == pytest.approx(1.0, rel=0.05)


def test_subsampled_gaussian_refuses_a_step_bound_above_the_charged_one():
    import torch

    noise = subsampled_gaussian(ledger=PrivacyLedger(rho_budget=1e6, delta=1e-9), name="sgd",
                                noise_multiplier=1.0, sample_rate=0.1, steps=3,
                                sensitivity=1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        noise.add_gradient_noise(torch.zeros(3), generator=torch.Generator(), sensitivity=1.5)
    with pytest.raises(ValueError, match="no count noise"):
        noise.add_count_noise(torch.zeros(3), generator=torch.Generator())
    # A smaller step bound draws noise σ·C of that bound, and records it.
    with recorded_queries() as queries:
        out = noise.add_gradient_noise(torch.zeros(20_000, dtype=torch.float64),
                                       generator=torch.Generator().manual_seed(0),
                                       sensitivity=0.25)
    assert float(out.std()) == pytest.approx(0.25, rel=0.03)
    assert queries[0].scale == 0.25 and queries[0].sensitivity == 0.25
