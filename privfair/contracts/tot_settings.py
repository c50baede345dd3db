"""TOT (Calmon et al.'s optimized pre-processing) declared in a contract, for any dataset.

A contract's ``tot:`` block says which columns TOT may move (a small feature set; the outcome
is always moved), the distortion as per-column penalties, and the discrimination constraint:

.. code-block:: yaml

    tot:
      features: [age, education]       # X; protected columns are never moved
      discrimination: additive         # or ratio (SAFES eq. 8)
      eta: 0.05                        # optional default; --eta overrides it
      distortion_scope: per_group      # or pooled (see below)
      max_variables: 5000000           # optional size guard of the linear program
      distortion:
        combine: max                   # how column penalties add up: max or sum
        thresholds: [0.99, 1.99, 2.99] # c_i
        bounds: [0.1, 0.05, 0.0]       # d_i: P(distortion >= c_i) <= d_i; 0 forbids
        columns:
          age: {ordinal: [0, 2, 3]}              # by |code step|; the last value repeats
          education: {up: [0, 0, 3], down: [0, 3]}  # ordinal, one list per direction
          income: {changes: {">50K": {"<=50K": 1}}, default: 0}  # categorical, from -> to

Which protected attributes the fairness methods constrain, and how they form groups, is the
contract's ``fairness:`` block, shared by TOT and the fair GANs (FairGAN, FairGAN+, CFGAN):

.. code-block:: yaml

    fairness:
      protected: [sex, race]    # default: every column under roles.protected
      groups: per_attribute     # default: intersectional

``intersectional`` (TOT's default, as before the block existed): one group per combination of
the constrained attributes, every pair of groups within η; groups multiply (2 × 5 × 4
attributes form up to 40 groups, many of them small). ``per_attribute``: one parity
constraint per attribute, each attribute's groups within η, solved in the same program. The
fair GANs always constrain each listed attribute on its own (one fairness adversary head, or
one effect, per attribute); ``intersectional`` adds none there, and their manifest states
parity per listed attribute.

``distortion_scope`` says which map the distortion bounds constrain. ``per_group`` (the
default) bounds ``P(δ >= c_i | d, x, y)`` for every protected group ``d`` and cell ``(x, y)``:
SAFES eq. (10) as written. ``pooled`` bounds only the group-averaged map,
``Σ_d p(d | x, y) P(δ >= c_i | d, x, y)``, per ``(x, y)``: the constraint of AIF360's
``OptTools``, which is what SAFES's experiments ran; it lets the map move one group's rows
more than the bound while the cell's average stays within it.

The SAFES distortions for Adult and COMPAS are written this way in the shipped
``adult_safes.yaml`` and ``compas.yaml``. Everything here is checked at preflight, before any
private read: the columns exist, every moved column has a penalty, and the program's variable
count, bounded from the declared domain and the forbidden transitions, fits ``max_variables``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from privfair.contracts.fields import Eta, refuse_loose_numbers

if TYPE_CHECKING:
    from privfair.contracts.schema import Contract

__all__ = ["ColumnPenalty", "DistortionSpec", "FairnessSpec", "TOTSetting", "TOTSpec",
           "check_fairness_spec", "check_tot_spec", "constrained_protected", "tot_setting"]

DEFAULT_MAX_VARIABLES = 5_000_000


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        return refuse_loose_numbers(cls, data)  # '1_0' is not 10 (issue 45.4)


class ColumnPenalty(_Frozen):
    """Penalty of moving one column's code ``old -> new``; give exactly one form.

    ``ordinal``: by ``|new - old|`` (entry ``i`` for a step of ``i``; the last repeats).
    ``up``/``down``: the same, one list per direction (both needed). ``changes``: categorical,
    ``{from label: {to label: penalty}}``, with ``default`` for every other change.
    """

    ordinal: tuple[float, ...] | None = None
    up: tuple[float, ...] | None = None
    down: tuple[float, ...] | None = None
    changes: dict[str, dict[str, float]] | None = None
    default: float = 0.0

    @model_validator(mode="after")
    def _one_form(self) -> ColumnPenalty:
        forms = [self.ordinal is not None, self.up is not None or self.down is not None,
                 self.changes is not None]
        if sum(forms) > 1:
            raise ValueError("give one of ordinal, up/down or changes")
        if (self.up is None) != (self.down is None):
            raise ValueError("up and down go together (one list per direction)")
        for lst in (self.ordinal, self.up, self.down):
            if lst is not None and (not lst or lst[0] != 0):
                raise ValueError("an ordinal penalty list starts with 0 (no move, no penalty)")
        values = [*(self.ordinal or ()), *(self.up or ()), *(self.down or ()), self.default,
                  *(p for to in (self.changes or {}).values() for p in to.values())]
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError("penalties must be finite numbers >= 0")
        return self

    def matrix(self, k: int, labels: Sequence[str] | None, *, column: str) -> np.ndarray:
        """``P[old, new]`` over the column's ``k`` codes (labels needed for ``changes``)."""
        old, new = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        if self.ordinal is not None or self.up is not None:
            step = new - old
            up = np.asarray(self.up if self.up is not None else self.ordinal)
            down = np.asarray(self.down if self.down is not None else self.ordinal)
            size = np.abs(step)
            return np.where(step >= 0, up[np.minimum(size, up.size - 1)],
                            down[np.minimum(size, down.size - 1)]).astype(float)
        out = np.where(old == new, 0.0, float(self.default))
        if labels is None:
            raise ValueError(f"tot.distortion.columns.{column}: a changes penalty needs the "
                             "column's labels, which a dp_bins column only gets at its "
                             "release; use an ordinal penalty")
        index = {lab: i for i, lab in enumerate(labels)}
        for src, targets in (self.changes or {}).items():
            for dst, penalty in targets.items():
                for label in (src, dst):
                    if label not in index:
                        raise ValueError(f"tot.distortion.columns.{column}.changes: {label!r} is "
                                         f"not a label of {column!r}; expected one of "
                                         f"{list(labels)}")
                out[index[src], index[dst]] = penalty
        return out


