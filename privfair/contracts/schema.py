"""Data contracts: the owner's public declaration of a dataset, one YAML file per dataset.

This module is long on purpose: it is the one schema of a contract (pydantic models, their
validators and the resolved forms); split, a reader would have to chase one YAML key across files.

A contract fixes everything that must *not* come from the private data: the columns, their
ordered categories or bin edges, what to do with nulls and out-of-domain values, the attribute
roles used by the fair methods, and the lifetime privacy budget. It is parsed into pydantic
models; :func:`load_contract` turns every problem into a one-line
:class:`~privfair.core.errors.ContractError`.

File layout
-----------
.. code-block:: yaml

    name: adult
    dataset_id: uci-adult     # optional: keys the lifetime ledger (default: the name)
    registry_id: 0123456789abcdef0123456789abcdef  # optional: pins the privacy registry
    version: "1.0.0"
    description: UCI Adult, train + test.
    drop: [fnlwgt]                 # raw columns that are read past and never used
    columns:
      - name: sex
        type: categorical
        categories: [Female, Male]  # codes 0..k-1 in this order
        aliases: {F: Female}        # raw value -> declared category
        nulls: drop                 # or "as:<category>"
        out_of_domain: drop         # or "other:<category>"
        prior: [0.49, 0.51]         # optional public weights (spread merged rare categories)
      - name: age
        type: numeric
        integer: true               # values are whole numbers
        bins: [17, 22, 27, 90]      # edges, see below
        labels: [17-21, 22-26, 27-90]   # optional; generated when left out
        lower: 17                   # optional declared range, defaults to the outer edges
        upper: 90
        out_of_domain: clamp        # or drop / "other:<label>"
      - name: gender_text
        type: text
        open_domain:                                  # released with CatHist
          universe: {words: {alphabet: "abcdefghijklmnopqrstuvwxyz", max_length: 12}}
          tolerance: 0.9                              # or universe: {values: [word list]}
        out_of_domain: "other:(other)"                # open bucket appended to the release
    roles:
      protected: [sex]
      admissible: [age]
      outcome: [income]
      free: []                      # optional; unlisted columns are free
    budget: {epsilon: 1.0, delta: 1.0e-6}
    dialect:                        # optional: how a CSV file delimits its records
      delimiter: ","                #   (these are the defaults)
      quote: '"'
      line_terminator: lf           # lf ("\\n"), crlf ("\\r\\n") or cr ("\\r")
      multiline: false              # quoted fields may hold line breaks
      max_record_bytes: 65536       # optional; by default 4096 per field of the header

Bin convention
--------------
Edges ``e_0 < e_1 < ... < e_k`` (strictly increasing; ``-.inf``/``.inf`` allowed at the ends)
declare ``k`` bins. Bin ``i`` is the half-open interval ``[e_i, e_{i+1})`` for ``i < k-1``; the
last bin ``[e_{k-1}, e_k]`` is closed, so a finite top edge belongs to it. A value is in the
domain when it is a number in ``[lower, upper]`` (and a whole number when ``integer: true``).
With ``clamp``, numbers below ``lower`` or above ``upper`` go to the nearest bin.

Policies
--------
A release never refuses, stops or reports on a condition of the private values (issue 21.2):
every row is encoded or dropped. ``out_of_domain`` applies to values outside the declared
categories or range, and to values that are not numbers in a numeric column (text,
infinities under ``drop``/``other``); ``drop`` (the default) drops the row, ``clamp`` moves a
number to the nearest bin (a value that is not a number is dropped), ``other:<category>``
maps it to a declared category. ``nulls``: ``drop`` (the default) or ``as:<category>``. The
rows each policy touched are released only as noisy counts charged to the run.
``refuse`` is a deprecated alias of ``drop`` (``privfair contract check --data``, the owner's
local tool, still lists those rows). With
``integer: true``, ``[0, 1, 5000]`` declares the bins ``{0}`` and ``1..4999`` exactly, which is
how a point bin such as "capital-gain = 0" is written with strictly increasing edges.

Generated labels: for integer columns ``"a-b"`` (``"a"`` for one value, ``">=a"`` / ``"<=b"``
for open ends), otherwise interval notation ``"[a, b)"`` / ``"[a, b]"``.

Categorical values in YAML must be strings; plain integers are accepted and read as their
decimal text (``0`` -> ``"0"``), but YAML booleans and floats (``yes``, ``1.5``) are refused so
that ``yes``/``no`` categories are not silently turned into ``True``/``False``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from privfair.contracts.fields import PLAIN_DECIMAL, Delta, Epsilon, refuse_loose_numbers
from privfair.contracts.tot_settings import DistortionSpec, FairnessSpec, TOTSpec
from privfair.core.domain import Domain, Roles
from privfair.core.errors import ContractError, DomainError

__all__ = [
    "BudgetSpec",
    "CausalGraphSpec",
    "ColumnSpec",
    "Contract",
    "DialectSpec",
    "OpenDomainSpec",
    "UniverseSpec",
    "Policy",
    "RECORD_BYTES_PER_FIELD",
    "RolesSpec",
    "MAX_CONTRACT_BYTES",
    "load_contract",
    "nfc",
    "parse_contract",
]

OpenCategories = Mapping[str, Sequence[str]]


#: What ``normalize: strip`` removes at both ends of a raw value: ASCII whitespace. The
#: loader's SQL (``trim(x, STRIP_CHARS)``) and the encoder's text normalization use this set.
STRIP_CHARS = " \t\n\r\f\v"


class Policy(NamedTuple):
    """A parsed ``nulls`` or ``out_of_domain`` policy.

    Attributes
    ----------
    kind : {"drop", "clamp", "other", "as"}
        What to do (``refuse`` in a contract is read as ``drop``).
    category : str or None
        The declared category (or bin label) that receives the values, for ``other``/``as``.
    """

    kind: str
    category: str | None = None


class _Strict(BaseModel):
    # Unknown keys are refused (typos must not silently drop a declaration) and parsed
    # contracts are immutable.
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        return refuse_loose_numbers(cls, data)  # '1_0' is not 10 (issue 45.4)


def _as_category(value: Any, *, what: str) -> str:
    """Read one YAML scalar as a category string, refusing YAML's surprising conversions."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        raise ValueError(
            f"{what} must be strings; got the YAML {type(value).__name__} {value!r} "
            "(quote values such as yes, no, null or 1.5)"
        )
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} must be strings; got {type(value).__name__}")
    return value


