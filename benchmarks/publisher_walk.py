"""A publisher's walk with the CLI only: raw file -> draft -> check -> release -> evaluate.

Two generated tables stand in for a publisher's own data (nothing here reads /work/shared):

* ``census``: a census-style extract, ``--rows`` x 41 columns, raw text with trailing spaces
  (``"Handlers equip cleaners etc "``), integer industry/occupation codes, three 43-country
  columns, amounts and a float weight;
* ``credit``: a 1,000-row credit table, released with TOT declared in its contract.

The only edits made to a draft are the publisher's review: roles, budget, ``reviewed: true``
(and a ``tot:`` block for credit). Prints one JSON object with the wall time of every step.

    python benchmarks/publisher_walk.py [--rows 299285] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(".")

COUNTRIES = [f"Country {i:02d} " for i in range(42)] + ["United-States "]
OCCUPATIONS = ["Handlers equip cleaners etc ", "Adm support including clerical ",
               "Precision production craft & repair ", "Sales ", "Not in universe ",
               "Professional specialty ", "Executive admin and managerial ", "Other service "]


def census_table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols: dict[str, object] = {
        "age": rng.integers(0, 91, n),
        "class_of_worker": rng.choice([f"Class {i} " for i in range(9)], n),
        "industry_code": rng.integers(0, 52, n),
        "occupation_code": rng.integers(0, 47, n),
        "education": rng.choice([f"Education level {i} " for i in range(17)], n),
        "wage_per_hour": np.where(rng.random(n) < 0.9, 0, rng.integers(1, 10000, n)),
        "enrolled": rng.choice(["Not in universe ", "High school ", "College or university "], n),
        "marital": rng.choice([f"Marital {i} " for i in range(7)], n),
        "major_industry": rng.choice([f"Industry {i} " for i in range(24)], n),
        "major_occupation": rng.choice(OCCUPATIONS, n),
        "race": rng.choice(["White ", "Black ", "Asian or Pacific Islander ", "Other ",
                            "Amer Indian Aleut or Eskimo "], n, p=[.8, .1, .05, .03, .02]),
        "hispanic": rng.choice([f"Hispanic {i} " for i in range(10)], n),
        "sex": rng.choice(["Female ", "Male "], n),
        "union": rng.choice(["Not in universe ", "No ", "Yes "], n),
        "unemployment_reason": rng.choice([f"Reason {i} " for i in range(6)], n),
        "employment_status": rng.choice([f"Status {i} " for i in range(8)], n),
        "capital_gains": np.where(rng.random(n) < 0.95, 0, rng.integers(1, 99999, n)),
        "capital_losses": np.where(rng.random(n) < 0.97, 0, rng.integers(1, 4600, n)),
        "dividends": np.where(rng.random(n) < 0.9, 0, rng.integers(1, 99999, n)),
        "tax_filer": rng.choice([f"Filer {i} " for i in range(6)], n),
        "region_prev": rng.choice([f"Region {i} " for i in range(6)], n),
        "state_prev": rng.choice([f"State {i:02d} " for i in range(51)], n),
        "household_detail": rng.choice([f"Household detail {i:02d} " for i in range(38)], n),
        "household_summary": rng.choice([f"Household {i} " for i in range(8)], n),
        "instance_weight": rng.uniform(37.0, 18657.0, n).round(2),
        "migration_msa": rng.choice([f"MSA {i} " for i in range(10)], n),
        "migration_reg": rng.choice([f"REG {i} " for i in range(9)], n),
        "migration_within": rng.choice([f"Within {i} " for i in range(10)], n),
        "same_house": rng.choice(["Yes ", "No ", "Not in universe "], n),
        "migration_sunbelt": rng.choice(["Yes ", "No ", "Not in universe ", "? "], n),
        "persons_employed": rng.integers(0, 7, n),
        "under_18_family": rng.choice([f"Family {i} " for i in range(5)], n),
        "country_father": rng.choice(COUNTRIES, n),
        "country_mother": rng.choice(COUNTRIES, n),
        "country_self": rng.choice(COUNTRIES, n),
        "citizenship": rng.choice([f"Citizenship {i} " for i in range(5)], n),
        "self_employed": rng.integers(0, 3, n),
        "veterans_questionnaire": rng.choice(["Not in universe ", "Yes ", "No "], n),
        "veterans_benefits": rng.integers(0, 3, n),
        "weeks_worked": rng.integers(0, 53, n),
        "income": rng.choice(["- 50000. ", "50000+. "], n, p=[.94, .06]),
    }
    return pd.DataFrame(cols)


def credit_table(n: int = 1000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    good = rng.random(n) < np.where(sex == "male", 0.8, 0.55)
    return pd.DataFrame({
        "checking": rng.choice(["A11", "A12", "A13", "A14"], n),
        "duration": rng.integers(4, 72, n),
        "purpose": rng.choice(["car", "furniture", "radio/tv", "education", "business"], n),
        "amount": rng.integers(250, 18500, n), "sex": sex, "age": rng.integers(19, 76, n),
        "credit_risk": np.where(good, "good", "bad")})


CREDIT_TOT = """tot:
  features: [duration, age]
  eta: 0.05
  distortion:
    combine: sum
    thresholds: [0.99, 1.99]
    bounds: [0.2, 0.0]
    columns:
      duration: {ordinal: [0, 1, 2]}
      age: {ordinal: [0, 1, 2]}
      credit_risk: {changes: {good: {bad: 1}}}
