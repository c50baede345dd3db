"""The one mechanism layer (issue 32.1): every mechanism of ``core.mechanisms.MECHANISMS``
charges the ledger with its sensitivity and scale before it draws, shows the audit the exact
answer and the declared scale, and draws at ``noise_factor()`` × that scale."""

from __future__ import annotations

import ast
import functools
import math
import random
from collections.abc import Callable, Iterable, Iterator
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
    gaussian_grid,
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
#: Every sampling method of numpy's Generator and legacy RandomState (``np.random.*`` too):
#: read off numpy itself, so a sampler a later numpy adds is scanned. Any draw can make noise
#: (a Laplace is ``-b * sign(u) * log(1 - 2|u|)`` of one ``rng.random()``), so all count,
#: not only the named distributions (issue 41.6).
NUMPY_DRAWS = {name for kind in (np.random.Generator, np.random.RandomState)
               for name in dir(kind) if not name.startswith("_")} - {
    "bit_generator", "spawn", "get_state", "set_state", "seed"}
#: The standard library's ``random`` (module functions and ``Random``/``SystemRandom``
#: methods) and ``secrets``.
STDLIB_DRAWS = ({name for name in dir(random.Random) if not name.startswith("_")}
                - {"VERSION", "seed", "getstate", "setstate"}
                | {"randbelow", "randbits", "token_bytes", "token_hex", "token_urlsafe",
                   "SystemRandom", "urandom"})
#: torch's samplers: the ``torch.*`` functions, the in-place ``Tensor`` ones, ``nn.init``'s
#: random initialisers, the random layers of ``nn`` and ``nn.functional``, Sobol draws.
TORCH_DRAWS = {
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "bernoulli", "multinomial", "normal", "poisson", "random_", "uniform_", "normal_",
    "exponential_", "geometric_", "bernoulli_", "cauchy_", "log_normal_", "trunc_normal_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
    "sparse_", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "gumbel_softmax", "rrelu", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "RReLU", "SobolEngine"}
#: scipy's ``rvs`` and the layer's own samplers.
OTHER_DRAWS = {"rvs", "sample_discrete_gaussian", "sample_discrete_laplace",
               "sample_row_laplace"}
DRAWS = NUMPY_DRAWS | STDLIB_DRAWS | TORCH_DRAWS | OTHER_DRAWS
CHARGES = {"spend", "spend_subsampled_gaussian"}
SAMPLERS = DRAWS | CHARGES
#: Modules whose functions share a name with a sampler (np.power, math.gamma, ...), and
#: module paths (``np.random.default_rng``: ``random`` is a module there, not a draw).
NOT_GENERATORS = {"np", "numpy", "math", "special", "scipy.special", "np.char", "os.path"}
#: Modules whose names, imported bare (``from random import choice``), are draws.
RANDOM_MODULES = {"random", "secrets", "numpy.random", "torch", "torch.nn", "torch.nn.init",
                  "torch.nn.functional", "torch.quasirandom", "os"}


@dataclass(frozen=True)
class Draw:
    """A noise draw or ledger charge found in a source: the enclosing function
    (``Class.method``), its line number, the line's text (stripped) and what is called."""

    function: str
    line: int
    text: str
    what: str


#: Why a line may draw: the reasons many lines share.
SIMULATED = "simulated data for tests and benchmarks, never a release"
AUDIT_DATA = ("audit: the audit's own trial data, canaries and seeds (a test of the layer, "
              "never a release)")
AUDIT_CLAIM = ("audit: the claim the mechanism's ledger records, composed on a scratch "
               "ledger; nothing is drawn")
EVALUATION = ("evaluation on public or synthetic tables (benchmarks and figures, never a "
              "release of private data)")
POST_PROCESSING = "sampling the synthetic table from the released (noisy) model: post-processing"
TORCH_SEED = "a seed for a torch generator, drawn from the run's generator (no noise of its own)"
INITIALISATION = "weight initialisation (independent of the data)"

