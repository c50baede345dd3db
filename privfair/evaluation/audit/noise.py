"""Noise-distribution tests of the code that releases, in the way Tumult Core tests its noise.

Each :class:`NoiseCase` calls one release function (the policy counts, the model card's
confusion counts, the marginal measurements, AIM's rounds, MST's selection, ...) many times
on exact answers the audit builds itself, inside :func:`~privfair.core.mechanisms.
recorded_queries`. The layer hands back every query's exact answer and declared scale; the
case reads the noisy answer from what the function *returns* (the published record, the
measurements), so what is tested is the noise that reaches the output. The declared scale
is checked against the ledger entry the same call wrote (the ledger's σ or ε, which is the
claim), and the draws are tested against the distribution that scale declares:

* Gaussian (continuous and discrete): ``Σ z²`` against χ²(n) for the scale (two-sided), and
  for continuous noise a Kolmogorov-Smirnov test of ``z`` against N(0, 1) for the shape;
* Laplace: ``Σ |z|`` against Gamma(n, 1), and a KS test against Laplace(0, 1);
* the exponential mechanism (Gumbel-max): the score test of the noise factor ``f`` in
  ``P(pick i) ∝ exp(logit_i / f)`` at ``f = 1``, i.e. the chosen logits against their
  expectation under the declared distribution.

A test *passes* when its p-value is at least :data:`ALPHA`. Its power is shown the way the
ε audits show theirs, by negative controls: the same case run under :func:`~privfair.core.
mechanisms.scaled_noise` at 0.7 and at 1.3 must fail. Every case is seeded, so the verdicts
are reproducible. A case whose draws the layer did not record (a call site not yet on the
layer) is reported as not covered rather than passed.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfair.core.accounting import LedgerEntry, PrivacyLedger
from privfair.core.mechanisms import Query, recorded_queries, scaled_noise
from privfair.evaluation.audit.core import fresh_ledger
from privfair.evaluation.audit.models import one_torch_thread

__all__ = [
    "ALPHA",
    "CONTROL_FACTORS",
    "NOISE_CASES",
    "NoiseCase",
    "UNTESTED_SITES",
    "NoiseResult",
    "Observation",
    "layer_inventory",
    "run_noise_case",
    "test_draws",
]

#: A test fails below this p-value. The cases are seeded, so this is not a flake rate but
#: the margin by which the true scale must pass.
ALPHA = 1e-3
#: The negative controls: every privacy noise draw scaled by these factors must be caught.
CONTROL_FACTORS = (0.7, 1.3)

#: Additive Laplace noise of scale b per entry, tested alike (the grid's rounding is 2^-22 b).
LAPLACE = ("laplace", "grid-laplace", "sparse-laplace")


@dataclass(frozen=True)
class Observation:
    """One draw as the release function returned it, beside the query the layer recorded.

    ``released`` is the noisy answer read from the function's output (same shape as
    ``query.exact``) for additive noise, or the index picked for the exponential mechanism.
    ``mechanism`` is the ledger's name for it (``gaussian``, ``discrete-gaussian``,
    ``laplace``, ``exponential``).
    """

    query: Query
    released: np.ndarray | int
    mechanism: str


@dataclass(frozen=True)
class Run:
    """What one call of a case returned: its observations and the ledger it charged."""

    observations: list[Observation]
    entries: list[LedgerEntry]


#: ``call(rng) -> Run``: one call of the release function on the audit's own data.
Call = Callable[[np.random.Generator], Run]


@dataclass(frozen=True)
class NoiseCase:
    """A release function whose noise is tested: ``samples`` draws in full, ``quick`` in
    ``--quick`` (scalar noise values, or picks for the exponential mechanism)."""

    key: str
    name: str
    function: str
    call: Call
    samples: int
    quick: int
    seed: int


@dataclass(frozen=True)
class Verdict:
    """One test of the draws: p-value and the scale ratio measured (drawn / declared)."""

    p_value: float
    ratio: float
    draws: int

    @property
    def passed(self) -> bool:
        return self.p_value >= ALPHA


@dataclass(frozen=True)
class NoiseResult:
    """A case's test at the audited factor and its negative controls."""

    key: str
    name: str
    function: str
    mechanism: str
    claim: str
    verdict: Verdict | None
    controls: dict[float, Verdict] = field(default_factory=dict)
    ledger_mismatch: str = ""
    seconds: float = 0.0

    @property
    def covered(self) -> bool:
        """The layer recorded the case's draws (its call site is on the layer)."""
        return self.verdict is not None

    @property
    def powered(self) -> bool:
        """On the layer, and both scaled-noise controls caught."""
        return self.covered and all(self.caught.values())

    @property
    def caught(self) -> dict[float, bool]:
        return {f: not v.passed for f, v in self.controls.items()}

    @property
    def status(self) -> str:
        if self.verdict is None:  # not covered
            return "not on the layer"
        if self.ledger_mismatch:
            return "LEDGER MISMATCH"
        if not self.verdict.passed:
            return "NOISE OFF SCALE"
        return "ok" if all(self.caught.values()) else "NO POWER"

    @property
    def ok(self) -> bool:
        """Nothing wrong found: passed with power, or not on the layer (coverage says so)."""
        return self.status in ("ok", "not on the layer")

    def to_dict(self) -> dict[str, Any]:
        def verdict(v: Verdict | None) -> dict[str, Any] | None:
            return None if v is None else {"p_value": v.p_value, "ratio": v.ratio,
                                           "draws": v.draws, "passed": v.passed}

        return {"key": self.key, "name": self.name, "function": self.function, "mechanism": self.mechanism,
                "claim": self.claim, "verdict": verdict(self.verdict),
                "controls": {str(f): verdict(v) for f, v in self.controls.items()},
                "caught": {str(f): c for f, c in self.caught.items()},
                "ledger_mismatch": self.ledger_mismatch, "status": self.status,
                "seconds": self.seconds}