class DistortionSpec(_Frozen):
    """Per-column penalties, how they combine, and the distortion constraint."""

    combine: Literal["max", "sum"] = "max"
    thresholds: tuple[float, ...] = (0.99, 1.99, 2.99)
    bounds: tuple[float, ...] = (0.1, 0.05, 0.0)
    columns: dict[str, ColumnPenalty] = Field(min_length=1)

    @model_validator(mode="after")
    def _pairs(self) -> DistortionSpec:
        if len(self.thresholds) != len(self.bounds):
            raise ValueError(f"thresholds has {len(self.thresholds)} values but bounds has "
                             f"{len(self.bounds)}; expected one bound per threshold")
        if any(b < 0 for b in self.bounds):
            raise ValueError("bounds are probabilities >= 0")
        return self


class TOTSpec(_Frozen):
    """A contract's ``tot:`` block (see the module docstring)."""

    features: tuple[str, ...]
    distortion: DistortionSpec
    discrimination: Literal["additive", "ratio"] = "additive"
    eta: Eta | None = None
    max_variables: int = Field(DEFAULT_MAX_VARIABLES, ge=1)
    # per_group: SAFES eq. (10) as written; pooled: AIF360 OptTools (what SAFES ran).
    distortion_scope: Literal["per_group", "pooled"] = "per_group"


class FairnessSpec(_Frozen):
    """A contract's ``fairness:`` block: the protected attributes the fairness methods
    constrain and how they form groups (see the module docstring)."""

    protected: tuple[str, ...] | None = Field(None, min_length=1)
    groups: Literal["intersectional", "per_attribute"] = "intersectional"


def check_fairness_spec(contract: Contract) -> None:
    """``fairness.protected`` names distinct columns declared under ``roles.protected``."""
    spec = contract.fairness
    if spec is None or spec.protected is None:
        return
    declared = list(contract.role_spec.protected)
    unknown = [c for c in spec.protected if c not in declared]
    if unknown:
        raise ValueError(f"fairness.protected: {unknown} are not protected columns; expected "
                         f"a subset of roles.protected {declared}")
    if len(set(spec.protected)) != len(spec.protected):
        raise ValueError("fairness.protected: a column is listed twice")


def constrained_protected(contract: Contract) -> tuple[tuple[str, ...], str]:
    """The protected attributes the fairness methods constrain, and their grouping."""
    spec = contract.fairness
    declared = tuple(contract.role_spec.protected)
    if spec is None:
        return declared, "intersectional"
    return (spec.protected or declared), spec.groups