#: Randomness that is not privacy noise, and charges that are not a run's, one line each:
#: (file, enclosing function, the line's exact text, stripped) → why. Per line, not per
#: function (issue 41.6): a draw added to an allowed function is on no allowed line, and an
#: allowed line that is copied is found twice; both fail (:func:`outside_the_layer`). A
#: reworded line needs its entry reworded: the scan then names it.
ALLOWED: dict[tuple[str, str, str], str] = {
    ('privfair/causal/simulate.py', 'random_dag',
     'order = rng.permutation(p)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'random_dag',
     'chosen = rng.choice(len(pairs), size=round(sparseness * len(pairs)), replace=False)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_categorical',
     'sizes = rng.integers(min_levels, max_levels + 1, size=p)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_categorical',
     'cpt = rng.dirichlet(np.full(int(sizes[k]), concentration), size=configs)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_categorical',
     'draws = rng.random(n)[:, None]'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_linear_gaussian',
     'weights[u, k] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_linear_gaussian',
     'values[:, k] = values @ weights[:, k] + rng.normal(size=n)'):
        SIMULATED,
    ('privfair/causal/simulate.py', 'sample_linear_gaussian',
     'weights[u, k] = rng.uniform(0.1, 1.0)'):
        SIMULATED,
    ('privfair/domains/cathist.py', 'sample_outside',
     'picked = rng.choice(n, size=k, replace=False).tolist()'):
        "the k values outside the active domain that the layer's sparse_laplace_histogram "
        'asks for, uniform (k drawn and the query charged in the layer; no scale here)',
    ('privfair/domains/cathist.py', 'sample_outside',
     'for i in rng.integers(0, n, size=k - len(chosen)).tolist():'):
        "the k values outside the active domain that the layer's sparse_laplace_histogram "
        'asks for, uniform (k drawn and the query charged in the layer; no scale here)',
    ('privfair/domains/quantiles.py', 'dp_quantile_edges',
     'k = first_in_gap[pick] + int(rng.integers(points_in_gap[pick]))'):
        "the edge is a uniform grid point inside the gap the layer's exponential mechanism "
        "picked (the grid-point count is its base measure; no noise scale)",
    ('privfair/embedding/dpne.py', 'public_factor',
     'h = rng.normal(size=(n_nodes, dim))'):
        "DPNE's data-independent public factor H",
    ('privfair/evaluation/audit/graphs.py', 'audit_privpc',
     'claimed_epsilon=claimed_epsilon(lambda ledger: ledger.spend(first), delta=1e-9),'):
        AUDIT_CLAIM,
    ('privfair/evaluation/audit/models.py', '_sgd_claim.charge',
     'ledger.spend(entry)'):
        AUDIT_CLAIM,
    ('privfair/evaluation/audit/models.py', '_canary_run',
     'included = rng.permutation(canaries) < canaries // 2'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', '_canary_run',
     'generator = torch.Generator().manual_seed(int(rng.integers(2**62)))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_dpsgd',
     'base = np.eye(2, dtype=np.float32)[base_rng.integers(0, 2, size=40)]'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_dpsgd',
     'base_y = base_rng.integers(0, 2, size=40).astype(np.float64)'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_dpsgd_f',
     'base[np.arange(30), base_rng.integers(0, 2, size=30)] = 1.0'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_dpsgd_f',
     'base_y = base_rng.integers(0, 2, size=30).astype(np.float64)'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_dpsgd_f.make.trial',
     'generator = torch.Generator().manual_seed(int(rng.integers(2**62)))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/models.py', 'audit_d1_step.make.trial',
     'trainer.gen.manual_seed(int(rng.integers(2**62)))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/noise.py', '_dpsgd',
     'features = np.random.default_rng(5).normal(size=(200, 30)).astype(np.float32)'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/noise.py', '_dpsgd',
     'seed = int(rng.integers(2**62))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/tables.py', 'audit_discrete_gaussian_marginals.make.run',
     'source = random.Random(int(rng.integers(2**63)))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/tables.py', 'audit_aim_round',
     'codes = np.random.default_rng(41).integers(0, 2, size=(3 * rows, 3))'):
        AUDIT_DATA,
    ('privfair/evaluation/audit/tables.py', 'audit_end_to_end',
     'frame = pd.DataFrame({a: rng0.integers(0, 2, size=rows) for a in domain.attributes})'):
        AUDIT_DATA,
    ('privfair/evaluation/classifiers.py', '_train_mlp',
     'layer.weight.uniform_(-bound, bound, generator=generator)'):
        'weight initialisation and batch order of an evaluation classifier (not '
        'privacy-protected)',
    ('privfair/evaluation/classifiers.py', '_train_mlp',
     'layer.bias.uniform_(-bound, bound, generator=generator)'):
        'weight initialisation and batch order of an evaluation classifier (not '
        'privacy-protected)',
    ('privfair/evaluation/classifiers.py', '_train_mlp',
     'order = torch.randperm(n, generator=generator)'):
        'weight initialisation and batch order of an evaluation classifier (not '
        'privacy-protected)',
    ('privfair/evaluation/evaluate.py', 'train_test_split',
     'order = rng.permutation(len(frame))'):
        EVALUATION,
    ('privfair/evaluation/evaluate.py', 'evaluate_synthetic',
     'train = synthetic.sample(n=max_train_rows, random_state=seed).reset_index(drop=True)'):
        EVALUATION,
    ('privfair/evaluation/evaluate.py', 'evaluate_cell',
     'synthetic = synth.sample(len(data.train), rng=sample_rng, mode=sample_mode)'):
        EVALUATION,
    ('privfair/evaluation/evaluate.py', '_gan_synthetic',
     'return pd.DataFrame(fitted.sample(len(data.train), rng=sample_rng))'):
        EVALUATION,
    ('privfair/evaluation/per_group.py', 'per_group_figures.capped',
     'return frame.sample(n=max_train_rows, random_state=seed).reset_index(drop=True)'):
        EVALUATION,
    ('privfair/evaluation/utility.py', 'ci_test',
     'shuffled = rng.permutation(n)'):
        EVALUATION,
    ('privfair/fair/tot.py', 'TOTransform.transform',
     'u = rng.random(len(frame))'):
        "TOT's randomised map, applied to the released synthetic codes: post-processing",
    ('privfair/generative/calibration.py', 'noise_multiplier_on_ledger.trial',
     'book.spend_subsampled_gaussian(**kwargs)'):
        'planning: charges on a copy of the ledger to calibrate sigma; nothing is drawn',
    ('privfair/generative/effects.py', 'causal_effect',
     'noise = {v: rng.random(n_samples) for v in dag.nodes}'):
        'ancestral sampling of causal effects from CPTs counted on the released table: '
        'post-processing',
    ('privfair/generative/effects.py', 'causal_effect.run',
     'values[v] = tables[v].sample(parents, noise[v])'):
        'ancestral sampling of causal effects from CPTs counted on the released table: '
        'post-processing',
    ('privfair/generative/gan.py', 'ConditionalGenerator.forward',
     'z = torch.randn((n, self.noise_dim), generator=generator, device=device)'):
        "the generator's latent input z (public randomness)",
    ('privfair/generative/gan.py', 'CausalGenerator.exogenous',
     'z[v] = torch.randn((n, self.noise_dim), generator=generator, device=device)'):
        "the causal generator's exogenous inputs (public randomness)",
    ('privfair/generative/gan.py', '_draw_onehot',
     'index = torch.multinomial(p, n, replacement=True, generator=gen) if n else \\'):
        'conditions drawn from the noisy (released) marginals: post-processing',
    ('privfair/generative/gan.py', '_Trainer.__init__',
     'int(torch.randint(2**62, (1,), generator=gen, device=device).item()))'):
        TORCH_SEED,
    ('privfair/generative/gan.py', '_Trainer.d1_private_step',
     'mask = torch.rand(real.shape[0], generator=self.gen, device=self.device) < sample_rate'):
        "Poisson batch sampling (the accountant's subsampling, not noise)",
    ('privfair/generative/nets.py', 'torch_generator',
     'return torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))'):
        TORCH_SEED,
    ('privfair/generative/nets.py', 'seeded_init_',
     'nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)'):
        INITIALISATION,
    ('privfair/generative/nets.py', 'seeded_init_',
     'nn.init.uniform_(layer.bias, -bound, bound, generator=generator)'):
        INITIALISATION,
    ('privfair/generative/nets.py', 'uniform_draws',
     'return [torch.rand((n, w), generator=generator, device=device) for w in widths]'):
        "Gumbel-softmax of the generator's own output (public)",
    ('privfair/learn/dpsgd.py', 'poisson_batch',
     'return torch.nonzero(torch.rand(n, generator=generator) < sample_rate).flatten()'):
        "Poisson batch sampling (the accountant's subsampling, not noise)",
    ('privfair/learn/dpsgd.py', '_build',
     'params[f"layer{i}.weight"] = (torch.rand(fan_out, fan_in, generator=generator)'):
        INITIALISATION,
    ('privfair/release/kinds/causal_graph/kind.py', 'read_stage',
     'keep = context.rng("subsample").choice(table.num_rows, size=plan.max_rows,'):
        "PrivPC's uniform subset of max_rows rows; its scores are scaled for a replaced "
        'record (module docstring), not noise',
    ('privfair/release/kinds/gan/stages.py', '_declared_curve',
     'book.spend(LedgerEntry("policies", "gaussian", 1.0, rho=policies))'):
        "planning: the run's declared curve on a scratch ledger; nothing is drawn",
    ('privfair/release/kinds/gan/stages.py', '_declared_curve',
     'book.spend(LedgerEntry("domains", "gaussian", 1.0, rho=domains))'):
        "planning: the run's declared curve on a scratch ledger; nothing is drawn",
    ('privfair/release/kinds/gan/stages.py', '_declared_curve',
     'book.spend(LedgerEntry("GAN counts", "gaussian", 1.0, rho=counts))'):
        "planning: the run's declared curve on a scratch ledger; nothing is drawn",
    ('privfair/release/kinds/gan/stages.py', '_declared_curve',
     'book.spend_subsampled_gaussian(**kwargs)'):
        "planning: the run's declared curve on a scratch ledger; nothing is drawn",
    ('privfair/release/kinds/gan/stages.py', 'data_fairness',
     'order = rng.permutation(n)'):
        'the 70/30 split of the released table for its fairness figures: post-processing',
    ('privfair/release/kinds/gan/stages.py', 'sample_gan',
     'codes = fitted.sample(n, rng=rng)'):
        POST_PROCESSING,
    ('privfair/release/kinds/gan/stages.py', 'sample_gan',
     'fitted.sample(n, rng=rng), domain, anchors=fitted.anchors,'):
        POST_PROCESSING,
    ('privfair/release/kinds/gan/stages.py', 'small_n_line',
     'book.spend(LedgerEntry(name, "gaussian", 1.0, rho=float(plan.split[name])))'):
        "planning: the plan's line on the GAN small-n rule, on a scratch ledger; nothing is "
        "drawn",
    ('privfair/release/kinds/gan/independence.py', 'independence_sample',
     'return {a: rng.choice(len(p), size=n, p=p).astype(np.int64) for a, p in one_way.items()}'):
        'sampling the independence model of the noisy (released) marginals: post-processing',
    ('privfair/generative/gan.py', 'FittedGAN.sample',
     'return {a: rng.choice(self.domain.size(a), size=int(n),'):
        "sampling the small-n rule's independence model from its noisy one-way marginals: "
        'post-processing',
    ('privfair/generative/gan.py', '_fallback_rho.fits',
     'book.spend(LedgerEntry("trial", "gaussian", 1.0, rho=rho))'):
        "planning: the largest ρ the run's curve still allows, tried on a copy of the ledger; "
        "nothing is drawn",
    ('privfair/release/kinds/model/budget.py', '_ledger',
     'ledger.spend(entry)'):
        'planning: a declared cost on a scratch ledger; nothing is drawn',
    ('privfair/release/kinds/model/predict.py', 'probe_inputs',
     'codes = np.stack([probe_rng.integers(0, k, size=limit) for k in sizes], axis=1)'):
        'probe inputs from the contract alone, a fixed public seed',
    ('privfair/release/kinds/model/train.py', 'holdout_mask',
     'return rng.random(n) < holdout'):
        'the held-out rows, each independently (adding a person moves no other one); not noise',
    ('privfair/release/kinds/model/train.py', '_train_sgd',
     'generator.manual_seed(int(context.rng("train").integers(2**63 - 1)))'):
        TORCH_SEED,
    ('privfair/store/backends.py', '_write_key',
     'key = key if key is not None else secrets.token_bytes(32)'):
        'a fresh secret key for the store, not noise',
    ('privfair/store/backends.py', 'run',
     'time.sleep(random.uniform(0, min(0.25, 0.002 * 2 ** min(attempt, 8))))'):
        'jitter between retries of a transaction',
    ('privfair/store/registry_sql.py', 'seed_key.step',
     'key = secrets.token_bytes(32)'):
        'a fresh secret seed key for the registry, not noise',
    ('privfair/synth/per_group.py', 'PerGroupSynthesizer.fit',
     'ledger.spend(LedgerEntry(name=PARALLEL_STEP, mechanism="parallel-composition",'):
        "parallel composition of disjoint parts, charged before any part draws; each part's "
        'noise goes through the layer on its own ledger',
    ('privfair/synth/per_group.py', 'PerGroupSynthesizer.sample',
     'counts = rng.multinomial(n_rows, weights)'):
        POST_PROCESSING,
    ('privfair/synth/per_group.py', 'PerGroupSynthesizer.sample',
     'frame = model.sample(int(count), rng=part_rng)'):
        POST_PROCESSING,
    ('privfair/synth/per_group.py', 'PerGroupSynthesizer.sample',
     'return out.iloc[rng.permutation(len(out))].reset_index(drop=True)'):
        POST_PROCESSING,
    ('privfair/synth/sampling.py', 'systematic_round',
     'offset = rng.random(len(totals))[:, None]'):
        POST_PROCESSING,
    ('privfair/synth/sampling.py', 'sample_model',
     'u = rng.random(n_rows) + parent_key'):
        POST_PROCESSING,
    ('privfair/synth/sampling.py', 'sample_model',
     'shuffled = rng.permutation(n_rows)'):
        POST_PROCESSING,
    ('privfair/synth/sampling.py', 'decompress',
     'original[bucket] = rng.choice(merged, size=int(bucket.sum()), p=p)'):
        POST_PROCESSING,
    ('privfair/synth/synthesizer.py', 'synthesize',
     'frame = synth.sample(n_rows, rng=sample_rng, mode=sample_mode)'):
        POST_PROCESSING,
}


