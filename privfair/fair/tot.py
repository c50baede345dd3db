"""Optimized pre-processing ("TOT", Calmon et al. 2017) as a sparse linear program.

This module is long on purpose: it is one optimisation problem (variables, the three constraint
families, the registered distortions and the sampler of its solution), read top to bottom.

TOT learns a randomized map ``q(x̃, ỹ | d, x, y)`` that leaves the protected attributes ``D``
unchanged and moves the features ``X`` and the outcome ``Y`` so that

* **utility** -- the distribution of ``(X̃, Ỹ)`` stays close, in total variation, to a target
  (by default the input distribution of ``(X, Y)``);
* **discrimination control** (group fairness) -- ``q(ŷ | d)`` is nearly the same for every pair
  of ``D``-groups and every ``ŷ``, either additively, ``|q(ŷ|d) - q(ŷ|d')| <= eta``, or in the
  ratio form of SAFES eq. (8)/(13), ``|q(ŷ|d) / q(ŷ|d') - 1| <= eta``;
* **distortion control** (individual fairness) -- for each threshold ``c_i`` the probability that
  a record is moved by a distortion ``δ((x, y), (x̃, ỹ)) >= c_i`` is at most ``d_i``.

In SAFES (Giddens & Liu 2024) the map is fitted on DP synthetic data and applied to it, which is
pure post-processing: no privacy cost. :class:`TOTransform` is the estimator; the rest of this
module builds and solves the program.

How this differs from AIF360's ``OptimPreproc``/``OptTools``:

* **Declared domains.** ``D``, ``X`` and ``Y`` have the sizes a
  :class:`~privfair.core.domain.Domain`
  declares, never the levels that happen to occur in the data, so a frame holding a level that
  was absent at fit time transforms fine (see *fallback* below).
* **Sparse.** Only transitions that the distortion allows are variables: with ``d_i = 0`` a
  transition with ``δ >= c_i`` is forbidden, and AIF360 keeps it as a dense variable pinned to 0.
  Only ``(d, x, y)`` with positive mass at fit time get rows. The map is one CVXPY vector over
  the allowed transitions and every constraint is a ``scipy.sparse`` matrix built with numpy;
  the distortion function is evaluated by broadcasting over code arrays, in bounded chunks.
* **Bounded.** The variable count is computed from the distortion and the support, chunk by
  chunk (keeping at most ``max_variables`` transitions), and checked against ``max_variables``
  before any problem matrix is allocated; a count that would itself need more than
  20 × ``max_variables`` distortion evaluations is refused outright with the dense upper bound.
  :class:`ProblemTooLargeError` gives the size.
* **O(|D|) discrimination constraints.** "All pairs within ``eta``" is the same as
  ``max_d q(ŷ|d) - min_d q(ŷ|d) <= eta`` (additive) or ``max_d <= (1 + eta) · min_d`` (ratio),
  so two auxiliary scalars per ``ŷ`` replace the ``|D|·(|D|-1)`` pairwise rows.
* **Solver-friendly LP.** The TV objective is one equality row per reachable ``(x̃, ỹ)`` cell
  with split slacks, and each ``q(ŷ | d)`` is its own variable, so the interior-point KKT system
  stays small (6× faster than CVXPY's ``norm1`` form at 63k variables).
* **Explicit solver, typed failures.** Clarabel by default, HiGHS (interior point + crossover),
  SCS, ... on request. An infeasible program raises :class:`InfeasibleFairnessError` naming the
  constraint family that makes it infeasible, found by re-solving feasibility problems with one
  family dropped; a solution that misses a constraint by more than 1e-6 (checked exactly on the
  cleaned map) raises :class:`TOTSolverError` instead of being returned.
* **Vectorized, seeded sampling.** One ``searchsorted`` over the cumulative map, driven by a
  passed :class:`numpy.random.Generator`.

Conventions and documented choices
----------------------------------
* Codes are packed in C order: group ``d`` = ravel of ``d_cols``, feature cell ``x`` = ravel of
  ``x_cols``, and ``xy = x · |Y| + y``; :func:`joint_distribution` returns ``p`` with shape
  ``(|D|, |X|, |Y|)`` in that order.
* **Distortion scope** (``distortion_scope``). ``"per_group"`` (default) imposes the distortion
  constraints on every ``(d, x, y)`` with ``p(d, x, y) > 0``, as SAFES eq. (9)/(10) is written.
  ``"pooled"`` imposes them on the ``d``-averaged map ``q(x̃ỹ | x, y) = Σ_d p(d | x, y)
  q(x̃ỹ | d, x, y)`` for every ``(x, y)`` with mass: AIF360 ``OptTools``' constraint, which is
  what SAFES's experiments ran. Pooling lets the map move one group's rows more than a bound
  as long as the cell's average stays within it (SAFES on COMPAS at η = 0.08 is infeasible
  per group and feasible pooled). A bound of 0 forbids the transitions under both scopes (an
  average of non-negative terms with positive weights is 0 only if every term is), so the
  variables are the same and only the distortion rows differ. Rows with zero mass are not
  variables: they do not affect the objective or ``q(ŷ | d)``.
* **Fallback:** a row whose ``(d, x, y)`` had zero mass at fit time -- including rows with a
  level the fitting data never showed -- is mapped by the identity. The identity has zero
  distortion under every shipped distortion function, so it satisfies every distortion bound;
  it does not change ``q(ŷ | d)`` of the fitted distribution, to which the discrimination
  guarantee refers. A custom distortion with ``δ(a, a) > 0`` breaks the first property.
* A ``D``-group with zero mass at fit time has no ``q(ŷ | d)`` and is left out of the
  discrimination constraints (AIF360 divides by zero there).
* The solver's solution is clipped at 0 and renormalized per row before it is used; the reported
  objective and achieved discrimination are recomputed exactly from that cleaned map.
* X columns that the distortion function does not read can change freely (zero distortion).
* SAFES states the ratio form (eq. 8) but ran AIF360, whose ratio constraint is commented out:
  its published numbers use the additive form. Both are offered; additive is the default.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from privfair.core.domain import Domain
from privfair.core.errors import DomainError, PrivfairError
from privfair.fair.eta import check_eta

__all__ = [
    "DISCRIMINATION_FORMS",
    "DISTORTIONS",
    "DISTORTION_SCOPES",
    "GROUPINGS",
    "SOLVERS",
    "DistortionFunction",
    "InfeasibleFairnessError",
    "ProblemTooLargeError",
    "TOTSolverError",
    "TOTransform",
    "joint_distribution",
    "safes_adult_distortion",
    "safes_adult_text_distortion",
    "safes_compas_distortion",
]

#: A distortion ``δ(old, new)``: two mappings from column name (every ``x_cols`` and ``y_col``)
#: to integer code arrays that broadcast against each other (``old`` of shape ``(m, 1)``,
#: ``new`` of shape ``(1, |X|·|Y|)``); returns the distortion of each pair (broadcastable to the
#: common shape). It must be vectorized: it is called on whole blocks, never per pair.
DistortionFunction = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], Any]

#: Forms of discrimination control accepted by :class:`TOTransform`.
DISCRIMINATION_FORMS = ("additive", "ratio")

#: How the protected attributes form groups: one group per combination of them, or one
#: parity constraint per attribute (each attribute's groups within η), in the same program.
GROUPINGS = ("intersectional", "per_attribute")

#: Scopes of the distortion constraints accepted by :class:`TOTransform`: every ``(d, x, y)``
#: (SAFES eq. (10) as written) or the group-averaged map per ``(x, y)`` (AIF360 OptTools).
DISTORTION_SCOPES = ("per_group", "pooled")

#: Solvers that handle this LP through CVXPY (the ones installed are checked at fit time).
SOLVERS = ("CLARABEL", "HIGHS", "SCS", "SCIPY", "ECOS", "GLOP", "GUROBI", "MOSEK", "CPLEX")

# Elements per block when scanning the distortion (memory of one block: ~3 float64 arrays).
_CHUNK_ELEMENTS = 2_000_000
# The sparse size is counted by scanning (distinct source (x, y)) × |X×Y| distortion values;
# a scan longer than this many times max_variables is refused without counting.
_SCAN_FACTOR = 20
# Largest constraint violation accepted from the solver (after cleaning the map).
_FEASIBILITY_TOL = 1e-6
# Above this many (d, x, y) cells the support is found by sorting instead of a dense bincount.
_DENSE_BINCOUNT_LIMIT = 50_000_000


# --- errors ------------------------------------------------------------------------------


class ProblemTooLargeError(PrivfairError, ValueError):
    """The TOT program would have more variables than ``max_variables``.

    Raised before any problem matrix is allocated. ``n_variables`` is the computed sparse size
    (or, when it was too expensive to count, the upper bound ``support rows × |X×Y|``);
    ``dense_variables`` is the size of AIF360's dense ``|D×X×Y| × |X×Y|`` map.
    """

    def __init__(self, message: str, *, n_variables: int, dense_variables: int,
                 max_variables: int) -> None:
        super().__init__(message)
        self.n_variables = n_variables
        self.dense_variables = dense_variables
        self.max_variables = max_variables


class InfeasibleFairnessError(PrivfairError):
    """No randomized map meets the discrimination and distortion constraints together.

    ``family`` names the constraint family that makes the program infeasible:
    ``"discrimination"`` (``eta`` is too small for the distortion constraints: dropping the
    discrimination constraints makes it feasible) or ``"distortion"`` (the distortion
    constraints alone admit no map, e.g. the identity is forbidden for some record).
    ``checks`` maps each family dropped in a diagnostic re-solve to whether the program then
    became feasible.
    """

    def __init__(self, message: str, *, family: str, checks: Mapping[str, bool],
                 smallest_gap: float | None = None, smallest_eta: float | None = None,
                 groups: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.family = family
        self.checks = dict(checks)
        #: The smallest discrimination any map reaches under the distortion limits, and the
        #: smallest η (rounded up, checked feasible) to ask for; None for a distortion failure.
        self.smallest_gap = smallest_gap
        self.smallest_eta = smallest_eta
        #: Groups with mass that each discrimination constraint compared.
        self.groups = dict(groups or {})


class TOTSolverError(PrivfairError, RuntimeError):
    """The solver failed or stopped without a usable solution (not an infeasibility proof)."""


def _contract_terms(check: str) -> str:
    """A diagnostic re-solve's name in the contract's terms (``tot.distortion.*`` keys)."""
    if check == "distortion bounds (dlist > 0)":
        return "lifting every non-zero bound of contract key tot.distortion.bounds"
    if check.startswith("distortion[c>="):
        threshold = check[len("distortion[c>="):-1]
        return (f"lifting the bound at threshold {threshold} (contract keys "
                f"tot.distortion.thresholds/bounds)")
    return check


# --- distortion functions ----------------------------------------------------------------


def _int(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.int64)


def _column(codes: Mapping[str, np.ndarray], name: str, function: str) -> np.ndarray:
    try:
        return _int(codes[name])
    except KeyError:
        raise DomainError(
            f"distortion {function!r} reads column {name!r}, which is not among the "
            f"transformed columns {sorted(codes)}; pass the column name as a keyword "
            f"(functools.partial) or choose x_cols/y_col to include it"
        ) from None


def safes_adult_distortion(old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray], *,
                           age: str = "age", education: str = "education",
                           income: str = "income") -> np.ndarray:
    """SAFES/Calmon Adult distortion on ordinal codes (the largest applicable value wins).

    * 3.0 if education goes down or up by more than one level, or age moves by more than one
      decade;
    * 2.0 if age moves by one decade;
    * 1.0 if income goes from 1 (``>50K``, favourable) to 0;
    * 0.0 otherwise.

    Codes must be ordinal: ``age`` in decades,
    ``education`` in increasing order of attainment, ``income`` 1 = ``>50K``.

    This is the function SAFES ran (its repository's ``custom_distortion``, after Calmon et
    al.): education may only stay or rise by one level. SAFES §5.2's prose says "education
    changes by more than one stage", which would also allow a one-level decrease; that reading
    is :func:`safes_adult_text_distortion` (``"safes-adult-text"``).
    """
    fn = "safes-adult"
    a0, a1 = _column(old, age, fn), _column(new, age, fn)
    e0, e1 = _column(old, education, fn), _column(new, education, fn)
    i0, i1 = _column(old, income, fn), _column(new, income, fn)
    return _adult(a0, a1, (e1 < e0) | (e1 > e0 + 1), i0, i1)


def safes_adult_text_distortion(old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray],
                                *, age: str = "age", education: str = "education",
                                income: str = "income") -> np.ndarray:
    """SAFES §5.2 Adult distortion read literally: education may move one level either way.

    Same as :func:`safes_adult_distortion` except that 3.0 is given when education *changes by
    more than one stage* (so a one-level decrease costs 0).
    """
    fn = "safes-adult-text"
    a0, a1 = _column(old, age, fn), _column(new, age, fn)
    e0, e1 = _column(old, education, fn), _column(new, education, fn)
    i0, i1 = _column(old, income, fn), _column(new, income, fn)
    return _adult(a0, a1, np.abs(e1 - e0) > 1, i0, i1)


def _adult(a0: np.ndarray, a1: np.ndarray, education_bad: np.ndarray, i0: np.ndarray,
           i1: np.ndarray) -> np.ndarray:
    age_step = np.abs(a1 - a0)
    income_down = (i0 == 1) & (i1 == 0)
    out = np.where(income_down, 1.0, 0.0)
    out = np.where(age_step == 1, 2.0, out)
    return np.where(education_bad | (age_step > 1), 3.0, out)


def safes_compas_distortion(old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray], *,
                            age: str = "age_cat", priors: str = "priors_count",
                            charge: str = "c_charge_degree", recidivism: str = "two_year_recid",
                            felony: int = 0) -> np.ndarray:
    """SAFES §5.2 COMPAS distortion: the sum of per-variable distortions.

    * age and number of priors (ordinal, 3 levels): 1 to an adjacent level, 2 further;
    * charge degree: 1 from felony to misdemeanor, 2 from misdemeanor to felony
      (``felony`` is the felony code; 0 in ``data_contracts/compas.yaml``);
    * recidivism (the outcome): 2 for any change.

    Default column names and codes follow ``data_contracts/compas.yaml``.
    """
    fn = "safes-compas"
    total = np.minimum(np.abs(_column(new, age, fn) - _column(old, age, fn)), 2).astype(float)
    total = total + np.minimum(np.abs(_column(new, priors, fn) - _column(old, priors, fn)), 2)
    c0, c1 = _column(old, charge, fn), _column(new, charge, fn)
    total = total + np.where(c0 == c1, 0.0, np.where(c0 == felony, 1.0, 2.0))
    r0, r1 = _column(old, recidivism, fn), _column(new, recidivism, fn)
    return total + np.where(r0 == r1, 0.0, 2.0)


#: Registered distortion functions, by the name :class:`TOTransform` accepts.
DISTORTIONS: dict[str, DistortionFunction] = {
    "safes-adult": safes_adult_distortion,
    "safes-adult-text": safes_adult_text_distortion,
    "safes-compas": safes_compas_distortion,
}


# --- layout: packing codes ---------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    d_cols: tuple[str, ...]
    x_cols: tuple[str, ...]
    y_col: str
    d_shape: tuple[int, ...]
    x_shape: tuple[int, ...]
    n_y: int

    @property
    def n_d(self) -> int:
        return math.prod(self.d_shape)

    @property
    def n_x(self) -> int:
        return math.prod(self.x_shape)

    @property
    def n_xy(self) -> int:
        return self.n_x * self.n_y

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.d_cols, *self.x_cols, self.y_col)

    @classmethod
    def build(cls, domain: Domain | Mapping[str, int], d_cols: str | Iterable[str],
              x_cols: str | Iterable[str], y_col: str) -> _Layout:
        if not isinstance(domain, Domain):
            domain = Domain.from_dict(domain)
        d_cols = (d_cols,) if isinstance(d_cols, str) else tuple(d_cols)
        x_cols = (x_cols,) if isinstance(x_cols, str) else tuple(x_cols)
        if not d_cols:
            raise DomainError("TOT: d_cols is empty; at least one protected attribute is needed")
        every = (*d_cols, *x_cols, y_col)
        if len(set(every)) != len(every):
            raise DomainError(f"TOT: d_cols, x_cols and y_col overlap: {list(every)}")
        layout = cls(d_cols, x_cols, str(y_col), domain.shape(d_cols), domain.shape(x_cols),
                     domain.size(y_col))
        if layout.n_d * layout.n_xy >= 2**62:
            raise ProblemTooLargeError(
                f"TOT: the (d, x, y) domain has {layout.n_d * layout.n_xy:.3g} cells, too many "
                f"to index", n_variables=0, dense_variables=0, max_variables=0)
        return layout

    def codes(self, frame: pd.DataFrame, col: str, size: int) -> np.ndarray:
        if col not in frame.columns:
            raise DomainError(f"TOT: column {col!r} is missing from the frame")
        values = frame[col].to_numpy()
        if not np.issubdtype(values.dtype, np.integer):
            raise DomainError(f"TOT: column {col!r}: expected integer codes, got {values.dtype}")
        if values.size and (values.min() < 0 or values.max() >= size):
            raise DomainError(f"TOT: column {col!r}: codes outside the declared domain "
                              f"0..{size - 1}")
        return values.astype(np.int64, copy=False)

    def pack(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(d, xy)`` packed indices of every row (codes checked against the domain)."""
        d = self._ravel([self.codes(frame, c, s) for c, s in zip(self.d_cols, self.d_shape,
                                                                  strict=True)], self.d_shape,
                        len(frame))
        x = self._ravel([self.codes(frame, c, s) for c, s in zip(self.x_cols, self.x_shape,
                                                                  strict=True)], self.x_shape,
                        len(frame))
        return d, x * self.n_y + self.codes(frame, self.y_col, self.n_y)

    @staticmethod
    def _ravel(arrays: list[np.ndarray], shape: tuple[int, ...], n: int) -> np.ndarray:
        if not arrays:
            return np.zeros(n, dtype=np.int64)
        return np.ravel_multi_index(tuple(arrays), shape).astype(np.int64, copy=False)

    def decode_xy(self, xy: np.ndarray) -> dict[str, np.ndarray]:
        xy = np.asarray(xy, dtype=np.int64)
        x, y = np.divmod(xy, self.n_y)
        out: dict[str, np.ndarray] = {}
        if self.x_cols:
            for col, codes in zip(self.x_cols, np.unravel_index(x, self.x_shape), strict=True):
                out[col] = codes.astype(np.int64, copy=False)
        out[self.y_col] = y
        return out