# --- the tests --------------------------------------------------------------------------------


def _two_sided(cdf: float, sf: float) -> float:
    return float(min(1.0, 2 * min(cdf, sf)))


def test_draws(mechanism: str, observations: Sequence[Observation]) -> Verdict:
    """Test the observations' noise against the scale each query declared.

    Returns the p-value (the smaller of the scale and the shape test's, doubled) and the
    measured ratio of the drawn to the declared scale.
    """
    from scipy import stats

    if mechanism == "exponential":
        return _test_exponential(observations)
    if mechanism == "row-laplace":
        return _test_row_laplace(observations)
    noise = [(np.asarray(o.released, dtype=np.float64) - o.query.exact).ravel()
             for o in observations]
    z = np.concatenate([e / o.query.scale for e, o in zip(noise, observations, strict=True)])
    n = z.size
    # Exact integer noise (issue 41.2: counts get discrete Gaussian or Laplace noise): float
    # noise is integral with probability 0, so integral noise is the discrete sampler's.
    integral = all(np.array_equal(e, np.round(e)) for e in noise)
    if integral and mechanism == "gaussian":
        mechanism = "discrete-gaussian"
    if integral and mechanism in LAPLACE:
        return _test_discrete_laplace(noise, observations)
    if mechanism in ("gaussian", "discrete-gaussian"):
        # Σ z² ~ χ²(n); the discrete Gaussian's variance is σ² to within e^{-2π²σ²}.
        total = float(np.sum(z**2))
        p_scale = _two_sided(stats.chi2.cdf(total, n), stats.chi2.sf(total, n))
        ratio = math.sqrt(total / n)
        if mechanism == "discrete-gaussian":
            return Verdict(p_scale, ratio, n)
        p_shape = float(stats.kstest(z, "norm").pvalue)
    elif mechanism in LAPLACE:
        total = float(np.sum(np.abs(z)))  # Σ |z| ~ Gamma(n, 1)
        p_scale = _two_sided(stats.gamma.cdf(total, n), stats.gamma.sf(total, n))
        ratio = total / n
        p_shape = float(stats.kstest(z, "laplace").pvalue)
    else:
        raise ValueError(f"no noise test for mechanism {mechanism!r}")
    return Verdict(min(1.0, 2 * min(p_scale, p_shape)), ratio, n)