def find_draws(source: str) -> list[Draw]:
    """Every noise draw or ledger charge in ``source``: a call (or a reference, such as
    ``draw = rng.random``) of a sampler of numpy, torch or the standard library (imported by
    name too), ``torch.distributions``, a ledger charge."""
    lines = source.splitlines()
    stack: list[str] = []
    found: list[Draw] = []
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    prefixes = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    # samplers imported by name (``from random import choice``) and the layer's own
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module in RANDOM_MODULES
                for alias in node.names if alias.name in DRAWS}
    bare = imported | OTHER_DRAWS | CHARGES

    def add(node: ast.AST, what: str) -> None:
        line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        found.append(Draw(".".join(stack), line, lines[line - 1].strip(), what))

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.AST) -> None:
            stack.append(node.name)  # type: ignore[attr-defined]
            self.generic_visit(node)
            stack.pop()

        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Attribute(self, node: ast.Attribute) -> None:
            if node.attr == "distributions" and ast.unparse(node.value) == "torch":
                add(node, "torch.distributions")
            elif (node.attr in SAMPLERS and id(node) not in prefixes
                  and isinstance(node.ctx, ast.Load)
                  and ast.unparse(node.value) not in NOT_GENERATORS):
                add(node, ast.unparse(node) + ("" if id(node) in called else " (reference)"))
            self.generic_visit(node)

        def visit_Name(self, node: ast.Name) -> None:
            if node.id in bare and isinstance(node.ctx, ast.Load):
                add(node, node.id + ("" if id(node) in called else " (reference)"))

    Visitor().visit(tree)
    return found


