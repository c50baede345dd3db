"""AIM (McKenna et al. 2022; SAFES Alg. 2), and fairness-constrained AIM.

AIM adaptively picks marginals from the downward closure of a workload, measures them with the
Gaussian mechanism, and refits a graphical model after every round:

* T = 16·d nominal rounds; each round's ρ/T is split 0.9 measure / 0.1 select;
* selection by the exponential mechanism with quality
  ``w_r·(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·n_r)``, sensitivity ``max w``;
* annealing: when a measured marginal moves the model less than its expected noise, σ halves
  and ε doubles;
* a model-size limit on the junction tree's maximal cliques that grows with the budget used;
* warm-started estimation every round; the remaining budget goes to the last round.

Fair AIM only keeps candidates whose addition leaves every protected–outcome path blocked by an
admissible attribute in the model's Markov network, so the fitted distribution satisfies
O ⟂ P | A by the global Markov property. The check runs again on the final model.

The initial one-way measurements are charged as what they are, d sensitivity-1 queries at σ₀
(the reference code charges ``len(oneway)`` whatever cliques it actually measures).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Clique, Domain, Roles

# exponential_first_admissible: AIM's selection, in the mechanism layer (re-exported here).
from privfair.core.mechanisms import exponential_first_admissible, gaussian_mechanism
from privfair.synth.estimation import (
    BeliefPropagation,
    GraphicalModel,
    build_junction_tree,
    estimate,
)
from privfair.synth.measure import Measurement, combine_measurements, measure_marginals
from privfair.synth.structure import check_fairness


def all_two_way_workload(domain: Domain, *, max_cells: int = 10_000) -> list[Clique]:
    """Every pair of attributes whose table has at most ``max_cells`` cells (AIM's default)."""
    return [tuple(p) for p in itertools.combinations(domain.attributes, 2)
            if domain.cells(p) <= max_cells]


def downward_closure(workload: Sequence[Clique]) -> list[Clique]:
    """All non-empty subsets of workload cliques, smallest first."""
    closure = {tuple(sub) for clique in workload for k in range(1, len(clique) + 1)
               for sub in itertools.combinations(clique, k)}
    return sorted(closure, key=lambda c: (len(c), c))


def junction_tree_size_mb(domain: Domain, cliques: Sequence[Clique]) -> float:
    """Memory of a model over ``cliques``: its junction tree's maximal cliques, in MiB."""
    tree = build_junction_tree(domain, cliques)
    return sum(domain.cells(c) for c in tree.cliques) * 8 / 2**20


def model_marginals(model: GraphicalModel, cliques: Sequence[Clique]) -> dict[Clique,
                                                                              np.ndarray]:
    """Expected counts of each clique under ``model``, wherever its attributes sit."""
    out: dict[Clique, np.ndarray] = {}
    pairs_from: dict[str, dict[str, np.ndarray]] = {}
    longest = max((len(c) for c in cliques), default=0)
    covered = {frozenset(sub) for m in model.tree.cliques
               for k in range(1, min(longest, len(m)) + 1)
               for sub in itertools.combinations(m, k)}
    # the pairs across the tree, by first attribute: one pass over the tree for each
    across: dict[str, set[str]] = {}
    for clique in cliques:
        if len(clique) == 2 and frozenset(clique) not in covered:
            across.setdefault(clique[0], set()).add(clique[1])
    for clique in cliques:
        if frozenset(clique) in covered:
            out[clique] = model.marginal(clique)
        elif len(clique) == 2:
            a, b = clique
            if a not in pairs_from:
                pairs_from[a] = model.pair_marginals(a, across[a])
            out[clique] = pairs_from[a][b]
        else:
            # Larger cliques across the tree: calibrate the model on a junction tree that
            # also covers the clique (its potential stays zero, so the distribution is equal).
            cover = [*model.potentials, clique]
            bp = BeliefPropagation(model.domain, build_junction_tree(model.domain, cover),
                                   cover)
            beliefs = bp.calibrate(model.potentials)
            out[clique] = model.total * bp.marginals(beliefs, [clique])[clique]
    return out


def _admissible(index: int, *, candidates: Sequence[Clique], domain: Domain,
                roles: Roles | None, model_cliques: list[Clique], covered: set[Clique],
                size_cap: float) -> bool:
    """Fair AIM's separation (when ``roles``) and the model-size cap, for one candidate."""
    clique = candidates[index]
    if roles is not None and not check_fairness(domain.attributes, [*model_cliques, clique],
                                                roles).passed:
        return False
    return (clique in covered
            or junction_tree_size_mb(domain, [*model_cliques, clique]) <= size_cap)


@dataclass(frozen=True)
class AIMRound:
    """What one round did (all post-noise)."""

    round: int
    clique: Clique
    sigma: float
    epsilon: float
    annealed: bool
    model_size_mb: float
    candidates: int


@dataclass
class AIMResult:
    """Measurements, the final model and the round log of an AIM run."""

    measurements: list[Measurement]
    model: GraphicalModel
    rounds: list[AIMRound] = field(default_factory=list)
    n_initial: int = 0  # the first n_initial measurements are the initial one-way marginals

    @property
    def cliques(self) -> list[Clique]:
        return list(dict.fromkeys(m.clique for m in self.measurements if len(m.clique) > 1))


def run_aim(
    tables: Mapping[Clique, np.ndarray],
    domain: Domain,
    *,
    rho: float,
    rng: np.random.Generator,
    ledger: PrivacyLedger,
    roles: Roles | None = None,
    fair: bool = False,
    workload: Sequence[Clique] | None = None,
    max_model_size_mb: float = 80.0,
    rounds: int | None = None,
    max_iters: int = 50,
    final_max_iters: int = 10_000,
    refit: bool = True,
    discrete: bool = True,
    tol: float = 1e-6,
    progress: Callable[[float], None] | None = None,
    stop_after_initial: Callable[[Sequence[Measurement], float], bool] | None = None,
    workload_after_initial: Callable[[Sequence[Measurement], float],
                                     tuple[Sequence[Clique], float, int | None]] | None = None,
    select_share: float = 0.1,
    initial_scale: float = 1.0,
    initial_allocation: str = "uniform",
    penalty_scale: float = 1.0,
) -> AIMResult:
    """Run AIM at privacy cost ``rho``.

    No clock: the rounds, their σ and ε, which round is the last and every fit's iteration
    cap follow from public inputs (the domain, ρ, ``rounds``, the caps) and the noisy
    measurements only, so a run is the same whatever the machine's speed (issue 41.5). An
    operator's time budget is the caller's alarm, never an input here.

    Parameters
    ----------
    tables : mapping
        Exact marginals (private) of every candidate clique, i.e. the workload's downward
        closure; see :func:`candidate_cliques`.
    fair : bool
        Keep only candidates that leave protected and outcome attributes separated by
        admissible ones (needs ``roles``).
    max_model_size_mb : float
        Cap on the junction tree's maximal-clique cells × 8 bytes; the cap available in a
        round grows with the fraction of the budget spent.
    rounds : int, optional
        Nominal number of rounds T (default 16·d).
    max_iters, final_max_iters : int
        Estimation iteration caps for the warm-started per-round fits and the final fit;
        both also stop on ``tol``. A round's fit only has to rank the candidates, and 50
        warm-started iterations do that as well as 250 (Adult, COMPAS, 5 seeds each:
        ``benchmarks/results/aim_floor_robust_descent.json``).
    refit : bool
        Finish with a full fit (skip it when the caller refits from the measurements).
    discrete : bool
        Exact discrete Gaussian noise for every measurement.
    stop_after_initial : callable, optional
        ``stop_after_initial(initial_one_way, rho_left)``, post-processing of the initial
        noisy one-way marginals: when it returns True the run stops there, having spent only
        their ρ, and the caller spends the rest (the small-n independence fallback).
    workload_after_initial : callable, optional
        ``workload_after_initial(initial_one_way, rho_left) -> (workload, rho_one_way,
        rounds)``,
        post-processing of the initial noisy one-way marginals: the workload the rounds
        select from (the pairs that can carry signal at the noisy total, issue 34) and the ρ
        of a second one-way measurement, combined with the initial one by inverse variance
        (the share of the rounds' ρ that the dropped pairs would have used). The rounds spend
        what is left, at the rounds' σ, or, when ``rounds`` is not None, at the σ and ε of
        ``rounds`` nominal rounds over what is left (issue 34.1: small n sizes the rounds to
        the qualifying pairs). An empty workload stops the run after the initial
        measurement, as ``stop_after_initial`` does.
    progress : callable, optional
        ``progress(fraction)`` after every round: the share of ρ spent.
    select_share : float
        Share of each round's ρ spent on selection (AIM's 0.1); the rest measures.
    initial_scale : float
        ρ of the initial one-way marginals as a multiple of AIM's (``d/(2σ²)``, i.e. as
        much as d rounds' measurements): more makes every attribute's marginal, and so every
        pair the model does not measure, less noisy, at the cost of the rounds. The total ρ
        spent is ``rho`` whatever it is.
    initial_allocation : {"uniform", "cells"}
        How the initial one-way ρ is shared between attributes: equally (AIM), or in
        proportion to ``cells^(2/3)`` (see :func:`measure_one_way_by_cells`).
    penalty_scale : float
        Multiplies the expected-noise term of the selection score (``√(2/π)·σ·cells``, the
        L1 error of a raw noisy marginal; AIM's 1). Public: the score's sensitivity is
        unchanged. On Adult at ε = 1 both 0.5 and 2 gave a worse 2-way TVD (issue 23.5).
    """
    if fair:
        if roles is None:
            raise ValueError("fair AIM needs roles")
        roles.check(domain, fair=True)
    workload = workload or all_two_way_workload(domain)
    candidates = [domain.canonical(c) for c in downward_closure(workload)]
    weights = {c: float(sum(len(set(c) & set(w)) for w in workload)) for c in candidates}
    # Selection's sensitivity: the largest weight of any candidate (fixed in advance, so it
    # does not depend on which candidates the size cap admits in a round).
    max_weight = max(weights.values())
    d = len(domain)
    rounds = rounds or 16 * d
    if not 0 < select_share < 1:
        raise ValueError(f"select_share must be in (0, 1), got {select_share!r}")
    measure_share = 1 - select_share
    sigma = math.sqrt(rounds / (2 * measure_share * rho))
    epsilon = math.sqrt(8 * select_share * rho / rounds)
    report = progress or (lambda fraction: None)

    start = ledger.spent
    oneway = [(a,) for a in domain]
    initial_rho = initial_scale * d / (2 * sigma**2)
    if not 0 < initial_rho < rho:  # public: ρ, d, the round count and the scale
        raise ValueError(f"initial_scale {initial_scale!r} leaves no ρ for the rounds")
    if initial_allocation not in ("uniform", "cells"):
        raise ValueError(f"initial_allocation must be 'uniform' or 'cells', "
                         f"got {initial_allocation!r}")
    measure_initial = (measure_marginals if initial_allocation == "uniform"
                       else partial(measure_one_way_by_cells, domain=domain))
    measurements = measure_initial(
        {c: tables[c] for c in oneway}, oneway, rho=initial_rho, rng=rng,
        ledger=ledger, name="AIM initial one-way marginals", discrete=discrete)
    model = estimate(domain, measurements, max_iters=max_iters, tol=tol)
    if stop_after_initial is not None and stop_after_initial(
            list(measurements), rho - (ledger.spent - start)):
        return AIMResult(measurements, model, [], n_initial=d)
    if workload_after_initial is not None:
        chosen, rho_one_way, rounds_left = workload_after_initial(
            list(measurements), rho - (ledger.spent - start))
        workload = list(chosen)
        if not workload:
            return AIMResult(measurements, model, [], n_initial=d)
        if rho_one_way > 0:
            extra = measure_initial(
                {c: tables[c] for c in oneway}, oneway, rho=rho_one_way, rng=rng,
                ledger=ledger, name="AIM one-way marginals (rho of the pairs too noisy to "
                "measure)", discrete=discrete)
            measurements = combine_measurements(measurements, extra)
            model = estimate(domain, measurements, max_iters=max_iters, tol=tol)
        candidates = [domain.canonical(c) for c in downward_closure(workload)]
        weights = {c: float(sum(len(set(c) & set(w)) for w in workload)) for c in candidates}
        max_weight = max(weights.values())
        remaining = rho - (ledger.spent - start)
        if rounds_left and remaining > 0:
            sigma = math.sqrt(rounds_left / (2 * measure_share * remaining))
            epsilon = math.sqrt(8 * select_share * remaining / rounds_left)
    log: list[AIMRound] = []
    t = 0
    while True:
        used = ledger.spent - start
        remaining = rho - used
        if remaining <= rho * 1e-9:
            break
        t += 1
        final = remaining < 2 * (1 / (2 * sigma**2) + epsilon**2 / 8)
        if final:
            sigma = math.sqrt(1 / (2 * measure_share * remaining))
            epsilon = math.sqrt(8 * select_share * remaining)
        used_after = used + 1 / (2 * sigma**2) + epsilon**2 / 8
        size_cap = max_model_size_mb * used_after / rho
        model_cliques = list(model.potentials)
        covered = {sub for m in model.tree.cliques for k in range(1, len(m) + 1)
                   for sub in itertools.combinations(m, k)}
        admissible = partial(_admissible, candidates=candidates, domain=domain,
                             roles=roles if fair else None,
                             model_cliques=model_cliques, covered=covered, size_cap=size_cap)
        estimates = model_marginals(model, candidates)
        quality = np.array([
            weights[c] * (np.abs(tables[c] - estimates[c]).sum()
                          - penalty_scale * math.sqrt(2 / math.pi) * sigma * domain.cells(c))
            for c in candidates
        ])
        index, examined = exponential_first_admissible(
            quality, admissible, epsilon=epsilon,
            sensitivity=max_weight, rng=rng, ledger=ledger, name=f"AIM select round {t}")
        pick = candidates[index]
        noisy = gaussian_mechanism(np.asarray(tables[pick]), sigma=sigma, sensitivity=1.0,
                                   rng=rng, ledger=ledger, name=f"AIM measure round {t}",
                                   discrete=discrete)
        measurements.append(Measurement(pick, noisy, np.full(noisy.shape, sigma)))
        before = estimates[pick]
        model = estimate(domain, measurements, max_iters=max_iters, tol=tol,
                         warm_start=model.potentials)
        moved = np.abs(model_marginals(model, [pick])[pick] - before).sum()
        annealed = bool(moved <= math.sqrt(2 / math.pi) * sigma * domain.cells(pick))
        log.append(AIMRound(t, pick, sigma, epsilon, annealed,
                            junction_tree_size_mb(domain, list(model.potentials)),
                            examined))
        if annealed:
            sigma, epsilon = sigma / 2, epsilon * 2
        report(min(1.0, (ledger.spent - start) / rho))
        if final:
            break
    if refit:
        # Rounds only need a model good enough to score candidates; the release gets a full
        # fit, from the uniform start rather than the last round's model (which converges
        # more slowly, see synthesizer.fit_model), with that model kept should it be better.
        model = estimate(domain, measurements, max_iters=final_max_iters, tol=tol,
                         fallback=model.potentials)
    return AIMResult(measurements, model, log, n_initial=d)


def measure_one_way_by_cells(
    tables: Mapping[Clique, np.ndarray], cliques: Sequence[Clique], *, domain: Domain,
    rho: float, rng: np.random.Generator, ledger: PrivacyLedger, name: str,
    discrete: bool = True,
) -> list[Measurement]:
    """One-way marginals at total cost ``rho``, attribute ``a`` getting ``ρ_a ∝ k_a^(2/3)``.

    A k-cell marginal measured at σ has L1 error ∝ k·σ; minimising ``Σ k_a σ_a`` at a fixed
    ``Σ 1/(2σ_a²)`` gives ``σ_a ∝ k_a^(-1/3)``, so a 42-country attribute gets less noise
    than a binary one instead of the same. The shares depend on the declared domain only.
    One Gaussian mechanism on the answers scaled by ``1/σ_a`` (unit noise, L2 sensitivity
    ``√Σ 1/σ_a²``, so ρ = Σ 1/(2σ_a²)); with discrete noise, one mechanism per attribute
    (the discrete Gaussian needs integer answers), at the same total ρ.
    """
    shares = np.array([domain.cells(c) ** (2 / 3) for c in cliques], dtype=np.float64)
    sigmas = 1 / np.sqrt(2 * rho * shares / shares.sum())
    if discrete:
        return [Measurement(c, gaussian_mechanism(
                    np.asarray(tables[c]), sigma=float(s), sensitivity=1.0, rng=rng,
                    ledger=ledger, name=f"{name}: {'/'.join(c)}", discrete=True),
                    np.full(np.shape(tables[c]), float(s)))
                for c, s in zip(cliques, sigmas, strict=True)]
    flat = np.concatenate([np.asarray(tables[c], dtype=np.float64).ravel() / s
                           for c, s in zip(cliques, sigmas, strict=True)])
    noisy = gaussian_mechanism(flat, sigma=1.0, sensitivity=float(np.sqrt(np.sum(1 / sigmas**2))),
                               rng=rng, ledger=ledger, name=name)
    out, start = [], 0
    for c, s in zip(cliques, sigmas, strict=True):
        shape = np.shape(tables[c])
        size = int(np.prod(shape))
        out.append(Measurement(c, noisy[start:start + size].reshape(shape) * s,
                               np.full(shape, float(s))))
        start += size
    return out


def candidate_cliques(domain: Domain, workload: Sequence[Clique] | None = None) -> list[Clique]:
    """Cliques whose exact marginals :func:`run_aim` needs (the workload's closure)."""
    workload = workload or all_two_way_workload(domain)
    return [domain.canonical(c) for c in downward_closure(workload)]
