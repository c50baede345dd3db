"""Conditional-independence statistics for the PC family: G² on contingency tables, Fisher z.

Two sources of contingency tables share one interface (:class:`TableSource`): exact counts from
integer codes (:class:`CodeTables`, private) and marginals of a noisy full table
(:class:`NoisyFullTable`, post-processing of a Laplace release). Degrees of freedom always come
from the declared domain, never from which cells happen to be empty (pcalg's ``gSquareDis``
lowers df for zero cells, which would make the test's threshold depend on the data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np
from scipy import special, stats

from privfair.core.domain import Domain
from privfair.core.errors import DomainError


class TableSource(Protocol):
    """Anything that returns a contingency table over attribute positions, in the given order."""

    domain: Domain

    def table(self, axes: Sequence[int]) -> np.ndarray: ...


class CodeTables:
    """Exact contingency tables of an ``(n, p)`` array of integer codes over ``domain``.

    Parameters
    ----------
    codes : ndarray of int, shape (n, p)
        One column per domain attribute, in domain order. Checked against the domain.
    domain : Domain
        The declared domain.
    """

    def __init__(self, codes: np.ndarray, domain: Domain) -> None:
        self.domain = domain
        self.codes = check_codes_matrix(codes, domain)

    def table(self, axes: Sequence[int]) -> np.ndarray:
        shape = tuple(self.domain.sizes[a] for a in axes)
        if not axes:
            return np.asarray(float(self.codes.shape[0]))
        flat = np.zeros(self.codes.shape[0], dtype=np.int64)
        for a, size in zip(axes, shape, strict=True):
            flat = flat * size + self.codes[:, a]
        counts = np.bincount(flat, minlength=math.prod(shape))
        return counts.reshape(shape).astype(np.float64)


class NoisyFullTable:
    """Marginals of a noisy full contingency table, each clamped at 0 after marginalising.

    Clamping after marginalising (not cell by cell on the full table) keeps the noise of the
    many empty cells from piling up as positive bias in the marginals. Pure post-processing.

    Unclamped marginals are cached by their set of axes, and each new one is summed from the
    smallest cached superset: PC asks for thousands of tables but only for a few hundred
    distinct axis sets, and a full table of ~10⁷ cells costs one pass per distinct set
    instead of one per test.
    """

    def __init__(self, noisy: np.ndarray, domain: Domain) -> None:
        if noisy.shape != tuple(domain.sizes):
            raise DomainError(
                f"noisy table: shape {noisy.shape} does not match the domain {tuple(domain.sizes)}")
        self.domain = domain
        self.noisy = noisy
        self.marginals: dict[tuple[int, ...], np.ndarray] = {
            tuple(range(len(domain))): noisy}

    def sorted_marginal(self, kept: tuple[int, ...]) -> np.ndarray:
        """The unclamped marginal over ``kept`` (ascending axes), from the cache if there."""
        if kept in self.marginals:
            return self.marginals[kept]
        wanted = set(kept)
        source = min((axes for axes in self.marginals if wanted <= set(axes)),
                     key=lambda axes: self.marginals[axes].size)
        drop = tuple(k for k, a in enumerate(source) if a not in wanted)
        marginal = self.marginals[source].sum(axis=drop)
        self.marginals[kept] = marginal
        return marginal

    def table(self, axes: Sequence[int]) -> np.ndarray:
        kept = tuple(sorted(axes))
        marginal = self.sorted_marginal(kept)
        marginal = np.moveaxis(marginal, [kept.index(a) for a in axes], range(len(axes)))
        return np.maximum(marginal, 0.0)


def check_codes_matrix(codes: np.ndarray, domain: Domain) -> np.ndarray:
    """Refuse anything but a 2-D integer array with one in-domain column per attribute."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise DomainError(
            f"codes: expected a 2-D array with {len(domain)} columns (one per attribute of the "
            f"domain), got shape {codes.shape}")
    columns = [domain.check_column(a, codes[:, k], where="codes")
               for k, a in enumerate(domain.attributes)]
    return np.stack(columns, axis=1) if columns else codes.astype(np.int64)


def g2_statistic(table: np.ndarray) -> float:
    """G² = 2 Σ O ln(O/E) of a table with axes (x, y, z...), z flattened as the stratum.

    Written as ``2 [Σ h(N_xyz) − Σ h(N_xz) − Σ h(N_yz) + Σ h(N_z)]`` with h(N) = N ln N, which
    equals the textbook form with E = N_xz N_yz / N_z and needs no division by empty cells.
    """
    t = np.asarray(table, dtype=np.float64)
    t = t.reshape(t.shape[0], t.shape[1], -1)
    h = special.xlogy
    nxz = t.sum(axis=1)
    nyz = t.sum(axis=0)
    nz = nxz.sum(axis=0)
    value = 2.0 * (h(t, t).sum() - h(nxz, nxz).sum() - h(nyz, nyz).sum() + h(nz, nz).sum())
    return max(float(value), 0.0)