def _library() -> Iterator[tuple[str, str]]:
    for file in sorted((ROOT / "privfair").rglob("*.py")):
        yield file.relative_to(ROOT).as_posix(), file.read_text(encoding="utf-8")


@functools.cache
def _library_draws() -> tuple[tuple[str, tuple[Draw, ...]], ...]:
    """Each library file's draws, scanned once per test session."""
    return tuple((path, tuple(find_draws(source))) for path, source in _library())


def outside_the_layer(files: Iterable[tuple[str, Iterable[Draw]]],
                      allowed: dict[tuple[str, str, str], str]) -> list[str]:
    """The draws and charges of ``files`` (path, its draws) outside :data:`LAYER` on no
    ``allowed`` line, and the allowed lines found other than exactly once (a copied line
    must be allowed on its own: make the copy's text differ, or add it with its reason)."""
    seen: dict[tuple[str, str, str], set[int]] = {}
    outside = []
    for path, draws in files:
        if path in LAYER:
            continue
        for draw in draws:
            key = (path, draw.function, draw.text)
            if key in allowed:
                seen.setdefault(key, set()).add(draw.line)
            else:
                outside.append(f"{path}:{draw.line} in {draw.function or '<module>'}: "
                               f"{draw.what}\n    {draw.text}")
    outside += [f"{path} in {function}: allowed line found {len(seen[key])} times, not once"
                f"\n    {text}" for key in allowed if len(seen.get(key, {0})) != 1
                for path, function, text in [key]]
    return outside


