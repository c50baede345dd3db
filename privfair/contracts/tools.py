"""The publisher's local contract tools: draft a contract from a file, check a file against one.

This module is long on purpose: `contract draft` and `contract check --data` share one scan
of the publisher's file and one set of suggestions.

Both read the private table and show what is in it (category lists, offending values and their
counts). They are the data owner's own diagnostics, run on their machine: nothing here is part of
a release, charged to a ledger or written to the release store. A draft's domains are copied from
data, and every domain of a contract is public in every release, so a draft says so at the top
and stays ``reviewed: false`` (``contract check`` keeps warning) until the publisher has checked
it against the codebook.

Both use the release's own reading rules: the file is read literally (no glob), a pandas index
stored in Parquet is not a column, CSV fields are text, and categories are matched with
:func:`privfair.contracts.encoding.match_text` after the column's ``normalize`` rule.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from privfair.contracts.csv_source import csv_header, is_csv, read_csv_table
from privfair.contracts.encoding import (
    as_text,
    hidden_index_columns,
    literal_file,
    match_text,
)
from privfair.contracts.schema import (
    STRIP_CHARS,
    ColumnSpec,
    Contract,
    DialectSpec,
    parse_contract,
)
from privfair.core.accounting import zcdp_epsilon, zcdp_rho
from privfair.core.errors import ReleaseInputError

__all__ = ["ColumnProblem", "DataCheck", "check_data", "draft_contract", "review_warning"]

_NUMERIC = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|REAL|DECIMAL.*)$")
_INTEGER = re.compile(r"^U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?$")
_TRIM = "'" + STRIP_CHARS.replace("'", "''") + "'"


def review_warning(contract: Contract) -> str | None:
    """The warning ``contract check`` prints while a drafted contract is not reviewed."""
    if contract.reviewed is not False:
        return None
    return (f"contract {contract.name!r} is a draft (reviewed: false): its category lists and "
            "bin edges were copied from data and are PUBLIC in every release; review each "
            "against the codebook, then set 'reviewed: true'")


# --- reading --------------------------------------------------------------------------------


@dataclass
class _Source:
    con: Any
    sql: str
    csv: bool
    types: dict[str, str]


@contextmanager
def _open(path: str | Path, dialect: DialectSpec | None = None) -> Iterator[_Source]:
    """The data as a DuckDB relation: a CSV file read record by record in ``dialect``
    (:mod:`privfair.contracts.csv_source`; every field text), a Parquet file by DuckDB."""
    import duckdb

    from privfair.contracts.encoding import source_sql

    with literal_file(path) as literal:
        lit = Path(literal)
        csv = is_csv(lit)
        hidden = set() if csv else set(hidden_index_columns(lit))
        con = duckdb.connect()
        try:
            if csv:
                try:
                    header = csv_header(path, dialect)
                    table, _ = read_csv_table(path, header, dialect)
                except ReleaseInputError as exc:
                    raise ValueError(str(exc)) from None
                if not header:  # an empty file: nothing to draft a contract from
                    raise ValueError(f"data file {path} has no header line (no columns); "
                                     "expected a CSV whose first line names its columns")
                con.register("records", table)  # an Arrow table: read once, queried in place
                sql = "records"
            else:
                sql = source_sql(lit)
            try:
                described = con.execute(f"DESCRIBE SELECT * FROM {sql}").fetchall()
            except duckdb.Error as exc:  # a binary or mangled file: one line naming it
                kind = str(exc).splitlines()[0].split(":")[0] if str(exc) else "error"
                raise ValueError(f"data file {path} cannot be read as "
                                 f"{'CSV' if csv else 'Parquet'} ({kind})") from None
            types = {row[0]: str(row[1]) for row in described if row[0] not in hidden}
            yield _Source(con, sql, csv, types)
        finally:
            con.close()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- check ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnProblem:
    """One way a column of the data breaks the contract.

    Attributes
    ----------
    column : str
        The column.
    problem : str
        What is wrong, in words.
    rows : int
        Rows affected (0 for a column-level problem).
    examples : tuple of (str, int)
        Offending values and their counts, most frequent first (private: shown locally only).
    fixes : tuple of str
        Suggested contract edits.
    """

    column: str
    problem: str
    rows: int = 0
    examples: tuple[tuple[str, int], ...] = ()
    fixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataCheck:
    """Every problem found in one file against one contract."""

    contract: str
    rows: int
    problems: tuple[ColumnProblem, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def failing_columns(self) -> list[str]:
        return list(dict.fromkeys(p.column for p in self.problems))

    def lines(self) -> list[str]:
        """A human-readable report (it quotes private values: keep it local)."""
        if self.passed:
            return [f"data fits contract {self.contract!r}: {self.rows} rows, no problem found"]
        out = [f"data breaks contract {self.contract!r} in {len(self.failing_columns)} "
               f"column(s) ({self.rows} rows read):"]
        for p in self.problems:
            share = f": {p.rows} of {self.rows} rows" if p.rows else ""
            out.append(f"  column {p.column!r}: {p.problem}{share}")
            if p.examples:
                shown = ", ".join(f"{v!r} ({n})" for v, n in p.examples)
                out.append(f"    values: {shown}")
            out.extend(f"    fix: {fix}" for fix in p.fixes)
        return out


def check_data(contract: Contract, data_path: str | Path, *, max_examples: int = 8
               ) -> DataCheck:
    """Check a data file against ``contract``, reporting every failing column at once.

    The publisher's local diagnostic: it reads the private file, quotes offending values with
    their counts, and writes nothing.
    """
    problems: list[ColumnProblem] = []
    with _open(data_path, contract.csv_dialect) as src:
        rows = int(src.con.execute(f"SELECT count(*) FROM {src.sql}").fetchone()[0])
        present = set(src.types)
        for name in contract.column_names:
            if name not in present:
                close = difflib.get_close_matches(name, list(present), n=3, cutoff=0.6)
                hint = (f"the data has {close}; rename the column, or set the contract's name "
                        "to the data's") if close else "add the column to the data, or remove "\
                    "its declaration"
                problems.append(ColumnProblem(name, "declared but missing from the data",
                                              fixes=(hint,)))
        known = set(contract.column_names) | set(contract.drop)
        for name in src.types:
            if name not in known:
                problems.append(ColumnProblem(
                    name, "in the data but not declared",
                    fixes=("declare it under columns, or list it under drop",)))
        for spec in contract.columns:
            if spec.name not in present:
                continue
            if spec.type == "numeric":
                problems.extend(_check_numeric(src, spec, max_examples))
            else:
                problems.extend(_check_text(src, contract, spec, max_examples))
    return DataCheck(contract.name, rows, tuple(problems))


def _top(frame: pd.DataFrame, mask: np.ndarray, k: int) -> tuple[tuple[str, int], ...]:
    part = frame[mask].sort_values("n", ascending=False, kind="stable").head(k)
    return tuple((str(v), int(n)) for v, n in zip(part["v"], part["n"], strict=True))


def _null_problem(spec: ColumnSpec, nulls: int) -> list[ColumnProblem]:
    if not nulls or spec.null_policy.kind != "drop":
        return []
    fix = ('add a category such as "(missing)" and set nulls: "as:(missing)"'
           if spec.type == "categorical" else
           'set out_of_domain: "other:(other)" and nulls: "as:(other)"' if spec.type == "text"
           else "fill them in the data, or declare the column categorical with a "
                '"(missing)" category')
    return [ColumnProblem(spec.name, "holds nulls and its nulls policy is drop (a release "
                          "drops these rows)", nulls, fixes=(fix,))]


def _check_text(src: _Source, contract: Contract, spec: ColumnSpec, k: int
                ) -> list[ColumnProblem]:
    kind = src.types[spec.name]
    if not src.csv and kind != "VARCHAR" and not _NUMERIC.match(kind) and kind != "BOOLEAN":
        return [ColumnProblem(spec.name, f"has type {kind}, which cannot hold categories",
                              fixes=("convert it to text in the data, or list it under drop",))]
    col = _q(spec.name)
    frame = src.con.execute(
        f"SELECT {col} AS v, count(*) AS n FROM {src.sql} GROUP BY 1").df()
    null = frame["v"].isna().to_numpy()
    nulls = int(frame["n"][null].sum())
    labels = [] if spec.type == "text" else contract.labels(spec.name)
    problems = _null_problem(spec, nulls)
    if spec.type == "text" or spec.out_of_domain_policy.kind != "drop":
        return problems
    codes = match_text(contract, spec.name, frame["v"])
    bad = (codes < 0) & ~null
    if not bad.any():
        return problems
    raw = as_text(frame["v"][bad])
    keys = {**{c: c for c in labels}, **spec.aliases}
    fixes = []
    stripped = [v for v in raw if v.strip(STRIP_CHARS) in keys]
    if stripped and contract.normalization(spec.name) == "none":
        fixes.append(f"normalize: strip (on the column or the contract): {len(stripped)} "
                     "value(s) differ from a category only by leading/trailing whitespace")
    folded = {c.strip(STRIP_CHARS).casefold(): c for c in labels}
    aliases = {v: folded[v.strip(STRIP_CHARS).casefold()] for v in raw
               if v not in stripped and v.strip(STRIP_CHARS).casefold() in folded}
    if aliases:
        shown = dict(list(aliases.items())[:5])
        fixes.append(f"aliases: {shown} (they differ from a category only in case)")
    if len(stripped) + len(aliases) < len(raw):
        other = next((c for c in labels if c.casefold() in ("other", "(other)")), "<category>")
        fixes.append("add the values to categories, map them with aliases, or set "
                     f'out_of_domain: "other:{other}"')
    return problems + [ColumnProblem(
        spec.name, f"{int(bad.sum())} distinct value(s) are not declared categories or aliases",
        int(frame["n"][bad].sum()), _top(frame, bad, k), tuple(fixes))]


def _check_numeric(src: _Source, spec: ColumnSpec, k: int) -> list[ColumnProblem]:
    kind = src.types[spec.name]
    col = _q(spec.name)
    if src.csv:
        value = f"TRY_CAST(trim({col}) AS DOUBLE)"
        empty = f"({col} IS NULL OR trim({col}) = '')"
    elif _NUMERIC.match(kind):
        value, empty = f"CAST({col} AS DOUBLE)", f"({col} IS NULL)"
    else:
        return [ColumnProblem(spec.name, f"has type {kind} but is declared numeric",
                              fixes=("declare it categorical, or convert it to numbers in the "
                                     "data",))]
    nulls, nonnum = src.con.execute(
        f"SELECT count(*) FILTER (WHERE {empty}), "
        f"count(*) FILTER (WHERE NOT {empty} AND {value} IS NULL) FROM {src.sql}").fetchone()
    problems = _null_problem(spec, int(nulls))
    if nonnum:
        examples = src.con.execute(
            f"SELECT CAST({col} AS VARCHAR), count(*) AS n FROM {src.sql} WHERE NOT {empty} "
            f"AND {value} IS NULL GROUP BY 1 ORDER BY n DESC, 1 LIMIT {int(k)}").fetchall()
        problems.append(ColumnProblem(
            spec.name, "holds values that are not numbers", int(nonnum),
            tuple((str(v), int(n)) for v, n in examples),
            ("clean them in the data, or declare the column categorical",)))
    if spec.out_of_domain_policy.kind != "drop":
        return problems
    lower, upper = spec.bounds
    cond = [f"x < {lower!r}" if math.isfinite(lower) else "false",
            f"x > {upper!r}" if math.isfinite(upper) else "false", "isinf(x)"]
    if spec.integer:
        cond.append("(isfinite(x) AND x <> trunc(x))")
    where = " OR ".join(cond)
    outside = src.con.execute(
        f"SELECT x, count(*) AS n FROM (SELECT {value} AS x FROM {src.sql}) "
        f"WHERE x IS NOT NULL AND ({where}) GROUP BY 1 ORDER BY n DESC, 1").fetchall()
    if outside:
        seen = [x for x, _ in outside if math.isfinite(x)]
        span = f" (the data reaches [{min(seen):g}, {max(seen):g}])" if seen else ""
        kind_text = "whole numbers" if spec.integer else "numbers"
        problems.append(ColumnProblem(
            spec.name, f"holds values outside the declared range ({kind_text} in "
                       f"[{lower:g}, {upper:g}]){span}",
            sum(int(n) for _, n in outside), tuple((f"{x:g}", int(n)) for x, n in outside[:k]),
            ("widen bins (or lower/upper), or set out_of_domain: clamp",)))
    return problems


# --- draft ----------------------------------------------------------------------------------

_HEADER = """\
# DRAFT data contract written by `privfair contract draft` from {source}.
#
# REVIEW BEFORE ANY RELEASE. The category lists and bin edges below were copied from the
# data, and every domain in a contract is PUBLIC in every release: a category held by one
# person discloses that person. Check each list against the codebook: remove values that must
# not be published, add valid values that this file happens not to hold, merge rare ones
# (aliases or out_of_domain: "other:<category>"). Then:
#   - declare the roles (protected, admissible, outcome) and the lifetime budget;
#   - a column with too many values to list, an identifier or a survey weight is left out
#     (under drop:, with a REVIEW note); to release one, declare its universe from the
#     codebook ({{values: [...]}} or {{words: {{alphabet, max_length}}}}), never a list or count
#     taken from this file, and move it to columns;
#   - expected_rows is a rounded guess for the plan's small-n line, and the budget is sized
#     for a season of releases: replace both with your own public figures;
#   - set `reviewed: true` (`privfair contract check` warns until you do).
#   - write the dataset's `description`: it is published in every report and manifest, so it
#     says what the data is, never a note to yourself.
"""


#: Whole-number columns with at most this many distinct values are drafted as categories.
WHOLE_NUMBER_CATEGORIES = 12
#: Text columns, and whole-number columns named as codes, with at most this many distinct
#: values are drafted as categories (a state column holds 50 states, DC, PR and others).
MAX_CATEGORIES = 100

#: Words of a column's name (split at non-letters and case changes) that mark it.
#: A code: categorical up to ``max_categories`` values, never numeric bins.
CODE_WORDS = frozenset({
    "code", "codes", "cd", "class", "category", "cat", "type", "status", "industry", "ind",
    "occupation", "occ", "naics", "soc", "isco", "sic", "fips", "zip", "zipcode", "postcode",
    "postal", "state", "county", "region", "country", "district", "province", "msa", "puma",
    "division", "sector", "group"})
#: A survey or instance weight: a design quantity, not an attribute of the record.
WEIGHT_WORDS = frozenset({"wgt", "wt", "fnlwgt", "perwt", "pwgtp", "wgtp", "hhwt", "weight",
                          "weights"})
#: Weight words that say "weight" of a survey, not of a body or a parcel.
_SURVEY_WORDS = frozenset({"instance", "survey", "sample", "sampling", "final", "person",
                           "household", "design", "expansion", "fnlwgt", "perwt", "pwgtp",
                           "wgtp", "hhwt", "wgt", "wt"})
#: An identifier: unique per record, released it discloses nothing but linkage.
ID_WORDS = frozenset({"id", "ids", "uuid", "guid", "key", "serial", "ssn", "record", "rowid",
                      "identifier"})

#: The draft's lifetime budget: a season of this many releases at ε = 1, δ = 1e-9 each,
#: composed in zCDP and stated at δ = 1e-6.
SEASON_RELEASES, SEASON_EPSILON, SEASON_RELEASE_DELTA, SEASON_DELTA = 12, 1.0, 1e-9, 1e-6


def name_words(name: str) -> frozenset[str]:
    """The words of a column name: split at non-letters and at lower-to-upper changes,
    lower-cased (``IndustryCode`` and ``industry_code`` give {industry, code})."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return frozenset(w.lower() for w in re.split(r"[^A-Za-z]+", spaced) if w)


