"""Fairness of a table (structural bias) and of a classifier's decisions on it.

This module is long on purpose: it is a catalogue of small, independent metric functions that
share one counting helper; each is short and cites its definition.

Two families of measures are implemented, each exactly as its paper writes it:

* SAFES (Giddens & Liu 2024, §3.2): data fairness COD (Def. 6), classifier fairness SPD and
  AOD (Def. 7), and FNR/FPR balance as conditional utility differences (Def. 8). All are
  *unprivileged minus privileged* (``g = 0`` minus ``g = 1``).
* PreFair (Pujol et al. 2023, Table 2): DP, TPRB, TNRB and their conditional versions CDP,
  CTPRB, CTNRB, written ``Pr(·|S=1) − Pr(·|S=0)``. Here ``S = 1`` is the privileged group, so
  these are *privileged minus unprivileged*.

Consequently ``SPD = −DP``, ``FNR balance = TPRB`` and ``FPR balance = TNRB`` hold exactly.

Binarisation (both papers assume a binary protected attribute and a binary outcome):

* Privileged group. ``privileged`` maps a protected attribute to the code, or set of codes,
  forming its privileged group; every other code is unprivileged. **Default:** for a binary
  attribute (declared size 2) code ``1`` is privileged, following SAFES's convention that the
  privileged group is encoded 1. A protected attribute with more than two categories has no
  default: its privileged group must be given, because the sign of every metric depends on it.
* Joint protection ("race+sex"): a row is privileged when it is privileged on *every*
  protected attribute (e.g. white male), unprivileged otherwise, as in SAFES §5.2.
* Favourable outcome. ``favorable`` is the outcome code (or codes) taken as ``Y = 1``;
  default ``1`` for a binary outcome, required otherwise. Predictions are 0/1 arrays with
  1 the favourable decision.

Conditional measures (conditional COD, CDP, CTPRB, CTNRB) average the within-stratum
difference over the strata ``a`` of the joint value of the admissible attributes,
``E_A[d(a)]``. A stratum counts only when both groups occur in it within the measure's
population (all rows for COD/CDP, ``Y = 1`` rows for CTPRB, ``Y = 0`` rows for CTNRB), since
``d(a)`` is undefined otherwise; the weights of the strata used are renormalised to sum to 1.
With ``stratum_weights="marginal"`` (default, the literal ``E_A``) a stratum weighs
``P(A = a)`` over all rows; with ``"conditional"`` it weighs ``P(A = a | population)``.
An undefined measure (an empty group, no usable stratum) is ``nan``, never an error.

The conditional mutual information ``I(O; P | A)`` uses the raw protected codes (not the
binarised group) and :func:`privfair.evaluation.utility.ci_test`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np

from privfair.core.domain import Domain
from privfair.core.errors import DomainError, RoleError
from privfair.evaluation.utility import (
    DomainLike,
    TableLike,
    as_domain,
    ci_test,
    codes,
    n_rows,
)

StratumWeights = Literal["marginal", "conditional"]
PrivilegedSpec = Mapping[str, int | Collection[int]]

__all__ = [
    "CLASSIFIER_METRICS",
    "CMIResult",
    "DATA_METRICS",
    "StratifiedDifference",
    "average_odds_difference",
    "classifier_fairness",
    "conditional_demographic_parity",
    "conditional_outcome_difference",
    "conditional_rate_difference",
    "conditional_true_negative_rate_balance",
    "conditional_true_positive_rate_balance",
    "data_fairness",
    "demographic_parity",
    "false_negative_rate_balance",
    "false_positive_rate_balance",
    "group_indicator",
    "outcome_difference",
    "outcome_indicator",
    "outcome_protected_cmi",
    "rate_difference",
    "statistical_parity_difference",
    "stratum_index",
    "true_negative_rate_balance",
    "true_positive_rate_balance",
]

DATA_METRICS = ("COD", "conditional_COD", "conditional_COD_coverage", "CMI", "CMI_G", "CMI_dof",
                "CMI_p_value")
CLASSIFIER_METRICS = ("DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB",
                      "SPD", "AOD", "FNR_balance", "FPR_balance")


class StratifiedDifference(NamedTuple):
    """A weighted average of within-stratum differences.

    Attributes
    ----------
    value : float
        ``Σ_a w_a d(a) / Σ_a w_a`` over the usable strata (``nan`` if none).
    coverage : float
        Share of the total stratum weight carried by the usable strata, in ``[0, 1]``.
    n_strata : int
        Number of usable strata.
    """

    value: float
    coverage: float
    n_strata: int


class CMIResult(NamedTuple):
    """``I(O; P | A)`` in nats with the G-test it comes from (``G = 2 n I``)."""

    cmi: float
    statistic: float
    dof: int
    p_value: float


# ---------------------------------------------------------------------------------------------
# Binary arrays


def _binary(values: np.ndarray, parameter: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DomainError(f"{parameter}: expected a 1-D array, got {arr.ndim} dimensions")
    if arr.dtype != np.bool_:
        if not np.issubdtype(arr.dtype, np.integer):
            raise DomainError(f"{parameter}: expected a 0/1 or boolean array, got dtype "
                              f"{arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise DomainError(f"{parameter}: expected only 0 and 1")
        arr = arr.astype(bool)
    if n is not None and arr.size != n:
        raise DomainError(f"{parameter}: has {arr.size} entries, expected {n}")
    return arr


def _rate(event: np.ndarray, mask: np.ndarray) -> float:
    """``P(event | mask)``, ``nan`` when ``mask`` is empty."""
    total = int(np.count_nonzero(mask))
    if total == 0:
        return float("nan")
    return int(np.count_nonzero(event & mask)) / total


def rate_difference(event: np.ndarray, group_a: np.ndarray, group_b: np.ndarray, *,
                    within: np.ndarray | None = None) -> float:
    """``P(event | group_a, within) − P(event | group_b, within)``.

    Parameters
    ----------
    event, group_a, group_b : ndarray of bool or 0/1
        Row indicators, all of the same length.
    within : ndarray of bool or 0/1, optional
        Population to restrict to (default: all rows).

    Returns
    -------
    float
        The difference, ``nan`` when either conditional rate is undefined.
    """
    event = _binary(event, "event")
    n = event.size
    a = _binary(group_a, "group_a", n)
    b = _binary(group_b, "group_b", n)
    pop = np.ones(n, dtype=bool) if within is None else _binary(within, "within", n)
    return _rate(event, a & pop) - _rate(event, b & pop)


def conditional_rate_difference(event: np.ndarray, group_a: np.ndarray, group_b: np.ndarray,
                                strata: np.ndarray, *, within: np.ndarray | None = None,
                                stratum_weights: StratumWeights = "marginal"
                                ) -> StratifiedDifference:
    """``E_A[P(event | group_a, within, A=a) − P(event | group_b, within, A=a)]``.

    Parameters
    ----------
    event, group_a, group_b : ndarray of bool or 0/1
        Row indicators, all of the same length.
    strata : ndarray of int
        Stratum index of each row (e.g. from :func:`stratum_index`), non-negative.
    within : ndarray of bool or 0/1, optional
        Population the rates are taken in (default: all rows).
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        ``"marginal"``: stratum ``a`` weighs ``P(A=a)`` over all rows (the literal ``E_A``);
        ``"conditional"``: it weighs ``P(A=a | within)``.

    Returns
    -------
    StratifiedDifference
        Only strata where both groups occur within the population are used; their weights
        are renormalised. ``value`` is ``nan`` when no stratum is usable.
    """
    event = _binary(event, "event")
    n = event.size
    a = _binary(group_a, "group_a", n)
    b = _binary(group_b, "group_b", n)
    pop = np.ones(n, dtype=bool) if within is None else _binary(within, "within", n)
    strata = np.asarray(strata)
    if strata.ndim != 1 or strata.size != n or not np.issubdtype(strata.dtype, np.integer):
        raise DomainError(f"strata: expected a 1-D integer array with {n} entries")
    if strata.size and strata.min() < 0:
        raise DomainError("strata: expected non-negative stratum indices")
    if stratum_weights not in ("marginal", "conditional"):
        raise DomainError(f"stratum_weights: expected 'marginal' or 'conditional', got "
                          f"{stratum_weights!r}")
    m = int(strata.max()) + 1 if n else 0
    n_a = np.bincount(strata[a & pop], minlength=m)
    n_b = np.bincount(strata[b & pop], minlength=m)
    e_a = np.bincount(strata[a & pop & event], minlength=m)
    e_b = np.bincount(strata[b & pop & event], minlength=m)
    base = strata if stratum_weights == "marginal" else strata[pop]
    weight = np.bincount(base, minlength=m).astype(np.float64)
    usable = (n_a > 0) & (n_b > 0)
    total = float(weight.sum())
    used = float(weight[usable].sum())
    if used == 0.0:
        return StratifiedDifference(float("nan"), 0.0, 0)
    diff = e_a[usable] / n_a[usable] - e_b[usable] / n_b[usable]
    value = float(np.sum(weight[usable] * diff) / used)
    return StratifiedDifference(value, used / total, int(np.count_nonzero(usable)))


# ---------------------------------------------------------------------------------------------
# SAFES (g = 1 privileged; unprivileged minus privileged)


def outcome_difference(*, y_true: np.ndarray, group: np.ndarray) -> float:
    """Conditional outcome difference, SAFES Def. 6: ``P(Y=1|g=0) − P(Y=1|g=1)``.

    Parameters
    ----------
    y_true : ndarray of bool or 0/1
        Outcome, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.

    Returns
    -------
    float
        COD in ``[-1, 1]``; negative favours the privileged group, ``nan`` if a group is empty.
    """
    y = _binary(y_true, "y_true")
    g = _binary(group, "group", y.size)
    return rate_difference(y, ~g, g)


def conditional_outcome_difference(*, y_true: np.ndarray, group: np.ndarray,
                                   strata: np.ndarray,
                                   stratum_weights: StratumWeights = "marginal"
                                   ) -> StratifiedDifference:
    """COD within admissible strata: ``E_A[P(Y=1|g=0,A=a) − P(Y=1|g=1,A=a)]``.

    Parameters
    ----------
    y_true : ndarray of bool or 0/1
        Outcome, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.
    strata : ndarray of int
        Joint admissible value of each row (:func:`stratum_index`).
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        See :func:`conditional_rate_difference` (identical here: the population is all rows).

    Returns
    -------
    StratifiedDifference
    """
    y = _binary(y_true, "y_true")
    g = _binary(group, "group", y.size)
    return conditional_rate_difference(y, ~g, g, strata, stratum_weights=stratum_weights)


def statistical_parity_difference(*, y_pred: np.ndarray, group: np.ndarray) -> float:
    """SPD, SAFES Def. 7: ``P(Ŷ=1|g=0) − P(Ŷ=1|g=1)``.

    Parameters
    ----------
    y_pred : ndarray of bool or 0/1
        Decisions, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.

    Returns
    -------
    float
    """
    o = _binary(y_pred, "y_pred")
    g = _binary(group, "group", o.size)
    return rate_difference(o, ~g, g)


def average_odds_difference(*, y_true: np.ndarray, y_pred: np.ndarray,
                            group: np.ndarray) -> float:
    """AOD, SAFES Def. 7.

    ``½[(P(Ŷ=1|Y=0,g=0) − P(Ŷ=1|Y=0,g=1)) + (P(Ŷ=1|Y=1,g=0) − P(Ŷ=1|Y=1,g=1))]``, the mean
    of the false- and true-positive-rate gaps.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome and decision, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.

    Returns
    -------
    float
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    g = _binary(group, "group", y.size)
    return 0.5 * (rate_difference(o, ~g, g, within=~y) + rate_difference(o, ~g, g, within=y))


