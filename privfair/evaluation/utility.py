"""Utility of a synthetic table: marginal TVD, Cramér's V correlation difference, KS, CI tests.

This module is long on purpose: a catalogue of small utility metrics over one packed-key
counting helper; each function is short and independent.

Every function takes tables of integer codes (a pandas ``DataFrame`` or a mapping of column ->
1-D integer array) and the declared :class:`~privfair.core.domain.Domain` (or a ``{name: size}``
mapping). Category counts always come from the declared domain, never from the data, so a
category missing from one table still counts as a zero cell.

Counting is ``numpy.bincount`` on a packed mixed-radix key (as in :mod:`privfair.synth.measure`);
when the joint domain of the packed attributes is much larger than the number of rows, keys are
re-densified with ``numpy.unique`` so memory stays linear in the rows.

Metrics follow the benchmarks of PreFair (Pujol et al. 2023, §5.1) and SAFES (Giddens & Liu
2024, §5.2): average k-way TVD, average correlation difference (ACD) of bias-corrected
Cramér's V (Bergsma 2013), per-attribute Kolmogorov–Smirnov distance, plus a stratified
likelihood-ratio (G) test of conditional independence and the plug-in conditional mutual
information.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from privfair.core.domain import Clique, Domain
from privfair.core.errors import DomainError

TableLike = pd.DataFrame | Mapping[str, np.ndarray]
DomainLike = Domain | Mapping[str, int]

__all__ = [
    "CITestResult",
    "KSResult",
    "TableLike",
    "DomainLike",
    "as_domain",
    "average_correlation_difference",
    "ci_test",
    "codes",
    "conditional_mutual_information",
    "correlation_difference_breakdown",
    "cramers_v",
    "cramers_v_pairs",
    "ks_statistics",
    "marginal_tvd",
    "marginal_tvd_breakdown",
    "n_rows",
]

# Packed keys are re-densified before the radix product passes this bound (no int64 overflow),
# and counted with numpy.unique instead of bincount when the cell count passes
# max(_DENSE_CELLS, 4 * rows).
_MAX_RADIX = 1 << 40
_DENSE_CELLS = 1 << 22


class CITestResult(NamedTuple):
    """Result of :func:`ci_test`; unpacks as ``(statistic, dof, p_value)``."""

    statistic: float
    dof: int
    p_value: float


class KSResult(NamedTuple):
    """Two-sample Kolmogorov–Smirnov distance of one attribute's codes, with its p-value."""

    statistic: float
    p_value: float


# ---------------------------------------------------------------------------------------------
# Input handling


def as_domain(domain: DomainLike) -> Domain:
    """Return ``domain`` as a :class:`Domain` (a ``{name: size}`` mapping is converted)."""
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, Mapping):
        return Domain.from_dict(domain)
    raise DomainError(
        f"domain: expected a privfair Domain or a mapping of attribute -> size, "
        f"got {type(domain).__name__}"
    )


def n_rows(table: TableLike, *, name: str = "table") -> int:
    """Number of rows of a table of codes (a mapping's columns must agree in length)."""
    if isinstance(table, pd.DataFrame):
        return len(table)
    if isinstance(table, Mapping):
        lengths = {len(np.asarray(v)) for v in table.values()}
        if len(lengths) > 1:
            raise DomainError(f"{name}: columns have different lengths {sorted(lengths)}")
        return lengths.pop() if lengths else 0
    raise DomainError(
        f"{name}: expected a pandas DataFrame or a mapping of column -> code array, "
        f"got {type(table).__name__}"
    )


def codes(table: TableLike, attribute: str, domain: DomainLike, *,
          name: str = "table") -> np.ndarray:
    """Return one column of ``table`` as int64 codes checked against the declared domain.

    Parameters
    ----------
    table : DataFrame or mapping of str to ndarray
        Table of integer codes.
    attribute : str
        Column to read; must be declared in ``domain``.
    domain : Domain or mapping of str to int
        Declared domain.
    name : str, optional
        How the table is named in error messages (e.g. ``"real"``, ``"synthetic"``).

    Returns
    -------
    ndarray of int64
        The codes, all in ``0 .. size-1``.

    Raises
    ------
    DomainError
        If the column is missing, not integer, has missing values, or holds codes outside the
        declared range (the message names the column, never the offending values).
    """
    dom = as_domain(domain)
    if isinstance(table, pd.DataFrame):
        if attribute not in table.columns:
            raise DomainError(f"{name}: missing column {attribute!r}")
        series = table[attribute]
        if series.isna().any():
            raise DomainError(f"{name}: column {attribute!r} has missing values; "
                              "expected integer codes")
        if pd.api.types.is_bool_dtype(series.dtype) or not pd.api.types.is_integer_dtype(
                series.dtype):
            raise DomainError(
                f"{name}: column {attribute!r}: expected integer codes, got dtype {series.dtype}"
            )
        return dom.check_column(attribute, series.to_numpy(dtype=np.int64), where=name)
    if isinstance(table, Mapping):
        if attribute not in table:
            raise DomainError(f"{name}: missing column {attribute!r}")
        return dom.check_column(attribute, table[attribute], where=name)
    raise DomainError(
        f"{name}: expected a pandas DataFrame or a mapping of column -> code array, "
        f"got {type(table).__name__}"
    )


