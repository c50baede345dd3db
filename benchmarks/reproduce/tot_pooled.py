"""TOT as SAFES actually ran it: AIF360 ``OptTools``' *pooled* distortion constraint.

SAFES eq. (10) bounds the excess distortion for every ``(g, x, y)``, and that is what
:class:`privfair.fair.tot.TOTransform` imposes. SAFES's code calls AIF360's ``OptimPreproc``,
whose ``OptTools.optimize`` bounds it only for the group-averaged map,
``Σ_g p(g | x, y) q(x̃, ỹ | g, x, y)``, per ``(x, y)``; and its discrimination constraint is
additive, ``|q(ŷ | g) − q(ŷ | g')| ≤ η`` (the ratio form is commented out). The pooled bound
lets the map move one group's rows more than the bound as long as the cell's average stays
within it, which is what makes COMPAS at η = 0.08 feasible (see :func:`row_bound_gap`).

This module rebuilds that LP (dense, ``|G×X×Y| × |X×Y|`` variables: 5,184 for COMPAS) with
CVXPY, for the reproduction only: it is the paper's formulation, not privfair's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd


class PooledInfeasible(RuntimeError):
    """The pooled program has no solution (SAFES counts such an attempt as failed)."""


def _grid(sizes: Sequence[int]) -> np.ndarray:
    return np.stack(np.unravel_index(np.arange(int(np.prod(sizes))), sizes), axis=1)


def fit_pooled(frame: pd.DataFrame, domain: Mapping[str, int], *, d_cols: Sequence[str],
               x_cols: Sequence[str], y_col: str, eta: float,
               distortion: Callable[..., np.ndarray],
               clist: Sequence[float] = (0.99, 1.99, 2.99),
               dlist: Sequence[float] = (0.1, 0.05, 0.0)) -> dict[str, Any]:
    """Solve AIF360's OptTools program on ``frame``'s empirical distribution.

    Returns the map ``q`` (rows ``(g, x, y)``, columns ``(x̃, ỹ)``, C order) with the sizes
    needed by :func:`apply_pooled`; raises :class:`PooledInfeasible`.
    """
    import cvxpy as cp

    d_sizes = [domain[c] for c in d_cols]
    xy_cols = [*x_cols, y_col]
    xy_sizes = [domain[c] for c in xy_cols]
    n_d, n_xy = int(np.prod(d_sizes)), int(np.prod(xy_sizes))
    d_idx = np.ravel_multi_index(tuple(frame[c].to_numpy() for c in d_cols), d_sizes)
    xy_idx = np.ravel_multi_index(tuple(frame[c].to_numpy() for c in xy_cols), xy_sizes)
    p = np.bincount(d_idx * n_xy + xy_idx, minlength=n_d * n_xy).astype(float)
    p = (p / p.sum()).reshape(n_d, n_xy)
    grid = _grid(xy_sizes)
    old = {c: np.repeat(grid[:, i], n_xy) for i, c in enumerate(xy_cols)}
    new = {c: np.tile(grid[:, i], n_xy) for i, c in enumerate(xy_cols)}
    delta = np.asarray(distortion(old, new), dtype=float).reshape(n_xy, n_xy)
    q = cp.Variable((n_d * n_xy, n_xy), nonneg=True)
    constraints = [cp.sum(q, axis=1) == 1]
    p_row = p.reshape(-1)
    p_xy = p.sum(axis=0)
    # Excess distortion of the group-averaged map, per (x, y) with mass (AIF360 OptTools).
    weights = np.zeros((n_xy, n_d * n_xy))
    for g in range(n_d):
        weights[np.arange(n_xy), g * n_xy + np.arange(n_xy)] = np.divide(
            p[g], p_xy, out=np.zeros(n_xy), where=p_xy > 0)
    pooled = weights @ q  # n_xy × n_xy: q(x̃ỹ | x, y) averaged over g
    live = p_xy > 0
    for c, bound in zip(clist, dlist, strict=True):
        mask = (delta >= c).astype(float)
        constraints.append(cp.sum(cp.multiply(pooled, mask), axis=1)[live] <= bound)
    # q(ŷ | g): additive discrimination over every pair of groups with mass.
    n_y = xy_sizes[-1]
    to_y = np.zeros((n_xy, n_y))
    to_y[np.arange(n_xy), np.arange(n_xy) % n_y] = 1
    groups = [g for g in range(n_d) if p[g].sum() > 0]
    rates = []
    for g in groups:
        w = p[g] / p[g].sum()
        rates.append((w @ q[g * n_xy:(g + 1) * n_xy]) @ to_y)
    for i, a in enumerate(rates):
        for b in rates[i + 1:]:
            constraints.append(cp.abs(a - b) <= eta)
    transformed = p_row @ q
    problem = cp.Problem(cp.Minimize(cp.norm1(transformed - p_xy) / 2), constraints)
    problem.solve(solver="CLARABEL")
    if problem.status not in ("optimal", "optimal_inaccurate") or q.value is None:
        raise PooledInfeasible(f"pooled TOT {problem.status} at eta={eta}")
    value = np.clip(q.value, 0, None)
    value /= value.sum(axis=1, keepdims=True)
    achieved = [float(np.asarray(r.value)[0]) for r in rates]
    return {"q": value, "d_cols": list(d_cols), "xy_cols": xy_cols, "d_sizes": d_sizes,
            "xy_sizes": xy_sizes, "objective": float(problem.value),
            "q_y0_given_group": achieved}


def apply_pooled(frame: pd.DataFrame, fitted: Mapping[str, Any], *,
                 rng: np.random.Generator) -> pd.DataFrame:
    """Draw each row's ``(x̃, ỹ)`` from its map row (inverse CDF, one uniform per row)."""
    n_xy = int(np.prod(fitted["xy_sizes"]))
    d_idx = np.ravel_multi_index(tuple(frame[c].to_numpy() for c in fitted["d_cols"]),
                                 fitted["d_sizes"])
    xy_idx = np.ravel_multi_index(tuple(frame[c].to_numpy() for c in fitted["xy_cols"]),
                                  fitted["xy_sizes"])
    cdf = np.cumsum(fitted["q"][d_idx * n_xy + xy_idx], axis=1)
    draws = (cdf < rng.random(len(frame))[:, None]).sum(axis=1).clip(max=n_xy - 1)
    out = frame.copy()
    for col, codes in zip(fitted["xy_cols"], np.unravel_index(draws, fitted["xy_sizes"]),
                          strict=True):
        out[col] = codes.astype(frame[col].dtype)
    return out


def row_bound_gap(frame: pd.DataFrame, *, d_cols: Sequence[str], y_col: str,
                  favorable: int, y_flip_bound: float) -> dict[str, float]:
    """Why the per-``(g, x, y)`` program is infeasible: the smallest reachable gap.

    Under SAFES's COMPAS distortion a change of the outcome costs 2 (≥ c₂ = 1.99, bound
    d₂ = 0.05) and any further change reaches 3 (forbidden), so per ``(g, x, y)`` at most
    ``y_flip_bound`` of the rows change outcome, and each group's favourable rate moves by at
    most that much. The gap between the best and worst group can then shrink by at most
    ``2 · y_flip_bound``.
    """
    rates = frame.groupby(list(d_cols))[y_col].apply(lambda s: float(np.mean(s == favorable)))
    gap = float(rates.max() - rates.min())
    return {"input_gap": gap, "smallest_reachable_gap": max(0.0, gap - 2 * y_flip_bound),
            "group_rates": {str(k): float(v) for k, v in rates.items()}}
