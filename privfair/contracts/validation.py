"""Great Expectations suites generated from a data contract, and validation of frames.

Two suites per contract:

* ``input`` — for the private table as staged by :func:`privfair.release.ingest.load` (declared
  columns; numeric columns as float64, the others as text): the exact column set, and per
  column the ``nulls: drop`` and ``out_of_domain: drop`` policies (values in the declared
  categories or aliases; numbers in ``[lower, upper]``).
* ``output`` — for the decoded synthetic table: the exact column set, no nulls, every value
  a declared label, and the row count.

Input results hold private information (counts and examples of unexpected values). They are
returned only in :attr:`ValidationOutcome.private_details`, which the pipeline writes to the
private staging folder; :meth:`ValidationOutcome.problem_line` and
:meth:`ValidationOutcome.public_summary` name expectations and columns only.

Great Expectations is imported inside the functions: it costs ~4 s and ~300 MB. The suites are
also kept as plain data (:func:`suite_spec`) and evaluated first by a pandas pre-check
(:func:`precheck`) that gives GX's verdicts; GX itself runs only on a batch the pre-check
fails (for its detailed results) and for the Data Docs (:mod:`privfair.release.tabular.data_docs`). Its progress bars are switched off. pandas 3 names its string dtype
``"str"``, so no ``ExpectColumnValuesToBeOfType`` is used on text columns (``"object"`` and
``"string"`` both fail there); types are fixed by the loader instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from privfair.contracts.schema import Contract

Side = Literal["input", "output"]

__all__ = ["ValidationOutcome", "build_suite", "precheck", "suite_spec", "validate_frames"]


@dataclass
class ValidationOutcome:
    """Combined result of one suite over one or more batches.

    Attributes
    ----------
    passed : bool
        Every expectation held on every batch.
    checks : list of dict
        ``{"expectation", "column", "success"}`` per expectation (no values, no counts).
    private_details : list
        Full GX results per batch (``SUMMARY`` format). Private for the input side.
    """

    side: str
    suite: str
    passed: bool
    checks: list[dict[str, Any]]
    batches: int
    private_details: list[Any] = field(default_factory=list, repr=False)

    @property
    def n_expectations(self) -> int:
        return len(self.checks)

    def failures(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["success"]]

    def problem_line(self) -> str:
        """One line naming the failed expectations and their columns."""
        failed = self.failures()
        if not failed:
            return "all expectations passed"
        parts = [f"{c['expectation']}" + (f" on column {c['column']!r}" if c["column"] else "")
                 for c in failed[:3]]
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return "; ".join(parts) + more

    def public_summary(self) -> dict[str, Any]:
        """Pass/fail per expectation; safe to publish for the output side."""
        return {"passed": self.passed, "suite": self.suite, "expectations": self.n_expectations,
                "failed": [{"expectation": c["expectation"], "column": c["column"]}
                           for c in self.failures()]}


#: One expectation of a generated suite: ``(GX expectation type, column or None, kwargs)``.
ExpectationSpec = tuple[str, str | None, dict[str, Any]]


def suite_spec(contract: Contract, *, side: Side,
               n_rows: int | None = None) -> list[ExpectationSpec]:
    """The expectations of one side's suite, in suite order, as plain data.

    Both :func:`build_suite` (GX objects) and :func:`precheck` (pandas) read this list, so
    the two cannot drift apart.
    """
    names = list(contract.column_names)
    spec: list[ExpectationSpec] = [
        ("expect_table_columns_to_match_set", None, {"column_set": names, "exact_match": True})]
    if side == "output":
        if n_rows is None:
            spec.append(("expect_table_row_count_to_be_between", None, {"min_value": 1}))
        else:
            spec.append(("expect_table_row_count_to_equal", None, {"value": int(n_rows)}))
        for name in names:
            spec.append(("expect_column_values_to_not_be_null", name, {}))
            spec.append(("expect_column_values_to_be_in_set", name,
                         {"value_set": list(contract.labels(name))}))
        return spec
    for column in contract.columns:
        if column.null_policy.kind == "drop":
            spec.append(("expect_column_values_to_not_be_null", column.name, {}))
        if column.out_of_domain_policy.kind != "drop":
            continue
        if column.type == "numeric":
            lower, upper = column.bounds
            spec.append(("expect_column_values_to_be_between", column.name,
                         {"min_value": lower, "max_value": upper}))
        elif column.type == "categorical":
            spec.append(("expect_column_values_to_be_in_set", column.name,
                         {"value_set": list(column.declared_labels()) + list(column.aliases)}))
    return spec


def build_suite(contract: Contract, *, side: Side, n_rows: int | None = None,
                context: Any = None) -> Any:
    """The ``great_expectations.ExpectationSuite`` for one side of a release.

    GX needs an active data context to build a suite; an ephemeral one is made when
    ``context`` is not given.
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe

    if context is None:
        gx_context()
    classes = {
        "expect_table_columns_to_match_set": gxe.ExpectTableColumnsToMatchSet,
        "expect_table_row_count_to_be_between": gxe.ExpectTableRowCountToBeBetween,
        "expect_table_row_count_to_equal": gxe.ExpectTableRowCountToEqual,
        "expect_column_values_to_not_be_null": gxe.ExpectColumnValuesToNotBeNull,
        "expect_column_values_to_be_in_set": gxe.ExpectColumnValuesToBeInSet,
        "expect_column_values_to_be_between": gxe.ExpectColumnValuesToBeBetween,
    }
    suite = gx.ExpectationSuite(name=f"{contract.name}-{side}")
    for kind, column, kwargs in suite_spec(contract, side=side, n_rows=n_rows):
        suite.add_expectation(classes[kind](**kwargs, **({"column": column} if column else {})))
    return suite