def _support(layout: _Layout, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys ``d·|X×Y| + xy`` with positive mass and their probabilities."""
    if len(frame) == 0:
        raise DomainError("TOT: the frame to fit has no rows")
    d, xy = layout.pack(frame)
    keys = d * layout.n_xy + xy
    n_cells = layout.n_d * layout.n_xy
    if n_cells <= min(_DENSE_BINCOUNT_LIMIT, 8 * len(keys) + 1_000_000):
        counts = np.bincount(keys, minlength=n_cells)
        support = np.flatnonzero(counts)
        mass = counts[support].astype(float)
    else:
        support, counts = np.unique(keys, return_counts=True)
        mass = counts.astype(float)
    return support.astype(np.int64), mass / mass.sum()


def joint_distribution(frame: pd.DataFrame, domain: Domain | Mapping[str, int],
                       d_cols: str | Iterable[str], x_cols: str | Iterable[str],
                       y_col: str) -> np.ndarray:
    """Empirical ``p(d, x, y)`` of ``frame`` over the declared domain, shape ``(|D|, |X|, |Y|)``.

    ``d`` and ``x`` are the C-order ravel of ``d_cols`` and ``x_cols``;
    ``p.reshape(domain.shape([*d_cols, *x_cols, y_col]))`` gives one axis per attribute.
    Counted with one ``bincount`` over packed keys.
    """
    layout = _Layout.build(domain, d_cols, x_cols, y_col)
    n_cells = layout.n_d * layout.n_xy
    if n_cells > _DENSE_BINCOUNT_LIMIT:
        raise ProblemTooLargeError(
            f"joint_distribution: the dense (d, x, y) table would have {n_cells:,} cells "
            f"(limit {_DENSE_BINCOUNT_LIMIT:,}); TOTransform.fit works on the support instead",
            n_variables=n_cells, dense_variables=n_cells, max_variables=_DENSE_BINCOUNT_LIMIT)
    if len(frame) == 0:
        raise DomainError("joint_distribution: the frame has no rows")
    d, xy = layout.pack(frame)
    counts = np.bincount(d * layout.n_xy + xy, minlength=n_cells).astype(float)
    return (counts / counts.sum()).reshape(layout.n_d, layout.n_x, layout.n_y)


# --- the program -------------------------------------------------------------------------


@dataclass
class _Transitions:
    """Allowed transitions, CSR by support row: row ``r`` owns ``ptr[r]:ptr[r+1]``."""

    ptr: np.ndarray          # (n_rows + 1,)
    target: np.ndarray       # (n_vars,) target xy of each variable
    flags: list[np.ndarray]  # one bool array per bounded level: δ >= c_i on that variable
    levels: list[int]        # index into clist of each entry of ``flags``
    n_variables: int


def _scan_transitions(layout: _Layout, row_xy: np.ndarray, distortion: DistortionFunction,
                      clist: Sequence[float], dlist: Sequence[float], max_variables: int,
                      dense: bool = False) -> _Transitions:
    """Evaluate the distortion in blocks and collect the allowed transitions of each row.

    Refuses (before storing anything large) when the count exceeds ``max_variables``.
    """
    n_rows, n_xy = len(row_xy), layout.n_xy
    dense_support = n_rows * n_xy
    src, row_src = np.unique(row_xy, return_inverse=True)
    rows_per_src = np.bincount(row_src, minlength=len(src))
    forbid_levels = [i for i, d in enumerate(dlist) if d <= 0.0 and not dense]
    bound_levels = [i for i, d in enumerate(dlist) if d < 1.0 and i not in forbid_levels]

    scan = len(src) * n_xy
    if n_xy > max_variables or (dense_support > max_variables
                                and scan > _SCAN_FACTOR * max_variables):
        raise ProblemTooLargeError(
            f"TOT problem too large: up to {dense_support:,} variables ({n_rows:,} support rows "
            f"(d, x, y) × {n_xy:,} cells (x̃, ỹ)), above max_variables={max_variables:,}; "
            f"counting the sparse size would take {scan:,} distortion evaluations, so it was "
            f"refused before allocating anything. AIF360's dense map would have "
            f"{layout.n_d * n_xy * n_xy:,} variables. Move fewer or coarser columns (contract key "
            f"tot.features), or raise contract key tot.max_variables.",
            n_variables=dense_support, dense_variables=layout.n_d * n_xy * n_xy,
            max_variables=max_variables)

    new = layout.decode_xy(np.arange(n_xy))
    new = {k: v[None, :] for k, v in new.items()}
    block = max(1, _CHUNK_ELEMENTS // n_xy)
    allowed_count = np.zeros(len(src), dtype=np.int64)
    parts_tgt: list[np.ndarray] = []
    parts_flag: list[list[np.ndarray]] = [[] for _ in bound_levels]
    total = 0
    over = False
    for start in range(0, len(src), block):
        stop = min(start + block, len(src))
        old = {k: v[:, None] for k, v in layout.decode_xy(src[start:stop]).items()}
        delta = _evaluate(distortion, old, new, (stop - start, n_xy))
        allowed = np.ones(delta.shape, dtype=bool)
        for i in forbid_levels:
            allowed &= delta < clist[i]
        counts = allowed.sum(axis=1)
        allowed_count[start:stop] = counts
        total += int(counts @ rows_per_src[start:stop])
        if total > max_variables:
            over = True
        if over:
            continue
        local, tgt = np.nonzero(allowed)
        parts_tgt.append(tgt)
        vals = delta[local, tgt]
        for j, i in enumerate(bound_levels):
            parts_flag[j].append(vals >= clist[i])
    if over:
        raise ProblemTooLargeError(
            f"TOT problem too large: the sparse map has {total:,} variables (of a dense "
            f"{dense_support:,} = {n_rows:,} support rows × {n_xy:,}; AIF360's dense map: "
            f"{layout.n_d * n_xy * n_xy:,}), above max_variables={max_variables:,}. Move "
            f"fewer or coarser columns (contract key tot.features), forbid more transitions (a "
            f"0 in contract key tot.distortion.bounds), or raise contract key "
            f"tot.max_variables.",
            n_variables=total, dense_variables=layout.n_d * n_xy * n_xy,
            max_variables=max_variables)

    src_tgt = np.concatenate(parts_tgt) if parts_tgt else np.zeros(0, np.int64)
    src_flags = [np.concatenate(p) if p else np.zeros(0, bool) for p in parts_flag]
    src_ptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(allowed_count, out=src_ptr[1:])
    # np.nonzero walks blocks row-major, so the entries are grouped by source in order.

    # Expand per support row (rows sharing a source (x, y) share its allowed targets).
    per_row = allowed_count[row_src]
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(per_row, out=ptr[1:])
    n_vars = int(ptr[-1])
    var_row = np.repeat(np.arange(n_rows), per_row)
    gather = src_ptr[row_src][var_row] + (np.arange(n_vars) - ptr[var_row])
    return _Transitions(ptr=ptr, target=src_tgt[gather].astype(np.int64),
                        flags=[f[gather] for f in src_flags], levels=bound_levels,
                        n_variables=n_vars)


def _evaluate(distortion: DistortionFunction, old: Mapping[str, np.ndarray],
              new: Mapping[str, np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    value = np.asarray(distortion(old, new), dtype=float)
    try:
        value = np.broadcast_to(value, shape)
    except ValueError:
        raise DomainError(f"TOT: the distortion returned shape {value.shape}, which does not "
                          f"broadcast to the block shape {shape}; it must be vectorized") from None
    if not np.all(np.isfinite(value)):
        raise DomainError("TOT: the distortion returned non-finite values")
    return value


@dataclass
class _Parity:
    """One discrimination constraint: ``q(ŷ | g)`` over the groups ``g`` of one grouping.

    ``intersectional``: ``g`` is the joint group ``d`` (every combination of the protected
    attributes); ``per_attribute``: one :class:`_Parity` per attribute, ``g`` its code.
    """

    name: str                  # "intersectional" or the attribute's name
    matrix: sparse.csr_matrix  # (G·|Y|) × n: q(ŷ | g) of the active groups
    groups: np.ndarray         # active group codes g (positive mass at fit time)
    before: np.ndarray         # (G, |Y|): p(y | g) of the fitted distribution


@dataclass
class _Program:
    """Sparse matrices of the LP over ``v`` (one entry per allowed transition)."""

    rows: sparse.csr_matrix          # n_rows × n: row sums (== 1)
    marginal: sparse.csr_matrix      # n_xy × n: p(x̃, ỹ)
    parity: list[_Parity]            # one per discrimination constraint
    bounds: list[tuple[int, sparse.csr_matrix]]  # (level, scope rows × n) excess distortion
    target: np.ndarray               # n_xy

    @property
    def constrained(self) -> list[_Parity]:
        """The parity constraints with two or more groups (one group constrains nothing)."""
        return [p for p in self.parity if len(p.groups) > 1]


def _groupings(layout: _Layout, row_d: np.ndarray, groups: str
               ) -> list[tuple[str, np.ndarray, int]]:
    """``(name, group code of each support row, number of codes)`` of each constraint."""
    if groups == "intersectional":
        return [("intersectional", row_d, layout.n_d)]
    codes = np.unravel_index(row_d, layout.d_shape)
    return [(col, np.asarray(c, dtype=np.int64), size)
            for col, c, size in zip(layout.d_cols, codes, layout.d_shape, strict=True)]


def _assemble(layout: _Layout, keys: np.ndarray, mass: np.ndarray, tr: _Transitions,
              target: np.ndarray, scope: str = "per_group",
              groups: str = "intersectional") -> _Program:
    n_rows, n = len(keys), tr.n_variables
    n_xy, n_y = layout.n_xy, layout.n_y
    row_d = keys // n_xy
    var_row = np.repeat(np.arange(n_rows), np.diff(tr.ptr))
    cols = np.arange(n)
    rows = sparse.csr_matrix((np.ones(n), cols, tr.ptr), shape=(n_rows, n))
    weight = mass[var_row]
    marginal = sparse.csr_matrix((weight, (tr.target, cols)), shape=(n_xy, n))
    parity = []
    for name, row_g, size in _groupings(layout, row_d, groups):
        p_g = np.bincount(row_g, weights=mass, minlength=size)
        active = np.flatnonzero(p_g > 0)
        pos = np.full(size, -1, dtype=np.int64)
        pos[active] = np.arange(len(active))
        var_g = row_g[var_row]
        matrix = sparse.csr_matrix(
            (weight / p_g[var_g], (pos[var_g] * n_y + tr.target % n_y, cols)),
            shape=(len(active) * n_y, n))
        joint = np.bincount(row_g * n_y + keys % n_y, weights=mass, minlength=size * n_y)
        before = joint.reshape(size, n_y)[active]
        parity.append(_Parity(name, matrix, active, before / before.sum(axis=1, keepdims=True)))
    # Excess distortion: one row per (d, x, y) ("per_group"), or per (x, y) of the map averaged
    # over d with weights p(d | x, y) ("pooled", AIF360 OptTools).
    if scope == "pooled":
        row_xy = keys % n_xy
        p_xy = np.bincount(row_xy, weights=mass, minlength=n_xy)
        owner, share = row_xy[var_row], weight / p_xy[row_xy[var_row]]
    else:
        owner, share = var_row, np.ones(n)
    bounds = []
    for level, flag in zip(tr.levels, tr.flags, strict=True):
        hit = np.flatnonzero(flag)
        if hit.size == 0:
            continue
        used, local = np.unique(owner[hit], return_inverse=True)
        bounds.append((level, sparse.csr_matrix((share[hit], (local, hit)),
                                                shape=(len(used), n))))
    return _Program(rows, marginal, parity, bounds, target)


def _solve(program: _Program, *, n_y: int, eta: float | None, form: str,
           dlist: Sequence[float], solver: str, solver_options: Mapping[str, Any],
           objective: bool = True, drop: frozenset[str] = frozenset()
           ) -> tuple[str, np.ndarray | None, float, Any]:
    """Build and solve the CVXPY problem; returns ``(status, v, objective, solver_stats)``.

    ``eta=None`` (additive form only) makes the bound a variable and minimises it instead of
    the TV objective: the smallest gap any map reaches under the distortion limits.
    """
    import cvxpy as cp

    n = program.rows.shape[1]
    v = cp.Variable(n, nonneg=True)
    constraints = [program.rows @ v == 1]
    bound = cp.Variable(nonneg=True) if eta is None else eta
    if "discrimination" not in drop:
        for parity in program.constrained:
            n_groups = len(parity.groups)
            # q(ŷ|g) gets its own variable: each dense row enters the KKT system once.
            u = cp.Variable(n_groups * n_y)
            constraints.append(parity.matrix @ v == u)
            lo, hi = cp.Variable(n_y), cp.Variable(n_y)
            spread = sparse.csr_matrix(
                (np.ones(n_groups * n_y), (np.arange(n_groups * n_y),
                                           np.tile(np.arange(n_y), n_groups))),
                shape=(n_groups * n_y, n_y))
            constraints += [u >= spread @ lo, u <= spread @ hi]
            constraints.append(hi - lo <= bound if form == "additive"
                               else hi <= (1.0 + bound) * lo)
    for level, matrix in program.bounds:
        if "distortion" in drop or f"distortion[{level}]" in drop:
            continue
        constraints.append(matrix @ v <= dlist[level])
    if objective:
        # TV as an equality with split slacks, over the cells that can carry mass: one row per
        # cell (cvxpy's norm1 would add two inequality rows per cell, which doubles the dense
        # block the interior-point factorisation ends up with).
        cells = np.union1d(np.flatnonzero(program.marginal.getnnz(axis=1)),
                           np.flatnonzero(program.target))
        over, under = cp.Variable(len(cells), nonneg=True), cp.Variable(len(cells), nonneg=True)
        constraints.append(program.marginal[cells] @ v - over + under == program.target[cells])
        goal = cp.Minimize((cp.sum(over) + cp.sum(under)) / 2)
    elif eta is None:
        goal = cp.Minimize(bound)
    else:
        goal = cp.Minimize(0)
    problem = cp.Problem(goal, constraints)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            problem.solve(solver=solver, **dict(solver_options))
        except cp.error.SolverError as exc:
            raise TOTSolverError(f"TOT: solver {solver} failed: {exc}") from exc
    for w in caught:
        # cvxpy's "Solution may be inaccurate" is reflected in the status we return; anything
        # else is passed on.
        if "inaccurate" not in str(w.message).lower():
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    value = None if v.value is None else np.asarray(v.value, dtype=float)
    obj = float(problem.value) if problem.value is not None else math.nan
    return str(problem.status), value, obj, problem.solver_stats


_OK = ("optimal", "optimal_inaccurate")
_INFEASIBLE = ("infeasible", "infeasible_inaccurate", "infeasible_or_unbounded")


def _default_options(solver: str) -> dict[str, Any]:
    """Solve options a solver gets unless ``solver_options`` says otherwise."""
    if solver == "HIGHS":
        # HiGHS's default dual simplex is ~10× slower than its interior point on this
        # transportation-like LP (measured: 24 s vs 1.8 s at 63k variables); crossover stays
        # on, so the answer is still a vertex.
        return {"highs_options": {"solver": "ipm"}}
    return {}


# --- estimator ---------------------------------------------------------------------------


class TOTransform:
    """Calmon et al.'s optimized pre-processing (SAFES "TOT") on declared integer domains.

    Parameters
    ----------
    d_cols : str or sequence of str
        Protected attributes ``D``; never changed. ``groups`` says how they form groups.
    x_cols : str or sequence of str
        Features ``X`` the map may change (may be empty).
    y_col : str
        Outcome ``Y`` the map may change.
    domain : Domain or mapping of str to int
        Declared sizes of (at least) those columns.
    eta : float
        Discrimination bound ``η >= 0``.
    discrimination : {"additive", "ratio"}
        ``"additive"``: ``|q(ŷ|d) - q(ŷ|d')| <= η``; ``"ratio"`` (SAFES eq. 8/13):
        ``|q(ŷ|d)/q(ŷ|d') - 1| <= η``, imposed linearly as ``q(ŷ|d) <= (1 + η) q(ŷ|d')`` for
        every ordered pair (both orders together are equivalent to eq. 8 for all pairs; a
        ``q(ŷ|d') = 0`` then forces ``q(ŷ|d) = 0``). Both for all pairs of groups with mass
        and every ``ŷ``.
    distortion : str or callable
        A name in :data:`DISTORTIONS` or a vectorized :data:`DistortionFunction`.
    clist, dlist : sequence of float
        Thresholds ``c_i`` and bounds ``d_i``: ``P(δ >= c_i | d, x, y) <= d_i`` for every
        ``(d, x, y)`` with positive mass (or its ``d``-average, see ``distortion_scope``).
        ``d_i = 0`` forbids the transitions (they are not variables); ``d_i >= 1`` imposes
        nothing.
    groups : {"intersectional", "per_attribute"}
        ``"intersectional"`` (default): one group per combination of the ``d_cols`` codes, all
        pairs within η (groups multiply: 2 × 5 × 4 attributes form up to 40 groups).
        ``"per_attribute"``: one parity constraint per protected attribute, each attribute's
        groups within η, all in the same program (contract key ``fairness.groups``).
    distortion_scope : {"per_group", "pooled"}
        ``"per_group"`` (default): the distortion bounds hold for every ``(d, x, y)``, SAFES
        eq. (10) as written. ``"pooled"``: they hold for the group-averaged map
        ``Σ_d p(d | x, y) q(x̃ỹ | d, x, y)`` per ``(x, y)``, AIF360 ``OptTools``' constraint
        and what SAFES's experiments ran.
    solver : str
        CVXPY solver name: ``"CLARABEL"`` (default, interior point) or ``"HIGHS"`` (it is an
        LP; run as HiGHS's interior point with crossover unless ``solver_options`` sets
        ``highs_options``), or another installed LP-capable solver in :data:`SOLVERS`.
    max_variables : int
        Refuse (:class:`ProblemTooLargeError`) a program with more variables than this.
    target : array-like, optional
        Target distribution of ``(X̃, Ỹ)`` for the TV objective, shape ``(|X|, |Y|)`` or one
        axis per column; by default the fitted distribution of ``(X, Y)``.
    solver_options : mapping, optional
        Extra keyword arguments for ``cvxpy.Problem.solve`` (e.g. ``{"highs_options":
        {"solver": "simplex"}}`` or Clarabel's ``tol_feas``). A solution whose cleaned map
        misses a constraint by more than 1e-6 raises :class:`TOTSolverError`.

    Attributes (after fit)
    ----------------------
    objective_ : float
        Total variation between the transformed ``(X̃, Ỹ)`` and the target (recomputed from the
        cleaned map).
    solve_time_, setup_time_ : float
        Wall seconds of ``Problem.solve`` (CVXPY compilation + solver) and of building the
        sparse program (distortion scan + matrices).
    n_variables_, dense_variables_ : int
        Variables of the sparse program, and of AIF360's dense ``|D×X×Y| × |X×Y|`` map.
    solver_failures_ : list of str
        Why each solver tried before the one that produced the map failed (empty when the
        first one did).
    status_ : str
        Solver status (``"optimal"`` or ``"optimal_inaccurate"``).
    discrimination_ : dict
        Achieved ``q(ŷ|d)`` per group and the largest additive / ratio gap.
    """

    def __init__(self, *, d_cols: str | Sequence[str], x_cols: str | Sequence[str], y_col: str,
                 domain: Domain | Mapping[str, int], eta: float,
                 discrimination: str = "additive",
                 distortion: str | DistortionFunction = "safes-adult",
                 clist: Sequence[float] = (0.99, 1.99, 2.99),
                 dlist: Sequence[float] = (0.1, 0.05, 0.0), solver: str = "CLARABEL",
                 max_variables: int = 5_000_000, target: Any = None,
                 solver_options: Mapping[str, Any] | None = None,
                 distortion_scope: str = "per_group",
                 fallback_solver: str | None = "HIGHS", groups: str = "intersectional") -> None:
        self.d_cols = d_cols
        self.x_cols = x_cols
        self.y_col = y_col
        self.domain = domain
        self.eta = eta
        self.discrimination = discrimination
        self.distortion = distortion
        self.clist = clist
        self.dlist = dlist
        self.solver = solver
        self.max_variables = max_variables
        self.target = target
        self.solver_options = solver_options
        self.distortion_scope = distortion_scope
        self.fallback_solver = fallback_solver
        self.groups = groups

    # -- validation --------------------------------------------------------------------

    def check(self) -> tuple[DistortionFunction, list[float], list[float]]:
        """Check the parameters (η, the forms, the distortion), before any data is seen;
        return the distortion function and its thresholds and bounds."""
        check_eta(self.eta, name="TOT: eta")
        if self.discrimination not in DISCRIMINATION_FORMS:
            raise ValueError(f"TOT: discrimination must be one of {list(DISCRIMINATION_FORMS)}, "
                             f"got {self.discrimination!r}")
        if self.distortion_scope not in DISTORTION_SCOPES:
            raise ValueError(f"TOT: distortion_scope (contract key tot.distortion_scope) must "
                             f"be one of {list(DISTORTION_SCOPES)}, got "
                             f"{self.distortion_scope!r}")
        if self.groups not in GROUPINGS:
            raise ValueError(f"TOT: groups (contract key fairness.groups) must be one of "
                             f"{list(GROUPINGS)}, got {self.groups!r}")
        if isinstance(self.distortion, str):
            if self.distortion not in DISTORTIONS:
                raise ValueError(f"TOT: unknown distortion {self.distortion!r}; registered: "
                                 f"{sorted(DISTORTIONS)}, or pass a callable")
            fn = DISTORTIONS[self.distortion]
        elif callable(self.distortion):
            fn = self.distortion
        else:
            raise ValueError("TOT: distortion must be a registered name or a callable")
        clist = [float(c) for c in self.clist]
        dlist = [float(d) for d in self.dlist]
        if len(clist) != len(dlist):
            raise ValueError(f"TOT: clist (contract key tot.distortion.thresholds) has "
                             f"{len(clist)} thresholds but dlist (tot.distortion.bounds) has "
                             f"{len(dlist)} bounds; expected one bound per threshold")
        if not all(math.isfinite(c) for c in clist):
            raise ValueError("TOT: clist (contract key tot.distortion.thresholds) must hold "
                             "finite thresholds")
        if not all(d >= 0.0 for d in dlist):
            raise ValueError(f"TOT: dlist (contract key tot.distortion.bounds) must hold "
                             f"probabilities >= 0, got {dlist}")
        if not (isinstance(self.max_variables, int) and self.max_variables > 0):
            raise ValueError(f"TOT: max_variables must be a positive int, got "
                             f"{self.max_variables!r}")
        if not isinstance(self.solver, str) or self.solver.upper() not in SOLVERS:
            raise ValueError(f"TOT: solver must be one of {list(SOLVERS)}, got {self.solver!r}")
        if self.fallback_solver is not None and (not isinstance(self.fallback_solver, str)
                                                 or self.fallback_solver.upper() not in SOLVERS):
            raise ValueError(f"TOT: fallback_solver must be None or one of {list(SOLVERS)}, "
                             f"got {self.fallback_solver!r}")
        return fn, clist, dlist

    def _target(self, layout: _Layout, keys: np.ndarray, mass: np.ndarray) -> np.ndarray:
        if self.target is None:
            return np.bincount(keys % layout.n_xy, weights=mass, minlength=layout.n_xy)
        target = np.asarray(self.target, dtype=float)
        if target.size != layout.n_xy:
            raise ValueError(f"TOT: target has {target.size} cells; expected |X|·|Y| = "
                             f"{layout.n_xy} (shape {(*layout.x_shape, layout.n_y)})")
        target = target.reshape(-1)
        if not np.all(np.isfinite(target)) or np.any(target < 0) or target.sum() <= 0:
            raise ValueError("TOT: target must be non-negative, finite and not all zero")
        return target / target.sum()

    # -- fitting -----------------------------------------------------------------------

    def fit(self, frame: pd.DataFrame) -> TOTransform:
        """Learn the map on ``frame`` (normally DP synthetic data): its empirical ``p(d, x, y)``."""
        layout = _Layout.build(self.domain, self.d_cols, self.x_cols, self.y_col)
        keys, mass = _support(layout, frame)
        return self._fit(layout, keys, mass)

    def fit_distribution(self, p: Any) -> TOTransform:
        """Learn the map on a distribution ``p(d, x, y)`` given as an array.

        ``p`` has shape ``(|D|, |X|, |Y|)`` (as :func:`joint_distribution` returns) or one axis
        per attribute of ``[*d_cols, *x_cols, y_col]``; it is normalized. Useful to fit on a DP
        model's distribution directly instead of on a sample of it.
        """
        layout = _Layout.build(self.domain, self.d_cols, self.x_cols, self.y_col)
        p = np.asarray(p, dtype=float).reshape(-1)
        if p.size != layout.n_d * layout.n_xy:
            raise ValueError(f"TOT: p has {p.size} cells; expected |D|·|X|·|Y| = "
                             f"{layout.n_d * layout.n_xy}")
        if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
            raise ValueError("TOT: p must be non-negative, finite and not all zero")
        keys = np.flatnonzero(p).astype(np.int64)
        return self._fit(layout, keys, p[keys] / p[keys].sum())

    def _fit(self, layout: _Layout, keys: np.ndarray, mass: np.ndarray, *,
             dense: bool = False) -> TOTransform:
        distortion, clist, dlist = self.check()
        solver = self.solver.upper()
        import cvxpy as cp

        if solver not in cp.installed_solvers():
            raise ValueError(f"TOT: solver {solver} is not installed; installed: "
                             f"{cp.installed_solvers()}")
        options = {**_default_options(solver), **(self.solver_options or {})}
        eta = float(self.eta)
        start = time.perf_counter()
        tr = _scan_transitions(layout, keys % layout.n_xy, distortion, clist, dlist,
                               self.max_variables, dense=dense)
        target = self._target(layout, keys, mass)
        self.layout_ = layout
        self.n_variables_ = tr.n_variables
        self.dense_variables_ = layout.n_d * layout.n_xy * layout.n_xy
        empty = np.flatnonzero(np.diff(tr.ptr) == 0)
        if empty.size:
            raise InfeasibleFairnessError(
                f"TOT infeasible: the distortion constraints forbid every move, even leaving "
                f"the row as it is, for {empty.size} record type(s) (d, x, y): a bound of 0 "
                f"in contract key tot.distortion.bounds forbids every move whose penalty "
                f"reaches its threshold in tot.distortion.thresholds, so give 'no move' a "
                f"penalty below the smallest such threshold (0 in each column's penalty under "
                f"tot.distortion.columns); family: distortion",
                family="distortion", checks={})
        program = _assemble(layout, keys, mass, tr, target, self.distortion_scope, self.groups)
        self.setup_time_ = time.perf_counter() - start

        attempts = [(solver, options)]
        fallback = None if self.fallback_solver is None else self.fallback_solver.upper()
        if fallback is not None and fallback != solver and fallback in cp.installed_solvers():
            attempts.append((fallback, _default_options(fallback)))
        self.solver_failures_ = []
        for name, solver_options in attempts[:-1]:
            try:
                self._solve_program(program, layout, keys, mass, tr, target, eta, clist, dlist,
                                    name, solver_options)
                return self
            except TOTSolverError as exc:
                # a numerical failure says nothing about feasibility, and another LP solver
                # may succeed: Clarabel fails on some near-degenerate COMPAS programs that
                # HiGHS solves
                self.solver_failures_.append(str(exc))
        name, solver_options = attempts[-1]
        self._solve_program(program, layout, keys, mass, tr, target, eta, clist, dlist, name,
                            solver_options)
        return self

    def _solve_program(self, program: _Program, layout: _Layout, keys: np.ndarray,
                       mass: np.ndarray, tr: _Transitions, target: np.ndarray, eta: float,
                       clist: list[float], dlist: list[float], solver: str,
                       options: Mapping[str, Any]) -> None:
        """Solve the assembled program with one solver and keep the checked, cleaned map."""
        start = time.perf_counter()
        status, v, solver_objective, stats = _solve(
            program, n_y=layout.n_y, eta=eta, form=self.discrimination, dlist=dlist,
            solver=solver, solver_options=options)
        self.solve_time_ = time.perf_counter() - start
        if status in _INFEASIBLE:
            self._diagnose(program, layout, eta, dlist, solver, options)
        if status not in _OK or v is None:
            raise TOTSolverError(f"TOT: solver {solver} stopped with status {status!r} and no "
                                 f"usable solution")
        self.status_ = status
        self.solver_objective_ = solver_objective
        self.solver_time_ = getattr(stats, "solve_time", None)
        self.iterations_ = getattr(stats, "num_iters", None)

        q = np.clip(v, 0.0, None)
        sums = np.add.reduceat(q, tr.ptr[:-1])
        q = q / np.repeat(sums, np.diff(tr.ptr))
        self.keys_ = keys
        self.mass_ = mass
        self.ptr_ = tr.ptr
        self.targets_ = tr.target
        self.probabilities_ = q
        cum = np.cumsum(q)
        starts = np.concatenate(([0.0], cum[tr.ptr[1:-1] - 1]))
        within = cum - np.repeat(starts, np.diff(tr.ptr))
        within[tr.ptr[1:] - 1] = 1.0
        self._cumulative = np.repeat(np.arange(len(keys), dtype=float), np.diff(tr.ptr)) + within
        self.objective_ = float(0.5 * np.abs(program.marginal @ q - target).sum())
        self.discrimination_ = self._discrimination(program, layout, q)
        self.excess_distortion_ = {
            f"P(delta>={clist[level]:g})": float((matrix @ q).max())
            for level, matrix in program.bounds}
        self._fitted_params = {"eta": eta, "clist": clist, "dlist": dlist, "solver": solver}
        self._check_solution(program, q, eta, dlist, solver, status)

    def _check_solution(self, program: _Program, q: np.ndarray, eta: float,
                        dlist: Sequence[float], solver: str, status: str) -> None:
        """Refuse a solution that misses a constraint by more than ``_FEASIBILITY_TOL``."""
        worst: list[tuple[float, str]] = [(0.0, "")]
        for parity in program.constrained:
            table = (parity.matrix @ q).reshape(len(parity.groups), -1)
            hi, lo = table.max(axis=0), table.min(axis=0)
            gap = (hi - lo - eta) if self.discrimination == "additive" else hi - (1 + eta) * lo
            of = "" if parity.name == "intersectional" else f" of {parity.name!r}"
            worst.append((float(gap.max()), f"discrimination constraint{of}"))
        for level, matrix in program.bounds:
            worst.append((float((matrix @ q).max() - dlist[level]),
                          f"distortion level {level} constraint"))
        excess, family = max(worst)
        if excess > _FEASIBILITY_TOL:
            raise TOTSolverError(
                f"TOT: solver {solver} returned status {status!r} but its map misses the "
                f"{family} by {excess:.2e} (> {_FEASIBILITY_TOL:g}); try another "
                f"solver or tighter solver tolerances")

    def _discrimination(self, program: _Program, layout: _Layout, q: np.ndarray
                        ) -> dict[str, Any]:
        """Achieved ``q(ŷ | g)`` and input ``p(y | g)`` per constraint, and the largest gaps.

        Intersectional: the joint groups at the top level (as before ``groups`` existed).
        Per attribute: the largest gaps over the attributes at the top level and one entry
        per attribute under ``per_attribute``.
        """

        def gaps(table: np.ndarray) -> tuple[float, float]:
            if len(table) < 2:
                return 0.0, 0.0
            hi, lo = table.max(axis=0), table.min(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(hi > 0, hi / lo - 1.0, 0.0)
            return float((hi - lo).max()), float(ratio.max())

        tables: dict[str, dict[str, Any]] = {}
        for parity in program.parity:
            after = (parity.matrix @ q).reshape(len(parity.groups), layout.n_y)
            add_after, ratio_after = gaps(after)
            add_before, ratio_before = gaps(parity.before)
            tables[parity.name] = {
                "groups": [int(g) for g in parity.groups],
                "q_outcome_given_group": after.tolist(),
                "p_outcome_given_group": parity.before.tolist(),
                "max_additive_gap": add_after,
                "max_ratio_gap": ratio_after,
                "input_max_additive_gap": add_before,
                "input_max_ratio_gap": ratio_before,
            }
        if self.groups == "intersectional":
            (only,) = tables.values()
            return {**only, "grouping": "intersectional", "n_groups": len(only["groups"])}
        keys = ("max_additive_gap", "max_ratio_gap", "input_max_additive_gap",
                "input_max_ratio_gap")
        return {"grouping": "per_attribute",
                **{k: max(t[k] for t in tables.values()) for k in keys},
                "per_attribute": tables}

    def _diagnose(self, program: _Program, layout: _Layout, eta: float,
                  dlist: Sequence[float], solver: str, options: Mapping[str, Any]) -> None:
        """Re-solve feasibility problems with one family dropped; raise the typed error."""

        def feasible(drop: Iterable[str]) -> bool:
            status, *_ = _solve(program, n_y=layout.n_y, eta=eta, form=self.discrimination,
                                dlist=dlist, solver=solver, solver_options=options,
                                objective=False, drop=frozenset(drop))
            return status in _OK

        checks = {"discrimination": feasible(["discrimination"])}
        if program.bounds:
            checks["distortion bounds (dlist > 0)"] = feasible(["distortion"])
            if len(program.bounds) > 1:
                for level, _ in program.bounds:
                    name = f"distortion[c>={self._fitted_clist(level):g}]"
                    checks[name] = feasible([f"distortion[{level}]"])
        form = f"{self.discrimination}, eta={eta:g}"
        if not checks["discrimination"]:
            raise InfeasibleFairnessError(
                f"TOT infeasible: the distortion constraints alone admit no map (dropping the "
                f"discrimination constraint ({form}) does not help): loosen contract keys "
                f"tot.distortion.thresholds and tot.distortion.bounds; family: distortion",
                family="distortion", checks=checks)
        relieved = [_contract_terms(k) for k, ok in checks.items()
                    if ok and k != "discrimination"]
        hint = (f"{' or '.join(relieved)} would also make it feasible" if relieved else
                "raising the bounds alone is not enough: the moves forbidden by a bound of 0 "
                "bind")
        gap, smallest = self._smallest_eta(program, layout, eta, dlist, solver, options)
        counts = {p.name: len(p.groups) for p in program.constrained}
        if self.groups == "intersectional":
            formed = (f"the intersectional setting formed {counts.get('intersectional', 1)} "
                      f"groups with mass (of {layout.n_d} combinations of {list(layout.d_cols)}"
                      f"; groups multiply with each protected attribute), every pair within "
                      f"eta; contract key fairness.groups: per_attribute puts one constraint "
                      f"per attribute instead, and fairness.protected constrains fewer "
                      f"attributes")
        else:
            formed = ("one constraint per protected attribute: "
                      + ", ".join(f"{name} {k} groups" for name, k in counts.items()))
        reached = (f"the smallest {self.discrimination} gap any map reaches under the "
                   f"distortion limits is {gap:.4g}, so the smallest feasible eta on this "
                   f"synthetic table is {smallest:g}: rerun its post-noise stages at no "
                   f"privacy cost with --resume RUN --eta {smallest:g}")
        raise InfeasibleFairnessError(
            f"TOT infeasible: no map brings the discrimination within eta={eta:g} "
            f"({self.discrimination}) under the distortion limits; family: discrimination "
            f"(without the eta constraint the problem is feasible; {hint}); {reached} "
            f"({formed}). Or raise contract key tot.eta, allow more rows to move (raise the "
            f"values of contract key tot.distortion.bounds, or lower a penalty under "
            f"tot.distortion.columns), or move more columns (tot.features).",
            family="discrimination", checks=checks, smallest_gap=gap, smallest_eta=smallest,
            groups=counts)

    def _smallest_eta(self, program: _Program, layout: _Layout, eta: float,
                      dlist: Sequence[float], solver: str, options: Mapping[str, Any]
                      ) -> tuple[float, float]:
        """The smallest gap any map reaches, and the η to suggest (rounded up, checked).

        Post-processing of the synthetic table, like the fit. Additive: one LP with η a
        variable it minimises. Ratio (``hi <= (1 + η) lo`` is bilinear in η): bisection on the
        feasibility of η, to a relative 1e-3.
        """

        def feasible(value: float) -> bool:
            status, *_ = _solve(program, n_y=layout.n_y, eta=value, form=self.discrimination,
                                dlist=dlist, solver=solver, solver_options=options,
                                objective=False)
            return status in _OK

        if self.discrimination == "additive":
            status, _, gap, _ = _solve(program, n_y=layout.n_y, eta=None, form="additive",
                                       dlist=dlist, solver=solver, solver_options=options,
                                       objective=False)
            if status not in _OK or not math.isfinite(gap):
                raise TOTSolverError(f"TOT: solver {solver} could not find the smallest "
                                     f"feasible eta (status {status!r})")
            gap = max(gap, eta)
        else:
            low, high = eta, max(2.0 * eta, 0.01)
            while not feasible(high):
                low, high = high, 2.0 * high
                if high > 1e6:
                    raise TOTSolverError("TOT: no ratio bound up to 1e6 is feasible")
            while high - low > 1e-3 * high:
                middle = (low + high) / 2
                low, high = (low, middle) if feasible(middle) else (middle, high)
            gap = high
        # Four decimals, rounded up past the solver's tolerance; checked before suggested.
        smallest = math.ceil((gap + 2e-5) * 1e4) / 1e4
        for _ in range(3):
            if feasible(smallest):
                break
            smallest = round(smallest + 1e-3, 4)
        return float(gap), float(smallest)

    def _fitted_clist(self, level: int) -> float:
        return float(list(self.clist)[level])

    # -- applying ----------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "probabilities_"):
            raise RuntimeError("TOTransform: call fit() before transform()/to_manifest()")

    def transform(self, frame: pd.DataFrame, *, rng: np.random.Generator) -> pd.DataFrame:
        """Apply the learned map to every row; returns a copy with ``x_cols``/``y_col`` redrawn.

        Each row draws ``(x̃, ỹ)`` from ``q(· | d, x, y)`` by inverse-CDF sampling (one uniform
        per row, one ``searchsorted`` for the whole frame). Rows whose ``(d, x, y)`` had zero
        mass at fit time keep their values (identity fallback, zero distortion). Codes outside
        the declared domain are refused.
        """
        self._check_fitted()
        if not isinstance(rng, np.random.Generator):
            raise TypeError("TOTransform.transform: rng must be a numpy.random.Generator")
        layout: _Layout = self.layout_
        d, xy = layout.pack(frame)
        key = d * layout.n_xy + xy
        pos = np.searchsorted(self.keys_, key)
        found = pos < len(self.keys_)
        found[found] = self.keys_[pos[found]] == key[found]
        u = rng.random(len(frame))
        row = pos[found].astype(float)
        draw = np.minimum(row + u[found], np.nextafter(row + 1.0, row))
        k = np.searchsorted(self._cumulative, draw, side="right")
        new_xy = xy.copy()
        new_xy[found] = self.targets_[np.minimum(k, len(self.targets_) - 1)]
        out = frame.copy()
        for col, codes in layout.decode_xy(new_xy).items():
            dtype = frame[col].dtype
            if not isinstance(dtype, np.dtype):  # numpy's astype takes no pandas dtype
                raise TypeError(f"TOTransform: column {col!r} holds {dtype}, not integer codes")
            out[col] = codes.astype(dtype, copy=False)
        return out

    def fit_transform(self, frame: pd.DataFrame, *, rng: np.random.Generator) -> pd.DataFrame:
        return self.fit(frame).transform(frame, rng=rng)

    def map_frame(self) -> pd.DataFrame:
        """The learned map as a long table: one row per transition with positive probability."""
        self._check_fitted()
        layout: _Layout = self.layout_
        counts = np.diff(self.ptr_)
        keys = np.repeat(self.keys_, counts)
        keep = self.probabilities_ > 0
        keys, tgt, prob = keys[keep], self.targets_[keep], self.probabilities_[keep]
        d, xy = np.divmod(keys, layout.n_xy)
        data: dict[str, np.ndarray] = {}
        # asarray: numpy's stubs read divmod's quotient as maybe a scalar (it is an array)
        for col, codes in zip(layout.d_cols, np.unravel_index(np.asarray(d), layout.d_shape),
                              strict=True):
            data[col] = codes
        data.update(layout.decode_xy(xy))
        data.update({f"{c}~": v for c, v in layout.decode_xy(tgt).items()})
        data["probability"] = prob
        return pd.DataFrame(data)

    def to_manifest(self) -> dict[str, Any]:
        """A JSON-serialisable record of the fitted transform (parameters and diagnostics)."""
        self._check_fitted()
        layout: _Layout = self.layout_
        if isinstance(self.distortion, str):
            distortion = self.distortion
        else:
            distortion = ("custom:" + getattr(self.distortion, "__module__", "?") + "."
                          + getattr(self.distortion, "__qualname__", type(self.distortion)
                                    .__name__))
        fitted = self._fitted_params
        return {
            "transform": "privfair.fair.tot.TOTransform",
            "method": "optimized pre-processing (Calmon et al. 2017; SAFES TOT, Giddens & Liu "
                      "2024)",
            "privacy": {
                "additional_privacy_cost": 0.0,
                "basis": "pure post-processing of DP output: the map is fitted on, and applied "
                         "to, DP synthetic data only (valid only if the fitted frame was DP "
                         "output)",
            },
            "columns": {"protected": list(layout.d_cols), "features": list(layout.x_cols),
                        "outcome": layout.y_col},
            "domain": {c: int(s) for c, s in zip(
                layout.columns, (*layout.d_shape, *layout.x_shape, layout.n_y), strict=True)},
            "parameters": {
                "eta": fitted["eta"],
                "discrimination": self.discrimination,
                "distortion": distortion,
                "clist": fitted["clist"],
                "dlist": fitted["dlist"],
                "solver": fitted["solver"],
                "max_variables": int(self.max_variables),
                "target": "input (X, Y) distribution" if self.target is None else "supplied",
                "distortion_scope": self.distortion_scope,
                "groups": self.groups,
            },
            "fallback": "identity map for (d, x, y) with zero mass at fit time",
            "distortion_scope": (
                "the group-averaged map sum_d p(d | x, y) q(. | d, x, y), for every (x, y) with "
                "positive mass at fit time (AIF360 OptTools, as SAFES's experiments ran)"
                if self.distortion_scope == "pooled" else
                "every (d, x, y) with positive mass at fit time (SAFES eq. (10) as written)"),
            "solver": {
                "name": fitted["solver"],
                "failed_before": list(self.solver_failures_),
                "status": self.status_,
                "objective": self.solver_objective_,
                "solver_time_s": self.solver_time_,
                "iterations": self.iterations_,
                "setup_time_s": self.setup_time_,
                "solve_time_s": self.solve_time_,
            },
            "size": {
                "support_rows": int(len(self.keys_)),
                "n_variables": int(self.n_variables_),
                "dense_variables": int(self.dense_variables_),
            },
            "objective_tv": self.objective_,
            "achieved_discrimination": self.discrimination_,
            "max_excess_distortion": self.excess_distortion_,
        }
