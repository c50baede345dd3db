"""Model inputs from a data contract: one-hot features, a binary label and protected groups.

Every numeric column is one-hot encoded over the contract's bins and every categorical column
over its declared categories, so the encoding is fixed by the contract alone and each row has
exactly one 1 per feature column (plus a constant-1 intercept). That gives the functional
mechanism a public, data-independent L1 bound on a row, ``||x||_1 = n_blocks``, much tighter than
the dissertation's ``d`` (Xu 2021, §8.2 assumes only x in [0, 1]^d).

Columns that the contract alone cannot encode (text columns with released categories and
``dp_bins`` columns, whose labels come out of a release run) are left out and listed in
:attr:`FeatureEncoding.excluded`. The protected (group) column is never a feature: the model
decides without it, and ``predict`` does not need it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.encoding import PolicyTally, discretize
from privfair.contracts.schema import Contract
from privfair.core.errors import DomainError


@dataclass(frozen=True)
class FeatureEncoding:
    """The public map from raw rows to model inputs.

    Attributes
    ----------
    features : tuple of (str, tuple of str)
        Feature columns and their labels, in contract order.
    outcome : str
        The label column; ``y = 1`` means ``positive``.
    positive : str
        The outcome label coded 1.
    group : str
        The protected column that defines the groups; group ``k`` is ``group_labels[k]``.
    group_labels : tuple of str
        Labels of the group column.
    excluded : tuple of str
        Declared columns the contract alone cannot encode.
    """

    features: tuple[tuple[str, tuple[str, ...]], ...]
    outcome: str
    positive: str
    group: str
    group_labels: tuple[str, ...]
    excluded: tuple[str, ...] = field(default=())

    @classmethod
    def from_contract(cls, contract: Contract, *, outcome: str | None = None,
                      positive: str | None = None, group: str | None = None) -> FeatureEncoding:
        """Encoding of ``contract``: its outcome role (or ``outcome``) as the label, its first
        protected column (or ``group``) as the groups, every other encodable column a feature.

        ``positive`` defaults to the outcome's last declared label (Adult: ``">50K"``).
        """
        roles = contract.roles()
        if outcome is None:
            if len(roles.outcome) != 1:
                raise DomainError(f"outcome: contract {contract.name!r} declares "
                                  f"{len(roles.outcome)} outcome columns; name one with outcome=")
            outcome = roles.outcome[0]
        if group is None:
            if not roles.protected:
                raise DomainError(f"group: contract {contract.name!r} declares no protected "
                                  "column; name one with group=")
            group = roles.protected[0]
        if group == outcome:
            raise DomainError(f"group: {group!r} is the outcome; expected a protected column")
        outcome_labels = _labels(contract, outcome, "outcome")
        if len(outcome_labels) != 2:
            raise DomainError(f"outcome: column {outcome!r} has {len(outcome_labels)} labels; "
                              "expected a binary outcome")
        positive = outcome_labels[-1] if positive is None else positive
        if positive not in outcome_labels:
            raise DomainError(f"positive: {positive!r} is not a label of {outcome!r}; expected "
                              f"one of {list(outcome_labels)}")
        group_labels = _labels(contract, group, "group")
        features, excluded = [], []
        for spec in contract.columns:
            if spec.name in (outcome, group):
                continue
            if spec.type == "text" or (spec.type == "numeric" and spec.bins is None):
                excluded.append(spec.name)
                continue
            features.append((spec.name, tuple(contract.labels(spec.name))))
        if not features:
            raise DomainError(f"contract {contract.name!r} leaves no encodable feature column")
        return cls(tuple(features), outcome, positive, group, tuple(group_labels),
                   tuple(excluded))

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names of the model inputs: ``column=label`` for each one-hot slot, then the
        intercept."""
        return tuple(f"{name}={label}" for name, labels in self.features
                     for label in labels) + ("(intercept)",)

    @property
    def dimension(self) -> int:
        return sum(len(labels) for _, labels in self.features) + 1

    @property
    def row_l1_bound(self) -> int:
        """||x||_1 of every encoded row: one 1 per feature column and the intercept."""
        return len(self.features) + 1

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the model reads: the features, the outcome and the group."""
        return (*(name for name, _ in self.features), self.outcome, self.group)

    def used_contract(self, contract: Contract) -> Contract:
        """``contract`` restricted to :attr:`columns`: the cells of the touched-rows tally of
        :meth:`transform` (pass it to ``measure_policy_counts``)."""
        return contract.model_copy(update={
            "columns": tuple(contract.column(c) for c in dict.fromkeys(self.columns)),
            "drop": ()})

    def _codes(self, frame: pd.DataFrame, contract: Contract,
               columns: Sequence[str], *, tally: PolicyTally | None = None
               ) -> Mapping[str, np.ndarray]:
        """Codes of ``columns`` for the rows the contract's policies keep.

        The policies are applied over every column the model reads whenever all of them are
        in ``frame`` (training), so :meth:`transform` and :meth:`labels_and_groups` of one
        frame keep the same rows (issue 21.2: a value drops its row, it never raises);
        otherwise (``predict`` on features only) over ``columns``.
        """
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DomainError(f"missing columns {missing}; the model needs {list(columns)}")
        used = list(dict.fromkeys(self.columns if all(c in frame.columns for c in self.columns)
                                  else columns))
        specs = tuple(contract.column(c) for c in used)
        # The same contract restricted to the columns needed, so other columns may be absent.
        sub = contract.model_copy(update={"columns": specs, "drop": ()})
        return discretize(frame[used], sub, tally=tally)

    def transform(self, frame: pd.DataFrame, contract: Contract, *,
                  tally: PolicyTally | None = None) -> np.ndarray:
        """Encoded features, float32 of shape ``(rows kept, dimension)``, entries 0 or 1.

        ``tally`` receives the rows each policy touched (private; see
        :func:`privfair.release.policy_counts.measure_policy_counts`).
        """
        codes = self._codes(frame, contract, [name for name, _ in self.features], tally=tally)
        rows = len(codes[self.features[0][0]]) if self.features else len(frame)
        x = np.zeros((rows, self.dimension), dtype=np.float32)
        offset = 0
        for name, labels in self.features:
            x[np.arange(rows), offset + codes[name]] = 1.0
            offset += len(labels)
        x[:, -1] = 1.0
        return x

    def labels_and_groups(self, frame: pd.DataFrame, contract: Contract
                          ) -> tuple[np.ndarray, np.ndarray]:
        """``(y, group)``: y in {0, 1} (1 = ``positive``), group codes in
        ``range(len(group_labels))``."""
        codes = self._codes(frame, contract, [self.outcome, self.group])
        positive = list(contract.labels(self.outcome)).index(self.positive)
        return ((codes[self.outcome] == positive).astype(np.float32),
                codes[self.group].astype(np.int64))

    def to_dict(self) -> dict[str, Any]:
        return {"features": [{"column": n, "labels": list(ls)} for n, ls in self.features],
                "encoding": "one-hot over the contract's categories and bins, plus an intercept",
                "outcome": self.outcome, "positive": self.positive, "group": self.group,
                "group_labels": list(self.group_labels), "excluded": list(self.excluded)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureEncoding:
        return cls(tuple((f["column"], tuple(f["labels"])) for f in data["features"]),
                   data["outcome"], data["positive"], data["group"],
                   tuple(data["group_labels"]), tuple(data.get("excluded", ())))


def _labels(contract: Contract, column: str, parameter: str) -> list[str]:
    try:
        return contract.labels(column)
    except DomainError as exc:
        raise DomainError(f"{parameter}: {exc}") from None
