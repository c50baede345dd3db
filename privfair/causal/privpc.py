"""Differentially private PC: PrivPC (Xu 2021, Alg. 3–4), LapMech and PrivPC* (§4.4.3, §4.5).

Neighbouring datasets differ by adding or removing one row (the project's convention).
Every release is charged to one :class:`~privfair.core.accounting.PrivacyLedger` in zCDP
before noise is drawn; an ε-DP exponential mechanism costs ε²/8 (bounded range) and an ε-DP
Laplace mechanism ε²/2.

How the dissertation's errata are handled
------------------------------------------
* Erratum 1 (inverted p-value semantics of Eq. 4.1). Here *independent* means p ≥ α, i.e.
  G² ≤ χ²_{1−α}(df), and the score of a pair is positive exactly then (see
  :func:`distance_scores`). Edges with positive scores are the ones PrivPC tends to delete.
* Erratum 2 (Alg. 2 line 18 re-tests independence while orienting). Orientation uses the
  separating sets, and in PrivPC the separating set is itself an output of the exponential
  mechanism: each selection picks a (neighbour, conditioning set) pair, so no data-dependent
  argmax leaks through the sepset (the spec's §3.1 leak).
* Erratum 4 (Adult case study: TPR and TDR swapped) concerns reported numbers only, and
  holds for Tables 4.3–4.11 too (the estimate and the truth are swapped in every printed
  TPR, FPR and TDR; :func:`privfair.causal.graph.skeleton_scores_as_printed_xu2021`). The
  metrics here are defined once in :func:`privfair.causal.graph.skeleton_scores` (TPR = hits
  / true edges, TDR = hits / found edges) and the benchmarks print both.
* Erratum 3 (PrivPC*'s sensitivity assumes N(0, 1) data) is fixed in :func:`priv_pc_star` by
  clipping publicly standardised features and deriving the sensitivity from the clip bound.
  The proof's own premise, Σ_a x_a² = p for every row, becomes a guarantee with
  ``row_norm=√p``: each row is scaled into the ball of that radius, and the sums of cross
  products then have the dissertation's sensitivity p(p + 1)/2 (before its division by n − 1).
* The printed Fisher z test treats the noisy correlations as exact, so at the paper's noise
  level (sd ≈ 0.03 per correlation at p = 20, n = 10,000, ε = 1, against a test threshold of
  0.026) it keeps most absent edges. :func:`priv_pc_star` tests at the effective sample size
  that adds the released noise's variance to the sampling variance (post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from privfair.causal.citests import (
    CodeTables,
    NoisyFullTable,
    g2_degrees_of_freedom,
    g2_sensitivity,
    g2_statistic,
    g2_threshold,
)
from privfair.causal.graph import CausalGraph
from privfair.causal.pc import (
    Skeleton,
    check_search_parameters,
    orient_skeleton,
    pc_gaussian,
    pc_skeleton,
    stable_levels,
)
from privfair.core.accounting import PrivacyLedger, laplace_rho
from privfair.core.domain import Domain, Roles
from privfair.core.errors import DomainError
from privfair.core.mechanisms import exponential_mechanism, laplace_mechanism


@dataclass(frozen=True)
class DiscoveryResult:
    """A released causal graph and the public facts of how it was found.

    Attributes
    ----------
    graph : CausalGraph
        The CPDAG (public constraints applied).
    skeleton : Skeleton
        Released adjacency and separating sets, over node positions.
    method : str
        ``"privpc"``, ``"lapmech"`` or ``"privpc-star"``.
    charged_steps : int
        Number of ledger entries this run added (one per mechanism invocation).
    max_rounds : int
        Data-independent cap on PrivPC rounds (0 for the one-shot methods).
    rho_spent : float
        zCDP cost of this run.
    """

    graph: CausalGraph
    skeleton: Skeleton
    method: str
    charged_steps: int
    max_rounds: int
    rho_spent: float


def max_rounds(p: int, max_order: int) -> int:
    """Cap on PrivPC rounds: one per (node, level), p · (max_order + 1). Data-independent."""
    return p * (max_order + 1)


def distance_scores(tables: CodeTables, i: int, candidates: Sequence[int],
                    conditioners: Sequence[int], order: int, *, alpha: float,
                    max_rows: int, replace_one: bool = False
                    ) -> tuple[list[tuple[int, tuple[int, ...]]], np.ndarray]:
    """Scores d(ij|K) = (χ²_{1−α}(df) − G²(ij|K)) / Δ_G for every candidate j and K.

    K ranges over the ``order``-subsets of ``conditioners`` ∖ {j}. Δ_G is the per-record bound
    of :func:`~privfair.causal.citests.g2_sensitivity`, so each score has sensitivity 1 and
    is a certified lower bound on the number of records that must be added or removed to
    flip the test (Eq. 4.1's distance, which the dissertation gives no algorithm for; a
    greedy search would only give an upper bound, and its sensitivity-1 claim would not
    hold). The sign is the decision: d ≥ 0 iff p ≥ α (independent; erratum 1). With
    ``replace_one`` the scale is twice Δ_G: replacing a record is removing one and adding
    one, each between tables of at most ``max_rows`` rows.
    """
    scale = (2.0 if replace_one else 1.0) * g2_sensitivity(max_rows)
    pairs: list[tuple[int, tuple[int, ...]]] = []
    scores: list[float] = []
    for j in candidates:
        for cond in combinations([k for k in conditioners if k != j], order):
            stat = g2_statistic(tables.table((i, j, *cond)))
            threshold = g2_threshold(g2_degrees_of_freedom(tables.domain, i, j, cond), alpha)
            pairs.append((j, cond))
            scores.append((threshold - stat) / scale)
    return pairs, np.asarray(scores, dtype=np.float64)


def count_quality(best: np.ndarray) -> np.ndarray:
    """q2(t) for t = 0..α (Eq. 4.2–4.4 with erratum 1's semantics), sensitivity 1.

    With d_(1) ≥ … ≥ d_(α) the sorted per-neighbour scores, d_(0) = +∞ and d_(α+1) = −∞,
    q2(t) = min(d_(t), −d_(t+1)): non-negative only where the sign flips, i.e. at the number
    of independent neighbours. This single formula is the dissertation's three cases without
    the "−1" offsets, which only make sense for integer distances. Order statistics and
    minima of sensitivity-1 quantities have sensitivity 1.
    """
    ordered = np.sort(best)[::-1]
    upper = np.concatenate(([np.inf], ordered))
    lower = np.concatenate((ordered, [-np.inf]))
    return np.minimum(upper, -lower)


def priv_pc(codes: np.ndarray, domain: Domain, *, rho: float, ledger: PrivacyLedger,
            rng: np.random.Generator, alpha: float = 0.01, max_order: int = 2,
            max_rows: int = 10**6, count_share: float = 0.5,
            roles: Roles | None = None, replace_one: bool = False) -> DiscoveryResult:
    """PrivPC: PC-stable where each node's removals are chosen by exponential mechanisms.

    Parameters
    ----------
    codes : ndarray of int, shape (n, p)
        Integer codes, one column per attribute of ``domain`` (the contract's discretisation).
    domain : Domain
        Declared domain.
    rho : float
        zCDP budget of the whole search, reserved up front: it is split evenly over the
        :func:`max_rounds` possible rounds, so the total never depends on the data. Rounds
        that never run (the graph became too sparse) leave their share unspent.
    ledger : PrivacyLedger
        Charged once per exponential mechanism: per round, once for the number of removals
        β̂ (share ``1 − count_share`` of the round) and once per removal (the rest of the
        round, split evenly in ρ over the β̂ picks, which zCDP composes exactly).
    rng : numpy.random.Generator
        Source of randomness.
    alpha : float
        Significance level of the G² tests.
    max_order : int
        Largest conditioning-set size.
    max_rows : int
        Public upper bound on the number of rows; it sets the scores' scale. Data with more
        rows is refused.
    count_share : float
        Fraction of each round's ρ spent choosing β̂ (ε2 in the dissertation).
    roles : Roles, optional
        Public orientation constraints.
    replace_one : bool
        Scores of sensitivity 1 when one record is *replaced* (twice the add/remove scale).
        A release that subsamples ``max_rows`` rows of a larger table without replacement
        needs it: the subsamples of two add/remove neighbours differ by one replaced record.

    Notes
    -----
    The number of CI statistics computed depends on the graph, but the statistics are never
    released or charged one by one: what is released per round is β̂ and the β̂ picks. The
    rounds that run are a function of released output (the current adjacency), their number
    is capped by :func:`max_rounds`, and each costs a fixed ρ, so the total is fixed in
    advance. Each pick is a (neighbour j, conditioning set K) pair scored by d(ij|K); every j
    has the same number of candidate sets, so this samples j ∝ Σ_K exp(ε d(ij|K)/2) and
    releases K as the DP separating set used for orientation (erratum 2).
    """
    tables = CodeTables(codes, domain)
    check_search_parameters(alpha=alpha, max_order=max_order)
    check_budget(rho)
    if not 0 < count_share < 1:
        raise ValueError(f"count_share must be in (0, 1), got {count_share!r}")
    g2_sensitivity(max_rows)
    if tables.codes.shape[0] > max_rows:
        raise DomainError(f"codes: more rows than the declared max_rows={max_rows}")
    p = len(domain)
    rounds = max_rounds(p, max_order)
    rho_round = rho / rounds
    eps_count = math.sqrt(8 * rho_round * count_share)
    rho_picks = rho_round * (1 - count_share)
    start = len(ledger.entries)
    rho_start = ledger.spent
    adj = {i: set(range(p)) - {i} for i in range(p)}
    sepsets: dict[frozenset[int], frozenset[int]] = {}
    tests = 0
    for order, frozen in stable_levels(adj, max_order):
        for i in range(p):
            candidates = sorted(adj[i])
            if len(frozen[i]) - 1 < order or not candidates:
                continue
            pairs, scores = distance_scores(tables, i, candidates, frozen[i], order,
                                            alpha=alpha, max_rows=max_rows,
                                            replace_one=replace_one)
            tests += len(pairs)
            best = np.array([scores[[k for k, (j, _) in enumerate(pairs) if j == c]].max()
                             for c in candidates])
            name = f"PrivPC level {order}, {domain.attributes[i]}"
            beta = exponential_mechanism(
                count_quality(best), epsilon=eps_count, sensitivity=1.0, rng=rng,
                ledger=ledger, name=f"{name}: number of removals")
            if beta == 0:
                continue
            eps_pick = math.sqrt(8 * rho_picks / beta)
            removed: set[int] = set()
            for _ in range(beta):
                keep = [k for k, (j, _) in enumerate(pairs) if j not in removed]
                k = keep[exponential_mechanism(
                    scores[keep], epsilon=eps_pick, sensitivity=1.0, rng=rng, ledger=ledger,
                    name=f"{name}: removal")]
                j, cond = pairs[k]
                removed.add(j)
                adj[i].discard(j)
                adj[j].discard(i)
                sepsets[frozenset((i, j))] = frozenset(cond)
    skeleton = Skeleton.from_adjacency(adj, sepsets, tests)
    return DiscoveryResult(orient_skeleton(skeleton, domain.attributes, roles), skeleton,
                           "privpc", len(ledger.entries) - start, rounds,
                           ledger.spent - rho_start)


def lap_mech(codes: np.ndarray, domain: Domain, *, rho: float, ledger: PrivacyLedger,
             rng: np.random.Generator, alpha: float = 0.01, max_order: int = 2,
             max_cells: int = 2**24, roles: Roles | None = None) -> DiscoveryResult:
    """LapMech: Laplace noise on the full contingency table, then ordinary PC (post-processing).

    The full table has L1 sensitivity 1 under add/remove, so Lap(1/ε) per cell is ε-DP with
    ε = √(2ρ). Tables with more than ``max_cells`` cells are refused (the baseline's known
    limit; the cell count is public).
    """
    tables = CodeTables(codes, domain)
    check_search_parameters(alpha=alpha, max_order=max_order)
    check_budget(rho)
    cells = math.prod(domain.sizes)
    if cells > max_cells:
        raise DomainError(
            f"domain: the full table has {cells} cells; LapMech allows at most "
            f"max_cells={max_cells}")
    epsilon = math.sqrt(2 * rho)
    noisy = laplace_mechanism(tables.table(range(len(domain))), epsilon=epsilon,
                              sensitivity=1.0, rng=rng, ledger=ledger,
                              name="LapMech full contingency table", queries=cells)
    source = NoisyFullTable(noisy, domain)

    def independent(i: int, j: int, cond: tuple[int, ...]) -> bool:
        stat = g2_statistic(source.table((i, j, *cond)))
        return stat <= g2_threshold(g2_degrees_of_freedom(domain, i, j, cond), alpha)

    skeleton = pc_skeleton(len(domain), independent, max_order=max_order)
    return DiscoveryResult(orient_skeleton(skeleton, domain.attributes, roles), skeleton,
                           "lapmech", 1, 0, laplace_rho(epsilon=epsilon))


@dataclass(frozen=True)
class MomentRelease:
    """The noisy moments PrivPC* releases, and what they imply."""

    count: float
    correlation: np.ndarray
    sensitivity: float
    epsilon: float

    @property
    def effective_count(self) -> float:
        """The sample size whose sampling variance 1/n equals 1/count + the noise's variance.

        The Laplace(Δ/ε) noise on a sum of cross products reaches a correlation divided by
        the count, with variance 2 (Δ / (ε · count))². Fisher z at this size widens the
        test's threshold by the released noise (public: Δ, ε and the noisy count), instead
        of reading noise as dependence. Post-processing.
        """
        noise_variance = 2.0 * (self.sensitivity / (self.epsilon * self.count)) ** 2
        return 1.0 / (1.0 / self.count + noise_variance)


def clip_standardised(values: np.ndarray, *, center: Sequence[float], scale: Sequence[float],
                      clip: float, row_norm: float | None = None) -> np.ndarray:
    """z = clip((x − center) / scale, −clip, clip) with public center, scale and bound.

    With ``row_norm`` each row is then scaled by min(1, row_norm / ‖z‖₂), so that no row's
    Euclidean norm exceeds that public radius.
    """
    values = np.asarray(values, dtype=np.float64)
    center_a = np.asarray(center, dtype=np.float64)
    scale_a = np.asarray(scale, dtype=np.float64)
    if values.ndim != 2:
        raise DomainError(f"values: expected a 2-D array (rows, features), got {values.shape}")
    p = values.shape[1]
    if center_a.shape != (p,) or scale_a.shape != (p,):
        raise ValueError(f"center and scale: expected {p} public values each, one per feature")
    if not np.all(np.isfinite(scale_a)) or np.any(scale_a <= 0):
        raise ValueError("scale: expected finite public scales > 0")
    if not (math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a finite bound > 0, got {clip!r}")
    check_row_norm(row_norm)
    if not np.all(np.isfinite(values)):
        raise DomainError("values: expected finite numbers (no NaN or inf)")
    z = np.clip((values - center_a) / scale_a, -clip, clip)
    if row_norm is None:
        return z
    norms = np.linalg.norm(z, axis=1)
    factor = np.minimum(1.0, row_norm / np.maximum(norms, np.finfo(np.float64).tiny))
    return z * factor[:, None]


def check_row_norm(row_norm: float | None) -> None:
    if row_norm is not None and not (isinstance(row_norm, float | int)
                                     and math.isfinite(row_norm) and row_norm > 0):
        raise ValueError(f"row_norm must be a finite radius > 0 or None, got {row_norm!r}")


def moment_sensitivity(p: int, clip: float, *, row_norm: float | None = None) -> float:
    """L1 sensitivity of (n, Σz, Σ z_a z_b for a ≤ b) under add/remove with |z_a| ≤ clip.

    One row adds 1 to the count, L = Σ_a |z_a| ≤ p·B to the sums and Σ_{a≤b} |z_a z_b| =
    (L² + ‖z‖²) / 2 to the cross products: B² p (p + 1) / 2 with coordinate clipping alone.
    If also ‖z‖₂ ≤ R (``row_norm``), then L ≤ √p·R and ‖z‖² ≤ R², so with R = √p the cross
    products have the dissertation's p (p + 1) / 2. Its p(p+1)/(2(n−1)) assumed
    Σ x² = p for every row, which N(0, 1) data does not guarantee (erratum 3).
    """
    l1 = p * clip
    square = p * clip**2
    if row_norm is not None:
        l1 = min(l1, math.sqrt(p) * row_norm)
        square = min(square, row_norm**2)
    return 1.0 + l1 + (l1**2 + square) / 2


def noisy_moments(z: np.ndarray, *, rho: float, ledger: PrivacyLedger,
                  rng: np.random.Generator, clip: float,
                  row_norm: float | None = None) -> MomentRelease:
    """Release count, sums and cross products of clipped features with Laplace noise.

    ``clip`` and ``row_norm`` are the bounds ``z`` was clipped to (:func:`clip_standardised`);
    the sensitivity is :func:`moment_sensitivity` of them.
    """
    n, p = z.shape
    upper = np.triu_indices(p)
    exact = np.concatenate(([float(n)], z.sum(axis=0), (z.T @ z)[upper]))
    sensitivity = moment_sensitivity(p, clip, row_norm=row_norm)
    epsilon = math.sqrt(2 * rho)
    noisy = laplace_mechanism(exact, epsilon=epsilon, sensitivity=sensitivity, rng=rng,
                              ledger=ledger, name="PrivPC* count, sums and cross products")
    count = max(noisy[0], 1.0)
    mean = noisy[1:p + 1] / count
    second = np.zeros((p, p))
    second[upper] = noisy[p + 1:]
    second = second + np.triu(second, 1).T
    return MomentRelease(count, nearest_correlation(second / count - np.outer(mean, mean)),
                         sensitivity, epsilon)


def nearest_correlation(cov: np.ndarray, *, floor: float = 1e-6) -> np.ndarray:
    """Project a noisy covariance to a correlation matrix (eigenvalue floor, unit diagonal)."""
    sym = (cov + cov.T) / 2
    values, vectors = np.linalg.eigh(sym)
    scale = max(float(np.abs(values).max()), 1e-12)
    psd = (vectors * np.maximum(values, floor * scale)) @ vectors.T
    d = np.sqrt(np.diag(psd))
    corr = psd / np.outer(d, d)
    np.fill_diagonal(corr, 1.0)
    return np.clip(corr, -1 + 1e-6, 1 - 1e-6)


def priv_pc_star(values: np.ndarray, nodes: Sequence[str], *, center: Sequence[float],
                 scale: Sequence[float], clip: float, rho: float, ledger: PrivacyLedger,
                 rng: np.random.Generator, alpha: float = 0.01, max_order: int = 2,
                 roles: Roles | None = None, row_norm: float | None = None,
                 noise_aware: bool = True) -> DiscoveryResult:
    """PrivPC* for numeric data: one Laplace release of clipped moments, then PC with Fisher z.

    Features are standardised with public ``center`` and ``scale`` (e.g. from the contract's
    declared bounds), clipped to [−clip, clip] (and, with ``row_norm``, each row into the
    ball of that radius), and their count, sums and cross products released once
    (:func:`noisy_moments`). The noisy covariance is projected to the nearest correlation
    matrix and PC runs on it: all post-processing. The mean is estimated from the release
    rather than assumed to be 0.

    Parameters
    ----------
    row_norm : float, optional
        Public bound on each standardised row's Euclidean norm. ``√p`` is the dissertation's
        premise Σ z² = p (§4.5) made a guarantee: it gives its sensitivity p (p + 1) / 2,
        where coordinate clipping at ``clip`` alone gives clip² p (p + 1) / 2.
    noise_aware : bool
        Run Fisher z at :attr:`MomentRelease.effective_count`, which counts the released
        noise as sampling variance; ``False`` tests at the noisy count as §4.5 prints it,
        which reads the noise on every correlation as dependence.
    """
    check_search_parameters(alpha=alpha, max_order=max_order)
    check_budget(rho)
    z = clip_standardised(values, center=center, scale=scale, clip=clip, row_norm=row_norm)
    if len(nodes) != z.shape[1]:
        raise ValueError(f"nodes: expected {z.shape[1]} names, one per feature")
    release = noisy_moments(z, rho=rho, ledger=ledger, rng=rng, clip=clip, row_norm=row_norm)
    n_test = release.effective_count if noise_aware else release.count
    graph, skeleton = pc_gaussian(release.correlation, n_test, nodes, alpha=alpha,
                                  max_order=max_order, roles=roles)
    return DiscoveryResult(graph, skeleton, "privpc-star", 1, 0,
                           laplace_rho(epsilon=math.sqrt(2 * rho)))


def check_budget(rho: float) -> None:
    if not (isinstance(rho, float | int) and math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be a finite zCDP budget > 0, got {rho!r}")
