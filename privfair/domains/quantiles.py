"""DP bin edges: quantiles by the exponential mechanism (Smith 2011), for ``dp_bins`` columns.

A contract may declare ``dp_bins: k`` with a public range ``[lower, upper]`` instead of bin
edges. The first release then publishes k−1 inner edges at the j/k quantiles, each chosen by
the exponential mechanism over the intervals between sorted (clipped) values, with utility
``−|rank − q·n|``. Nothing but the edges leaves this module.

The utility's sensitivity under add/remove is ``max(q, 1 − q)``, not 1 (issue 41's audit
found the median charged at sensitivity 1 (ε/2)-DP). Read the utility as a function of the
output point g, whose base measure does not depend on the data. Adding a value x to n
values moves qn to qn + q: a point g below x keeps its rank r, so ``|r − qn|`` moves by at
most q; a point at or above x has rank r + 1, so ``r − qn`` moves by 1 − q and ``|r − qn|``
by at most 1 − q. Removing a value is the same read backwards. Both extremes are reached
(for q ≤ 1/2 by points just above and far above an x added below rank qn), so the charge
is tight for every q, and the median gets half the noise it had at the same ε.

The output space is a public grid, not the reals (issue 41.2: no published number at float
precision that noise produced): :data:`GRID_CELLS` equal steps of ``[lower, upper]``, or the
integers of the range for an integer column that has at most that many. A grid point's
rank is the number of values at or below it, so the points between two consecutive sorted
values share one utility: the mechanism picks such a gap with the count of its grid points
as base measure, then the point inside it by an exact uniform integer draw. Together that
is the exponential mechanism over the grid points, exactly.
"""

from __future__ import annotations

import math

import numpy as np

from privfair.core.accounting import PrivacyLedger, exponential_epsilon
from privfair.core.mechanisms import exponential_mechanism

#: Equal steps of the declared range that edges can fall on (public; 2**20 keeps an edge within
#: a millionth of the range of the continuous mechanism's).
GRID_CELLS = 2**20


def edge_grid(*, lower: float, upper: float, integer: bool) -> tuple[float, int]:
    """The public grid of candidate edges: its step and number of cells (points ``lower +
    k·step`` for ``k = 0 … cells``). An integer column whose range has at most
    :data:`GRID_CELLS` integers gets the integers themselves."""
    if integer and float(lower).is_integer() and float(upper).is_integer() \
            and upper - lower <= GRID_CELLS:
        return 1.0, int(upper - lower)
    return (upper - lower) / GRID_CELLS, GRID_CELLS


def _grid_points_below(v: np.ndarray, *, lower: float, step: float, cells: int) -> np.ndarray:
    """How many grid points ``lower + k·step`` (``k = 0 … cells``) lie strictly below each
    value: the float quotient's ceiling, corrected by comparing with the grid points
    themselves (the quotient can be one off where a value sits on a grid point)."""
    k = np.clip(np.ceil((v - lower) / step), 0, cells + 1).astype(np.int64)
    k = np.where((k > 0) & (lower + step * (k - 1) >= v), k - 1, k)
    return np.where((k <= cells) & (lower + step * k < v), k + 1, k)


def dp_quantile_edges(
    values: np.ndarray, *, bins: int, lower: float, upper: float, integer: bool, rho: float,
    rng: np.random.Generator, ledger: PrivacyLedger, name: str,
) -> list[float]:
    """Bin edges ``[lower, e_1, ..., upper]`` with DP inner edges at the j/``bins`` quantiles.

    Parameters
    ----------
    values : ndarray
        The column's private values (NaN are ignored); clipped to ``[lower, upper]``.
    bins : int
        Requested number of bins (≥ 2); edges that coincide are merged, so there may be fewer.
    lower, upper : float
        Declared, public range.
    integer : bool
        Round inner edges to whole numbers (bins ``[a, b)`` of integers).
    rho : float
        zCDP cost of all ``bins − 1`` quantiles together (split evenly).
    """
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins!r}")
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise ValueError(f"expected finite lower < upper, got [{lower!r}, {upper!r}]")
    epsilon = exponential_epsilon(rho=rho / (bins - 1))
    x = np.asarray(values, dtype=np.float64)
    x = np.sort(np.clip(x[~np.isnan(x)], lower, upper))
    step, cells = edge_grid(lower=lower, upper=upper, integer=integer)
    # Gap i holds the grid points with exactly i values at or below them: those at or above
    # the i-th smallest value and below the next.
    first = np.concatenate([[0], _grid_points_below(x, lower=lower, step=step, cells=cells),
                            [cells + 1]])
    points_in_gap, first_in_gap = np.diff(first), first[:-1]
    with np.errstate(divide="ignore"):
        log_count = np.log(points_in_gap)  # −inf for a gap with no grid point: never chosen
    ranks = np.arange(x.size + 1)
    inner = []
    for j in range(1, bins):
        q = j / bins
        pick = exponential_mechanism(-np.abs(ranks - q * x.size), epsilon=epsilon,
                                     sensitivity=max(q, 1 - q),  # module docstring
                                     rng=rng, ledger=ledger,
                                     name=f"{name} quantile {j}/{bins}", log_base=log_count,
                                     queries=1)  # one quantile; n + 1 candidates would leak n
        k = first_in_gap[pick] + int(rng.integers(points_in_gap[pick]))
        inner.append(float(lower + step * k))
    if integer:
        inner = [float(round(e)) for e in inner]
    edges = sorted({lower, upper, *(e for e in inner if lower < e < upper)})
    return [float(e) for e in edges]
