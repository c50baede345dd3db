"""DP bin edges: quantiles by the exponential mechanism (Smith 2011), for ``dp_bins`` columns.

A contract may declare ``dp_bins: k`` with a public range ``[lower, upper]`` instead of bin
edges. The first release then publishes k−1 inner edges at the j/k quantiles, each chosen by
the exponential mechanism over the intervals between sorted (clipped) values, with utility
``−|rank − q·n|`` (sensitivity 1 under add/remove) and the interval length as base measure;
the edge is uniform inside the chosen interval. Nothing but the edges leaves this module.
"""

from __future__ import annotations

import math

import numpy as np

from privfair.core.accounting import PrivacyLedger, exponential_epsilon
from privfair.core.mechanisms import exponential_mechanism


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
    points = np.concatenate([[lower], x, [upper]])
    with np.errstate(divide="ignore"):
        log_length = np.log(np.diff(points))  # −inf for empty intervals: never chosen
    ranks = np.arange(x.size + 1)
    inner = []
    for j in range(1, bins):
        q = j / bins
        pick = exponential_mechanism(-np.abs(ranks - q * x.size), epsilon=epsilon,
                                     sensitivity=1.0, rng=rng, ledger=ledger,
                                     name=f"{name} quantile {j}/{bins}", log_base=log_length,
                                     queries=1)  # one quantile; n + 1 candidates would leak n
        inner.append(rng.uniform(points[pick], points[pick + 1]))
    if integer:
        inner = [float(round(e)) for e in inner]
    edges = sorted({lower, upper, *(e for e in inner if lower < e < upper)})
    return [float(e) for e in edges]
