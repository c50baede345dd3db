"""A publisher's walk with the CLI only, step by step as a user sees it (issue 25).

Two datasets, each walked draft -> check -> dry run -> release (every table method, a GAN, a
model, a causal graph) -> evaluate -> ledger show:

* ``compas``: the embedded COMPAS data (``privfair/data/compas.parquet``) with the shipped
  contract (``data_contracts/compas.yaml``; the draft step drafts from the same file to show
  what a publisher would start from);
* ``credit``: a generated 1,000-row credit table with a 42-character column name, whose
  draft is reviewed the way a publisher would: roles, budget, ``reviewed: true``, and the
  draft's proposed ``tot:`` block adopted (uncommented, two features kept).

Every step prints its time, exit code, and the first and last line the user saw (stdout and
stderr together). A step that fails is recorded and the walk goes on. ``--census-rows N``
adds the earlier census-style walk (41 columns, N rows; default 0: skipped).

    python benchmarks/publisher_walk.py [--out benchmarks/results/publisher_walk.json]
        [--keep DIR] [--census-rows 299285]
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


#: The credit table's long column name (issue 25.5: long labels must fit the reports).
LONG = "status_of_existing_checking_account_months"


def credit_table(n: int = 1000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    good = rng.random(n) < np.where(sex == "male", 0.8, 0.55)
    return pd.DataFrame({
        LONG: rng.choice(["A11", "A12", "A13", "A14"], n),
        "duration": rng.integers(4, 72, n),
        "purpose": rng.choice(["car", "furniture", "radio/tv", "education", "business"], n),
        "amount": rng.integers(250, 18500, n), "sex": sex, "age": rng.integers(19, 76, n),
        "credit_risk": np.where(good, "good", "bad")})


def adopt_tot(text: str, *, features: list[str], outcome: str) -> str:
    """The publisher adopts the draft's proposed ``tot:`` block: uncommented, with
    ``features`` kept and a penalty for each feature and the outcome only."""
    lines, out, inside = text.splitlines(), [], False
    for line in lines:
        if line == "# tot:":
            inside = True
        if not inside or not line.startswith("#"):
            out.append(line)
            continue
        body = line[2:]
        name = body.strip().split(":", 1)[0]
        if body.startswith("  features:"):
            body = f"  features: [{', '.join(features)}]"
        elif body.startswith("      ") and name not in (*features, outcome):
            continue
        out.append(body)
    return "\n".join(out) + "\n"


def review(path: Path, *, protected: list[str], admissible: list[str], outcome: str,
           tot_features: list[str] | None = None) -> None:
    """The publisher's review of a draft: roles, budget, reviewed: true (and TOT)."""
    text = path.read_text().replace("reviewed: false", "reviewed: true").replace(
        "  protected: []\n  admissible: []\n  outcome: []",
        f"  protected: {protected}\n  admissible: {admissible}\n  outcome: [{outcome}]"
    ).replace("epsilon: 1.0\n", "epsilon: 10.0\n")
    if tot_features:
        text = adopt_tot(text, features=tot_features, outcome=outcome)
    path.write_text(text)


STEPS: list[dict[str, object]] = []


