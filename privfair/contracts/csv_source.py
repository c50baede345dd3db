"""The one CSV dialect privfair reads, declared here and never sniffed from the data.

A CSV file is read as RFC 4180 says: fields separated by ``,``, quoted with ``"``, a quote
inside a quoted field doubled, the first line the header. The header is the file's schema,
a public fact checked before a release reserves its budget
(:func:`privfair.contracts.encoding.check_source_schema`); every field is read as text and
typed by the contract, never by DuckDB's sniffer, whose guess (the delimiter, the types)
depends on the rows it samples.

A record the dialect cannot parse (too many or too few fields, a quote left open, bytes that
are not UTF-8) is dropped, like a row that a ``drop`` policy drops, and counted in the
:data:`UNPARSED_CELL` of the policy tally, which a release publishes only as a noisy count.
So once the budget is reserved a malformed line never stops the run nor changes its message
(issue 21.2, privacy rule 4). The unit of privacy is the record as this dialect parses it: a
quote left open makes the rest of the file one record, which is dropped as one.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["UNPARSED_CELL", "csv_header", "csv_relation_sql", "is_csv", "read_csv_text",
           "unparsed_records"]

#: The policy-tally cell of the records the dialect could not parse (each dropped).
UNPARSED_CELL = ("(unparsed record)", "dropped")

#: DuckDB's tables of rejected records, one pair per connection (temporary tables).
_REJECTS = "privfair_rejected_lines"
_SCANS = "privfair_rejected_scans"


def is_csv(path: str | Path) -> bool:
    """Whether ``path`` names a CSV file (``.csv`` or ``.csv.gz``), from its name alone."""
    return Path(path).name.lower().endswith((".csv", ".csv.gz"))


def csv_header(path: str | Path) -> list[str]:
    """The column names on the first line of a CSV file, stripped of surrounding spaces."""
    path = Path(path)
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as fh:
        return [name.strip() for name in next(csv.reader(fh), [])]


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def csv_relation_sql(literal: str | Path, header: Sequence[str]) -> str:
    """DuckDB's ``read_csv`` of ``literal`` in the declared dialect, every column as text.

    Parameters
    ----------
    literal : str or Path
        The file to read, as DuckDB should see it (no glob characters: see
        :func:`privfair.contracts.encoding.literal_file`).
    header : sequence of str
        The names on the header line (:func:`csv_header`), in order.

    Returns
    -------
    str
        A table function call; records it cannot parse are skipped and logged in this
        connection's rejects table, counted by :func:`unparsed_records`.
    """
    columns = ", ".join(f"{_sql_text(name)}: 'VARCHAR'" for name in header)
    return (f"read_csv({_sql_text(str(literal))}, header = true, auto_detect = false, "
            f"delim = ',', quote = '\"', escape = '\"', columns = {{{columns}}}, "
            f"strict_mode = true, ignore_errors = true, store_rejects = true, "
            f"rejects_table = '{_REJECTS}', rejects_scan = '{_SCANS}')")


def unparsed_records(con: Any) -> int:
    """How many records the reads of :func:`csv_relation_sql` on ``con`` skipped (private).

    A record can be rejected for several reasons at once, and by several reads of the one
    file a connection makes; it counts once.
    """
    try:
        (count,) = con.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT line FROM {_REJECTS})").fetchone()
    except Exception as exc:  # no read on this connection rejected anything, or none ran
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            return 0
        raise
    return int(count)


def read_csv_text(path: str | Path, columns: Sequence[str]) -> tuple[Any, int]:
    """The ``columns`` of a CSV file as a pandas frame of text (nulls for empty fields),
    and the number of records the dialect could not parse (private, for the policy tally).
    """
    import duckdb

    from privfair.contracts.encoding import literal_file

    header = csv_header(path)
    selected = ", ".join('"' + name.replace('"', '""') + '"' for name in columns)
    con = duckdb.connect()
    try:
        with literal_file(path) as literal:
            frame = con.sql(f"SELECT {selected} FROM {csv_relation_sql(literal, header)}").df()
        return frame, unparsed_records(con)
    finally:
        con.close()
