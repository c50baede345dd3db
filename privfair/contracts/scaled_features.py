"""Scaled model inputs from a data contract: min-max numbers, ordinal ranks and dummy columns.

The one-hot encoding of :mod:`privfair.contracts.model_features` is privfair's default. Xu
(2021, §9.5.1.1 for DPSGD-F; the same 45,222 × 40 Adult inputs in ch. 8) instead converts
categorical attributes to indicator vectors and normalises numerical attributes to [0, 1],
which gives 40 inputs for Adult. This module builds such inputs from public facts only:

* a numeric column is scaled by the range its contract declares (``lower``/``upper``, else
  the outermost finite bin edges) or by a range the caller declares, and clipped into it: the
  scaling never looks at the private rows (the paper's min-max over the data is replaced by
  the declared range, which for Adult's age, education and hours is the same range);
* an ordinal column (a categorical column with a declared order) is the rank of its label
  scaled to [0, 1];
* a categorical column gives one 0/1 input per listed indicator label; every other label
  (the reference, and labels that cannot occur in the data the setting is meant for) is all
  zeros.

:func:`xu2021_adult` is the dissertation's Adult setting (40 inputs). There is no intercept
input: the models add their own bias.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privfair.contracts.encoding import Encoded, PolicyTally, encode
from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import Contract
from privfair.core.errors import DomainError

#: Adult's education labels from lowest to highest: the public ``education-num`` code (1-16)
#: of the UCI file, which the contract drops as a duplicate of ``education``.
ADULT_EDUCATION_ORDER: tuple[str, ...] = (
    "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad",
    "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school",
    "Doctorate")


@dataclass(frozen=True)
class ScaledNumber:
    """A numeric column as ``clip((v - low) / (high - low), 0, 1)``; ``low < high`` public."""

    column: str
    low: float
    high: float


@dataclass(frozen=True)
class OrdinalRank:
    """A categorical column as the rank of its label in ``order``, over ``len(order) - 1``."""

    column: str
    order: tuple[str, ...]


@dataclass(frozen=True)
class Indicators:
    """A categorical column as one 0/1 input per label in ``labels`` (others all zero)."""

    column: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class ScaledFeatureEncoding:
    """The public map from raw rows to scaled model inputs (no intercept input).

    Attributes
    ----------
    numbers : tuple of ScaledNumber
    ranks : tuple of OrdinalRank
    indicators : tuple of Indicators
    outcome, positive, group : str
        The label column, its label coded 1, and the protected column of the groups.
    group_labels : tuple of str
        Group ``k`` is ``group_labels[k]``.
    name : str
        The setting's name (``"xu2021-adult"``), recorded with the encoding.
    """

    numbers: tuple[ScaledNumber, ...]
    ranks: tuple[OrdinalRank, ...]
    indicators: tuple[Indicators, ...]
    outcome: str
    positive: str
    group: str
    group_labels: tuple[str, ...]
    name: str = field(default="scaled")

    @classmethod
    def from_contract(cls, contract: Contract, *, outcome: str | None = None,
                      positive: str | None = None, group: str | None = None,
                      ranges: Mapping[str, tuple[float, float]] | None = None,
                      ranks: Mapping[str, Sequence[str]] | None = None,
                      indicators: Mapping[str, Sequence[str]] | None = None,
                      columns: Sequence[str] | None = None,
                      name: str = "scaled") -> ScaledFeatureEncoding:
        """Scaled encoding of ``contract``'s columns (all but outcome and group, or ``columns``).

        Parameters
        ----------
        contract : Contract
        outcome, positive, group : str, optional
            As :meth:`FeatureEncoding.from_contract`: the outcome role, its last label, the
            first protected column by default.
        ranges : mapping of str to (float, float), optional
            Public ``(low, high)`` scaling range of numeric columns; default the contract's
            ``lower``/``upper``, else its outermost finite bin edges.
        ranks : mapping of str to sequence of str, optional
            Categorical columns encoded by rank: every label of the column, lowest first.
        indicators : mapping of str to sequence of str, optional
            The indicator labels of categorical columns; default every label but the first
            declared one (the reference category).
        columns : sequence of str, optional
            The feature columns, in order; default every numeric column with bins or bounds
            and every categorical column, in contract order.
        name : str
            The setting's name.
        """
        # The label, its positive value and the groups are checked as the one-hot encoding
        # checks them.
        base = FeatureEncoding.from_contract(contract, outcome=outcome, positive=positive,
                                             group=group)
        outcome, positive, group = base.outcome, base.positive, base.group
        ranges, ranks, indicators = dict(ranges or {}), dict(ranks or {}), dict(indicators or {})
        for parameter, given in (("ranges", ranges), ("ranks", ranks),
                                 ("indicators", indicators)):
            unknown = sorted(set(given) - set(contract.column_names))
            if unknown:
                raise DomainError(f"{parameter}: {unknown} are not columns of contract "
                                  f"{contract.name!r}")
        if columns is None:
            columns = [spec.name for spec in contract.columns
                       if spec.name not in (outcome, group) and spec.type != "text"
                       and (spec.type != "numeric" or spec.bins is not None
                            or spec.name in ranges)]
        numbers, ordered, dummies = [], [], []
        for column in columns:
            if column in (outcome, group):
                raise DomainError(f"columns: {column!r} is the outcome or the group; expected "
                                  "feature columns")
            spec = contract.column(column)
            if spec.type == "numeric":
                low, high = ranges.get(column) or _declared_range(contract, column)
                if not (math.isfinite(low) and math.isfinite(high) and low < high):
                    raise DomainError(f"ranges: column {column!r} needs a finite range low < "
                                      f"high, got ({low}, {high})")
                numbers.append(ScaledNumber(column, float(low), float(high)))
                continue
            if spec.type == "text":
                raise DomainError(f"columns: {column!r} is a text column; the contract alone "
                                  "cannot encode it")
            labels = _labels(contract, column, "columns")
            if column in ranks:
                order = tuple(ranks[column])
                if sorted(order) != sorted(labels):
                    raise DomainError(f"ranks: the order of {column!r} must list each of its "
                                      f"labels once, {labels}")
                ordered.append(OrdinalRank(column, order))
                continue
            chosen = tuple(indicators[column]) if column in indicators else tuple(labels[1:])
            missing = [label for label in chosen if label not in labels]
            if missing or len(set(chosen)) != len(chosen) or not chosen:
                raise DomainError(f"indicators: {column!r} needs distinct labels of the column "
                                  f"{labels}, got {list(chosen)}")
            dummies.append(Indicators(column, chosen))
        if not (numbers or ordered or dummies):
            raise DomainError(f"contract {contract.name!r} leaves no encodable feature column")
        return cls(tuple(numbers), tuple(ordered), tuple(dummies), outcome, positive, group,
                   base.group_labels, name)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names of the inputs: numbers, ranks, then ``column=label`` indicators."""
        return (tuple(n.column for n in self.numbers) + tuple(r.column for r in self.ranks)
                + tuple(f"{d.column}={label}" for d in self.indicators for label in d.labels))

    @property
    def dimension(self) -> int:
        return len(self.numbers) + len(self.ranks) + sum(len(d.labels) for d in self.indicators)

    @property
    def row_l2_bound(self) -> float:
        """Public bound on ``||x||_2``: each number and rank is in [0, 1], each categorical
        column has at most one 1."""
        return math.sqrt(len(self.numbers) + len(self.ranks) + len(self.indicators))

    @property
    def feature_columns(self) -> tuple[str, ...]:
        return (tuple(n.column for n in self.numbers) + tuple(r.column for r in self.ranks)
                + tuple(d.column for d in self.indicators))

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the model reads: the features, the outcome and the group."""
        return (*self.feature_columns, self.outcome, self.group)

    def used_contract(self, contract: Contract) -> Contract:
        """``contract`` restricted to :attr:`columns`."""
        return contract.model_copy(update={
            "columns": tuple(contract.column(c) for c in dict.fromkeys(self.columns)),
            "drop": ()})

    def _encoded(self, frame: pd.DataFrame, contract: Contract, columns: Sequence[str], *,
                 tally: PolicyTally | None = None) -> Encoded:
        """The contract's codes of ``columns`` and the rows its policies keep, applied over
        every column the model reads when ``frame`` has them all (so :meth:`transform` and
        :meth:`labels_and_groups` keep the same rows), else over ``columns``."""
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DomainError(f"missing columns {missing}; the model needs {list(columns)}")
        used = list(dict.fromkeys(self.columns if all(c in frame.columns for c in self.columns)
                                  else columns))
        sub = contract.model_copy(update={
            "columns": tuple(contract.column(c) for c in used), "drop": ()})
        encoded = encode(frame[used], sub)
        if tally is not None:
            tally.update(encoded.tally)
        return encoded

    def transform(self, frame: pd.DataFrame, contract: Contract, *,
                  tally: PolicyTally | None = None) -> np.ndarray:
        """Inputs of the rows the contract's policies keep, float32 ``(rows, dimension)``,
        every entry in [0, 1]."""
        encoded = self._encoded(frame, contract, self.feature_columns, tally=tally)
        rows = int(encoded.keep.sum())
        x = np.zeros((rows, self.dimension), dtype=np.float32)
        j = 0
        for number in self.numbers:
            spec = contract.column(number.column)
            raw = pd.to_numeric(frame[number.column].astype(object), errors="coerce")
            values = raw.to_numpy(dtype=np.float64, na_value=np.nan)[encoded.keep]
            # A row a policy kept without a number (a null mapped to a bin) takes its bin's
            # middle: the encoder's code, never a statistic of the rows.
            gap = np.isnan(values)
            if gap.any():
                edges = np.asarray(spec.edges, dtype=np.float64)
                finite = np.clip(edges, number.low, number.high)
                middle = (finite[:-1] + finite[1:]) / 2
                values[gap] = middle[encoded.codes[number.column][gap]]
            x[:, j] = np.clip((values - number.low) / (number.high - number.low), 0.0, 1.0)
            j += 1
        for rank in self.ranks:
            labels = contract.labels(rank.column)
            position = np.array([rank.order.index(label) for label in labels], dtype=np.float64)
            x[:, j] = position[encoded.codes[rank.column]] / max(1, len(rank.order) - 1)
            j += 1
        for dummy in self.indicators:
            labels = contract.labels(dummy.column)
            slot = np.array([dummy.labels.index(label) if label in dummy.labels else -1
                             for label in labels], dtype=np.int64)[encoded.codes[dummy.column]]
            hit = slot >= 0
            x[np.flatnonzero(hit), j + slot[hit]] = 1.0
            j += len(dummy.labels)
        return x

    def labels_and_groups(self, frame: pd.DataFrame, contract: Contract
                          ) -> tuple[np.ndarray, np.ndarray]:
        """``(y, group)``: y in {0, 1} (1 = ``positive``), group codes in
        ``range(len(group_labels))``, for the rows :meth:`transform` keeps."""
        codes = self._encoded(frame, contract, [self.outcome, self.group]).codes
        positive = list(contract.labels(self.outcome)).index(self.positive)
        return ((codes[self.outcome] == positive).astype(np.float32),
                codes[self.group].astype(np.int64))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name,
                "encoding": "numbers min-max scaled by declared ranges, ordinal ranks, "
                            "indicator columns; no intercept",
                "numbers": [{"column": n.column, "low": n.low, "high": n.high}
                            for n in self.numbers],
                "ranks": [{"column": r.column, "order": list(r.order)} for r in self.ranks],
                "indicators": [{"column": d.column, "labels": list(d.labels)}
                               for d in self.indicators],
                "outcome": self.outcome, "positive": self.positive, "group": self.group,
                "group_labels": list(self.group_labels)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScaledFeatureEncoding:
        return cls(tuple(ScaledNumber(n["column"], float(n["low"]), float(n["high"]))
                         for n in data["numbers"]),
                   tuple(OrdinalRank(r["column"], tuple(r["order"])) for r in data["ranks"]),
                   tuple(Indicators(d["column"], tuple(d["labels"]))
                         for d in data["indicators"]),
                   data["outcome"], data["positive"], data["group"],
                   tuple(data["group_labels"]), data.get("name", "scaled"))


#: How :func:`xu2021_adult` picks each categorical column's reference (all-zero) label.
#: ``"sorted"``: the first label in sorted order, as ``pandas.get_dummies(drop_first=True)``
#: codes the labels (it sorts them); ``"declared"``: the first label the contract declares
#: (the UCI file's order).
XU2021_REFERENCES: tuple[str, ...] = ("sorted", "declared")


def xu2021_adult(contract: Contract, *, group: str = "sex",
                 reference: str = "sorted") -> ScaledFeatureEncoding:
    """Xu (2021) §9.5.1.1's Adult inputs (also ch. 8's 45,222 × 40): 40 scaled features.

    The dissertation prints the recipe (categorical attributes as indicator vectors, numbers
    normalised to [0, 1], sex protected, income the decision) and the count, 40, but not the
    list. The list here is the one that recipe gives with reference (drop-first) coding, as
    the same group's published fairness code encodes Adult and Dutch (its Dutch encoding gives
    the dissertation's 35 Dutch inputs), over the complete-case rows (no ``?``) the paper uses:

    * 5 numbers: age, capital-gain, capital-loss, hours-per-week scaled by the contract's
      declared ranges (capital amounts by their outermost finite bin edges, 0 to 10,000, as
      the contract declares no upper bound), and education as the rank of its label (the UCI
      file's public ``education-num``, which the contract drops as a duplicate);
    * 35 indicators: workclass 6 (``Never-worked`` only occurs with an unknown occupation, so
      never in complete-case rows), marital-status 6, occupation 13, relationship 5, race 4
      (each without its reference label, and without ``?``), and native-country 1
      (``United-States``, the group's US/non-US split).

    Parameters
    ----------
    contract : Contract
        The UCI Adult contract.
    group : str
        The protected column.
    reference : {"sorted", "declared"}
        Which label of each categorical column is the reference (all zeros). ``"sorted"``
        (the paper's setting): the first in sorted order, the label
        ``pandas.get_dummies(drop_first=True)`` drops (``Federal-gov``, ``Divorced``,
        ``Adm-clerical``, ``Husband``, ``Amer-Indian-Eskimo``). ``"declared"``: the first the
        contract declares (``Private``, ``Married-civ-spouse``, ``Tech-support``, ``Wife``,
        ``White``). Both give 40 inputs and the same linear span with an intercept; they differ
        for a model trained from w = 0 for few steps (ch. 9's SGD: 20 epochs at learning rate
        1/√T), whose fit depends on which label sits at zero. On balanced Adult the sorted
        reference reproduces Table 9.5's SGD and DPSGD − SGD cells (``benchmarks/reproduce``,
        section ``xu_dpsgd``).

    Rows with a label outside the indicators (the reference, ``?``, ``Never-worked``) encode
    as all zeros.
    """
    adult = ("age", "workclass", "education", "marital-status", "occupation", "relationship",
             "race", "capital-gain", "capital-loss", "hours-per-week", "native-country")
    if reference not in XU2021_REFERENCES:
        raise ValueError(f"reference: expected one of {XU2021_REFERENCES}, got {reference!r}")
    missing = [c for c in (*adult, group, "income") if c not in contract.column_names]
    if missing:
        raise DomainError(f"contract {contract.name!r} lacks Adult's columns {missing}; "
                          "xu2021_adult encodes the UCI Adult contract")

    def all_but_reference(column: str, *dropped: str) -> tuple[str, ...]:
        labels = [label for label in contract.labels(column) if label not in dropped]
        if reference == "sorted":
            kept = sorted(labels)[1:]
            # Indicators in the contract's order, whichever label is the reference.
            return tuple(label for label in labels if label in kept)
        return tuple(labels[1:])

    return ScaledFeatureEncoding.from_contract(
        contract, outcome="income", group=group, name=f"xu2021-adult-{reference}",
        columns=("age", "capital-gain", "capital-loss", "hours-per-week", "education",
                 "workclass", "marital-status", "occupation", "relationship", "race",
                 "native-country"),
        ranks={"education": ADULT_EDUCATION_ORDER},
        indicators={"workclass": all_but_reference("workclass", "Never-worked", "?"),
                    "marital-status": all_but_reference("marital-status"),
                    "occupation": all_but_reference("occupation", "?"),
                    "relationship": all_but_reference("relationship"),
                    "race": all_but_reference("race"),
                    "native-country": ("United-States",)})


def _declared_range(contract: Contract, column: str) -> tuple[float, float]:
    spec = contract.column(column)
    finite = [e for e in (spec.edges if spec.bins is not None else ()) if math.isfinite(e)]
    low = spec.lower if spec.lower is not None else (finite[0] if finite else -math.inf)
    high = spec.upper if spec.upper is not None else (finite[-1] if finite else math.inf)
    return float(low), float(high)


def _labels(contract: Contract, column: str, parameter: str) -> list[str]:
    try:
        return contract.labels(column)
    except DomainError as exc:
        raise DomainError(f"{parameter}: {exc}") from None