def _test_discrete_laplace(noise: Sequence[np.ndarray],
                           observations: Sequence[Observation]) -> Verdict:
    """Integer noise of the discrete Laplace, P(k) ∝ r^|k|, r = e^(−1/b): Σ|k| against its
    exact mean 2r/(1 − r²) and variance 2r/(1 − r)² − (2r/(1 − r²))² per draw (normal
    approximation, scale), and a chi-square of |k| against its pmf (shape)."""
    from scipy import stats

    mean = var = 0.0
    counts: dict[int, int] = {}
    expected: dict[int, float] = {}
    total = 0.0
    top = int(max(np.abs(e).max(initial=0) for e in noise)) + 1
    for e, o in zip(noise, observations, strict=True):
        r = math.exp(-1.0 / o.query.scale)
        m1 = 2 * r / (1 - r * r)
        mean += e.size * m1
        var += e.size * (2 * r / (1 - r) ** 2 - m1 * m1)
        total += float(np.abs(e).sum())
        magnitudes = np.abs(e).astype(np.int64)
        pmf = np.array([(1 - r) / (1 + r) * (1 if k == 0 else 2) * r**k for k in range(top)])
        for k in range(top):
            counts[k] = counts.get(k, 0) + int(np.sum(magnitudes == k))
            expected[k] = expected.get(k, 0.0) + e.size * float(pmf[k])
    p_scale = _two_sided(stats.norm.cdf(total, mean, math.sqrt(var)),
                         stats.norm.sf(total, mean, math.sqrt(var)))
    keys = [k for k in sorted(expected) if expected[k] >= 5]
    observed = np.array([counts[k] for k in keys] + [sum(counts.values())
                                                     - sum(counts[k] for k in keys)])
    wanted = np.array([expected[k] for k in keys] + [sum(e.size for e in noise)
                                                     - sum(expected[k] for k in keys)])
    keep = wanted > 0
    chi = float(((observed[keep] - wanted[keep]) ** 2 / wanted[keep]).sum())
    p_shape = float(stats.chi2.sf(chi, max(int(keep.sum()) - 1, 1)))
    return Verdict(min(1.0, 2 * min(p_scale, p_shape)), _laplace_ratio(noise, observations),
                   sum(e.size for e in noise))


def _laplace_ratio(noise: Sequence[np.ndarray], observations: Sequence[Observation]) -> float:
    """The factor c on every declared scale b whose discrete Laplace mean |k| (2r/(1 − r²),
    r = e^(−1/(cb))) matches the draws': the drawn/declared scale (E|k| is not linear in b)."""
    total = sum(float(np.abs(e).sum()) for e in noise)

    def expected(c: float) -> float:
        out = 0.0
        for e, o in zip(noise, observations, strict=True):
            r = math.exp(-1.0 / (c * o.query.scale))
            out += e.size * 2 * r / (1 - r * r)
        return out

    low, high = 1e-3, 1e3
    for _ in range(80):  # E|k| increases with c: bisect on a log scale
        mid = math.sqrt(low * high)
        low, high = (mid, high) if expected(mid) < total else (low, mid)
    return math.sqrt(low * high)


def _test_row_laplace(observations: Sequence[Observation]) -> Verdict:
    """Rows of density ∝ exp(−‖η‖₂ / b) in R^k: ‖η‖/b ~ Gamma(k, 1), so the sum of n rows'
    norms is Gamma(n k, 1) (scale), and a KS test of the norms against Gamma(k) (shape)."""
    from scipy import stats

    norms, dims = [], set()
    for o in observations:
        eta = (np.asarray(o.released, dtype=np.float64) - o.query.exact) / o.query.scale
        norms.append(np.linalg.norm(eta, axis=1))
        dims.add(eta.shape[1])
    (k,) = dims  # one case, one embedding size
    r = np.concatenate(norms)
    total, shape = float(r.sum()), r.size * k
    p_scale = _two_sided(stats.gamma.cdf(total, shape), stats.gamma.sf(total, shape))
    p_shape = float(stats.kstest(r, "gamma", args=(k,)).pvalue)
    return Verdict(min(1.0, 2 * min(p_scale, p_shape)), total / shape, r.size)