def round_guess(rows: int) -> int:
    """A row count as the draft states it: one significant figure (48,842 -> 50,000), a
    guess for the plan, never the file's count."""
    if rows < 10:
        return max(1, int(rows))
    magnitude = 10 ** int(math.floor(math.log10(rows)))
    return int(round(rows / magnitude) * magnitude)


def season_budget() -> tuple[float, int, float]:
    """The draft's lifetime ε (at δ = 1e-6), the releases it pays for and their ε each:
    :data:`SEASON_RELEASES` releases at ε = 1, δ = 1e-9, composed in zCDP, rounded up to a
    tenth."""
    rho = SEASON_RELEASES * zcdp_rho(epsilon=SEASON_EPSILON, delta=SEASON_RELEASE_DELTA)
    epsilon = math.ceil(zcdp_epsilon(rho=rho, delta=SEASON_DELTA) * 10) / 10
    return epsilon, SEASON_RELEASES, SEASON_EPSILON


def _left_out_note(name: str, words: frozenset[str]) -> str | None:
    """Why a column is left out of the draft by its name alone (a weight, an id), or None."""
    if words & WEIGHT_WORDS and words & _SURVEY_WORDS:
        return ("named as a survey weight: a weight is a design quantity, not an attribute "
                "of the record, and is left out (drop:); declare it as a column only if it is "
                "an attribute to release")
    if words & ID_WORDS:
        return ("named as an identifier: a record identifier carries nothing to synthesise "
                "and is left out (drop:)")
    return None


