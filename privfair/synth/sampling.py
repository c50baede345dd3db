"""Synthetic rows from a fitted graphical model.

Ancestral sampling along the junction tree: the root clique is drawn jointly, then each
clique's new attributes are drawn given its separator with its parent. Two modes:

* ``"iid"`` — every row independently (inverse-CDF, vectorised over rows).
* ``"round"`` — low variance: the number of rows in each cell of a conditional table is the
  expected count rounded by systematic randomized rounding (unbiased, sums preserved), and the
  values are dealt to the rows of each parent group in random order. Marginals then match the
  model's up to rounding, while siblings stay conditionally independent given their parent
  (dealing without the shuffle is what breaks the reference "round" mode).

All randomness comes from the passed Generator. Decompression maps MST's merged bucket back to
one of its original codes, by the contract's public prior where one is declared, else uniformly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privfair.core.domain import Domain, code_dtype
from privfair.synth.estimation import GraphicalModel
from privfair.synth.measure import Compression

MODES = ("iid", "round")


def systematic_round(expected: np.ndarray, totals: np.ndarray, rng: np.random.Generator
                     ) -> np.ndarray:
    """Round each row of ``expected`` to integers summing to ``totals``, unbiasedly.

    Parameters
    ----------
    expected : ndarray, shape (groups, k)
        Non-negative expected counts; row g sums to ``totals[g]`` up to float error.
    totals : ndarray of int, shape (groups,)
    """
    expected = np.maximum(expected, 0.0)
    sums = expected.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(sums > 0, expected * (totals[:, None] / sums),
                          totals[:, None] / expected.shape[1])
    cumulative = np.cumsum(scaled, axis=1)
    cumulative[:, -1] = totals  # kill float drift so every row sums exactly
    offset = rng.random(len(totals))[:, None]
    marks = np.floor(cumulative + offset)
    counts = np.diff(np.concatenate([np.floor(offset), marks], axis=1), axis=1)
    return counts.astype(np.int64)


def _conditional(model: GraphicalModel, i: int) -> tuple[tuple[str, ...], tuple[str, ...],
                                                         np.ndarray]:
    """P(new attributes | separator) for clique i, as (separator, new, table[S, N])."""
    domain, tree = model.domain, model.tree
    clique = tree.cliques[i]
    sep = tree.separator(i)
    new = tuple(a for a in clique if a not in sep)
    order = [clique.index(a) for a in (*sep, *new)]
    joint = np.transpose(model.beliefs[i], order).reshape(domain.cells(sep), domain.cells(new))
    return sep, new, joint


def _flat_index(domain: Domain, attributes: tuple[str, ...], columns: dict[str, np.ndarray],
                n: int) -> np.ndarray:
    key = np.zeros(n, dtype=np.int64)
    for a in attributes:
        key = key * domain.size(a) + columns[a]
    return key


def _unflatten(domain: Domain, attributes: tuple[str, ...], flat: np.ndarray,
               columns: dict[str, np.ndarray]) -> None:
    if not attributes:
        return
    for a, codes in zip(attributes,
                        np.unravel_index(flat, domain.shape(attributes)), strict=True):
        columns[a] = codes.astype(code_dtype(domain.size(a)))


def _inverse_cdf(shifted: np.ndarray, u: np.ndarray, parent_key: np.ndarray) -> np.ndarray:
    """``min(searchsorted(shifted.ravel(), u, "right") - parent_key * k, k - 1)``: the value
    drawn in each row from its group's shifted CDF (row ``g`` of ``shifted``, in ``[g, g+1]``)
    by ``u`` in ``[g, g+1]``.

    A binary search per value mispredicts its branches on unsorted ``u``; when the shifted
    CDFs are sorted as one array (they are, unless a table holds NaN or a negative mass), the
    same count is ``#{j < k - 1: shifted[g, j] <= u}`` (every entry of an earlier group is at
    most ``g <= u``, a later group is reached only past the whole of group ``g``, which the
    cap at ``k - 1`` folds back), found here by a branchless binary search over the rows'
    own entries: ``log2(k)`` vectorised gathers and comparisons of the same floats.
    """
    k = shifted.shape[1]
    flat_cdf = shifted.ravel()
    if not (np.all(np.isfinite(flat_cdf)) and np.all(flat_cdf[1:] >= flat_cdf[:-1])):
        flat = np.searchsorted(flat_cdf, u, side="right") - parent_key * k
        return np.minimum(flat, k - 1)
    steps = (k - 1).bit_length()  # candidates 1 .. 2**steps - 1 >= k - 1
    if steps == 0:  # one value per group
        return np.zeros(len(u), dtype=np.int64)
    width = 1 << steps
    table = np.full((len(shifted), width), np.inf)  # past entry k - 2: never <= u
    table[:, 1:k] = shifted[:, :k - 1]  # entry j at column j + 1; column 0 unused
    flat_table = table.ravel()
    pos = parent_key * width  # row g's column 0: the count so far is 0
    # Preallocated buffers and arithmetic instead of a masked copy: a mask picked by random
    # values mispredicts as much as the binary search it replaces.
    cand, values = np.empty_like(pos), np.empty(len(u))
    found = np.empty(len(u), dtype=bool)
    for step in (1 << s for s in reversed(range(steps))):
        np.add(pos, step, out=cand)
        np.take(flat_table, cand, out=values, mode="clip")  # in range: no bounds check
        np.less_equal(values, u, out=found)
        np.multiply(found, step, out=cand)
        pos += cand
    pos &= width - 1
    return pos


def sample_model(model: GraphicalModel, n_rows: int, *, rng: np.random.Generator,
                 mode: str = "iid") -> dict[str, np.ndarray]:
    """Draw ``n_rows`` rows of codes from ``model``, each column in its narrowest unsigned
    dtype (:func:`~privfair.core.domain.code_dtype`)."""
    if mode not in MODES:
        raise ValueError(f"sample mode must be one of {list(MODES)}, got {mode!r}")
    if not isinstance(n_rows, int | np.integer) or n_rows < 0:
        raise ValueError(f"n_rows must be an integer >= 0, got {n_rows!r}")
    domain, tree = model.domain, model.tree
    columns: dict[str, np.ndarray] = {}
    for i in tree.order:
        sep, new, joint = _conditional(model, i)
        parent_key = _flat_index(domain, sep, columns, n_rows)
        group_mass = joint.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            cond = np.where(group_mass > 0, joint / group_mass, 1.0 / joint.shape[1])
        if mode == "iid":
            cdf = np.cumsum(cond, axis=1)
            cdf[:, -1] = 1.0
            # One search over all groups: shift group g's CDF into [g, g+1).
            shifted = cdf + np.arange(len(cdf))[:, None]
            u = rng.random(n_rows) + parent_key
            flat = _inverse_cdf(shifted, u, parent_key)
        else:
            sizes = np.bincount(parent_key, minlength=cond.shape[0])
            counts = systematic_round(cond * sizes[:, None], sizes, rng)
            shuffled = rng.permutation(n_rows)
            rows = shuffled[np.argsort(parent_key[shuffled], kind="stable")]
            values = np.repeat(np.tile(np.arange(cond.shape[1]), cond.shape[0]), counts.ravel())
            flat = np.empty(n_rows, dtype=np.int64)
            flat[rows] = values
        _unflatten(domain, new, flat, columns)
    return {a: columns[a] for a in domain}


def decompress(columns: dict[str, np.ndarray], compression: Compression, *,
               rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Map compressed codes back to the original domain.

    Kept categories map back exactly; the merged bucket becomes one of its original codes,
    drawn by the contract's public prior weights when the attribute declares them, else
    uniformly (the noisy counts of merged codes are below the noise threshold, so they carry
    no usable signal about which is likelier). Columns come back in the original domain's
    narrowest unsigned dtype.
    """
    out = {}
    for a, codes in columns.items():
        mapping, merged = compression.mapping[a], compression.merged[a]
        kept = np.setdiff1d(np.arange(len(mapping)), merged)
        inverse = np.zeros(compression.compressed.size(a), dtype=code_dtype(len(mapping)))
        inverse[mapping[kept]] = kept
        original = inverse[codes]
        if len(merged):
            bucket = codes == compression.compressed.size(a) - 1
            p = None
            if compression.spread_rule(a) == "public prior":
                weights = compression.prior[a][merged]
                p = weights / weights.sum()
            original[bucket] = rng.choice(merged, size=int(bucket.sum()), p=p)
        out[a] = original
    return out


def to_frame(columns: dict[str, np.ndarray], domain: Domain) -> pd.DataFrame:
    return pd.DataFrame({a: columns[a] for a in domain})