def precheck(frame: pd.DataFrame, spec: Sequence[ExpectationSpec]) -> list[bool]:
    """Evaluate each expectation of ``spec`` on ``frame`` with pandas, as GX 1.x does.

    GX's semantics, kept here: a missing column fails its expectations; the in-set and
    between checks ignore nulls; every column check holds vacuously on an empty frame.
    ``tests/test_validation_precheck.py`` checks the verdicts against GX's own.
    """
    present = set(frame.columns)
    verdicts = []
    for kind, column, kwargs in spec:
        if kind == "expect_table_columns_to_match_set":
            verdicts.append(present == set(kwargs["column_set"]))
        elif kind == "expect_table_row_count_to_be_between":
            verdicts.append(len(frame) >= kwargs["min_value"])
        elif kind == "expect_table_row_count_to_equal":
            verdicts.append(len(frame) == kwargs["value"])
        elif column not in present:
            verdicts.append(False)
        elif kind == "expect_column_values_to_not_be_null":
            verdicts.append(not bool(frame[column].isna().any()))
        elif kind == "expect_column_values_to_be_in_set":
            verdicts.append(_all_in_set(frame[column], kwargs["value_set"]))
        elif kind == "expect_column_values_to_be_between":
            values = pd.to_numeric(frame[column].dropna(), errors="coerce")
            inside = (values >= kwargs["min_value"]) & (values <= kwargs["max_value"])
            verdicts.append(bool(inside.all()))
        else:  # pragma: no cover - suite_spec makes only the kinds above
            raise ValueError(f"no pre-check for expectation {kind!r}")
    return verdicts


def _all_in_set(column: pd.Series, value_set: Sequence[Any]) -> bool:
    """Every non-null value of ``column`` is in ``value_set``.

    A categorical column holds only its categories (or null), so when they all lie in the
    set no row needs looking at: a decoded synthetic table's categories are the contract's
    labels, and this is the whole check on 300k rows in microseconds.
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        allowed = set(value_set)
        try:
            if all(category in allowed for category in column.cat.categories):
                return True
        except TypeError:  # an unhashable category: look at the rows
            pass
    return bool(column.dropna().isin(value_set).all())


def gx_context() -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # GX pins some of its loggers at INFO (e.g. "Created temporary directory ... for
    # ephemeral docs site" on every context); keep them quiet in pipeline logs.
    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


def validate_frames(frames: Iterable[pd.DataFrame], contract: Contract, *, side: Side,
                    n_rows: int | None = None) -> ValidationOutcome:
    """Validate each frame (batch) and combine: an expectation passes if it held everywhere.

    Each batch is checked first by :func:`precheck` (pandas, same verdicts as GX). Great
    Expectations is imported and run only on a batch that the pre-check fails, so a clean
    table never pays GX's import; GX's results for such batches are the private details.
    The row-count expectation of the output side applies to a single frame.
    """
    spec = suite_spec(contract, side=side, n_rows=n_rows)
    checks = [{"expectation": kind, "column": column, "success": True}
              for kind, column, _ in spec]
    details: list[Any] = []
    batches = 0
    validator = None
    for frame in frames:
        batches += 1
        verdicts = precheck(frame, spec)
        if all(verdicts):
            if side == "input":
                details.append({"batch": batches, "checked_by": "privfair pre-check",
                                "success": True, "expectations": len(spec)})
            continue
        if validator is None:
            validator = _gx_validator(contract, side=side, n_rows=n_rows)
        result = validator(_without_categoricals(frame))
        if side == "input":
            details.append(result.to_json_dict())
        for entry, success in zip(checks, gx_verdicts(result, spec), strict=True):
            entry["success"] = entry["success"] and success
    if batches == 0:
        # No batch at all: an empty input. Report the table-level expectation as failed.
        checks.append({"expectation": "expect_table_row_count_to_be_between", "column": None,
                       "success": False})
    return ValidationOutcome(side=side, suite=f"{contract.name}-{side}",
                             passed=all(c["success"] for c in checks), checks=checks,
                             batches=batches, private_details=details)


def _without_categoricals(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns (the loader's text read from dictionary pages) as plain values,
    so GX sees the types its suites were checked against."""
    kinds = {c: object for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)}
    return frame.astype(kinds) if kinds else frame


def gx_verdicts(result: Any, spec: Sequence[ExpectationSpec]) -> list[bool]:
    """GX's per-expectation successes in ``spec`` order (GX may reorder its results)."""
    by_key = {(r.expectation_config.type, r.expectation_config.kwargs.get("column")):
              bool(r.success) for r in result.results}
    return [by_key[(kind, column)] for kind, column, _ in spec]


def _gx_validator(contract: Contract, *, side: Side,
                  n_rows: int | None) -> Callable[[pd.DataFrame], Any]:
    """A function validating one frame with the GX suite (imports GX, ~4 s)."""
    ctx = gx_context()
    suite = build_suite(contract, side=side, n_rows=n_rows, context=ctx)
    batch_definition = (ctx.data_sources.add_pandas(f"{contract.name}-{side}")
                        .add_dataframe_asset("table")
                        .add_batch_definition_whole_dataframe("batch"))

    def validate(frame: pd.DataFrame) -> Any:
        return batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
            suite, result_format="SUMMARY")

    return validate
