"""Build the datasets embedded in the package, reproducibly, from the shared raw files.

Writes

* ``privfair/data/adult.parquet``: UCI Adult ``adult.data`` followed by ``adult.test``
  (48,842 rows, rows in file order, so the first 32,561 rows are the training file). All 15
  original columns with their raw values: whitespace stripped, ``'?'`` kept as the string
  ``'?'``, the test file's junk first line skipped, its ``'.'``-suffixed income labels kept
  as they are (the contract maps them with aliases).
* ``privfair/data/compas.parquet``: ProPublica's ``compas-scores-two-years.csv`` with the
  filters of SAFES §5.1 (days_b_screening_arrest in [-30, 30], is_recid != -1,
  c_charge_degree != 'O', score_text != 'N/A', race in {African-American, Caucasian}),
  5,278 rows in file order, columns race, sex, age_cat, c_charge_degree, priors_count,
  two_year_recid.
* ``privfair/data/contracts/*.yaml``: byte copies of the canonical ``data_contracts/*.yaml``
  so an installed package finds them.

Usage::

    python scripts/build_embedded_data.py [--source ../shared/datasets]
"""

from __future__ import annotations

import argparse
import csv
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "datasets"
DATA_DIR = ROOT / "privfair" / "data"

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
)
ADULT_INTS = frozenset({"age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                        "hours-per-week"})
ADULT_ROWS = 48_842
COMPAS_COLUMNS = ("race", "sex", "age_cat", "c_charge_degree", "priors_count", "two_year_recid")
COMPAS_ROWS = 5_278


def _write(table: pa.Table, path: Path) -> None:
    # No pandas metadata and fixed writer options, so rebuilding gives the same bytes for the
    # same pyarrow version.
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(None), path, compression="zstd",
                   compression_level=19, store_schema=False)


def _read_adult_file(path: Path) -> list[list[str]]:
    rows: list[list[str]] = []
    with path.open(newline="", encoding="ascii") as handle:
        for fields in csv.reader(handle):
            if not fields or (len(fields) == 1 and fields[0].startswith("|")):
                continue  # blank lines and adult.test's "|1x3 Cross validator" header line
            if len(fields) != len(ADULT_COLUMNS):
                raise ValueError(f"{path}: a row has {len(fields)} fields, expected 15")
            rows.append([f.strip() for f in fields])
    return rows


def build_adult(source: Path) -> pa.Table:
    """Read adult.data + adult.test into a table of raw values (see module docstring)."""
    rows = (_read_adult_file(source / "adult" / "adult.data")
            + _read_adult_file(source / "adult" / "adult.test"))
    if len(rows) != ADULT_ROWS:
        raise ValueError(f"adult: read {len(rows)} rows, expected {ADULT_ROWS}")
    arrays = {}
    for i, name in enumerate(ADULT_COLUMNS):
        values = [r[i] for r in rows]
        arrays[name] = (pa.array([int(v) for v in values], pa.int64()) if name in ADULT_INTS
                        else pa.array(values, pa.string()))
    return pa.table(arrays)


def build_compas(source: Path) -> pa.Table:
    """ProPublica COMPAS with the SAFES §5.1 / ProPublica filters (see module docstring)."""
    raw = pd.read_csv(source / "compas" / "compas-scores-two-years.csv")
    keep = (
        raw["days_b_screening_arrest"].between(-30, 30)  # NaN compares False, as in R's filter
        & (raw["is_recid"] != -1)
        & (raw["c_charge_degree"] != "O")
        & raw["score_text"].notna() & (raw["score_text"] != "N/A")  # pandas reads N/A as NaN
        & raw["race"].isin(["African-American", "Caucasian"])
    )
    frame = raw.loc[keep, list(COMPAS_COLUMNS)].reset_index(drop=True)
    if len(frame) != COMPAS_ROWS:
        raise ValueError(f"compas: {len(frame)} rows after filtering, expected {COMPAS_ROWS}")
    return pa.table({
        c: (pa.array(frame[c].astype("int64").to_numpy(), pa.int64())
            if c in ("priors_count", "two_year_recid")
            else pa.array(frame[c].astype(str).tolist(), pa.string()))
        for c in COMPAS_COLUMNS
    })


def copy_contracts() -> list[Path]:
    """Copy data_contracts/*.yaml (canonical) into the package."""
    target = DATA_DIR / "contracts"
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted((ROOT / "data_contracts").glob("*.yaml")):
        shutil.copyfile(path, target / path.name)
        copied.append(target / path.name)
    return copied


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="folder holding adult/ and compas/ (default: ../shared/datasets)")
    args = parser.parse_args(argv)
    _write(build_adult(args.source), DATA_DIR / "adult.parquet")
    _write(build_compas(args.source), DATA_DIR / "compas.parquet")
    for path in [DATA_DIR / "adult.parquet", DATA_DIR / "compas.parquet", *copy_contracts()]:
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