def check_tot_spec(contract: Contract) -> None:
    """Contract-level checks of the ``tot`` block (names and labels), from the YAML alone."""
    spec = contract.tot
    if spec is None:
        return
    roles = contract.role_spec
    names = set(contract.column_names)
    if len(roles.outcome) != 1:
        raise ValueError("tot: needs exactly one outcome column under roles.outcome")
    if not roles.protected:
        raise ValueError("tot: needs protected columns under roles.protected")
    for col in spec.features:
        if col not in names:
            raise ValueError(f"tot.features: {col!r} is not a declared column")
        if col in roles.protected or col in roles.outcome:
            raise ValueError(f"tot.features: {col!r} is protected or the outcome; list only "
                             "the features TOT may move")
    moved = [*spec.features, roles.outcome[0]]
    missing = [c for c in moved if c not in spec.distortion.columns]
    if missing:
        raise ValueError(f"tot.distortion.columns: no penalty for moved column(s) {missing}; "
                         "give each an ordinal, up/down or changes penalty")
    extra = [c for c in spec.distortion.columns if c not in moved]
    if extra:
        raise ValueError(f"tot.distortion.columns: {extra} are not moved by TOT; list them "
                         "under tot.features or remove their penalty")
    for col in moved:
        if contract.column(col).type == "text":
            raise ValueError(f"tot: column {col!r} is open-domain text, whose categories are "
                             "only known after a release; TOT moves declared columns only")
        _penalties(contract, col)


def _penalties(contract: Contract, col: str) -> np.ndarray:
    spec = contract.column(col)
    if contract.tot is None:
        raise ValueError("tot: the contract declares no tot section")
    penalty = contract.tot.distortion.columns[col]
    if spec.bins is None and spec.dp_bins is not None:
        return penalty.matrix(spec.dp_bins, None, column=col)
    labels = contract.labels(col)
    return penalty.matrix(len(labels), labels, column=col)


def _size(contract: Contract, col: str) -> int:
    """Declared size; a dp_bins column its bin count; a text column 1 (its released
    categories are not known before the release, so the bound is a lower one there)."""
    spec = contract.column(col)
    if spec.type == "text":
        return 1
    if spec.bins is None and spec.dp_bins is not None:
        return int(spec.dp_bins)
    return len(contract.labels(col))


@dataclass(frozen=True)
class TOTSetting:
    """What TOT runs with for one release: columns, distortion, constraint, size guard."""

    protected: tuple[str, ...]
    features: tuple[str, ...]
    outcome: str
    distortion: Any  # registered name or a callable over code mappings
    clist: tuple[float, ...]
    dlist: tuple[float, ...]
    discrimination: str
    eta: float | None
    max_variables: int
    source: str  # where the setting came from, for messages and the manifest
    distortion_scope: str = "per_group"  # TOTransform's distortion_scope
    groups: str = "intersectional"  # TOTransform's groups (contract key fairness.groups)

    def size_fix(self) -> str:
        """What to change when the program is too large."""
        if self.source == "contract":
            return ("move fewer or coarser columns (contract key tot.features), forbid more "
                    "transitions (a 0 in contract key tot.distortion.bounds), or raise "
                    "contract key tot.max_variables")
        return ("declare a 'tot:' block in the contract: a small tot.features list and "
                "per-column penalties under tot.distortion")

    def key(self, name: str) -> str:
        """How to refer to a setting in a message: a contract key or a CLI flag."""
        if self.source == "contract" or name == "eta":
            return f"contract key tot.{name}" + (" or --eta" if name == "eta" else "")
        if name == "distortion":
            return "--distortion, or declare tot.distortion in the contract"
        return f"the contract: declare a 'tot:' block with tot.{name}"


def _combined(matrices: Mapping[str, np.ndarray], combine: str) -> Any:
    def distortion(old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray]) -> np.ndarray:
        parts = [m[np.asarray(old[c], dtype=np.int64), np.asarray(new[c], dtype=np.int64)]
                 for c, m in matrices.items()]
        out = parts[0]
        for part in parts[1:]:
            out = np.maximum(out, part) if combine == "max" else out + part
        return np.asarray(out, dtype=float)

    distortion.__qualname__ = f"contract_distortion[{combine}]"
    return distortion