def _test_exponential(observations: Sequence[Observation]) -> Verdict:
    """The score test of ``P(i) ∝ exp(l_i / f)`` at ``f = 1`` (``l = score / scale``, the
    Gumbel-max logits), and the maximum-likelihood ``f`` on a grid as the measured ratio."""
    from scipy import stats
    from scipy.special import logsumexp, softmax

    width = max(o.query.exact.size for o in observations)
    # One row per draw, padded with -inf (a candidate that cannot be picked).
    logits = np.full((len(observations), width), -np.inf)
    for i, o in enumerate(observations):
        logits[i, :o.query.exact.size] = o.query.exact / o.query.scale
    picks = np.array([int(o.released) for o in observations])
    rows = np.arange(len(picks))
    p = softmax(logits, axis=1)
    finite = np.where(np.isfinite(logits), logits, 0.0)
    mean = np.sum(p * finite, axis=1)
    score = float(np.sum(finite[rows, picks] - mean))
    variance = float(np.sum(p * (finite - mean[:, None]) ** 2))
    if variance <= 0:  # every pick forced: the draws say nothing about the scale
        return Verdict(1.0, float("nan"), len(picks))
    zscore = score / math.sqrt(variance)
    p_value = float(2 * stats.norm.sf(abs(zscore)))
    grid = np.exp(np.linspace(math.log(0.25), math.log(4.0), 281))
    loglik = [float(np.sum(finite[rows, picks] / f - logsumexp(logits / f, axis=1)))
              for f in grid]
    return Verdict(p_value, float(grid[int(np.argmax(loglik))]), len(picks))


# --- running a case -------------------------------------------------------------------------


def _collect(case: NoiseCase, draws: int, rng: np.random.Generator) -> list[Run]:
    runs, have = [], 0
    while have < draws:
        run = case.call(rng)
        runs.append(run)
        if not run.observations:  # not on the layer: nothing to test
            return runs
        have += sum(1 if o.mechanism == "exponential" else np.size(o.query.exact)
                    for o in run.observations)
    return runs


def _check_ledger(run: Run) -> str:
    """The declared scale of every observed query against the ledger entry the call wrote
    under its name: σ (Gaussian), b = Δ/ε (Laplace), 2Δ/ε (exponential)."""
    by_name: dict[str, list[LedgerEntry]] = {}
    for entry in run.entries:
        by_name.setdefault(entry.name, []).append(entry)
    for o in run.observations:
        entries = by_name.get(o.query.name, [])
        if not entries:
            return f"{o.query.name!r}: no ledger entry"
        entry = entries[0]
        if entry.mechanism in ("exponential", "laplace"):
            declared = (2 if entry.mechanism == "exponential" else 1) * entry.sensitivity / (
                entry.epsilon or float("nan"))
        else:
            declared = entry.sigma or float("nan")
        # 1e-6: the grid Laplace's scale is Δ/ε to within 1 + 2^-21 (its integer steps).
        if not math.isclose(declared, o.query.scale, rel_tol=1e-6):
            return (f"{o.query.name!r}: noise scale {o.query.scale:.6g}, the ledger's "
                    f"{declared:.6g}")
        if not math.isclose(entry.sensitivity, o.query.sensitivity, rel_tol=1e-9):
            return (f"{o.query.name!r}: sensitivity {o.query.sensitivity:.6g}, the ledger's "
                    f"{entry.sensitivity:.6g}")
    return ""


def _claim(run: Run) -> str:
    """The ledger's claim for one call: ρ summed (and ε for pure-DP entries)."""
    rho = sum(e.rho for e in run.entries)
    pure = [e.epsilon for e in run.entries if e.mechanism in ("laplace", "exponential")
            and e.epsilon]
    return f"rho {rho:.4g}" + (f", eps {sum(pure):.4g}" if pure else "")


def _test_at(case: NoiseCase, draws: int, factor: float, seed: np.random.SeedSequence
             ) -> tuple[list[Run], dict[str, Verdict]]:
    rng = np.random.default_rng(seed)
    with scaled_noise(factor):
        runs = _collect(case, draws, rng)
    observations = [o for run in runs for o in run.observations]
    by_mechanism: dict[str, list[Observation]] = {}
    for o in observations:
        by_mechanism.setdefault(o.mechanism, []).append(o)
    return runs, {m: test_draws(m, obs) for m, obs in by_mechanism.items()}