def false_negative_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                                group: np.ndarray) -> float:
    """FNR balance, SAFES Def. 8 with ``u = P(Ŷ=0|Y=1,g)``: ``u(g=0) − u(g=1)``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome and decision, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.

    Returns
    -------
    float
        Positive: more unprivileged than privileged positives are denied.
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    g = _binary(group, "group", y.size)
    return rate_difference(~o, ~g, g, within=y)


def false_positive_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                                group: np.ndarray) -> float:
    """FPR balance, SAFES Def. 8 with ``u = P(Ŷ=1|Y=0,g)``: ``u(g=0) − u(g=1)``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome and decision, 1 favourable.
    group : ndarray of bool or 0/1
        1 (True) for the privileged group.

    Returns
    -------
    float
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    g = _binary(group, "group", y.size)
    return rate_difference(o, ~g, g, within=~y)


# ---------------------------------------------------------------------------------------------
# PreFair Table 2 (S = 1 privileged; privileged minus unprivileged)


def demographic_parity(*, y_pred: np.ndarray, group: np.ndarray) -> float:
    """DP, PreFair Table 2: ``Pr(O=1|S=1) − Pr(O=1|S=0)``.

    Parameters
    ----------
    y_pred : ndarray of bool or 0/1
        Decisions ``O``, 1 favourable.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.

    Returns
    -------
    float
    """
    o = _binary(y_pred, "y_pred")
    s = _binary(group, "group", o.size)
    return rate_difference(o, s, ~s)