class WordUniverseSpec(_Strict):
    """Every word over ``alphabet`` of ``min_length`` to ``max_length`` characters."""

    alphabet: str = Field(min_length=2)
    max_length: int = Field(ge=1, le=64)
    min_length: int = Field(1, ge=1)


class UniverseSpec(_Strict):
    """How CatHist draws values from outside the data: exactly one of ``values``, ``words``.

    Attributes
    ----------
    values : tuple of str, optional
        An enumerable universe (e.g. an English word list).
    words : WordUniverseSpec, optional
        A generated universe: all words over an alphabet within a length range, enumerated
        shortest first, then in the alphabet's order.
    """

    values: tuple[str, ...] | None = Field(None, min_length=1)
    words: WordUniverseSpec | None = None

    @field_validator("values", mode="before")
    @classmethod
    def _values_are_strings(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(_as_category(v, what="universe values") for v in value)
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> UniverseSpec:
        if (self.values is None) == (self.words is None):
            raise ValueError("universe: declare exactly one of 'values' (a list) or 'words' "
                             "({alphabet, max_length})")
        if self.words is not None:
            self.build()  # refuses an alphabet with repeats or an oversized universe
        return self

    def build(self) -> Any:
        """The :class:`~privfair.domains.cathist.Universe` this declares."""
        from privfair.domains.cathist import ValueListUniverse, WordUniverse

        if self.values is not None:
            return ValueListUniverse(self.values)
        assert self.words is not None
        return WordUniverse(alphabet=self.words.alphabet, max_length=self.words.max_length,
                            min_length=self.words.min_length)


class OpenDomainSpec(_Strict):
    """Declared universe of an open-domain (text) column, released with CatHist.

    Attributes
    ----------
    size : int, optional
        Number of possible values ``n`` (e.g. 1.71e5 English words). With a ``universe`` it
        is that universe's size (and, if given, must match it).
    tolerance : float
        ``rho_tol`` in (0, 1): the probability that no value from outside the active domain
        is released. Higher means a higher threshold.
    universe : UniverseSpec, optional
        Where values outside the data are drawn from. A release needs it; a contract that
        declares only ``size`` parses (drafts) but is refused at preflight.
    """

    size: int | None = Field(None, ge=1)
    tolerance: float = Field(gt=0.0, lt=1.0)
    universe: UniverseSpec | None = None

    @model_validator(mode="after")
    def _size_matches_universe(self) -> OpenDomainSpec:
        if self.universe is None:
            if self.size is None:
                raise ValueError("open_domain needs a 'universe' (values or words) or a 'size'")
            return self
        size = self.universe.build().size
        if self.size is not None and self.size != size:
            raise ValueError(f"size: {self.size} does not match the declared universe, which "
                             f"has {size} values; drop size or correct it")
        object.__setattr__(self, "size", size)
        return self


class ColumnSpec(_Strict):
    """One declared column.

    Attributes
    ----------
    name : str
        Column name in the raw data.
    type : {"categorical", "numeric", "text"}
        Categorical: a closed list of ``categories``. Numeric: binned by ``bins``.
        Text: an open domain whose categories are released with CatHist.
    categories : tuple of str, optional
        Ordered categories of a categorical column; codes are ``0 .. k-1`` in this order.
    aliases : dict of str to str
        Raw value -> declared category, applied before matching (categorical only).
    bins : tuple of float, optional
        Strictly increasing bin edges of a numeric column (see the module docstring).
    labels : tuple of str, optional
        Bin labels of a numeric column; generated from the edges when left out.
    lower, upper : float, optional
        Declared range of a numeric column; default to the outer edges.
    integer : bool
        Numeric values are whole numbers; a fractional value is out of domain.
    open_domain : OpenDomainSpec, optional
        Universe of a text column.
    dp_bins : int, optional
        Instead of ``bins``: this many bins whose inner edges are DP quantiles released by
        the first release (charged to its ledger); needs finite ``lower`` and ``upper``.
    out_of_domain : str
        ``"drop"`` (``"refuse"``: deprecated alias), ``"clamp"`` (numeric only) or
        ``"other:<category>"``.
    nulls : str
        ``"drop"`` (``"refuse"``: deprecated alias) or ``"as:<category>"``.
    description : str, optional
        Free text for people; shown in the release report and manifest.
    normalize : {"none", "strip"}, optional
        Text normalization of raw values before matching (and before CatHist counts them);
        defaults to the contract's ``normalize``. ``strip`` removes leading and trailing
        whitespace (:data:`STRIP_CHARS`).
    rename : str, optional
        The column's name in the released table (``name`` is the raw data's); roles and
        every other key still use ``name``.
    label : str, optional
        A human-readable title, shown with the description in the report and manifest.
    prior : tuple of float, optional
        Public weights of the declared categories (or bins), one each in declared order
        (e.g. shares from a census; any non-negative scale). Releases use them only to
        spread a bucket of rare categories merged for the noise back over its categories
        (uniformly without a prior); they never read the private data. Not for text or
        ``dp_bins`` columns, whose categories are not declared.
    """

    name: str = Field(min_length=1)
    type: Literal["categorical", "numeric", "text"]
    description: str | None = None
    categories: tuple[str, ...] | None = None
    aliases: dict[str, str] = Field(default_factory=dict)
    bins: tuple[float, ...] | None = None
    labels: tuple[str, ...] | None = None
    lower: float | None = None
    upper: float | None = None
    integer: bool = False
    open_domain: OpenDomainSpec | None = None
    dp_bins: int | None = Field(None, ge=2, le=1000)
    out_of_domain: str = "drop"
    nulls: str = "drop"
    normalize: Literal["none", "strip"] | None = None
    rename: str | None = Field(None, min_length=1)
    label: str | None = Field(None, min_length=1)
    prior: tuple[float, ...] | None = None

    @field_validator("categories", "labels", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [_as_category(v, what="categories and labels") for v in value]
        return value

    @field_validator("aliases", mode="before")
    @classmethod
    def _alias_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                _as_category(k, what="alias keys"): _as_category(v, what="alias targets")
                for k, v in value.items()
            }
        return value

    @field_validator("name", mode="before")
    @classmethod
    def _name_string(cls, value: Any) -> Any:
        return _as_category(value, what="column names") if value is not None else value

    @model_validator(mode="after")
    def _check(self) -> ColumnSpec:
        {"categorical": self._check_categorical, "numeric": self._check_numeric,
         "text": self._check_text}[self.type]()
        self._check_policies()
        self._check_prior()
        return self

    def _check_prior(self) -> None:
        if self.prior is None:
            return
        if self.type == "text" or self.dp_bins is not None:
            raise ValueError("prior: a text or dp_bins column has no declared categories to "
                             "weigh; remove the prior")
        k = len(self.declared_labels())
        if len(self.prior) != k:
            raise ValueError(f"prior: {len(self.prior)} weights for {k} "
                             f"{'categories' if self.type == 'categorical' else 'bins'}; "
                             "expected one weight each, in declared order")
        if not all(math.isfinite(w) and w >= 0 for w in self.prior) or sum(self.prior) <= 0:
            raise ValueError("prior: weights must be finite numbers >= 0, not all zero")

    def _forbid(self, *fields: str) -> None:
        for f in fields:
            value = getattr(self, f)
            if value not in (None, False, {}):
                raise ValueError(f"key {f!r} is not allowed for a {self.type} column")

    def _check_categorical(self) -> None:
        self._forbid("bins", "labels", "lower", "upper", "integer", "open_domain", "dp_bins")
        if self.categories is None:
            raise ValueError("a categorical column needs a 'categories' list")
        _check_labels(self.categories, what="categories")
        declared = {nfc(c) for c in self.categories}  # compared as the encoder matches
        raws: set[str] = set()
        for raw, target in self.aliases.items():
            if nfc(target) not in declared:
                raise ValueError(f"alias {raw!r} -> {target!r}: target is not a declared category")
            if nfc(raw) in declared:
                raise ValueError(
                    f"alias {raw!r} is itself a declared category (after Unicode NFC "
                    "normalisation); an alias must be a raw value that is not a category"
                )
            if nfc(raw) in raws:
                raise ValueError(f"alias {raw!r} is listed twice (after Unicode NFC "
                                 "normalisation)")
            raws.add(nfc(raw))

    def _check_numeric(self) -> None:
        self._forbid("categories", "aliases", "open_domain")
        if self.dp_bins is not None:
            self._forbid("bins", "labels")
            if self.lower is None or self.upper is None or not (
                    math.isfinite(self.lower) and math.isfinite(self.upper)
                    and self.lower < self.upper):
                raise ValueError("dp_bins needs finite declared 'lower' < 'upper' (the range "
                                 "the DP quantiles are searched in)")
            return
        if self.bins is None:
            raise ValueError("a numeric column needs a 'bins' list of edges, or 'dp_bins'")
        edges = self.bins
        if len(edges) < 2:
            raise ValueError(f"bins: {len(edges)} edge(s); expected at least 2 edges (one bin)")
        if any(math.isnan(e) for e in edges):
            raise ValueError("bins: edges must be numbers, not NaN")
        if any(math.isinf(e) for e in edges[1:-1]):
            raise ValueError("bins: only the first and last edge may be infinite")
        for i, (a, b) in enumerate(zip(edges, edges[1:], strict=False)):
            if not a < b:
                raise ValueError(
                    f"bins: edges must be strictly increasing; edge {i + 1} ({b:g}) is not "
                    f"greater than edge {i} ({a:g})"
                )
        lower = edges[0] if self.lower is None else self.lower
        upper = edges[-1] if self.upper is None else self.upper
        if not edges[0] <= lower <= upper <= edges[-1]:
            raise ValueError(
                f"lower/upper: [{lower:g}, {upper:g}] must lie inside the bin edges "
                f"[{edges[0]:g}, {edges[-1]:g}] with lower <= upper"
            )
        if self.labels is not None and len(self.labels) != len(edges) - 1:
            raise ValueError(
                f"labels: {len(self.labels)} labels for {len(edges) - 1} bins; expected one "
                "label per bin"
            )
        # Generating the labels also checks that every integer bin holds a whole number.
        generated = _generated_labels(edges, integer=self.integer)
        _check_labels(generated if self.labels is None else self.labels, what="labels")

    def _check_text(self) -> None:
        self._forbid("categories", "aliases", "bins", "labels", "lower", "upper", "integer",
                     "dp_bins")
        if self.open_domain is None:
            raise ValueError(
                "a text column needs 'open_domain: {universe: ..., tolerance: rho_tol}' (its "
                "categories are released with CatHist)"
            )

    def _check_policies(self) -> None:
        ood = _parse_policy(self.out_of_domain, allowed=("drop", "clamp", "other"),
                            key="out_of_domain")
        nulls = _parse_policy(self.nulls, allowed=("drop", "as"), key="nulls")
        if ood.kind == "clamp" and self.type != "numeric":
            raise ValueError(
                f"out_of_domain: clamp needs a numeric column; use drop or other:<category> "
                f"for a {self.type} column"
            )
        if self.type == "text":
            bucket = ood.category if ood.kind == "other" else None
            if nulls.kind == "as" and nulls.category != bucket:
                raise ValueError(
                    "nulls: a text column can only map nulls to its out_of_domain other bucket "
                    "(its other categories are not known before the CatHist release)"
                )
            return
        if self.dp_bins is not None:
            if ood.kind == "other" or nulls.kind == "as":
                raise ValueError("a dp_bins column has no bin labels before its release; use "
                                 "out_of_domain: drop or clamp, and nulls: drop")
            return
        known = set(self.declared_labels())
        for key, policy in (("out_of_domain", ood), ("nulls", nulls)):
            if policy.category is not None and policy.category not in known:
                raise ValueError(
                    f"{key}: {policy.category!r} is not a declared "
                    f"{'category' if self.type == 'categorical' else 'bin label'}"
                )

    # --- derived, public ------------------------------------------------------------------

    @property
    def out_of_domain_policy(self) -> Policy:
        """The parsed ``out_of_domain`` policy."""
        return _parse_policy(self.out_of_domain, allowed=("drop", "clamp", "other"),
                             key="out_of_domain")

    @property
    def null_policy(self) -> Policy:
        """The parsed ``nulls`` policy."""
        return _parse_policy(self.nulls, allowed=("drop", "as"), key="nulls")

    @property
    def edges(self) -> tuple[float, ...]:
        """Bin edges of a numeric column."""
        if self.bins is None:
            if self.dp_bins is not None:
                raise DomainError(f"column {self.name!r}: its dp_bins edges are released by a "
                                  "release run (DP quantiles); none are known yet")
            raise ContractError(f"column {self.name!r}: a {self.type} column has no bin edges")
        return tuple(self.bins)

    @property
    def bounds(self) -> tuple[float, float]:
        """Declared ``(lower, upper)`` range of a numeric column."""
        if self.bins is None and self.dp_bins is not None:
            if self.lower is None or self.upper is None:
                raise ContractError(f"column {self.name!r}: dp_bins need lower and upper")
            return (self.lower, self.upper)
        edges = self.edges
        return (edges[0] if self.lower is None else self.lower,
                edges[-1] if self.upper is None else self.upper)

    def declared_labels(self) -> list[str]:
        """Labels known from the contract alone (empty for a text column)."""
        if self.type == "categorical":
            return list(self.categories or [])
        if self.type == "numeric":
            if self.labels is not None:
                return list(self.labels)
            return _generated_labels(self.edges, integer=self.integer)
        return []

    def open_bucket(self) -> str | None:
        """The ``other`` bucket of a text column, appended after its released categories."""
        ood = self.out_of_domain_policy
        return ood.category if self.type == "text" and ood.kind == "other" else None


class RolesSpec(_Strict):
    """Attribute roles. Columns not listed anywhere are free."""

    protected: tuple[str, ...] = ()
    admissible: tuple[str, ...] = ()
    outcome: tuple[str, ...] = ()
    free: tuple[str, ...] = ()


class CausalGraphSpec(_Strict):
    """A causal DAG over the declared columns, declared by the publisher (CFGAN's graph).

    ``edges`` are directed ``[parent, child]`` pairs; ``undirected`` pairs are oriented by the
    public constraints (protected attributes exogenous, the outcome a sink) when a release
    uses the graph. Columns in no edge are isolated nodes.
    """

    edges: tuple[tuple[str, str], ...] = ()
    undirected: tuple[tuple[str, str], ...] = ()

    def as_mapping(self) -> dict[str, Any]:
        return {"edges": [list(e) for e in self.edges],
                "undirected": [list(e) for e in self.undirected]}


#: A record's default byte bound per field of the header (:meth:`DialectSpec.record_limit`):
#: ample for a category, a number or a short text, and it keeps the lines a multiline quote
#: left open can reach few.
RECORD_BYTES_PER_FIELD = 4096

#: The line terminators a contract's CSV dialect can declare, by name.
LINE_TERMINATORS = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


class DialectSpec(_Strict):
    """How a CSV data file delimits its records: the unit of privacy of a CSV source.

    A record is one line, ended by ``line_terminator`` (or by the end of the file); with
    ``multiline`` a quoted field may hold line breaks: a line whose quote is left open runs
    on to the first terminator outside quotes, and those lines are one record if it comes
    within ``max_record_bytes`` and they parse as one row; otherwise the opening line alone
    is one record (malformed) and the next line starts the next record, so a quote left
    open costs one line, never the lines after it. A record that does not parse as exactly
    one row of the header's fields (a field too many or too few, a quote left open, a stray
    ``\\r``/``\\n``, more than ``max_record_bytes`` bytes) is dropped and counted among the
    noisy policy counts (:mod:`privfair.contracts.csv_source`). The first line is the header.
    Text is UTF-8; bytes that are not are one value out of the column's domain.

    ``max_record_bytes`` left out is :data:`RECORD_BYTES_PER_FIELD` times the header's
    fields (the file's schema: public), :meth:`record_limit`.
    """

    delimiter: str = ","
    quote: str = '"'
    line_terminator: Literal["\n", "\r\n", "\r"] = "\n"
    multiline: bool = False
    max_record_bytes: int | None = Field(default=None, ge=64, le=256 * 1_048_576)

    def record_limit(self, fields: int) -> int:
        """The most bytes a record of ``fields`` fields may hold (its terminator aside): the
        declared ``max_record_bytes``, else :data:`RECORD_BYTES_PER_FIELD` per field."""
        if self.max_record_bytes is not None:
            return self.max_record_bytes
        return max(64, RECORD_BYTES_PER_FIELD * fields)

    @field_validator("line_terminator", mode="before")
    @classmethod
    def _terminator_name(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in LINE_TERMINATORS:
            return LINE_TERMINATORS[value.lower()]
        if value not in LINE_TERMINATORS.values():
            raise ValueError(f"{value!r}; expected one of {', '.join(LINE_TERMINATORS)}")
        return value

    @field_validator("delimiter", "quote")
    @classmethod
    def _one_character(cls, value: str) -> str:
        if len(value) != 1 or not value.isascii() or value in "\r\n" or value.isalnum():
            raise ValueError(f"{value!r}; expected one ASCII character that is not a letter, "
                             "a digit or a line break")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> DialectSpec:
        if self.delimiter == self.quote:
            raise ValueError("delimiter and quote must differ")
        return self


#: The dialect of a contract that declares none.
DEFAULT_DIALECT = DialectSpec()


def _cycle(edges: Sequence[tuple[str, str]]) -> list[str]:
    """A directed cycle of ``edges`` (its nodes, the first repeated last), or []."""
    children: dict[str, list[str]] = {}
    for parent, child in edges:
        children.setdefault(parent, []).append(child)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for child in children.get(node, ()):
            if state.get(child) == 1:
                full = [*path, node]
                return [*full[full.index(child):], child]
            if child not in state:
                found = visit(child, [*path, node])
                if found:
                    return found
        state[node] = 2
        return []

    for start in list(children):
        if start not in state:
            found = visit(start, [])
            if found:
                return found
    return []


class BudgetSpec(_Strict):
    """Lifetime privacy budget of the dataset, in (epsilon, delta)-DP: the bounds of ``ledger
    raise`` (a budget outside them is a typo, and its accounting overflows: issue 36)."""

    epsilon: Epsilon
    delta: Delta


class Contract(_Strict):
    """A parsed data contract. Build it with :func:`load_contract` or :func:`parse_contract`."""

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    # The dataset's stable identity: it keys the lifetime privacy ledger (the registry), so a
    # renamed contract or a new release folder still draws on the same budget. Default: name.
    dataset_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
    # The privacy registry that holds the dataset's ledger (its id, written by `contract
    # draft`): every reservation refuses another registry, so one dataset never has two
    # budgets. Optional: a contract without one is not pinned.
    registry_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    description: str = ""
    columns: tuple[ColumnSpec, ...] = Field(min_length=1)
    drop: tuple[str, ...] = ()
    # Stored as ``role_spec`` (YAML key ``roles``) so that ``roles()`` can return a
    # :class:`~privfair.core.domain.Roles` as the rest of the library expects.
    role_spec: RolesSpec = Field(default_factory=RolesSpec, alias="roles")
    budget: BudgetSpec
    # Default text normalization of every column (see ColumnSpec.normalize).
    normalize: Literal["none", "strip"] = "none"
    # False in a draft written by `privfair contract draft` until the publisher has reviewed
    # the domains it copied from data; `contract check` warns while it is False.
    reviewed: bool | None = None
    # TOT's setting for this dataset (privfair.contracts.tot_settings); optional.
    tot: TOTSpec | None = None
    # Which protected attributes TOT and the fair GANs constrain, and how they form groups
    # (privfair.contracts.tot_settings.FairnessSpec); optional.
    fairness: FairnessSpec | None = None
    # A causal DAG over the columns (CFGAN); checked against the domain when a release uses it.
    causal_graph: CausalGraphSpec | None = None
    # The publisher's public guess of the row count (issue 34). Only the plan and --dry-run
    # use it, to say how many pairs the small-n rule would let through; a release decides on
    # its noisy total, never on this.
    expected_rows: int | None = Field(None, ge=1)
    # How a CSV data file delimits its records (None: :data:`DEFAULT_DIALECT`).
    dialect: DialectSpec | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # `version: 1` and `version: 1.2` are natural YAML; keep them as text.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> Contract:
        names = [c.name for c in self.columns]
        counts = Counter(nfc(n) for n in names)  # "é" composed or not is one name
        dupes = sorted({n for n in names if counts[nfc(n)] > 1})
        if dupes:
            raise ValueError(f"columns: names {dupes} are declared more than once (compared "
                             "after Unicode NFC normalisation)")
        if len(set(self.drop)) != len(self.drop):
            raise ValueError("drop: a column is listed twice")
        both = sorted(set(self.drop) & set(names))
        if both:
            raise ValueError(f"drop: {both} are also declared under columns; pick one")
        self._check_roles(set(names))
        self._check_normalized()
        if self.causal_graph is not None:
            pairs = self.causal_graph.edges + self.causal_graph.undirected
            unknown = sorted({n for pair in pairs for n in pair} - set(names))
            if unknown:
                raise ValueError(f"causal_graph: {unknown} are not declared columns; expected "
                                 f"edges between {names}")
            cycle = _cycle(self.causal_graph.edges)
            if cycle:
                raise ValueError(f"causal_graph: the edges form a cycle {' -> '.join(cycle)}; "
                                 "expected a DAG")
        from privfair.contracts.tot_settings import check_fairness_spec, check_tot_spec

        check_tot_spec(self)
        check_fairness_spec(self)
        released = [c.rename or c.name for c in self.columns]
        clash = sorted({n for n in released if released.count(n) > 1})
        if clash:
            raise ValueError(f"columns: released names {clash} are used more than once; "
                             "change a 'rename'")
        return self

    @property
    def csv_dialect(self) -> DialectSpec:
        """The declared CSV dialect, or the default one."""
        return self.dialect if self.dialect is not None else DEFAULT_DIALECT

    def released_names(self) -> dict[str, str]:
        """Raw column name -> its name in the released table (``rename`` or ``name``)."""
        return {c.name: c.rename or c.name for c in self.columns}

    def column_notes(self) -> list[dict[str, Any]]:
        """Public per-column notes for the manifest and report: names, label, description."""
        return [{"name": c.name, "released_as": c.rename or c.name, "type": c.type,
                 "label": c.label, "description": c.description} for c in self.columns]

    def normalization(self, column: str) -> str:
        """The text normalization (``"none"`` or ``"strip"``) that applies to ``column``."""
        spec = self.column(column)
        return spec.normalize if spec.normalize is not None else self.normalize

    def _check_normalized(self) -> None:
        for spec in self.columns:
            if self.normalization(spec.name) != "strip":
                continue
            for value in [*(spec.categories or ()), *spec.aliases]:
                if value != value.strip(STRIP_CHARS):
                    raise ValueError(
                        f"column {spec.name!r}: {value!r} has leading or trailing whitespace, "
                        "which normalize: strip removes from raw values; write it stripped")

    def _check_roles(self, names: set[str]) -> None:
        lists = {k: getattr(self.role_spec, k) for k in ("protected", "admissible", "outcome", "free")}
        for role, members in lists.items():
            if len(set(members)) != len(members):
                raise ValueError(f"roles.{role}: a column is listed twice")
            unknown = [m for m in members if m not in names]
            if unknown:
                dropped = [m for m in unknown if m in self.drop]
                hint = f" ({dropped} are dropped)" if dropped else ""
                raise ValueError(
                    f"roles.{role}: {unknown} are not declared columns{hint}; expected names "
                    "from 'columns'"
                )
        keys = list(lists)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                overlap = sorted(set(lists[a]) & set(lists[b]))
                if overlap:
                    raise ValueError(
                        f"roles: {overlap} are both {a} and {b}; the roles must not overlap"
                    )
        if lists["outcome"] and not lists["admissible"]:
            raise ValueError(
                "roles: an outcome is declared but no admissible attribute; a justifiably fair "
                "release is impossible (declare at least one admissible column)"
            )

    # --- public API -------------------------------------------------------------------------

    @property
    def column_names(self) -> tuple[str, ...]:
        """Declared column names, in declared order (the order of every code table)."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> ColumnSpec:
        """The declaration of column ``name``."""
        for c in self.columns:
            if c.name == name:
                return c
        raise DomainError(
            f"column {name!r} is not declared in contract {self.name!r}; expected one of "
            f"{list(self.column_names)}"
        )

    def priors(self) -> dict[str, tuple[float, ...]]:
        """Declared public prior weights, by column (only columns that declare one)."""
        return {c.name: c.prior for c in self.columns if c.prior is not None}

    def labels(self, column: str, *, open_categories: OpenCategories | None = None) -> list[str]:
        """Ordered labels of ``column``; code ``i`` means ``labels[i]``.

        Parameters
        ----------
        column : str
            A declared column.
        open_categories : mapping of str to sequence of str, optional
            Released categories of text (open-domain) columns, e.g.
            ``{"gender": cathist_result.categories}``. The column's ``other`` bucket, if
            declared, is appended when not already released.
        """
        spec = self.column(column)
        if spec.type != "text":
            return spec.declared_labels()
        released = _released(self, spec, open_categories)
        bucket = spec.open_bucket()
        if bucket is not None and bucket not in released:
            released.append(bucket)
        if not released:
            raise DomainError(
                f"column {column!r}: CatHist released no categories and no out_of_domain other "
                "bucket is declared; expected at least one category"
            )
        return released

    def domain(self, *, open_categories: OpenCategories | None = None) -> Domain:
        """The declared :class:`~privfair.core.domain.Domain` (sizes from the contract alone).

        Raises
        ------
        DomainError
            If a text column has no released categories in ``open_categories``.
        """
        _check_open_keys(self, open_categories)
        return Domain(self.column_names,
                      tuple(len(self.labels(c, open_categories=open_categories))
                            for c in self.column_names))

    def roles(self) -> Roles:
        """Protected/admissible/outcome roles as a :class:`~privfair.core.domain.Roles`.

        The declared block itself, with its optional ``free`` list, is :attr:`role_spec`.
        """
        spec = self.role_spec
        return Roles(tuple(spec.protected), tuple(spec.admissible), tuple(spec.outcome))

    def free_columns(self) -> tuple[str, ...]:
        """Columns with no protected/admissible/outcome role, in declared order."""
        spec = self.role_spec
        used = set(spec.protected) | set(spec.admissible) | set(spec.outcome)
        return tuple(c for c in self.column_names if c not in used)

    @property
    def unresolved_columns(self) -> list[str]:
        """Columns whose domain a release must first publish with DP: text and dp_bins."""
        return [c.name for c in self.columns if c.type == "text" or c.dp_bins is not None]

    def with_released_bins(self, released: Mapping[str, Sequence[float]]) -> Contract:
        """This contract with each ``dp_bins`` column given its released (DP) bin edges."""
        if all(c.dp_bins is None for c in self.columns):
            return self  # nothing to resolve (frozen, so sharing it is safe); no YAML round trip
        raw = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        for column in raw["columns"]:
            if column.get("dp_bins") is None:
                continue
            if column["name"] not in released:
                raise ContractError(f"column {column['name']!r}: no released bin edges")
            column.pop("dp_bins")
            column["bins"] = [float(e) for e in released[column["name"]]]
        return parse_contract(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                              source=f"{self.name} (released bins)")

    def with_released_categories(self, released: Mapping[str, Sequence[str]]) -> Contract:
        """This contract with each open-domain text column turned categorical.

        ``released`` maps a text column to the categories CatHist released for it (post-DP,
        so public); the column's declared "other" bucket is appended after them, and values
        not released go there. The result is what every later stage of a release uses.
        """
        if all(c.type != "text" for c in self.columns):
            return self  # nothing to resolve (frozen, so sharing it is safe); no YAML round trip
        raw = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        for column in raw["columns"]:
            name = column["name"]
            if column["type"] != "text":
                continue
            if name not in released:
                raise ContractError(f"column {name!r}: no released categories were given")
            spec = self.column(name)
            other = spec.open_bucket()
            categories = [c for c in released[name] if c != other]
            if other is not None:
                categories.append(other)
            if not categories:
                raise ContractError(f"column {name!r}: CatHist released no category and no "
                                    "'other' bucket is declared")
            column.pop("open_domain", None)
            column.update(type="categorical", categories=categories)
        return parse_contract(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True),
                              source=f"{self.name} (released categories)")

    def fingerprint(self) -> str:
        """sha256 of a canonical JSON dump of the parsed contract.

        Comments, key order and YAML spelling do not change it; any declared value does.
        """
        dump = self.model_dump(mode="python", by_alias=True)
        for key in ("dataset_id", "registry_id"):
            if dump.get(key) is None:  # contracts without one keep their fingerprint
                dump.pop(key, None)
        # Likewise for keys added later, left at their defaults.
        for key, default in (("normalize", "none"), ("reviewed", None), ("tot", None),
                             ("causal_graph", None), ("expected_rows", None),
                             ("dialect", None), ("fairness", None)):
            if dump.get(key, default) == default:
                dump.pop(key, None)
        if dump.get("tot") and dump["tot"].get("distortion_scope") == "per_group":
            del dump["tot"]["distortion_scope"]  # added later; its default
        for column in dump["columns"]:
            for key in ("normalize", "rename", "label", "prior"):
                if column.get(key) is None:
                    column.pop(key, None)
            # ``drop`` and its deprecated alias ``refuse`` are one declaration; a contract
            # keeps the fingerprint it had when the policy was spelled ``refuse``.
            for key in ("out_of_domain", "nulls"):
                if str(column.get(key, "")).strip() == "drop":
                    column[key] = "refuse"
        text = json.dumps(dump, sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False, allow_nan=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parse_policy(text: str, *, allowed: tuple[str, ...], key: str) -> Policy:
    head, sep, tail = text.partition(":")
    head = head.strip()
    if head in ("other", "as"):
        if head not in allowed:
            raise ValueError(f"{key}: {text!r}; expected one of {_policy_forms(allowed)}")
        if not sep or not tail.strip():
            raise ValueError(f"{key}: {head!r} must name a category, e.g. '{head}:<category>'")
        return Policy(head, tail.strip())
    if head == "refuse" and "drop" in allowed and not sep:
        return Policy("drop")  # deprecated alias: a release drops the row (issue 21.2)
    if sep or head not in allowed:
        raise ValueError(f"{key}: {text!r}; expected one of {_policy_forms(allowed)}")
    return Policy(head)


def _policy_forms(allowed: tuple[str, ...]) -> str:
    return ", ".join(f"{a}:<category>" if a in ("other", "as") else a for a in allowed)


def nfc(text: str) -> str:
    """``text`` in Unicode normal form C: how categories are compared (issue 45.4: ``"é"``
    and ``"e\u0301"`` look the same and are one category)."""
    return unicodedata.normalize("NFC", text)


def _check_labels(labels: Sequence[str], *, what: str) -> None:
    if not labels:
        raise ValueError(f"{what}: the list is empty; expected at least one")
    if any(not lab for lab in labels):
        raise ValueError(f"{what}: empty strings are not allowed")
    seen: dict[str, str] = {}
    for lab in labels:
        key = nfc(lab)
        if key in seen:
            same = "" if seen[key] == lab else f" (as {seen[key]!r}, the same after Unicode " \
                                                 "NFC normalisation)"
            raise ValueError(f"{what}: {lab!r} is listed twice{same}")
        seen[key] = lab


def _fmt_edge(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"


def _generated_labels(edges: Sequence[float], *, integer: bool) -> list[str]:
    """Labels for bins ``[e_i, e_{i+1})`` (last one closed); see the module docstring."""
    k = len(edges) - 1
    labels: list[str] = []
    for i in range(k):
        a, b = edges[i], edges[i + 1]
        last = i == k - 1
        if not integer:
            labels.append(f"[{_fmt_edge(a)}, {_fmt_edge(b)}{']' if last else ')'}")
            continue
        lo = None if math.isinf(a) else math.ceil(a)
        hi = None if math.isinf(b) else (math.floor(b) if last else math.ceil(b) - 1)
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(
                f"bins: bin {i} [{a:g}, {b:g}{']' if last else ')'} holds no whole number but "
                "the column is integer"
            )
        if lo is None and hi is None:
            labels.append("any")
        elif lo is None:
            labels.append(f"<={hi}")
        elif hi is None:
            labels.append(f">={lo}")
        else:
            labels.append(str(lo) if lo == hi else f"{lo}-{hi}")
    return labels


def _released(contract: Contract, spec: ColumnSpec, open_categories: OpenCategories | None
              ) -> list[str]:
    if open_categories is None or spec.name not in open_categories:
        raise DomainError(
            f"column {spec.name!r} is an open-domain text column with no released categories; "
            f"release them with CatHist and pass open_categories={{{spec.name!r}: "
            "result.categories}"
        )
    values = open_categories[spec.name]
    if isinstance(values, str):
        raise DomainError(f"open_categories[{spec.name!r}]: expected a list of strings, got a str")
    released = [str(v) for v in values]
    if len(set(released)) != len(released):
        raise DomainError(f"open_categories[{spec.name!r}]: categories must be unique")
    return released


def _check_open_keys(contract: Contract, open_categories: OpenCategories | None) -> None:
    if not open_categories:
        return
    for key in open_categories:
        spec = contract.column(key)
        if spec.type != "text":
            raise DomainError(
                f"open_categories[{key!r}]: column is {spec.type}; only text (open-domain) "
                "columns take released categories"
            )


# --- YAML reading --------------------------------------------------------------------------


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int) -> None:
        super().__init__(key, line)
        self.key = key
        self.line = line


class _OddNumber(Exception):
    """A number written so that people and PyYAML may read it differently (``1_0``, ``1:30``,
    ``010``, ``0x0A``, ``0b11``) or that is not a number (``.nan``) or overflows
    (``1e400``). ``path`` is filled in by the mappings and lists it is found in."""

    def __init__(self, text: str, line: int, node: yaml.Node) -> None:
        super().__init__(text, line)
        self.text = text
        self.line = line
        self.node = node
        self.path: list[Any] = []


class _ContractLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and reads ``1e-6``/``2.94e10`` as floats.

    PyYAML follows YAML 1.1, where a float needs a dot and a signed exponent, so ``1e-6`` would
    be read as a string; contracts are written by people, so we accept the YAML 1.2 spelling.
    """


_ContractLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        except TypeError:
            continue  # unhashable key: let PyYAML report it
    try:
        return loader.construct_mapping(node, deep=True)
    except _OddNumber as odd:  # name the key it sits under (issue 45.4)
        _locate(odd, node)
        raise


def _construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> list[Any]:
    try:
        return loader.construct_sequence(node, deep=True)
    except _OddNumber as odd:
        _locate(odd, node)
        raise


def _locate(odd: _OddNumber, node: yaml.Node) -> None:
    """Prepend to ``odd.path`` the key (or index) of ``node``'s child that holds it."""
    pairs = (node.value if isinstance(node, yaml.MappingNode)
             else list(enumerate(node.value)))
    for key, child in pairs:
        if _holds(child, odd.node):
            label = key.value if isinstance(key, yaml.ScalarNode) else key
            odd.path.insert(0, label)
            return


def _holds(node: Any, target: yaml.Node) -> bool:
    if node is target:
        return True
    if isinstance(node, yaml.MappingNode):
        return any(_holds(k, target) or _holds(v, target) for k, v in node.value)
    if isinstance(node, yaml.SequenceNode):
        return any(_holds(v, target) for v in node.value)
    return False


_ContractLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_ContractLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
                                _construct_sequence)

#: A contract's whole number: digits, no leading zero (YAML 1.1 reads 010 as octal 8; the
#: YAML resolver already took any number with a point or exponent as a float).
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
#: A contract's decimal: digits, an optional point and exponent, or a bin's open end.
_PLAIN_FLOAT = re.compile(PLAIN_DECIMAL.pattern + r"|[-+]?\.(?:inf|Inf|INF)")


def _construct_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    # YAML 1.1 reads 1_0 as 10, 1:30 as 90, 010 as 8, 0x0A as 10 and 0b11 as 3: a contract's
    # numbers are plain decimals (issue 36, 45.4); a budget of 1e400 broke the accounting.
    text = str(node.value)
    plain = _PLAIN_INT if node.tag.endswith(":int") else _PLAIN_FLOAT
    if not plain.fullmatch(text):
        raise _OddNumber(text, node.start_mark.line + 1, node)
    if node.tag.endswith(":int"):
        return int(text)  # plain digits: no base, separator or sexagesimal left to read
    value = loader.construct_yaml_float(node)
    # .inf is a bin's open end, spelt so; a NaN, or a finite spelling that overflows, is not
    if math.isnan(value) or (math.isinf(value) and "inf" not in text.lower()):
        raise _OddNumber(text, node.start_mark.line + 1, node)
    return value


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _ContractLoader.add_constructor(_tag, _construct_number)


if getattr(yaml, "__with_libyaml__", False):
    class _ContractCLoader(yaml.CSafeLoader):
        """:class:`_ContractLoader` on libyaml's parser (the same resolvers and constructors
        in Python over the same events; several times faster on a wide contract). A document
        it refuses is parsed again by :class:`_ContractLoader`, whose error is the one
        reported."""

    _ContractCLoader.yaml_implicit_resolvers = _ContractLoader.yaml_implicit_resolvers
    _ContractCLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                     _construct_mapping)
    _ContractCLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
                                     _construct_sequence)
    for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        _ContractCLoader.add_constructor(_tag, _construct_number)
    _FAST_LOADER: type | None = _ContractCLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _FAST_LOADER = None