def run_noise_case(case: NoiseCase, *, quick: bool = False, factor: float = 1.0,
                   scale: float = 1.0) -> NoiseResult:
    """Test one case at ``factor`` (1 unless ``--scale-noise``) and at each control factor,
    with ``samples`` (``quick``: ``quick``) × ``scale`` draws."""
    start = time.perf_counter()
    draws = max(50, round((case.quick if quick else case.samples) * scale))
    streams = np.random.SeedSequence(case.seed).spawn(1 + len(CONTROL_FACTORS))
    runs, verdicts = _test_at(case, draws, factor, streams[0])
    if not verdicts:
        return NoiseResult(case.key, case.name, case.function, "-",
                           _claim(runs[0]) if runs else "-", None,
                           seconds=round(time.perf_counter() - start, 2))
    # One test per case (the cases are built so); the first carries the verdict.
    test, verdict = next(iter(verdicts.items()))
    controls = {}
    for f, stream in zip(CONTROL_FACTORS, streams[1:], strict=True):
        # At f x the declared scale whatever ``factor`` is: the controls show the test's
        # power, which does not depend on the noise the audited run drew.
        _, control = _test_at(case, draws, f, stream)
        controls[f] = control[test]
    mismatch = next((m for m in map(_check_ledger, runs[:3]) if m), "")
    # The layer's name for what drew the noise (its inventory's), not the test's.
    layer = next(o.query.mechanism for run in runs for o in run.observations)
    return NoiseResult(case.key, case.name, case.function, layer, _claim(runs[0]), verdict,
                       controls, mismatch, round(time.perf_counter() - start, 2))


# --- the cases --------------------------------------------------------------------------------


def _charged(body: Callable[[PrivacyLedger], Any]) -> tuple[Any, list[Query], list[LedgerEntry]]:
    ledger = fresh_ledger(delta=1e-9)
    with recorded_queries() as queries:
        out = body(ledger)
    return out, list(queries), list(ledger.entries)


def _additive(query: Query, released: np.ndarray) -> Observation:
    mechanism = query.mechanism
    return Observation(query, np.asarray(released, dtype=np.float64).reshape(query.exact.shape),
                       mechanism)


def _entry_mechanism(entries: Sequence[LedgerEntry], name: str, default: str) -> str:
    """The ledger's mechanism name for the entry ``name`` (``discrete-gaussian`` is told
    apart there, not in the query)."""
    return next((e.mechanism for e in entries if e.name == name), default)


POLICY_CONTRACT = """\
name: audit-policies
version: "1"
columns:
  - {name: c, type: categorical, categories: [x, y, other], out_of_domain: "other:other",
     nulls: drop}
  - {name: n, type: numeric, bins: [0, 10, 20], out_of_domain: clamp, nulls: "as:[10, 20]"}
  - {name: d, type: categorical, categories: [a, b]}
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


@functools.lru_cache(maxsize=1)
def policy_contract() -> Any:
    """The contract of the policy-count audits (3 columns, 7 cells), parsed once."""
    from privfair.contracts.schema import parse_contract

    return parse_contract(POLICY_CONTRACT)


def _policy_counts(rng: np.random.Generator) -> Run:
    """``release.policy_counts.measure_policy_counts`` at a run's share of ρ = 1, all
    counts 0; the noisy counts are read from the record the manifest publishes."""
    from privfair.contracts.encoding import PolicyTally
    from privfair.release.policy_counts import POLICY_SHARE, measure_policy_counts

    contract = policy_contract()
    record, queries, entries = _charged(lambda ledger: measure_policy_counts(
        PolicyTally(), contract, ledger, rho=POLICY_SHARE, rng=rng))
    noisy = np.array([cell["noisy_count"] for cell in record["touched_rows"]])
    return Run([_additive(q, noisy) for q in queries[:1]], entries)


def _row_count(rng: np.random.Generator) -> Run:
    """``release.kinds.model.train.noisy_row_count``: DP-SGD's row count n̂ (exact discrete
    Laplace on an integer), exact count 0, at ε = 0.5."""
    from privfair.release.kinds.model.train import noisy_row_count

    noisy, queries, entries = _charged(lambda ledger: noisy_row_count(
        0, epsilon=0.5, rng=rng, ledger=ledger))
    return Run([_additive(q, np.array([noisy])) for q in queries[:1]], entries)


def _confusion_counts(rng: np.random.Generator) -> Run:
    """``release.model.evaluation.release_confusion``: the model card's per-group confusion
    counts (2 groups), exact counts 0, at the σ of a release's evaluation share."""
    from privfair.release.kinds.model.evaluation import release_confusion

    counts = np.zeros((2, 2, 2), dtype=np.int64)
    noisy, queries, entries = _charged(lambda ledger: release_confusion(
        counts, sigma=7.0, ledger=ledger, rng=rng))
    return Run([_additive(q, noisy) for q in queries[:1]], entries)