def test_no_privacy_noise_draw_or_ledger_charge_outside_the_layer():
    outside = outside_the_layer(_library_draws(), ALLOWED)
    assert not outside, ("privacy noise and ledger charges go through privfair/core/"
                         "mechanisms.py (or, for randomness that is not noise, a line on "
                         "ALLOWED with the reason):\n" + "\n".join(outside))


def test_every_allowance_is_still_used():
    used = {(path, draw.function, draw.text) for path, draws in _library_draws()
            for draw in draws}
    stale = [key for key in ALLOWED if key not in used]
    assert not stale, f"allowances nothing needs any more (remove them): {stale}"


def test_the_scan_finds_a_draw_or_a_charge_added_anywhere():
    source = (
        "import numpy as np\n"
        "from random import choice\n"
        "class Release:\n"
        "    def noisy(self, values, rng):\n"
        "        return values + rng.laplace(0.0, 1.0, size=values.shape)\n"
        "def charge(ledger, entry):\n"
        "    ledger.spend(entry)\n"
        "def torch_noise(torch, g):\n"
        "    return torch.normal(0.0, 1.0, size=(3,), generator=g) + g.new_empty(3).normal_()\n"
        "def legacy(x):\n"
        "    return x + np.random.gumbel(size=3) + torch.distributions.Laplace(0, 1).sample()\n"
        "def uniform_draws(rng, torch, g, secrets, nn):\n"
        "    picks = rng.choice(5, 2) + rng.integers(3) + rng.permutation(4)\n"
        "    coins = torch.bernoulli(g) + torch.randint(2, (3,)) + torch.randperm(3)\n"
        "    nn.init.xavier_uniform_(g); g.random_(); g.exponential_()\n"
        "    draw = rng.random  # a reference, called later\n"
        "    return picks, coins, secrets.randbelow(9), random.gauss(0, 1), draw(), choice([1])\n"
        "def not_noise(x):\n"
        "    rng = np.random.default_rng(0)\n"
        "    return np.power(x, 2) + math.gamma(x) + torch.random.initial_seed()\n")
    found = {(draw.function, draw.what) for draw in find_draws(source)}
    assert found == {
        ("uniform_draws", "choice"), ("Release.noisy", "rng.laplace"),
        ("charge", "ledger.spend"), ("torch_noise", "torch.normal"),
        ("torch_noise", "g.new_empty(3).normal_"), ("legacy", "np.random.gumbel"),
        ("legacy", "torch.distributions"),
        ("legacy", "torch.distributions.Laplace(0, 1).sample"), ("uniform_draws", "rng.choice"),
        ("uniform_draws", "rng.integers"), ("uniform_draws", "rng.permutation"),
        ("uniform_draws", "torch.bernoulli"), ("uniform_draws", "torch.randint"),
        ("uniform_draws", "torch.randperm"), ("uniform_draws", "nn.init.xavier_uniform_"),
        ("uniform_draws", "g.random_"), ("uniform_draws", "g.exponential_"),
        ("uniform_draws", "rng.random (reference)"), ("uniform_draws", "secrets.randbelow"),
        ("uniform_draws", "random.gauss")}