#: The most values a contract's YAML may hold once its aliases are expanded: a contract of
#: a few thousand columns holds well under this; an alias bomb (each anchor nine times the
#: one before) holds billions and took 17 s of CPU to refuse (issue 45, fresh battery).
MAX_EXPANDED_VALUES = 1_000_000


class _AliasBomb(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


def _expanded_values(root: yaml.Node) -> int:
    """How many nodes ``root`` holds with every alias expanded (each shared node counted as
    often as it is reached), computed once per node, capped far above the limit."""
    memo: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in memo:
            continue
        kids: list[yaml.Node] = (
            [k for pair in node.value for k in pair] if isinstance(node, yaml.MappingNode)
            else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if ready:
            memo[id(node)] = min(1 + sum(memo[id(k)] for k in kids), 10**15)
        else:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
    return memo[id(root)]


def _check_aliases(text: str) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_EXPANDED_VALUES`, before any
    object is built (an alias bomb)."""
    if "*" not in text:
        return
    loader = _FAST_LOADER or _ContractLoader
    try:
        root = yaml.compose(text, Loader=loader)  # noqa: S506 - nodes only, nothing built
    except yaml.YAMLError:
        return  # the loader reports it in its usual words
    if root is not None:
        count = _expanded_values(root)
        if count > MAX_EXPANDED_VALUES:
            raise _AliasBomb(count)


def _load_yaml(text: str) -> Any:
    _check_aliases(text)
    if _FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a SafeLoader subclass
        except (yaml.YAMLError, _DuplicateKey, _OddNumber):
            pass  # the pure-Python loader below gives the error its usual wording
    return yaml.load(text, Loader=_ContractLoader)  # noqa: S506 - a SafeLoader subclass

# Sub-models reached by a validation error location, to list the allowed keys.
_MODEL_AT: dict[tuple[str, ...], type[BaseModel]] = {
    (): Contract,
    ("columns", "*"): ColumnSpec,
    ("columns", "*", "open_domain"): OpenDomainSpec,
    ("columns", "*", "open_domain", "universe"): UniverseSpec,
    ("columns", "*", "open_domain", "universe", "words"): WordUniverseSpec,
    ("roles",): RolesSpec,
    ("budget",): BudgetSpec,
    ("tot",): TOTSpec,
    ("tot", "distortion"): DistortionSpec,
    ("fairness",): FairnessSpec,
}


def _path_text(loc: Sequence[Any]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int) and parts:
            parts[-1] = f"{parts[-1]}[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


def _loc_text(loc: tuple[Any, ...], data: Any) -> str:
    """``columns[3].bins`` -> ``column 'age' (columns[3]).bins`` when the name is known."""
    if len(loc) >= 2 and loc[0] == "columns" and isinstance(loc[1], int):
        try:
            name = data["columns"][loc[1]]["name"]
        except (KeyError, IndexError, TypeError):
            name = None
        if isinstance(name, str):
            rest = _path_text(loc[2:])
            return f"column {name!r} (columns[{loc[1]}])" + (f".{rest}" if rest else "")
    return _path_text(loc)


def _format_error(err: Mapping[str, Any], data: Any) -> str:
    loc = tuple(err.get("loc", ()))
    if err["type"] == "extra_forbidden":
        parent = loc[:-1]
        pattern = tuple("*" if isinstance(p, int) else p for p in parent)
        model = _MODEL_AT.get(pattern)
        keys = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
        allowed = f"; expected one of {keys}" if keys else ""
        where = _loc_text(parent, data) or "top level"
        return f"{where}: unknown key {loc[-1]!r}{allowed}"
    if err["type"] == "missing":
        where = _loc_text(loc[:-1], data) or "top level"
        return f"{where}: missing required key {loc[-1]!r}"
    msg = str(err["msg"]).removeprefix("Value error, ").replace("\n", " ")
    where = _loc_text(loc, data)
    return f"{where}: {msg}" if where else msg


def parse_contract(text: str, *, source: str = "<string>") -> Contract:
    """Parse contract YAML text.

    Parameters
    ----------
    text : str
        The YAML document.
    source : str
        Where it came from, for error messages.

    Raises
    ------
    ContractError
        With a one-line message naming the problem.
    """
    try:
        data = _load_yaml(text)
    except _AliasBomb as bomb:
        raise ContractError(
            f"contract {source}: its YAML aliases (*name) expand to more than "
            f"{MAX_EXPANDED_VALUES:,} values ({bomb.count:,}); write the contract out without "
            "anchors and aliases") from None
    except _DuplicateKey as dup:
        raise ContractError(
            f"contract {source}: duplicate key {dup.key!r} at line {dup.line}"
        ) from None
    except _OddNumber as odd:
        lines = text.splitlines()
        where = lines[odd.line - 1].strip() if 0 < odd.line <= len(lines) else ""
        key = _path_text(odd.path) or "top level"
        raise ContractError(
            f"contract {source}: {key}: number {odd.text!r} at line {odd.line} "
            f"({where[:80]}) is not a plain decimal number (YAML 1.1 reads leading zeros as "
            "octal, 0x as hex, 0b as binary, '_' and ':' as digit separators); write digits "
            "only, e.g. 10, 0.5, 1e-6") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        detail = f": {problem}" if problem else ""
        raise ContractError(f"contract {source}: YAML syntax error{where}{detail}") from None
    if isinstance(data, dict) and any(not isinstance(k, str) for k in data):
        key = next(k for k in data if not isinstance(k, str))
        raise ContractError(f"contract {source}: top-level key {key!r} is not a name; expected "
                            "keys name, version, columns, roles, budget")
    if not isinstance(data, dict):
        raise ContractError(
            f"contract {source}: expected a mapping with keys name, version, columns, roles, "
            "budget at the top level"
        )
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ContractError(f"contract {source}: {_format_error(errors[0], data)}{more}") from None


#: The largest contract file read: a contract of 10,000 columns with 100 categories each is
#: about 10 MB; a larger "contract" is a mistake (``/dev/zero``, a data file).
MAX_CONTRACT_BYTES = 64 * 2**20


def _read_contract_file(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_CONTRACT_BYTES` (issue 45.5).

    Opened without blocking (a FIFO would wait for a writer forever) and checked on the open
    descriptor, so a device (``/dev/zero``, ``/dev/urandom``), a FIFO or a socket is refused
    without reading a byte, and a file swapped after a check is still the one checked.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = ("a folder" if stat.S_ISDIR(info.st_mode)
                    else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                    else "a socket" if stat.S_ISSOCK(info.st_mode) else "special")
            raise ContractError(f"contract {path} is not a regular file ({what}); expected a "
                                "YAML file")
        if info.st_size > MAX_CONTRACT_BYTES:
            raise ContractError(f"contract {path} is larger than {MAX_CONTRACT_BYTES >> 20} MiB "
                                f"({info.st_size / 2**20:.0f} MiB); expected a YAML contract")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_CONTRACT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_CONTRACT_BYTES:  # it grew while read
        raise ContractError(f"contract {path} is larger than {MAX_CONTRACT_BYTES >> 20} MiB; "
                            "expected a YAML contract")
    return data


def load_contract(path: str | Path) -> Contract:
    """Read and validate the contract at ``path``.

    Raises
    ------
    ContractError
        If the file cannot be read, is not valid YAML, or declares something inconsistent.
    """
    path = Path(path)
    try:
        text = _read_contract_file(path).decode("utf-8")
    except OSError as exc:
        raise ContractError(f"contract {path}: cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ContractError(f"contract {path}: not UTF-8 text (byte {exc.start}); expected a "
                            "YAML file") from None
    return parse_contract(text, source=str(path))