def _marginals(discrete: bool) -> Call:
    """``synth.measure.measure_marginals`` on a one-way and a 2-way marginal at once (L2
    sensitivity √2), as a table release measures its one-way and selected marginals."""

    def call(rng: np.random.Generator) -> Run:
        from privfair.synth.measure import measure_marginals

        tables = {("a",): np.zeros(3, dtype=np.int64),
                  ("a", "b"): np.full((3, 4), 5, dtype=np.int64)}
        out, queries, entries = _charged(lambda ledger: measure_marginals(
            tables, list(tables), rho=0.05, rng=rng, ledger=ledger, name="marginals",
            discrete=discrete))
        flat = np.concatenate([m.values.ravel() for m in out])
        return Run([Observation(q, flat, _entry_mechanism(entries, q.name, q.mechanism))
                    for q in queries[:1]], entries)

    return call


def _aim_rounds(rng: np.random.Generator) -> Run:
    """``synth.aim.run_aim`` itself on 3 attributes: its initial one-way marginals and its
    rounds' measurements (read from the returned measurements, in the order drawn)."""
    from privfair.core.domain import Domain
    from privfair.synth.aim import candidate_cliques, run_aim

    domain = Domain(("a", "b", "c"), (2, 3, 2))
    tables = {c: np.zeros(domain.shape(c)) for c in candidate_cliques(domain)}
    result, queries, entries = _charged(lambda ledger: run_aim(
        tables, domain, rho=2.0, rng=rng, ledger=ledger, rounds=6, max_iters=5,
        refit=False))
    flat = np.concatenate([m.values.ravel() for m in result.measurements])
    observations, start = [], 0
    for q in queries:
        if q.mechanism != "gaussian":
            continue
        size = q.exact.size
        observations.append(_additive(q, flat[start:start + size]))
        start += size
    return Run(observations, entries)


def _mst_selection(rng: np.random.Generator) -> Run:
    """``synth.structure.private_kruskal`` (MST and Greedy-PreFair's selection) over the 3
    edges of 3 attributes, weights two noise scales apart; each round's pick is read from
    the edges it returns."""
    from privfair.core.domain import Domain
    from privfair.synth.structure import private_kruskal

    domain = Domain(("a", "b", "c"), (2, 2, 2))
    candidates = [("a", "b"), ("a", "c"), ("b", "c")]
    weights = np.array([0.0, 2.0, 4.0])  # ε = 1 per round at ρ = 1/4: scale 2
    chosen, queries, entries = _charged(lambda ledger: private_kruskal(
        domain, candidates, weights, rho=0.25, rng=rng, ledger=ledger))
    observations = []
    for q, edge in zip(queries, chosen, strict=False):
        pick = int(np.flatnonzero(q.exact == weights[candidates.index(edge)])[0])
        observations.append(Observation(q, pick, "exponential"))
    return Run(observations, entries)


def _aim_selection(rng: np.random.Generator) -> Run:
    """``synth.aim.exponential_first_admissible`` (AIM's own selection), every candidate
    admissible, qualities two noise scales apart."""
    from privfair.synth.aim import exponential_first_admissible

    scores = np.array([0.0, 2.0, 4.0, 6.0])
    (pick, _), queries, entries = _charged(lambda ledger: exponential_first_admissible(
        scores, lambda i: True, epsilon=1.0, sensitivity=1.0, rng=rng, ledger=ledger,
        name="AIM select"))
    return Run([Observation(q, pick, "exponential") for q in queries[:1]], entries)