def tot_setting(contract: Contract, *, distortion: str = "safes-adult",
                discrimination: str = "additive", eta: float | None = None) -> TOTSetting:
    """The TOT setting of a release, from the contract's ``tot`` block or the CLI defaults.

    With a ``tot`` block the contract decides the columns, distortion and constraint (``eta``
    given here overrides the block's). Without one, the registered ``distortion`` is used on
    every non-protected, non-outcome column (the shipped Adult/COMPAS behaviour).
    """
    roles = contract.roles()
    spec = contract.tot
    protected, groups = constrained_protected(contract)
    if spec is None:
        # protected columns outside fairness.protected are neither constrained nor moved
        return TOTSetting(
            protected=protected, outcome=roles.outcome[0] if roles.outcome else "",
            features=tuple(a for a in contract.column_names
                           if a not in roles.protected and a not in roles.outcome),
            distortion=distortion, clist=(0.99, 1.99, 2.99), dlist=(0.1, 0.05, 0.0),
            discrimination=discrimination, eta=eta, max_variables=DEFAULT_MAX_VARIABLES,
            source="cli", groups=groups)
    moved = [*spec.features, roles.outcome[0]]
    matrices = {c: _penalties(contract, c) for c in moved}
    return TOTSetting(
        protected=protected, features=tuple(spec.features),
        outcome=roles.outcome[0], distortion=_combined(matrices, spec.distortion.combine),
        clist=tuple(spec.distortion.thresholds), dlist=tuple(spec.distortion.bounds),
        discrimination=spec.discrimination, eta=spec.eta if eta is None else eta,
        max_variables=spec.max_variables, source="contract",
        distortion_scope=spec.distortion_scope, groups=groups)


def preflight_tot(contract: Contract, setting: TOTSetting) -> int:
    """Check a TOT setting against the declared domain before any private read.

    Returns the bound on the program's variables. Raises ``ValueError`` naming the contract
    key (or CLI flag) to change: a registered distortion that reads a column TOT does not
    move, or a program larger than ``max_variables``.
    """
    from privfair.fair.tot import DISTORTIONS

    if setting.eta is None:
        raise ValueError("fairness_transform 'tot' needs eta, the discrimination bound "
                         f"(--eta 0.05, or {setting.key('eta')})")
    moved = [*setting.features, setting.outcome]
    sizes = {c: _size(contract, c) for c in [*setting.protected, *moved]}
    fn = DISTORTIONS.get(setting.distortion) if isinstance(setting.distortion, str) \
        else setting.distortion
    if fn is None:
        raise ValueError(f"distortion {setting.distortion!r} is not registered; expected one "
                         f"of {sorted(DISTORTIONS)}, or declare a 'tot:' block in the contract")
    n_d = math.prod(sizes[c] for c in setting.protected)
    n_xy = math.prod(sizes[c] for c in moved)
    allowed = _allowed_transitions(contract, setting, moved)
    bound = n_d * (allowed if allowed is not None else n_xy * n_xy)
    if bound > setting.max_variables:
        raise ValueError(
            f"TOT would have up to {bound:.3g} variables ({n_d} protected groups x {n_xy:,} "
            f"cells of {moved}), above max_variables={setting.max_variables:,}; "
            f"{setting.size_fix()}")
    probe = {c: np.zeros(1, dtype=np.int64) for c in moved}
    try:
        fn(probe, probe)
    except Exception as exc:  # a registered distortion names the column it lacks
        hint = next((f" (--distortion {name} fits this contract)" for name, other in
                     DISTORTIONS.items() if other is not fn and _fits(other, probe)), "")
        raise ValueError(f"TOT distortion {setting.distortion!r} does not fit contract "
                         f"{contract.name!r}: {str(exc).split(';')[0]}{hint}; change "
                         f"{setting.key('distortion')}") from None
    return bound


def _fits(fn: Any, probe: Mapping[str, np.ndarray]) -> bool:
    try:
        fn(probe, probe)
    except Exception:
        return False
    return True


def _allowed_transitions(contract: Contract, setting: TOTSetting, moved: list[str]
                         ) -> int | None:
    """Upper bound on allowed ``(x, y) -> (x~, y~)`` pairs, from the forbidden threshold.

    Penalties are >= 0, so under ``max`` or ``sum`` a transition is forbidden when any one
    column's penalty reaches the smallest threshold whose bound is 0.
    """
    spec = contract.tot
    if spec is None or setting.source != "contract":
        return None
    forbidden = [c for c, d in zip(setting.clist, setting.dlist, strict=True) if d == 0]
    if not forbidden:
        return None
    cut = min(forbidden)
    total = 1
    for col in moved:
        total *= int((_penalties(contract, col) < cut).sum())
    return total