def draft_contract(data_path: str | Path, *, max_categories: int = MAX_CATEGORIES,
                   max_codes: int = WHOLE_NUMBER_CATEGORIES, name: str | None = None,
                   bins: int = 5, registry_id: str | None = None) -> str:
    """A draft contract (YAML text) for a CSV/Parquet file.

    Parameters
    ----------
    data_path : str or Path
        The private table.
    max_categories : int
        Text columns, and whole-number columns named as codes (:data:`CODE_WORDS`), with at
        most this many distinct (whitespace-stripped) values become categorical with a sorted
        category list; a text column with more is left out with a note asking for its
        universe (the draft does not guess one).
    max_codes : int
        Whole-number columns with at most this many distinct values (codes, flags, small
        scales) become categorical; the others (amounts, durations, ages) numeric with
        suggested bins.
    name : str, optional
        Contract name; defaults to the file's stem.
    bins : int
        Suggested number of bins of numeric columns (round-number edges near quantiles).
    registry_id : str, optional
        The id of the privacy registry that will hold the dataset's ledger: the contract
        pins it (``registry_id:``), and every reservation refuses another registry.

    Returns
    -------
    str
        YAML that :func:`~privfair.contracts.schema.parse_contract` accepts, with
        ``reviewed: false`` and a header saying what to review.
    """
    if isinstance(max_categories, bool) or not isinstance(max_categories, int) \
            or max_categories < 1:
        raise ValueError(f"--max-categories must be an integer >= 1, got {max_categories!r}")
    if isinstance(max_codes, bool) or not isinstance(max_codes, int) or max_codes < 1:
        raise ValueError(f"--max-codes must be an integer >= 1, got {max_codes!r}")
    path = Path(data_path)
    columns: list[dict[str, Any]] = []
    drop: list[str] = []
    left_out: dict[str, str] = {}
    with _open(path) as src:
        numeric_csv = _csv_numeric_columns(src)
        rows = int(src.con.execute(f"SELECT count(*) FROM {src.sql}").fetchone()[0])
        for col, kind in src.types.items():
            words = name_words(col)
            note = _left_out_note(col, words)
            spec = None if note else _draft_column(
                src, col, kind, max_categories, bins, max_codes=max_codes,
                csv_numeric=numeric_csv.get(col, False), code=bool(words & CODE_WORDS))
            if spec is not None and spec.get("left_out"):
                note, spec = spec["left_out"], None
            if spec is None:
                drop.append(col)
                if note:
                    left_out[col] = note
            else:
                columns.append(spec)
    stem = name or re.sub(r"[^A-Za-z0-9_.-]+", "_", path.name.split(".")[0]).strip("._-")
    doc: dict[str, Any] = {
        "name": stem or "dataset", "version": "0.1.0",
        **({"registry_id": registry_id} if registry_id else {}),
        # published in every report: what the data is, never a review note (issue 35.5)
        "description": f"Data from {path.name}.",
        "reviewed": False, "normalize": "strip", "columns": columns}
    if drop:
        doc["drop"] = drop
    doc["roles"] = {"protected": [], "admissible": [], "outcome": []}
    season, releases, each = season_budget()
    doc["expected_rows"] = round_guess(rows)
    doc["budget"] = {"epsilon": season, "delta": SEASON_DELTA}
    notes = {c["name"]: c.pop("review") for c in columns if "review" in c}
    body = yaml.dump(doc, Dumper=_DraftDumper, sort_keys=False, allow_unicode=True, width=100)
    for col, note in notes.items():
        # A comment, not a description: descriptions are published in the report.
        entry = yaml.dump([{"name": col}], Dumper=_DraftDumper, width=100).splitlines()[0]
        body = body.replace(entry + "\n", f"# REVIEW {col}: {note}\n{entry}\n", 1)
    if left_out:  # above the drop: line, one note per column left out
        body = re.sub(r"^drop:", lambda m: "".join(
            f"# REVIEW {col}: {note}\n" for col, note in left_out.items()) + m.group(0),
            body, count=1, flags=re.MULTILINE)
    body = re.sub(r"^expected_rows: (\d+)$", r"expected_rows: \1  # a guess, rounded to one "
                  r"figure: the plan's small-n line reads it; never the true count",
                  body, count=1, flags=re.MULTILINE)
    body = body.replace("budget:\n", f"# a season: {releases} releases at epsilon {each:g} "
                        f"(delta {SEASON_RELEASE_DELTA:g} each) compose in zCDP to epsilon "
                        f"{season:g} at delta {SEASON_DELTA:g}; size it for your own plan\n"
                        "budget:\n", 1)
    text = _HEADER.format(source=path.name) + body + tot_proposal(columns)
    parse_contract(text, source=f"draft of {path.name}")  # the draft must be a valid contract
    return text