def _privpc_moments(rng: np.random.Generator) -> Run:
    """``causal.privpc.noisy_moments`` (PrivPC*'s Laplace release of the count, sums and
    cross products), one feature; the released count is read back (1 000 rows, far above
    the noise, so the floor at 1 never clips it)."""
    from privfair.causal.privpc import noisy_moments

    z = np.zeros((1000, 1))
    moments, queries, entries = _charged(lambda ledger: noisy_moments(
        z, rho=0.5, ledger=ledger, rng=rng, clip=1.0))
    observations = [Observation(Query(q.name, q.mechanism, q.exact[:1], q.sensitivity,
                                      q.scale), np.array([moments.count]), "laplace")
                    for q in queries[:1]]
    return Run(observations, entries)


def _cathist(rng: np.random.Generator) -> Run:
    """``domains.cathist.cathist`` on 20 active values of a 50-value universe, each counted
    far above the threshold, so every noisy count is released and read back by label."""
    from privfair.domains.cathist import ValueListUniverse, cathist

    universe = ValueListUniverse(tuple(f"v{i:02d}" for i in range(50)))
    true = {f"v{i:02d}": 1000 for i in range(20)}
    result, queries, entries = _charged(lambda ledger: cathist(
        true, universe=universe, tolerance=0.01, epsilon=1.0, rng=rng, ledger=ledger))
    released = dict(zip(result.categories, result.noisy_counts.tolist(), strict=True))
    noisy = np.array([released.get(label, np.nan) for label in true])
    return Run([Observation(q, noisy, "sparse-laplace") for q in queries[:1]], entries)


def _dpne(rng: np.random.Generator) -> Run:
    """``embedding.dpne.dpne`` on a 6-node path, dim 2, public factor: its perturbed linear
    term is read back from the embeddings it returns (``linear = −2 W (HᵀH + λI)``)."""
    from privfair.embedding.dpne import EdgeList, dpne

    graph = EdgeList(6, np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]))
    factor = np.linspace(-0.7, 0.7, 12).reshape(6, 2)  # rows of norm <= 1
    regularization = 1e-3
    w, queries, entries = _charged(lambda ledger: dpne(
        graph, dim=2, epsilon=2.0, ledger=ledger, rng=rng, factor=factor,
        regularization=regularization))
    gram = factor.T @ factor + regularization * np.eye(2)
    linear = -2.0 * w @ gram
    return Run([Observation(q, linear, "row-laplace") for q in queries[:1]], entries)


def _functional(rng: np.random.Generator) -> Run:
    """``learn.functional.noisy_objective`` (PFLR, public centre): the released polynomial's
    coefficients (λ1, μ, Λ2; μ with the default absolute fairness term) on its
    discrete-Laplace grid, against the exact ones."""
    from privfair.learn.functional import noisy_objective

    x = np.eye(4)[np.arange(40) % 4]
    y, s = (np.arange(40) % 2).astype(float), (np.arange(40) % 3 == 0).astype(float)
    (objective, _, _), queries, entries = _charged(lambda ledger: noisy_objective(
        x, y, s, epsilon=1.0, variant="pflr", row_l1_bound=1.0, ledger=ledger, rng=rng,
        alpha=0.3, centre=0.5))
    fairness = [] if objective.fairness is None else [objective.fairness]
    released = np.concatenate([objective.linear, *fairness, objective.quadratic.ravel()])
    return Run([Observation(q, released, "grid-laplace") for q in queries[-1:]
                if q.exact.size == released.size], entries)