def _attribute_list(attributes: str | Sequence[str] | None, dom: Domain, *,
                    parameter: str, allow_empty: bool = False) -> tuple[str, ...]:
    if attributes is None:
        result: tuple[str, ...] = ()
    elif isinstance(attributes, str):
        result = (attributes,)
    else:
        result = tuple(attributes)
    for a in result:
        if not isinstance(a, str):
            raise DomainError(f"{parameter}: expected attribute names, got {a!r}")
        if a not in dom:
            raise DomainError(f"{parameter}: attribute {a!r} is not in the declared domain")
    if len(set(result)) != len(result):
        raise DomainError(f"{parameter}: lists an attribute twice: {list(result)}")
    if not result and not allow_empty:
        raise DomainError(f"{parameter}: expected at least one attribute")
    return result


def _selected(attributes: Sequence[str] | None, dom: Domain) -> tuple[str, ...]:
    """The attributes a table metric runs over: all declared ones by default, domain order."""
    if attributes is None:
        return dom.attributes
    chosen = _attribute_list(attributes, dom, parameter="attributes")
    return dom.canonical(chosen)


# ---------------------------------------------------------------------------------------------
# Packed keys


def _densify(key: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inverse = np.unique(key, return_inverse=True)
    return inverse.astype(np.int64, copy=False).reshape(-1), max(int(uniq.size), 1)


def _pack(columns: Sequence[np.ndarray], sizes: Sequence[int], n: int) -> tuple[np.ndarray, int]:
    """Mixed-radix key of the joint value of ``columns`` and the number of possible keys.

    When the radix product would pass ``_MAX_RADIX`` the running key is first replaced by the
    index of its observed value, so the key never overflows int64; keys stay consistent across
    every row passed in one call (pack tables to be compared together).
    """
    key = np.zeros(n, dtype=np.int64)
    cells = 1
    for col, size in zip(columns, sizes, strict=True):
        if cells * size > _MAX_RADIX:
            key, cells = _densify(key)
        key = key * size + col
        cells *= size
    return key, cells


def _bincount(key: np.ndarray, cells: int) -> tuple[np.ndarray, int]:
    """``(key', cells')`` with ``cells'`` small enough for ``np.bincount(key', minlength=cells')``."""
    if cells > max(_DENSE_CELLS, 4 * key.size):
        return _densify(key)
    return key, cells


# ---------------------------------------------------------------------------------------------
# Total variation distance


def marginal_tvd_breakdown(real: TableLike, synthetic: TableLike, domain: DomainLike,
                           k: int = 1, *,
                           attributes: Sequence[str] | None = None) -> dict[Clique, float]:
    """Total variation distance of every k-way marginal of two tables.

    ``TVD(p, q) = ½ Σ_cells |p − q|`` between the normalised k-way contingency tables, over the
    declared cells of each k-subset of attributes.

    Parameters
    ----------
    real, synthetic : DataFrame or mapping of str to ndarray
        Tables of integer codes. Extra columns are ignored.
    domain : Domain or mapping of str to int
        Declared domain.
    k : int, default 1
        Marginal order, ``1 <= k <= len(attributes)``.
    attributes : sequence of str, optional
        Attributes to use (default: all declared attributes).

    Returns
    -------
    dict of tuple of str to float
        TVD in ``[0, 1]`` of each k-subset (attributes in domain order), in
        ``itertools.combinations`` order.

    Raises
    ------
    DomainError
        On a bad column, an empty table, or ``k`` out of range.
    """
    dom = as_domain(domain)
    attrs = _selected(attributes, dom)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= len(attrs):
        raise DomainError(f"k: expected an integer in 1..{len(attrs)}, got {k!r}")
    n_real = n_rows(real, name="real")
    n_syn = n_rows(synthetic, name="synthetic")
    if n_real == 0 or n_syn == 0:
        empty = "real" if n_real == 0 else "synthetic"
        raise DomainError(f"{empty}: the table has no rows; TVD is undefined")
    both = {
        a: np.concatenate([codes(real, a, dom, name="real"),
                           codes(synthetic, a, dom, name="synthetic")])
        for a in attrs
    }
    out: dict[Clique, float] = {}
    for clique in itertools.combinations(attrs, int(k)):
        key, cells = _pack([both[a] for a in clique], dom.shape(clique), n_real + n_syn)
        key, cells = _bincount(key, cells)
        p = np.bincount(key[:n_real], minlength=cells) / n_real
        q = np.bincount(key[n_real:], minlength=cells) / n_syn
        out[clique] = float(0.5 * np.abs(p - q).sum())
    return out


def marginal_tvd(real: TableLike, synthetic: TableLike, domain: DomainLike, k: int = 1, *,
                 attributes: Sequence[str] | None = None) -> float:
    """Average total variation distance over all k-way marginals (PreFair §5.1, k = 1, 2, 3).

    Parameters
    ----------
    real, synthetic : DataFrame or mapping of str to ndarray
        Tables of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    k : int, default 1
        Marginal order.
    attributes : sequence of str, optional
        Attributes to use (default: all declared attributes).

    Returns
    -------
    float
        Mean of :func:`marginal_tvd_breakdown` over all k-subsets, in ``[0, 1]``.
    """
    per = marginal_tvd_breakdown(real, synthetic, domain, k, attributes=attributes)
    return float(np.mean(list(per.values())))


# ---------------------------------------------------------------------------------------------
# Cramér's V


def _cramers_v_cells(cell_counts: np.ndarray, row_of_cell: np.ndarray, col_of_cell: np.ndarray,
                     row_totals: np.ndarray, col_totals: np.ndarray,
                     bias_correction: bool) -> float:
    n = float(row_totals.sum())
    r = int(np.count_nonzero(row_totals))
    c = int(np.count_nonzero(col_totals))
    if r < 2 or c < 2:
        return 0.0
    # Pearson chi² = n (Σ O² / (R C) − 1), summed over non-empty cells only.
    ratio = cell_counts.astype(np.float64) ** 2 / (
        row_totals[row_of_cell].astype(np.float64) * col_totals[col_of_cell])
    phi2 = max(float(ratio.sum()) - 1.0, 0.0)  # chi² / n
    if not bias_correction:
        return float(min(math.sqrt(phi2 / (min(r, c) - 1)), 1.0))
    # Bergsma (2013): shrink phi² and the table dimensions by their small-sample bias.
    phi2_corr = max(0.0, phi2 - (r - 1) * (c - 1) / (n - 1))
    r_corr = r - (r - 1) ** 2 / (n - 1)
    c_corr = c - (c - 1) ** 2 / (n - 1)
    denominator = min(r_corr - 1, c_corr - 1)
    if denominator <= 0:
        return 0.0
    return float(min(math.sqrt(phi2_corr / denominator), 1.0))


def cramers_v(contingency: np.ndarray, *, bias_correction: bool = True) -> float:
    """Cramér's V of a two-way contingency table, bias-corrected as in Bergsma (2013).

    With ``n`` rows, ``φ² = χ²/n`` (Pearson, no continuity correction), and ``r``, ``c`` the
    numbers of non-empty rows and columns::

        φ̃² = max(0, φ² − (r−1)(c−1)/(n−1))
        r̃ = r − (r−1)²/(n−1),   c̃ = c − (c−1)²/(n−1)
        Ṽ = sqrt(φ̃² / min(r̃−1, c̃−1))

    Empty rows and columns (declared categories that never occur) are dropped first: they carry
    no information and would otherwise make χ² undefined.

    Parameters
    ----------
    contingency : array_like of shape (r, c)
        Non-negative counts.
    bias_correction : bool, default True
        Apply Bergsma's correction; ``False`` gives the classical ``sqrt(φ² / (min(r, c)−1))``.

    Returns
    -------
    float
        V in ``[0, 1]``; ``0.0`` when fewer than two rows or columns are non-empty, or when the
        corrected denominator is not positive (no association can be measured).
    """
    table = np.asarray(contingency)
    if table.ndim != 2:
        raise DomainError(f"contingency: expected a 2-D table, got {table.ndim} dimensions")
    if not np.issubdtype(table.dtype, np.number) or np.any(~np.isfinite(table)) or np.any(
            table < 0):
        raise DomainError("contingency: expected finite non-negative counts")
    rows, cols = np.nonzero(table)
    return _cramers_v_cells(table[rows, cols], rows, cols, table.sum(axis=1), table.sum(axis=0),
                            bias_correction)


def _pair_v(x: np.ndarray, y: np.ndarray, size_x: int, size_y: int,
            bias_correction: bool) -> float:
    key = x * size_y + y
    cells = size_x * size_y
    if cells <= max(_DENSE_CELLS, 4 * key.size):
        counts = np.bincount(key, minlength=cells)
        keys = np.flatnonzero(counts)
        counts = counts[keys]
    else:
        keys, counts = np.unique(key, return_counts=True)
    return _cramers_v_cells(counts, keys // size_y, keys % size_y,
                            np.bincount(x, minlength=size_x), np.bincount(y, minlength=size_y),
                            bias_correction)


def cramers_v_pairs(table: TableLike, domain: DomainLike, *,
                    attributes: Sequence[str] | None = None,
                    bias_correction: bool = True, name: str = "table") -> dict[Clique, float]:
    """Bias-corrected Cramér's V of every pair of attributes of one table.

    Parameters
    ----------
    table : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    attributes : sequence of str, optional
        Attributes to use (default: all declared attributes).
    bias_correction : bool, default True
        See :func:`cramers_v`.
    name : str, optional
        How the table is named in error messages.

    Returns
    -------
    dict of tuple of str to float
        V of each pair (domain order), in ``itertools.combinations`` order.
    """
    dom = as_domain(domain)
    attrs = _selected(attributes, dom)
    if n_rows(table, name=name) == 0:
        raise DomainError(f"{name}: the table has no rows; Cramér's V is undefined")
    cols = {a: codes(table, a, dom, name=name) for a in attrs}
    return {
        (a, b): _pair_v(cols[a], cols[b], dom.size(a), dom.size(b), bias_correction)
        for a, b in itertools.combinations(attrs, 2)
    }


def correlation_difference_breakdown(real: TableLike, synthetic: TableLike,
                                     domain: DomainLike, *,
                                     attributes: Sequence[str] | None = None
                                     ) -> dict[Clique, float]:
    """``|V_real − V_synthetic|`` of bias-corrected Cramér's V for every attribute pair.

    Parameters
    ----------
    real, synthetic : DataFrame or mapping of str to ndarray
        Tables of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    attributes : sequence of str, optional
        Attributes to use (default: all declared attributes; at least two).

    Returns
    -------
    dict of tuple of str to float
        Absolute difference in ``[0, 1]`` per pair.
    """
    dom = as_domain(domain)
    attrs = _selected(attributes, dom)
    if len(attrs) < 2:
        raise DomainError("attributes: the correlation difference needs at least two attributes")
    v_real = cramers_v_pairs(real, dom, attributes=attrs, name="real")
    v_syn = cramers_v_pairs(synthetic, dom, attributes=attrs, name="synthetic")
    return {pair: abs(v_real[pair] - v_syn[pair]) for pair in v_real}


def average_correlation_difference(real: TableLike, synthetic: TableLike, domain: DomainLike,
                                   *, attributes: Sequence[str] | None = None) -> float:
    """Average correlation difference (ACD, PreFair §5.1).

    The mean over all attribute pairs of ``|V_real − V_synthetic|``, with V the bias-corrected
    Cramér's V (:func:`cramers_v`).

    Parameters
    ----------
    real, synthetic : DataFrame or mapping of str to ndarray
        Tables of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    attributes : sequence of str, optional
        Attributes to use (default: all declared attributes; at least two).

    Returns
    -------
    float
        ACD in ``[0, 1]``.
    """
    per = correlation_difference_breakdown(real, synthetic, domain, attributes=attributes)
    return float(np.mean(list(per.values())))


# ---------------------------------------------------------------------------------------------
# Kolmogorov–Smirnov


def ks_statistics(real: TableLike, synthetic: TableLike, domain: DomainLike, *,
                  attributes: Sequence[str] | None = None) -> dict[str, KSResult]:
    """Two-sample Kolmogorov–Smirnov distance of each attribute, reading codes as ordinal.

    The statistic is ``max_c |F_real(c) − F_synthetic(c)|`` over the declared codes, computed
    from the 1-way counts; it equals ``scipy.stats.ks_2samp(...).statistic`` on the raw codes.
    The p-value is the asymptotic two-sided one (Kolmogorov distribution with
    ``n·m/(n+m)`` effective samples). With discrete codes it is conservative (too large).
    Only meaningful for attributes whose codes are ordered (e.g. binned numbers).

    Parameters
    ----------
    real, synthetic : DataFrame or mapping of str to ndarray
        Tables of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    attributes : sequence of str, optional
        Attributes to test (default: all declared attributes).

    Returns
    -------
    dict of str to KSResult
        ``(statistic, p_value)`` per attribute, statistic in ``[0, 1]``.
    """
    dom = as_domain(domain)
    attrs = _selected(attributes, dom)
    n_real = n_rows(real, name="real")
    n_syn = n_rows(synthetic, name="synthetic")
    if n_real == 0 or n_syn == 0:
        empty = "real" if n_real == 0 else "synthetic"
        raise DomainError(f"{empty}: the table has no rows; the KS statistic is undefined")
    effective = n_real * n_syn / (n_real + n_syn)
    out: dict[str, KSResult] = {}
    for a in attrs:
        size = dom.size(a)
        cdf_real = np.cumsum(np.bincount(codes(real, a, dom, name="real"), minlength=size))
        cdf_syn = np.cumsum(np.bincount(codes(synthetic, a, dom, name="synthetic"),
                                        minlength=size))
        d = float(np.abs(cdf_real / n_real - cdf_syn / n_syn).max())
        p = float(stats.kstwo.sf(d, max(round(effective), 1))) if d > 0 else 1.0
        out[a] = KSResult(d, min(max(p, 0.0), 1.0))
    return out


# ---------------------------------------------------------------------------------------------
# Conditional independence


def _joint_index(table: TableLike, attrs: tuple[str, ...], dom: Domain, n: int,
                 name: str) -> np.ndarray:
    """Index of the observed joint value of ``attrs`` for each row (all zeros if none)."""
    if not attrs:
        return np.zeros(n, dtype=np.int64)
    key, _ = _pack([codes(table, a, dom, name=name) for a in attrs], dom.shape(attrs), n)
    return _densify(key)[0]


def _counts_by(*indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the joint value of ``indices`` per row: ``(inverse index, count of each value)``."""
    n = indices[0].size
    sizes = [int(ix.max()) + 1 if n else 1 for ix in indices]
    key, _ = _pack(list(indices), sizes, n)
    uniq_inverse, _ = _densify(key)
    return uniq_inverse, np.bincount(uniq_inverse)


def ci_test(frame: TableLike, x: str | Sequence[str], y: str | Sequence[str],
            given: str | Sequence[str] | None, domain: DomainLike, *,
            adjust_dof: bool = True, permutations: int = 0,
            rng: np.random.Generator | None = None) -> CITestResult:
    """Likelihood-ratio (G) test of ``X ⟂ Y | Z``, stratified by the joint value of ``Z``.

    ``G = 2 Σ_z Σ_{x,y} O_xyz · ln(O_xyz · n_z / (n_xz · n_yz))`` over non-empty cells, which
    is ``2 n Î(X;Y|Z)`` in nats. Under independence ``G ~ χ²(dof)`` asymptotically.

    Degrees of freedom count only strata that occur in the data. With ``adjust_dof=True``
    (default) each stratum contributes ``(r_z − 1)(c_z − 1)``, where ``r_z`` and ``c_z`` are
    the numbers of values of X and Y *observed* in that stratum (a row or column of zeros adds
    no free parameter); with ``adjust_dof=False`` each non-empty stratum contributes
    ``(|X| − 1)(|Y| − 1)`` with the declared sizes. The adjusted count is better calibrated on
    sparse tables; the declared count is more conservative.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    x, y : str or sequence of str
        The two variables (a sequence is treated as one joint variable).
    given : str, sequence of str, or None
        Conditioning attributes; ``None`` or ``()`` gives the marginal test.
    domain : Domain or mapping of str to int
        Declared domain.
    adjust_dof : bool, default True
        Count degrees of freedom from observed levels per stratum (see above).
    permutations : int, default 0
        If positive, the p-value comes from this many permutations of Y within strata of Z
        instead of the χ² approximation, which is unreliable when strata are sparse.
    rng : numpy.random.Generator, optional
        Randomness for the permutations.

    Returns
    -------
    CITestResult
        ``(statistic, dof, p_value)``; ``p_value = 1.0`` when ``dof == 0``.

    Raises
    ------
    DomainError
        If an attribute is unknown or used in two roles, a column is bad, or there are no rows.
    """
    dom = as_domain(domain)
    xs = _attribute_list(x, dom, parameter="x")
    ys = _attribute_list(y, dom, parameter="y")
    zs = _attribute_list(given, dom, parameter="given", allow_empty=True)
    for (pa, a), (pb, b) in itertools.combinations((("x", xs), ("y", ys), ("given", zs)), 2):
        both = set(a) & set(b)
        if both:
            raise DomainError(f"{pa} and {pb} share attributes {sorted(both)}; "
                              "they must be disjoint")
    n = n_rows(frame, name="frame")
    if n == 0:
        raise DomainError("frame: the table has no rows; the CI test is undefined")
    xi = _joint_index(frame, xs, dom, n, "frame")
    yi = _joint_index(frame, ys, dom, n, "frame")
    zi = _joint_index(frame, zs, dom, n, "frame")

    statistic = _g_statistic(xi, yi, zi)
    n_z = np.bincount(zi)
    n_strata = int(n_z.size)
    if adjust_dof:
        zx, n_zx = _counts_by(zi, xi)
        zy, n_zy = _counts_by(zi, yi)
        zx_first = np.zeros(n_zx.size, dtype=np.int64)
        zx_first[zx] = zi
        zy_first = np.zeros(n_zy.size, dtype=np.int64)
        zy_first[zy] = zi
        r_z = np.bincount(zx_first, minlength=n_strata)
        c_z = np.bincount(zy_first, minlength=n_strata)
        dof = int(np.sum((r_z - 1) * (c_z - 1)))
    else:
        dof = n_strata * (dom.cells(xs) - 1) * (dom.cells(ys) - 1)
    if permutations:
        if rng is None:
            raise ValueError("a permutation CI test needs rng, a numpy Generator")
        # Shuffle Y within strata of Z: row i of stratum z takes Y from a random row of z.
        grouped = np.argsort(zi, kind="stable")
        exceed = 0
        for _ in range(permutations):
            shuffled = rng.permutation(n)
            source = shuffled[np.argsort(zi[shuffled], kind="stable")]
            permuted = np.empty_like(yi)
            permuted[grouped] = yi[source]
            exceed += _g_statistic(xi, permuted, zi) >= statistic - 1e-9
        return CITestResult(statistic, dof, (1 + exceed) / (1 + permutations))
    p_value = float(stats.chi2.sf(statistic, dof)) if dof > 0 else 1.0
    return CITestResult(statistic, dof, p_value)


def _g_statistic(xi: np.ndarray, yi: np.ndarray, zi: np.ndarray) -> float:
    """``2 Σ O ln(O n_z / (n_xz n_yz))`` over the non-empty (z, x, y) cells."""
    n = xi.size
    zxy, n_zxy = _counts_by(zi, xi, yi)
    zx, n_zx = _counts_by(zi, xi)
    zy, n_zy = _counts_by(zi, yi)
    n_z = np.bincount(zi)
    # Some row of each non-empty (z, x, y) cell (any will do: they share z, x and y).
    first = np.zeros(n_zxy.size, dtype=np.int64)
    first[zxy] = np.arange(n)
    observed = n_zxy.astype(np.float64)
    log_ratio = (np.log(observed) + np.log(n_z[zi[first]])
                 - np.log(n_zx[zx[first]]) - np.log(n_zy[zy[first]]))
    return max(float(2.0 * np.sum(observed * log_ratio)), 0.0)


def conditional_mutual_information(frame: TableLike, x: str | Sequence[str],
                                   y: str | Sequence[str], given: str | Sequence[str] | None,
                                   domain: DomainLike) -> float:
    """Plug-in conditional mutual information ``I(X;Y|Z)`` in nats.

    Computed from the empirical distribution as ``G / (2n)`` with ``G`` the statistic of
    :func:`ci_test`; zero exactly when X and Y are empirically independent in every stratum.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    x, y : str or sequence of str
        The two variables (a sequence is one joint variable).
    given : str, sequence of str, or None
        Conditioning attributes (``None``: the unconditional mutual information).
    domain : Domain or mapping of str to int
        Declared domain.

    Returns
    -------
    float
        ``I(X;Y|Z) >= 0`` in nats.
    """
    result = ci_test(frame, x, y, given, domain)
    return result.statistic / (2.0 * n_rows(frame, name="frame"))