def true_positive_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                               group: np.ndarray) -> float:
    """TPRB, PreFair Table 2: ``Pr(O=1|S=1,Y=1) − Pr(O=1|S=0,Y=1)``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome ``Y`` and decision ``O``, 1 favourable.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.

    Returns
    -------
    float
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    s = _binary(group, "group", y.size)
    return rate_difference(o, s, ~s, within=y)


def true_negative_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                               group: np.ndarray) -> float:
    """TNRB, PreFair Table 2: ``Pr(O=0|S=1,Y=0) − Pr(O=0|S=0,Y=0)``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome ``Y`` and decision ``O``, 1 favourable.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.

    Returns
    -------
    float
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    s = _binary(group, "group", y.size)
    return rate_difference(~o, s, ~s, within=~y)


def conditional_demographic_parity(*, y_pred: np.ndarray, group: np.ndarray,
                                   strata: np.ndarray,
                                   stratum_weights: StratumWeights = "marginal"
                                   ) -> StratifiedDifference:
    """CDP, PreFair Table 2: ``E_A[Pr(O=1|S=1,A=a) − Pr(O=1|S=0,A=a)]``.

    Parameters
    ----------
    y_pred : ndarray of bool or 0/1
        Decisions ``O``.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.
    strata : ndarray of int
        Joint admissible value ``A`` of each row (:func:`stratum_index`).
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        See :func:`conditional_rate_difference`.

    Returns
    -------
    StratifiedDifference
    """
    o = _binary(y_pred, "y_pred")
    s = _binary(group, "group", o.size)
    return conditional_rate_difference(o, s, ~s, strata, stratum_weights=stratum_weights)