def _dpsgd(rng: np.random.Generator) -> Run:
    """``learn.dpsgd.train`` (DP-SGD, logistic regression), one Poisson-subsampled step at
    q = 1/4. Its noise is read from the weights: the same run (same torch seed, so the same
    batch) under ``scaled_noise(1e-9)`` gives the noiseless update, and the difference of
    the two weights, times b / lr, is the noise the step added to each gradient sum."""
    import torch

    from privfair.core.mechanisms import noise_factor
    from privfair.learn.dpsgd import SGDSettings, train

    features = np.random.default_rng(5).normal(size=(200, 30)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(np.float64)
    groups = np.zeros(200, dtype=np.int64)
    settings = SGDSettings(method="dpsgd", sample_rate=0.25, steps=1,
                           expected_batch_size=50.0, noise_multiplier=1.0, clip=1.0,
                           learning_rate=1.0, weight_decay=0.0)
    seed = int(rng.integers(2**62))

    def fit(ledger: PrivacyLedger) -> Any:
        with one_torch_thread():
            return train(features, labels, groups, settings=settings, n_groups=1,
                         ledger=ledger, generator=torch.Generator().manual_seed(seed))

    net, queries, entries = _charged(fit)
    with scaled_noise(noise_factor() * 1e-9), recorded_queries():
        quiet = fit(fresh_ledger(delta=1e-9))
    scale = settings.expected_batch_size / settings.lr
    observations = []
    for q, name in zip(queries, net.weights, strict=True):
        moved = (quiet.weights[name] - net.weights[name]).astype(np.float64)
        observations.append(Observation(q, q.exact + moved.reshape(q.exact.shape) * scale,
                                        "gaussian"))
    return Run(observations, entries)


#: The release functions whose noise is tested (name -> case). Full counts take a few CPU
#: seconds in all; ``quick`` ones power every control by a wide margin.
NOISE_CASES: dict[str, NoiseCase] = {c.key: c for c in (
    NoiseCase("policy-counts", "policy counts",
              "release.policy_counts.measure_policy_counts", _policy_counts,
              20_000, 2_000, 100),
    NoiseCase("row-count", "DP-SGD row count", "release.kinds.model.train.noisy_row_count",
              _row_count, 20_000, 2_000, 112),
    NoiseCase("confusion-counts", "model card confusion counts",
              "release.model.evaluation.release_confusion", _confusion_counts,
              20_000, 2_000, 101),
    NoiseCase("gaussian", "marginals", "synth.measure.measure_marginals",
              _marginals(False), 20_000, 2_000, 102),
    NoiseCase("gaussian-discrete", "marginals (discrete)",
              "synth.measure.measure_marginals(discrete=True)", _marginals(True),
              6_000, 1_500, 103),
    NoiseCase("aim-round", "AIM measurements", "synth.aim.run_aim", _aim_rounds,
              20_000, 2_000, 104),
    NoiseCase("selection", "MST/PreFair selection", "synth.structure.private_kruskal",
              _mst_selection, 20_000, 3_000, 105),
    NoiseCase("aim-selection", "AIM selection", "synth.aim.exponential_first_admissible",
              _aim_selection, 20_000, 3_000, 106),
    NoiseCase("privpc-star", "PrivPC* moments", "causal.privpc.noisy_moments",
              _privpc_moments, 20_000, 2_000, 107),
    NoiseCase("cathist", "CatHist", "domains.cathist.cathist", _cathist, 20_000, 2_000, 108),
    NoiseCase("dpne", "DPNE", "embedding.dpne.dpne", _dpne, 20_000, 2_000, 109),
    NoiseCase("pflr", "functional mechanism (PFLR)", "learn.functional.noisy_objective",
              _functional, 20_000, 2_000, 110),
    NoiseCase("dpsgd-subsampled", "DP-SGD step (q = 1/4)", "learn.dpsgd.train",
              _dpsgd, 20_000, 2_000, 111),
)}

#: Release call sites that draw privacy noise with no noise test here yet (their ε audits,
#: where they have one, still run): each is named in the coverage line.
UNTESTED_SITES: dict[str, str] = {
    "DP quantiles": "domains.quantiles.dp_quantile_edges (exponential with a base measure)",
    "PrivPC / LapMech": "causal.privpc.priv_pc, lap_mech (output is a graph)",
    "DPSGD-F": "learn.dpsgd.train, method dpsgd-f (adaptive clipping bounds)",
    "GAN": "generative.gan (subsampled Gaussian, torch)",
}


def layer_inventory(results: Sequence[NoiseResult] = ()) -> list[str]:
    """The layer's inventory of mechanisms (``core.mechanisms.MECHANISMS`` when the layer
    has one; otherwise the mechanism names its ledger entries use)."""
    from privfair.core import mechanisms

    inventory = getattr(mechanisms, "MECHANISMS", None)
    if inventory:
        return sorted(inventory)
    return sorted({"gaussian", "discrete-gaussian", "exponential", "laplace",
                   "subsampled-gaussian"} | {r.mechanism for r in results if r.covered})