#: A module that makes Laplace noise by inverse CDF from one uniform draw (issue 41.6: the
#: scan listed only named distributions, so this passed unflagged).
INVERSE_CDF_LAPLACE = """\
import numpy as np


def noisy_count(values, scale, rng):
    u = rng.random() - 0.5
    return len(values) - scale * np.sign(u) * np.log(1 - 2 * abs(u))


def bootstrap(values, rng):
    order = rng.permutation(len(values))  # allowed: resampling, not noise
    return values[order]
"""


def test_an_inverse_cdf_laplace_is_flagged():
    path = "privfair/synth/inverse_cdf.py"
    outside = outside_the_layer([(path, find_draws(INVERSE_CDF_LAPLACE))], {
        (path, "bootstrap", "order = rng.permutation(len(values))  # allowed: resampling, "
                            "not noise"): "a test allowance"})
    assert len(outside) == 1 and "in noisy_count: rng.random" in outside[0], outside


def test_a_new_draw_in_an_allowed_function_is_flagged():
    """The allow-list is per line: a draw added next to an allowed one fails, and so does
    a copy of the allowed line."""
    path = "privfair/synth/inverse_cdf.py"
    allowed = {(path, "bootstrap", "order = rng.permutation(len(values))  # allowed: "
                                   "resampling, not noise"): "a test allowance"}
    base = "import numpy as np\n\n\ndef bootstrap" + INVERSE_CDF_LAPLACE.split(
        "def bootstrap")[1]
    assert outside_the_layer([(path, find_draws(base))], allowed) == []
    added = base.replace("    return values[order]",
                         "    return values[order] + rng.normal(0, 1, len(values))")
    flagged = outside_the_layer([(path, find_draws(added))], allowed)
    assert len(flagged) == 1 and "in bootstrap: rng.normal" in flagged[0], flagged
    copied = base.replace("    return values[order]",
                          "    order = rng.permutation(len(values))  # allowed: resampling, "
                          "not noise\n    return values[order]")
    flagged = outside_the_layer([(path, find_draws(copied))], allowed)
    assert len(flagged) == 1 and "found 2 times" in flagged[0], flagged


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


