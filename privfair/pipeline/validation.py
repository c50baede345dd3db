"""Great Expectations suites generated from a data contract, and validation of frames.

Two suites per contract:

* ``input`` — for the private table as staged by :func:`privfair.pipeline.ingest.load` (declared
  columns; numeric columns as float64, the others as text): the exact column set, and per
  column the ``nulls: refuse`` and ``out_of_domain: refuse`` policies (values in the declared
  categories or aliases; numbers in ``[lower, upper]``).
* ``output`` — for the decoded synthetic table: the exact column set, no nulls, every value
  a declared label, and the row count.

Input results hold private information (counts and examples of unexpected values). They are
returned only in :attr:`ValidationOutcome.private_details`, which the pipeline writes to the
private staging folder; :meth:`ValidationOutcome.problem_line` and
:meth:`ValidationOutcome.public_summary` name expectations and columns only.

Great Expectations is imported inside the functions: it costs ~4 s and ~300 MB, and only the
validation steps need it. Its progress bars are switched off. pandas 3 names its string dtype
``"str"``, so no ``ExpectColumnValuesToBeOfType`` is used on text columns (``"object"`` and
``"string"`` both fail there); types are fixed by the loader instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from privfair.pipeline.contracts import Contract

Side = Literal["input", "output"]

__all__ = ["ValidationOutcome", "build_suite", "validate_frames"]


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


def build_suite(contract: Contract, *, side: Side, n_rows: int | None = None,
                context: Any = None) -> Any:
    """The ``great_expectations.ExpectationSuite`` for one side of a release.

    GX needs an active data context to build a suite; an ephemeral one is made when
    ``context`` is not given.
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe

    if context is None:
        _context()
    suite = gx.ExpectationSuite(name=f"{contract.name}-{side}")
    names = list(contract.column_names)
    suite.add_expectation(gxe.ExpectTableColumnsToMatchSet(column_set=names, exact_match=True))
    if side == "output":
        if n_rows is None:
            suite.add_expectation(gxe.ExpectTableRowCountToBeBetween(min_value=1))
        else:
            suite.add_expectation(gxe.ExpectTableRowCountToEqual(value=int(n_rows)))
        for name in names:
            suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=name))
            suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(
                column=name, value_set=list(contract.labels(name))))
        return suite
    for spec in contract.columns:
        if spec.null_policy.kind == "refuse":
            suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=spec.name))
        if spec.out_of_domain_policy.kind != "refuse":
            continue
        if spec.type == "numeric":
            lower, upper = spec.bounds
            suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(
                column=spec.name, min_value=lower, max_value=upper))
        elif spec.type == "categorical":
            suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(
                column=spec.name,
                value_set=list(spec.declared_labels()) + list(spec.aliases)))
    return suite


def _context() -> Any:
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

    The row-count expectation of the output side applies to a single frame.
    """
    ctx = _context()
    suite = build_suite(contract, side=side, n_rows=n_rows, context=ctx)
    batch_definition = (ctx.data_sources.add_pandas(f"{contract.name}-{side}")
                        .add_dataframe_asset("table")
                        .add_batch_definition_whole_dataframe("batch"))
    checks: dict[tuple[str, str | None, int], dict[str, Any]] = {}
    details: list[Any] = []
    batches = 0
    for frame in frames:
        batches += 1
        result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
            suite, result_format="SUMMARY")
        if side == "input":
            details.append(result.to_json_dict())
        for k, r in enumerate(result.results):
            config = r.expectation_config
            key = (config.type, config.kwargs.get("column"), k)
            entry = checks.setdefault(key, {"expectation": config.type,
                                            "column": config.kwargs.get("column"),
                                            "success": True})
            entry["success"] = entry["success"] and bool(r.success)
    if batches == 0:
        # No batch at all: an empty input. Report the table-level expectation as failed.
        checks[("expect_table_row_count_to_be_between", None, -1)] = {
            "expectation": "expect_table_row_count_to_be_between", "column": None,
            "success": False}
    ordered = list(checks.values())
    return ValidationOutcome(side=side, suite=suite.name,
                             passed=all(c["success"] for c in ordered), checks=ordered,
                             batches=batches, private_details=details)