#: The proposed TOT constraint: a move costing 1 (one step of one column, or the outcome
#: flipped) for at most 20% of the rows, nothing costing 2 or more.
_TOT_THRESHOLDS, _TOT_BOUNDS = "[0.99, 1.99]", "[0.2, 0.0]"


def tot_proposal(columns: list[dict[str, Any]]) -> str:
    """A commented ``tot:`` block for the draft (issue 25.4): a penalty for every column
    TOT could move and a constraint that is feasible for most tables.

    It stays commented because TOT needs the roles (one outcome, protected columns), which
    only the publisher can declare; ``contract check`` then checks the block. Two numeric
    (ordinal) columns with the fewest bins are proposed as ``tot.features``.
    """
    movable = [c for c in columns if c.get("type") in ("numeric", "categorical")]
    if not movable:
        return ""

    def size(c: dict[str, Any]) -> int:
        return len(c["bins"]) - 1 if c.get("type") == "numeric" else len(c["categories"])

    ordinal = sorted((c for c in movable if c.get("type") == "numeric"), key=size)
    picks = [c["name"] for c in (ordinal or sorted(movable, key=size))[:2]]
    width = min(max(len(c["name"]) for c in movable), 20)
    lines = ["", "# TOT (`--fairness tot`): post-processing, no privacy cost. It moves a few "
             "columns of the synthetic", "# rows so the outcome's rate differs by at most eta "
             "across the protected groups. To use it:", "#   1. declare roles.protected and "
             "one roles.outcome above, then uncomment the block;", "#   2. keep under "
             "tot.features one to three columns that are neither protected nor the outcome",
             "#      (small domains keep the linear program small);", "#   3. keep under "
             "tot.distortion.columns the penalty of each feature and of the outcome only.",
             "# A penalty is the cost of one move: ordinal columns by steps (one bin: 1, two: "
             "2), categorical", "# ones 1 for any change. thresholds/bounds: at most 20% of "
             "the rows move at a cost >= 1,", "# none at a cost >= 2 (a bound of 0 forbids). "
             "If the release says 'TOT infeasible', raise", "# tot.eta or a bound, or move "
             "one more column.", "# With several protected attributes every combination is "
             "a group (2 x 5 x 4 = 40, many", "# of them small) and every pair must be within "
             "eta: for one constraint per attribute", "# instead, add the top-level block "
             "`fairness: {groups: per_attribute}`.", "# tot:", f"#   features: [{', '.join(picks)}]",
             "#   discrimination: additive   # or ratio", "#   eta: 0.05",
             "#   distortion:", "#     combine: sum", f"#     thresholds: {_TOT_THRESHOLDS}",
             f"#     bounds: {_TOT_BOUNDS}", "#     columns:"]
    for c in movable:
        penalty = ("{ordinal: [0, 1, 2]}" if c.get("type") == "numeric" else "{default: 1}")
        lines.append(f"#       {c['name'] + ':':<{width + 1}} {penalty}  # {size(c)} "
                     + ("bins" if c.get("type") == "numeric" else "categories"))
    return "\n".join(lines) + "\n"