COUNTS = np.zeros(20_000, dtype=np.int64)
SPARSE = np.full(5_000, 1_000.0)
ROWS = np.zeros((4_000, 3))


def _gaussian(discrete: bool, *, grid: bool = False) -> Case:
    exact = np.zeros(3_000 if discrete else 20_000,
                     dtype=np.int64 if discrete and not grid else float)
    # Real answers on the grid: the declared sensitivity and σ grow by the same 1 + 2^-22-ish
    # factor (Δ' = Δ + g⌈√m⌉, σ' = σΔ'/Δ), so ρ is the declared one.
    sizes = gaussian_grid(sensitivity=2.0, sigma=3.0, coordinates=exact.size)
    sensitivity, sigma = ((float(sizes.sensitivity), sizes.sigma) if grid else (2.0, 3.0))
    return Case(
        "gaussian", exact, sensitivity, sigma,
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
    "grid gaussian": _gaussian(True, grid=True),
    "exponential": _exponential(False),
    "exponential first admissible": _exponential(True),
    "laplace": Case(
        "laplace", COUNTS, 2.0, 4.0,
        lambda ledger, rng: laplace_mechanism(COUNTS, epsilon=0.5, sensitivity=2.0, rng=rng,
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
    # Exact noise: an empty bin passes τ when its discrete Laplace noise reaches k = ⌈τ⌉ = 2,
    # with probability r^k/(1 + r), r = e^(−1/b): b = 2 declared, b = 1 at half the noise;
    # its count is then k + (Z | Z ≥ 0), of mean k + r/(1 − r).
    for factor, b in ((1.0, 2.0), (0.5, 1.0)):
        r = math.exp(-1 / b)
        assert len(draws[factor].outside) == pytest.approx(40_000 * r**2 / (1 + r), rel=0.05)
        assert np.mean(draws[factor].outside_counts) == pytest.approx(2 + r / (1 - r),
                                                                      rel=0.05)
        assert np.all(draws[factor].outside_counts >= 2)


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