def g2_degrees_of_freedom(domain: Domain, i: int, j: int, cond: Sequence[int]) -> int:
    """Declared degrees of freedom (r_i − 1)(r_j − 1) Π r_k; never reduced for empty cells."""
    sizes = domain.sizes
    return (sizes[i] - 1) * (sizes[j] - 1) * math.prod(sizes[k] for k in cond)


@lru_cache(maxsize=4096)
def g2_threshold(df: int, alpha: float) -> float:
    """Critical value: independent iff G² ≤ threshold, i.e. p-value = 1 − F_χ²(df)(G²) ≥ α."""
    if df <= 0:
        return 0.0
    return float(stats.chi2.isf(alpha, df))


def g2_sensitivity(max_rows: int) -> float:
    """Bound on |G²(D) − G²(D')| for add/remove neighbours that both have ≤ ``max_rows`` rows.

    Adding a record to cell (x, y, z) changes G²/2 by ``[g(m) − g(c)] − [g(b) − g(a)]`` with
    a = N_xyz ≤ b = N_xz, c = N_yz ≤ m = N_z and g(N) = h(N + 1) − h(N) = ln(N + 1) +
    N ln(1 + 1/N), which is increasing with g(0) = 0. Each bracket lies in [0, g(m)) and
    g(m) < ln(m + 1) + 1 ≤ ln(max_rows) + 1 since m ≤ max_rows − 1 before the addition.
    Removing a record is the same step read backwards. Hence |ΔG²| < 2 (ln(max_rows) + 1).
    """
    if not (isinstance(max_rows, int) and max_rows >= 1):
        raise ValueError(f"max_rows must be an integer >= 1, got {max_rows!r}")
    return 2.0 * (math.log(max_rows) + 1.0)


def g2_test(source: TableSource, i: int, j: int, cond: Sequence[int], *,
            alpha: float) -> tuple[float, float]:
    """(G², threshold) of the test i ⫫ j | cond on ``source``."""
    stat = g2_statistic(source.table((i, j, *cond)))
    return stat, g2_threshold(g2_degrees_of_freedom(source.domain, i, j, cond), alpha)


def partial_correlation(corr: np.ndarray, i: int, j: int, cond: Sequence[int]) -> float:
    """ρ_{ij|cond} from the inverse of the sub-correlation matrix on {i, j} ∪ cond."""
    idx = [i, j, *cond]
    sub = corr[np.ix_(idx, idx)]
    prec = np.linalg.pinv(sub)
    denom = math.sqrt(max(prec[0, 0] * prec[1, 1], 1e-300))
    return float(np.clip(-prec[0, 1] / denom, -1 + 1e-6, 1 - 1e-6))


def fisher_z_independent(corr: np.ndarray, i: int, j: int, cond: Sequence[int], *,
                         n: float, alpha: float) -> bool:
    """Fisher z test: independent iff √(n − |cond| − 3) · |atanh ρ_{ij|cond}| ≤ Φ⁻¹(1 − α/2)."""
    r = partial_correlation(corr, i, j, cond)
    scale = math.sqrt(max(n - len(cond) - 3.0, 1.0))
    return scale * abs(math.atanh(r)) <= float(stats.norm.isf(alpha / 2))


def fisher_z_first_independent(corr: np.ndarray, i: int, j: int,
                               conds: Sequence[Sequence[int]], *, n: float,
                               alpha: float) -> int | None:
    """Position of the first ``cond`` in ``conds`` (all of one size) under which
    :func:`fisher_z_independent` finds i ⫫ j, or None: the same decisions, batched.

    The sub-correlation matrices of one chunk are inverted in one stacked ``pinv`` call, so
    PC at p = 100 runs ~10⁶ tests in numpy rather than one Python call each.
    """
    if not conds:
        return None
    order = len(conds[0])
    threshold = float(stats.norm.isf(alpha / 2))
    scale = math.sqrt(max(n - order - 3.0, 1.0))
    chunk = 256
    for start in range(0, len(conds), chunk):
        part = conds[start:start + chunk]
        idx = np.array([[i, j, *cond] for cond in part], dtype=np.intp)
        prec = np.linalg.pinv(corr[idx[:, :, None], idx[:, None, :]])
        denom = np.sqrt(np.maximum(prec[:, 0, 0] * prec[:, 1, 1], 1e-300))
        r = np.clip(-prec[:, 0, 1] / denom, -1 + 1e-6, 1 - 1e-6)
        independent = np.flatnonzero(scale * np.abs(np.arctanh(r)) <= threshold)
        if independent.size:
            return start + int(independent[0])
    return None