def conditional_true_positive_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                                           group: np.ndarray, strata: np.ndarray,
                                           stratum_weights: StratumWeights = "marginal"
                                           ) -> StratifiedDifference:
    """CTPRB, PreFair Table 2: ``E_A[Pr(O=1|S=1,Y=1,A=a) − Pr(O=1|S=0,Y=1,A=a)]``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome ``Y`` and decision ``O``.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.
    strata : ndarray of int
        Joint admissible value ``A`` of each row.
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        ``"conditional"`` weighs strata by ``P(A=a | Y=1)``.

    Returns
    -------
    StratifiedDifference
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    s = _binary(group, "group", y.size)
    return conditional_rate_difference(o, s, ~s, strata, within=y,
                                       stratum_weights=stratum_weights)


def conditional_true_negative_rate_balance(*, y_true: np.ndarray, y_pred: np.ndarray,
                                           group: np.ndarray, strata: np.ndarray,
                                           stratum_weights: StratumWeights = "marginal"
                                           ) -> StratifiedDifference:
    """CTNRB, PreFair Table 2: ``E_A[Pr(O=0|S=1,Y=0,A=a) − Pr(O=0|S=0,Y=0,A=a)]``.

    Parameters
    ----------
    y_true, y_pred : ndarray of bool or 0/1
        Outcome ``Y`` and decision ``O``.
    group : ndarray of bool or 0/1
        ``S``: 1 (True) for the privileged group.
    strata : ndarray of int
        Joint admissible value ``A`` of each row.
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        ``"conditional"`` weighs strata by ``P(A=a | Y=0)``.

    Returns
    -------
    StratifiedDifference
    """
    y = _binary(y_true, "y_true")
    o = _binary(y_pred, "y_pred", y.size)
    s = _binary(group, "group", y.size)
    return conditional_rate_difference(~o, s, ~s, strata, within=~y,
                                       stratum_weights=stratum_weights)


# ---------------------------------------------------------------------------------------------
# From tables of codes


def _as_tuple(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _code_set(spec: int | Collection[int], attribute: str, size: int, parameter: str
              ) -> np.ndarray:
    items = [spec] if isinstance(spec, int | np.integer) else list(spec)
    for c in items:
        if isinstance(c, bool) or not isinstance(c, int | np.integer) or not 0 <= c < size:
            raise DomainError(f"{parameter}[{attribute!r}]: expected codes in 0..{size - 1}, "
                              f"got {c!r}")
    chosen = np.zeros(size, dtype=bool)
    chosen[np.asarray(items, dtype=np.int64)] = True
    if not chosen.any() or chosen.all():
        raise DomainError(f"{parameter}[{attribute!r}]: must name some but not all of the "
                          f"{size} codes, or one group would be empty by construction")
    return chosen


def group_indicator(frame: TableLike, domain: DomainLike, protected: str | Sequence[str], *,
                    privileged: PrivilegedSpec | None = None,
                    name: str = "frame") -> np.ndarray:
    """Binarise protected attributes: True for rows of the privileged group.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    protected : str or sequence of str
        Protected attribute(s). With several, a row is privileged when it is privileged on all
        of them (joint protection).
    privileged : mapping of str to int or collection of int, optional
        Privileged code(s) per protected attribute. Default for a binary attribute: code 1;
        an attribute with more than two categories must be listed.
    name : str, optional
        How the table is named in error messages.

    Returns
    -------
    ndarray of bool
    """
    dom = as_domain(domain)
    attrs = _as_tuple(protected)
    if not attrs:
        raise RoleError("protected: expected at least one protected attribute")
    spec = dict(privileged or {})
    unknown = [a for a in spec if a not in attrs]
    if unknown:
        raise RoleError(f"privileged: {unknown} are not among the protected attributes "
                        f"{list(attrs)}")
    n = n_rows(frame, name=name)
    result = np.ones(n, dtype=bool)
    for a in attrs:
        size = dom.size(a)
        if a in spec:
            chosen = _code_set(spec[a], a, size, "privileged")
        elif size == 2:
            chosen = np.array([False, True])
        else:
            raise RoleError(
                f"privileged: protected attribute {a!r} has {size} categories; name its "
                f"privileged code(s), e.g. privileged={{{a!r}: 0}} (code 1 is the default only "
                "for binary attributes)"
            )
        result &= chosen[codes(frame, a, dom, name=name)]
    return result


def outcome_indicator(frame: TableLike, domain: DomainLike, outcome: str, *,
                      favorable: int | Collection[int] | None = None,
                      name: str = "frame") -> np.ndarray:
    """Binarise the outcome: True where it takes a favourable code.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    outcome : str
        Outcome attribute.
    favorable : int or collection of int, optional
        Favourable code(s). Default: 1 for a binary outcome; required otherwise.
    name : str, optional
        How the table is named in error messages.

    Returns
    -------
    ndarray of bool
    """
    dom = as_domain(domain)
    if not isinstance(outcome, str):
        raise RoleError(f"outcome: expected one attribute name, got {outcome!r}")
    size = dom.size(outcome)
    if favorable is None:
        if size != 2:
            raise RoleError(f"favorable: outcome {outcome!r} has {size} categories; name its "
                            "favourable code(s) (code 1 is the default only for binary "
                            "outcomes)")
        chosen = np.array([False, True])
    else:
        chosen = _code_set(favorable, outcome, size, "favorable")
    return chosen[codes(frame, outcome, dom, name=name)]


def stratum_index(frame: TableLike, domain: DomainLike,
                  attributes: str | Sequence[str] | None, *, name: str = "frame"
                  ) -> np.ndarray:
    """Index of the joint value of ``attributes`` per row (all zeros when none are given).

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    attributes : str, sequence of str, or None
        Stratifying (admissible) attributes.
    name : str, optional
        How the table is named in error messages.

    Returns
    -------
    ndarray of int64
        Dense stratum indices ``0 .. n_strata-1``.
    """
    dom = as_domain(domain)
    attrs = _as_tuple(attributes)
    n = n_rows(frame, name=name)
    if not attrs:
        return np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    for a in attrs:
        col = codes(frame, a, dom, name=name)
        key = key * dom.size(a) + col
        # Re-densify so the mixed-radix key cannot overflow.
        key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return key


def _check_roles(dom: Domain, protected: tuple[str, ...], outcome: str,
                 admissible: tuple[str, ...]) -> None:
    if not protected:
        raise RoleError("protected: expected at least one protected attribute")
    for role, attrs in (("protected", protected), ("outcome", (outcome,)),
                        ("admissible", admissible)):
        for a in attrs:
            if a not in dom:
                raise RoleError(f"{role}: attribute {a!r} is not in the declared domain")
    sets = {"protected": set(protected), "outcome": {outcome}, "admissible": set(admissible)}
    for a, b in (("protected", "outcome"), ("protected", "admissible"),
                 ("outcome", "admissible")):
        both = sets[a] & sets[b]
        if both:
            raise RoleError(f"roles: {sorted(both)} are both {a} and {b}; the role sets must "
                            "be disjoint")


def _groups(protected: tuple[str, ...], joint: bool) -> list[tuple[str, tuple[str, ...]]]:
    groups: list[tuple[str, tuple[str, ...]]] = [(a, (a,)) for a in protected]
    if joint and len(protected) > 1:
        groups.append(("+".join(protected), protected))
    return groups


def outcome_protected_cmi(frame: TableLike, domain: DomainLike, *, outcome: str,
                          protected: str | Sequence[str],
                          admissible: str | Sequence[str] | None = ()) -> CMIResult:
    """Conditional mutual information ``I(O; P | A)`` and its G-test.

    Zero exactly when, in the data, the outcome is independent of the protected attributes
    within every admissible stratum: the data-level condition of justifiable fairness.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes.
    domain : Domain or mapping of str to int
        Declared domain.
    outcome : str
        Outcome attribute ``O`` (raw codes, not binarised).
    protected : str or sequence of str
        Protected attribute(s) ``P`` (several form one joint variable; raw codes).
    admissible : str, sequence of str, or None
        Admissible attributes ``A`` (empty: the unconditional ``I(O; P)``).

    Returns
    -------
    CMIResult
        ``(cmi, statistic, dof, p_value)``; see :func:`privfair.evaluation.utility.ci_test`.
    """
    dom = as_domain(domain)
    prot = _as_tuple(protected)
    adm = _as_tuple(admissible)
    _check_roles(dom, prot, outcome, adm)
    n = n_rows(frame, name="frame")
    result = ci_test(frame, outcome, prot, adm, dom)
    cmi = result.statistic / (2.0 * n)
    return CMIResult(cmi, result.statistic, result.dof, result.p_value)


def data_fairness(frame: TableLike, domain: DomainLike, *, protected: str | Sequence[str],
                  outcome: str, admissible: str | Sequence[str] | None = (),
                  privileged: PrivilegedSpec | None = None,
                  favorable: int | Collection[int] | None = None, joint: bool = True,
                  stratum_weights: StratumWeights = "marginal") -> dict[str, dict[str, float]]:
    """Structural bias of a table, per protected attribute and jointly.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Table of integer codes (real or synthetic).
    domain : Domain or mapping of str to int
        Declared domain.
    protected : str or sequence of str
        Protected attributes.
    outcome : str
        Outcome attribute.
    admissible : str, sequence of str, or None
        Admissible attributes; conditional measures stratify on their joint value (with none,
        they equal the unconditional ones).
    privileged : mapping, optional
        Privileged code(s) per protected attribute (see :func:`group_indicator`).
    favorable : int or collection of int, optional
        Favourable outcome code(s) (see :func:`outcome_indicator`).
    joint : bool, default True
        Also report the joint group (label ``"a+b"``) when there are several protected
        attributes.
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        See :func:`conditional_rate_difference`.

    Returns
    -------
    dict of str to dict of str to float
        Per group label: ``COD`` (SAFES Def. 6), ``conditional_COD`` with its
        ``conditional_COD_coverage``, and ``CMI`` = ``I(O; P | A)`` in nats with ``CMI_G``,
        ``CMI_dof``, ``CMI_p_value``.
    """
    dom = as_domain(domain)
    prot = _as_tuple(protected)
    adm = _as_tuple(admissible)
    _check_roles(dom, prot, outcome, adm)
    _check_privileged(privileged, prot)
    y = outcome_indicator(frame, dom, outcome, favorable=favorable)
    strata = stratum_index(frame, dom, adm)
    report: dict[str, dict[str, float]] = {}
    for label, attrs in _groups(prot, joint):
        g = group_indicator(frame, dom, attrs, privileged=_subspec(privileged, attrs))
        ccod = conditional_outcome_difference(y_true=y, group=g, strata=strata,
                                              stratum_weights=stratum_weights)
        cmi = outcome_protected_cmi(frame, dom, outcome=outcome, protected=attrs,
                                    admissible=adm)
        report[label] = {
            "COD": outcome_difference(y_true=y, group=g),
            "conditional_COD": ccod.value,
            "conditional_COD_coverage": ccod.coverage,
            "CMI": cmi.cmi,
            "CMI_G": cmi.statistic,
            "CMI_dof": float(cmi.dof),
            "CMI_p_value": cmi.p_value,
        }
    return report


def _subspec(privileged: PrivilegedSpec | None, attrs: tuple[str, ...]
             ) -> dict[str, int | Collection[int]]:
    return {a: v for a, v in (privileged or {}).items() if a in attrs}


def _check_privileged(privileged: PrivilegedSpec | None, protected: tuple[str, ...]) -> None:
    unknown = [a for a in (privileged or {}) if a not in protected]
    if unknown:
        raise RoleError(f"privileged: {unknown} are not among the protected attributes "
                        f"{list(protected)}")


def classifier_fairness(frame: TableLike, y_pred: np.ndarray, domain: DomainLike, *,
                        protected: str | Sequence[str], outcome: str,
                        admissible: str | Sequence[str] | None = (),
                        privileged: PrivilegedSpec | None = None,
                        favorable: int | Collection[int] | None = None, joint: bool = True,
                        stratum_weights: StratumWeights = "marginal"
                        ) -> dict[str, dict[str, float]]:
    """Fairness of a classifier's decisions on a (real, held-out) table.

    Parameters
    ----------
    frame : DataFrame or mapping of str to ndarray
        Rows the classifier decided on, with the protected, admissible and outcome columns.
    y_pred : ndarray of bool or 0/1
        Decisions, one per row, 1 favourable.
    domain : Domain or mapping of str to int
        Declared domain.
    protected : str or sequence of str
        Protected attributes.
    outcome : str
        Outcome attribute (the true label).
    admissible : str, sequence of str, or None
        Admissible attributes for the conditional measures.
    privileged : mapping, optional
        Privileged code(s) per protected attribute (see :func:`group_indicator`).
    favorable : int or collection of int, optional
        Favourable outcome code(s) (see :func:`outcome_indicator`).
    joint : bool, default True
        Also report the joint group (label ``"a+b"``).
    stratum_weights : {"marginal", "conditional"}, default "marginal"
        See :func:`conditional_rate_difference`.

    Returns
    -------
    dict of str to dict of str to float
        Per group label, the keys of :data:`CLASSIFIER_METRICS`: PreFair's ``DP``, ``TPRB``,
        ``TNRB``, ``CDP``, ``CTPRB``, ``CTNRB`` (privileged − unprivileged) and SAFES's
        ``SPD``, ``AOD``, ``FNR_balance``, ``FPR_balance`` (unprivileged − privileged).
    """
    dom = as_domain(domain)
    prot = _as_tuple(protected)
    adm = _as_tuple(admissible)
    _check_roles(dom, prot, outcome, adm)
    _check_privileged(privileged, prot)
    y = outcome_indicator(frame, dom, outcome, favorable=favorable)
    o = _binary(y_pred, "y_pred", y.size)
    strata = stratum_index(frame, dom, adm)
    report: dict[str, dict[str, float]] = {}
    for label, attrs in _groups(prot, joint):
        g = group_indicator(frame, dom, attrs, privileged=_subspec(privileged, attrs))
        kw = {"y_true": y, "y_pred": o, "group": g}
        report[label] = {
            "DP": demographic_parity(y_pred=o, group=g),
            "TPRB": true_positive_rate_balance(**kw),
            "TNRB": true_negative_rate_balance(**kw),
            "CDP": conditional_demographic_parity(
                y_pred=o, group=g, strata=strata, stratum_weights=stratum_weights).value,
            "CTPRB": conditional_true_positive_rate_balance(
                **kw, strata=strata, stratum_weights=stratum_weights).value,
            "CTNRB": conditional_true_negative_rate_balance(
                **kw, strata=strata, stratum_weights=stratum_weights).value,
            "SPD": statistical_parity_difference(y_pred=o, group=g),
            "AOD": average_odds_difference(**kw),
            "FNR_balance": false_negative_rate_balance(**kw),
            "FPR_balance": false_positive_rate_balance(**kw),
        }
    return report