"""


def review(path: Path, *, protected: list[str], admissible: list[str], outcome: str,
           extra: str = "") -> None:
    """The publisher's review of a draft: roles, budget, reviewed: true."""
    text = path.read_text().replace("reviewed: false", "reviewed: true").replace(
        "  protected: []\n  admissible: []\n  outcome: []",
        f"  protected: {protected}\n  admissible: {admissible}\n  outcome: [{outcome}]"
    ).replace("epsilon: 1.0\n", "epsilon: 10.0\n")
    path.write_text(text + extra)


def run(steps: dict[str, float], name: str, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           # the walk's lifetime ledgers stay in its own folder, not the user's registry
           "PRIVFAIR_REGISTRY": str(WORK / "registry")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "privfair.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    steps[name] = round(time.perf_counter() - start, 2)
    if done.returncode not in ok:
        raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=299_285, help="census rows")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    global WORK
    work = WORK = Path(args.keep or tempfile.mkdtemp(prefix="privfair-walk-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, object] = {"census_rows": args.rows, "census_columns": 41}
    steps: dict[str, float] = {}

    census = work / "census.csv"
    census_table(args.rows).to_csv(census, index=False)
    draft = work / "census.yaml"
    run(steps, "census draft", "contract", "draft", "--data", str(census),
        "--max-categories", "60", "--out", str(draft))
    review(draft, protected=["sex", "race"], admissible=["education", "major_occupation"],
           outcome="income")
    run(steps, "census check", "contract", "check", str(draft), "--data", str(census))
    release = run(steps, "census release (mst, eps=1, --no-prefect)", "release", "--contract",
                  str(draft), "--data", str(census), "--epsilon", "1", "--delta", "1e-9",
                  "--method", "mst", "--out", str(work / "releases"), "--work-dir",
                  str(work / "work"), "--no-prefect")
    run(steps, "census evaluate --release", "evaluate", "--release", release, "--data",
        str(census), "--contract", str(draft), "--privileged", "race=White", "--out",
        str(work / "evaluations"))

    credit = work / "credit.csv"
    credit_table().to_csv(credit, index=False)
    cdraft = work / "credit.yaml"
    run(steps, "credit draft", "contract", "draft", "--data", str(credit), "--out", str(cdraft))
    review(cdraft, protected=["sex"], admissible=["checking", "amount"],
           outcome="credit_risk", extra=CREDIT_TOT)
    run(steps, "credit check", "contract", "check", str(cdraft), "--data", str(credit))
    crelease = run(steps, "credit release (mst + TOT, eps=1, --no-prefect)", "release",
                   "--contract", str(cdraft), "--data", str(credit), "--epsilon", "1",
                   "--delta", "1e-7", "--method", "mst", "--fairness", "tot", "--out",
                   str(work / "releases"), "--work-dir", str(work / "work"), "--no-prefect")
    run(steps, "credit evaluate --contract (mst, 2 eps, 1 seed, +TOT)", "evaluate",
        "--contract", str(cdraft), "--data", str(credit), "--methods", "mst", "--epsilons",
        "1", "4", "--seeds", "1", "--etas", "0.05", "--classifiers", "logistic", "--out",
        str(work / "evaluations"), "--no-prefect")
    run(steps, "credit evaluate --release", "evaluate", "--release", crelease, "--data",
        str(credit), "--contract", str(cdraft), "--out", str(work / "evaluations"))
    out["seconds"] = steps
    out["releases"] = [release, crelease]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