def run(name: str, *args: str) -> str:
    """One CLI command as the user runs it; records time, exit code, first and last line.

    Returns the last folder it printed (a release's), or "" when the step failed."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "COLUMNS": "100", "PYTHONUNBUFFERED": "1",  # lines in the order the user sees
           # the walk's lifetime ledgers stay in its own folder, not the user's registry
           "PRIVFAIR_REGISTRY": str(WORK / "registry")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "privfair.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    seconds = round(time.perf_counter() - start, 2)
    shown = [line.rstrip() for line in done.stdout.splitlines() if line.strip()]
    step = {"step": name, "seconds": seconds, "exit": done.returncode,
            "first": shown[0] if shown else "", "last": shown[-1] if shown else ""}
    STEPS.append(step)
    print(f"{seconds:7.2f}s  exit {done.returncode}  {name}\n    first: {step['first'][:160]}"
          f"\n    last:  {step['last'][:160]}", flush=True)
    folders = [line.strip() for line in shown if line.startswith("/")
               and Path(line.strip()).is_dir()]
    return folders[-1] if done.returncode == 0 and folders else ""


#: Every table method, a GAN, a model and a causal graph: (step name, command and options).
def releases(contract: str, data: list[str], store: str, work: str, *, tot_eta: str
             ) -> list[tuple[str, list[str]]]:
    common = ["--contract", contract, *data, "--epsilon", "1", "--out", store, "--work-dir",
              work, "--no-prefect"]
    table = [*common, "--delta", "1e-7"]
    return [
        ("release mst + TOT", ["release", *table, "--method", "mst", "--fairness", "tot",
                               "--eta", tot_eta]),
        ("release prefair-greedy", ["release", *table, "--method", "prefair-greedy"]),
        ("release prefair-exact", ["release", *table, "--method", "prefair-exact"]),
        ("release aim (--max-time 20)", ["release", *table, "--method", "aim",
                                         "--max-time", "20"]),
        ("release aim-fair (--max-time 20)", ["release", *table, "--method", "aim-fair",
                                              "--max-time", "20"]),
        ("release independent", ["release", *table, "--method", "independent"]),
        ("release dpgan (GAN, 2 epochs)", ["release", *table, "--method", "dpgan",
                                           "--gan-epochs", "2"]),
        ("train pflr (model)", ["train", *common, "--delta", "1e-6", "--model", "pflr"]),
        ("discover privpc (graph)", ["discover", *common, "--delta", "1e-6", "--method",
                                     "privpc"]),
    ]


def walk(label: str, *, contract: str, data_file: Path, data: list[str], work: Path,
         draft: Path, review_draft: dict[str, object] | None, tot_eta: str,
         privileged: list[str]) -> list[str]:
    store, scratch = str(work / "releases"), str(work / "work")
    run(f"{label}: contract draft", "contract", "draft", "--data", str(data_file), "--out",
        str(draft))
    if review_draft is not None:
        review(draft, **review_draft)  # type: ignore[arg-type]
    run(f"{label}: contract check", "contract", "check", contract, "--data", str(data_file))
    run(f"{label}: release --dry-run (mst + TOT)", "release", "--contract", contract, *data,
        "--epsilon", "1", "--delta", "1e-7", "--method", "mst", "--fairness", "tot", "--eta",
        tot_eta, "--out", store, "--work-dir", scratch, "--dry-run")
    published = {name: run(f"{label}: {name}", *args)
                 for name, args in releases(contract, data, store, scratch, tot_eta=tot_eta)}
    first = published["release mst + TOT"]
    if first:
        run(f"{label}: evaluate --release (mst + TOT)", "evaluate", "--release", first,
            "--data", str(data_file), *(["--privileged", *privileged] if privileged else []),
            "--out", str(work / "evaluations"))
    run(f"{label}: evaluate --contract (mst, eps 1, 1 seed, + TOT)", "evaluate",
        "--contract", contract, "--data", str(data_file), "--methods", "mst", "--epsilons",
        "1", "--seeds", "1", "--etas", tot_eta, "--classifiers", "logistic", "--out",
        str(work / "evaluations"), "--no-prefect")
    run(f"{label}: ledger show", "ledger", "show", "--out", store, "--dataset",
        Path(contract).stem if label == "compas" else "credit")
    return [p for p in published.values() if p]


def census_walk(rows: int, work: Path) -> None:
    census = work / "census.csv"
    census_table(rows).to_csv(census, index=False)
    draft = work / "census.yaml"
    run("census: contract draft", "contract", "draft", "--data", str(census),
        "--max-categories", "60", "--out", str(draft))
    review(draft, protected=["sex", "race"], admissible=["education", "major_occupation"],
           outcome="income")
    run("census: contract check", "contract", "check", str(draft), "--data", str(census))
    run("census: release mst", "release", "--contract", str(draft), "--data", str(census),
        "--epsilon", "1", "--delta", "1e-9", "--method", "mst", "--out",
        str(work / "releases"), "--work-dir", str(work / "work"), "--no-prefect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/publisher_walk.json"),
                        help="write the steps here as JSON")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--census-rows", type=int, default=0,
                        help="also walk a census-style table of this many rows (0: skip)")
    args = parser.parse_args()
    global WORK
    work = WORK = Path(args.keep or tempfile.mkdtemp(prefix="privfair-walk-"))
    work.mkdir(parents=True, exist_ok=True)
    from privfair.contracts.datasets import dataset_path

    started = time.perf_counter()
    compas = walk("compas", contract=str(ROOT / "data_contracts/compas.yaml"),
                  data_file=dataset_path("compas"), data=[], work=work / "compas",
                  draft=work / "compas-draft.yaml", review_draft=None, tot_eta="0.1",
                  privileged=["race=Caucasian"])
    credit = work / "credit.csv"
    credit_table().to_csv(credit, index=False)
    cdraft = work / "credit.yaml"
    published = walk("credit", contract=str(cdraft), data_file=credit,
                     data=["--data", str(credit)], work=work / "credit", draft=cdraft,
                     review_draft={"protected": ["sex"], "admissible": [LONG, "amount"],
                                   "outcome": "credit_risk",
                                   "tot_features": ["duration", "age"]},
                     tot_eta="0.05", privileged=["sex=male"])
    if args.census_rows:
        census_walk(args.census_rows, work)
    failed = [s["step"] for s in STEPS if s["exit"] != 0]
    out = {"seconds": round(time.perf_counter() - started, 1), "steps": STEPS,
           "failed": failed, "releases": [*compas, *published], "work": str(work)}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"{len(STEPS)} steps, {len(failed)} failed, {out['seconds']} s; written to {args.out}")


if __name__ == "__main__":
    main()