class _DraftDumper(yaml.SafeDumper):
    """Lists of scalars (categories, bins) on one line, as people write contracts."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> Any:
    flow = all(not isinstance(v, dict | list) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_DraftDumper.add_representer(list, _represent_list)


def _csv_numeric_columns(src: _Source) -> dict[str, bool]:
    """CSV columns (all text) whose non-blank values all read as numbers: one scan."""
    if not src.csv or not src.types:
        return {}
    parts = []
    for name in src.types:
        col = _q(name)
        parts += [f"count(*) FILTER (WHERE trim({col}) <> '' AND "
                  f"TRY_CAST(trim({col}) AS DOUBLE) IS NULL)",
                  f"count(*) FILTER (WHERE trim({col}) <> '')"]
    row = src.con.execute(f"SELECT {', '.join(parts)} FROM {src.sql}").fetchone()
    return {name: row[2 * i + 1] > 0 and row[2 * i] == 0 for i, name in enumerate(src.types)}


def _draft_column(src: _Source, name: str, kind: str, k: int, bins: int, *,
                  max_codes: int = 12, csv_numeric: bool = False, code: bool = False
                  ) -> dict[str, Any] | None:
    col = _q(name)
    if src.csv:
        numeric = csv_numeric
        value = f"TRY_CAST(trim({col}) AS DOUBLE)"
    elif _NUMERIC.match(kind):
        numeric, value = True, f"CAST({col} AS DOUBLE)"
    elif kind == "BOOLEAN":
        # The encoder reads booleans as "True"/"False" (discretize.as_text).
        nulls = src.con.execute(f"SELECT count(*) FILTER (WHERE {col} IS NULL) FROM {src.sql}"
                                ).fetchone()[0]
        boolean: dict[str, Any] = {"name": name, "type": "categorical",
                                   "categories": ["False", "True"]}
        if nulls:
            boolean.update(categories=["False", "True", "(missing)"], nulls="as:(missing)")
        return boolean
    elif kind == "VARCHAR":
        numeric, value = False, col
    else:
        return None  # dates, blobs, nested: not releasable as declared; listed under drop
    if numeric:
        return _draft_numeric(src, name, value, k if code else max_codes, bins,
                              integer_type=bool(_INTEGER.match(kind)), code=code)
    text = f"trim(CAST({col} AS VARCHAR), {_TRIM})"
    frame = src.con.execute(
        f"SELECT {text} AS v, count(*) AS n FROM {src.sql} GROUP BY 1 LIMIT {k + 2}").df()
    null = frame["v"].isna()
    values = sorted(str(v) for v in frame["v"][~null])
    spec: dict[str, Any] = {"name": name}
    if len(values) > k:
        # No universe is guessed: one taken from the file would publish its values, and a
        # placeholder cannot hold them. The column waits, under drop:, for the codebook's.
        return {"left_out": (f"more than {k} distinct values: declare its universe from the "
                             "codebook (open_domain: {universe: {values: [...]}} or words) "
                             "and move it to columns, or raise --max-categories")}
    categories = [v if v else "(blank)" for v in values]
    spec.update(type="categorical", categories=categories)
    if "" in values:
        spec["aliases"] = {"": "(blank)"}
    if null.any():
        spec["categories"] = categories + ["(missing)"]
        spec["nulls"] = "as:(missing)"
    return spec


def _draft_numeric(src: _Source, name: str, value: str, k: int, bins: int, *,
                   integer_type: bool, code: bool = False) -> dict[str, Any]:
    row = src.con.execute(
        f"SELECT min(x), max(x), count(DISTINCT x), bool_and(x = trunc(x)), "
        f"quantile_cont(x, {[i / bins for i in range(1, bins)]}), count(*) FILTER (WHERE x IS "
        f"NULL) FROM (SELECT {value} AS x FROM {src.sql} WHERE isfinite({value}))").fetchone()
    lo, hi, distinct, whole, quantiles, _ = row
    spec: dict[str, Any] = {"name": name}
    if lo is None:  # no numbers at all
        spec.update(type="categorical", categories=["(missing)"], nulls="as:(missing)")
        return spec
    whole = bool(whole) or integer_type
    nulls = src.con.execute(f"SELECT count(*) FILTER (WHERE {value} IS NULL) FROM {src.sql}"
                            ).fetchone()[0]
    # A handful of whole values are codes (0/1 flags, small scales); more are amounts or
    # durations, which bins serve better than one category per value (issue 25.3).
    if whole and distinct <= k:
        found = src.con.execute(
            f"SELECT DISTINCT {value} AS x FROM {src.sql} WHERE {value} IS NOT NULL ORDER BY 1"
        ).fetchall()
        cats = [str(int(x)) for (x,) in found]
        spec.update(type="categorical", categories=cats)
        if nulls:
            spec.update(categories=[*cats, "(missing)"], nulls="as:(missing)")
        return spec
    if code:  # a code's numbers name categories: bins over them would mean nothing
        return {"left_out": (f"named as a code with more than {k} distinct values: declare "
                             "its categories from the codebook and move it to columns, or "
                             "raise --max-categories")}
    edges = suggest_edges(float(lo), float(hi), [float(q) for q in quantiles or []],
                          integer=whole)
    spec.update(type="numeric", integer=whole, bins=edges, out_of_domain="clamp")
    if nulls:
        spec["review"] = (f"{nulls} null(s): a bin cannot hold nulls; fill them, or declare the "
                          'column categorical with a "(missing)" category')
    return spec


def suggest_edges(lo: float, hi: float, quantiles: list[float], *, integer: bool
                  ) -> list[float | int]:
    """Round-number bin edges near the given quantiles, covering ``[lo, hi]``.

    The step is half a power of ten below the range (ages 17..90 give steps of 5). The outer
    edges are rounded outward to the step, the upper one strictly above ``hi`` (never the
    data's maximum copied). A mass at the minimum (a zero-inflated column such as capital
    gain) gets its own point bin; a skewed non-negative column whose quantiles crowd into
    fewer bins than asked gets powers of ten up to its range (wages: 0, 1, 100, ..., 10⁵).
    """
    span = hi - lo
    if span <= 0:
        step = 1.0
    else:
        step = 10.0 ** (math.floor(math.log10(span)) - 1)
        if span / step > 40:
            step *= 5
    if integer:
        step = max(step, 1.0)
    first = math.floor(lo / step) * step
    last = (math.floor(hi / step) + 1) * step
    inner = sorted({round(q / step) * step for q in quantiles})
    edges = [first] + [e for e in inner if first < e < last] + [last]
    if lo >= 0 and hi >= 10 and len(edges) - 1 < min(len(quantiles) + 1, 4):
        top = math.floor(math.log10(hi))
        edges = sorted({*edges, *(10.0 ** e for e in range(max(top - 3, 0), top + 1)
                                  if first < 10.0 ** e < last)})
    if integer and any(q <= lo for q in quantiles) and lo + 1 < edges[1]:
        edges.insert(1, lo + 1)
        edges[0] = lo
    clean = [int(e) if integer or float(e).is_integer() else round(e, 10) for e in edges]
    return sorted(set(clean))
