"""A publisher's walk with the CLI only, step by step as a user sees it (issues 25 and 35).

``--walk stop15`` (the default, issue 35): the whole day again as a new user on generated
tables the project has not seen: a loans table (3,000 rows, 22 columns, three protected
attributes) drafted from its CSV and from a Parquet copy, reviewed (roles, budget, the
proposed ``tot:`` block), checked, dry-run, released with mst, prefair-greedy, aim (short
``--max-time``), mst + TOT and one method through Prefect, a run that fails after its noise
then the ``--resume`` command it printed, ``train`` pflr and dpsgd, ``discover``, ``ledger
show``, ``releases list``, ``store check``, ``evaluate`` on own data and ``--release``; and a
wide table with a 50-value state column. Each step's command, exit code, first and last line
and time go to ``benchmarks/results/publisher_walk_stop15.json`` with a list of
``surprises`` (an exit code a new user would not expect, no output, or a line naming an
internal error). ``--quick``: the smallest sizes (for CI).

``--walk issue25``, the earlier walk:

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

    python benchmarks/publisher_walk.py [--quick] [--keep DIR]
    python benchmarks/publisher_walk.py --walk issue25 [--census-rows 299285]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
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
           tot_features: list[str] | None = None, per_attribute: bool = False) -> None:
    """The publisher's review of a draft: roles, budget, reviewed: true (and TOT; with
    ``per_attribute``, the draft's hint for several protected attributes, pasted as written)."""
    text = path.read_text().replace("reviewed: false", "reviewed: true").replace(
        "  protected: []\n  admissible: []\n  outcome: []",
        f"  protected: {protected}\n  admissible: {admissible}\n  outcome: [{outcome}]"
    )
    # the walk's season: the draft's lifetime budget (a stated guess) raised to 10
    text = re.sub(r"(?m)^(budget:\n  epsilon: )[0-9.]+$", r"\g<1>10.0", text, count=1)
    if tot_features:
        text = adopt_tot(text, features=tot_features, outcome=outcome)
    if per_attribute:
        hint = re.search(r"`(fairness: \{groups: per_attribute\})`", text)
        text += (hint.group(1) if hint else "# the draft gives no per_attribute hint") + "\n"
    path.write_text(text)


STEPS: list[dict[str, object]] = []


def run(name: str, *args: str, expect: int = 0, prefix: tuple[str, ...] = ("-m", "privfair.cli")
        ) -> str:
    """One CLI command as the user runs it; records time, exit code, first and last line.

    ``expect`` is the exit code a new user expects (the walk's one failed run expects 2);
    ``prefix`` replaces ``-m privfair.cli`` (the failed run's fault injection). Returns the
    last folder it printed (a release's), or "" when the step failed."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "COLUMNS": "100", "PYTHONUNBUFFERED": "1",  # lines in the order the user sees
           # the walk's lifetime ledgers stay in its own folder, not the user's registry
           "PRIVFAIR_REGISTRY": str(WORK / "registry")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *prefix, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    seconds = round(time.perf_counter() - start, 2)
    shown = [line.rstrip() for line in done.stdout.splitlines() if line.strip()]
    step = {"step": name, "command": "privfair " + " ".join(args), "seconds": seconds,
            "exit": done.returncode, "first": shown[0] if shown else "",
            "last": shown[-1] if shown else ""}
    STEPS.append(step)
    judge(step, shown, expect=expect)
    print(f"{seconds:7.2f}s  exit {done.returncode}  {name}\n    first: {step['first'][:160]}"
          f"\n    last:  {step['last'][:160]}", flush=True)
    folders = [line.strip() for line in shown if line.startswith("/")
               and Path(line.strip()).is_dir()]
    if folders and done.returncode == 0:
        missing = missing_parts(Path(folders[-1]))
        if missing:
            SURPRISES.append({"step": name, "command": step["command"],
                              "why": [f"{folders[-1]} has no {', '.join(missing)}"]})
    return folders[-1] if done.returncode == 0 and folders else ("\n".join(shown)
                                                                 if expect else "")



def missing_parts(folder: Path) -> list[str]:
    """What a printed folder lacks: a release its manifest and its report (a model's card),
    an evaluation its report."""
    if (folder / "manifest.json").exists() or "releases" in folder.parts:
        report = ["report.html", "model_card.md"]
        return [*(["manifest.json"] if not (folder / "manifest.json").exists() else []),
                *([" or ".join(report)] if not any((folder / r).exists() for r in report)
                  else [])]
    return [] if (folder / "report.html").exists() else ["report.html"]

#: Words a new user should never read: an internal error's name or a leaked placeholder.
INTERNAL = ("Traceback", "Error:", "Exception", "PydanticUndefined", "Catalog Error",
            "KeyError", "AttributeError", "TypeError", "NoneType", "nan%", "<object")
SURPRISES: list[dict[str, object]] = []


def judge(step: dict[str, object], shown: list[str], *, expect: int) -> None:
    """A surprise: an exit code a new user would not expect, no output at all, or a line
    naming an internal error (the CLI's own ``privfair: error:`` lines are expected ones)."""
    why = []
    if step["exit"] != expect:
        why.append(f"exit {step['exit']}, expected {expect}")
    if not shown:
        why.append("printed nothing")
    for line in shown:
        words = line.replace("privfair: error:", "")
        hit = [w for w in INTERNAL if w in words]
        if hit:
            why.append(f"names {hit[0]!r}: {line.strip()[:200]}")
            break
    if why:
        SURPRISES.append({"step": step["step"], "command": step["command"], "why": why})


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


# --- issue 35: the whole day again, as a new user, on tables the project has not seen --------

STATES = [f"S{i:02d}" for i in range(50)]
#: The privileged group of each protected column (evaluate asks for non-binary ones).
LOANS_PRIVILEGED = ["sex=male", "race=white", "age_band=30-44"]


def loans_table(n: int, seed: int = 35) -> pd.DataFrame:
    """A generated loans table: 22 columns, three protected attributes (sex, race, age_band),
    a binary outcome that depends on them and on two admissible columns."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["female", "male"], n)
    race = rng.choice(["white", "black", "asian", "hispanic", "other"], n,
                      p=[.6, .13, .07, .15, .05])
    age_band = rng.choice(["18-29", "30-44", "45-64", "65+"], n)
    income = rng.integers(8, 250, n) * 1000
    grade = rng.choice(list("ABCDEFG"), n)
    logit = (income / 60000 - 1.2 + np.where(sex == "male", .5, 0) + np.where(race == "white",
             .4, 0) - (np.array([ord(g) for g in grade]) - 65) * .2)
    approved = rng.random(n) < 1 / (1 + np.exp(-logit))
    cols: dict[str, object] = {
        "sex": sex, "race": race, "age_band": age_band, "income": income, "grade": grade,
        "term_months": rng.choice([12, 24, 36, 48, 60], n),
        "loan_amount": rng.integers(1, 40, n) * 1000,
        "home": rng.choice(["rent", "own", "mortgage", "other"], n),
        "employment_years": rng.integers(0, 41, n),
        "purpose": rng.choice(["car", "debt", "home", "medical", "education", "business",
                               "wedding", "vacation"], n),
        "dti": rng.uniform(0, 45, n).round(1),
        "open_accounts": rng.integers(0, 30, n),
        "delinquencies": np.where(rng.random(n) < .85, 0, rng.integers(1, 8, n)),
        "inquiries": rng.integers(0, 10, n),
        "revolving_util": rng.uniform(0, 100, n).round(1),
        "verified": rng.choice(["yes", "no"], n),
        "channel": rng.choice(["branch", "online", "broker"], n),
        "marital": rng.choice(["single", "married", "divorced", "widowed"], n),
        "dependents": rng.integers(0, 6, n),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "cosigner": rng.choice(["yes", "no"], n, p=[.1, .9]),
        "approved": np.where(approved, "yes", "no"),
    }
    return pd.DataFrame(cols)


def wide_table(n: int, seed: int = 36) -> pd.DataFrame:
    """The wide one: a 50-value state column, 24 columns, two protected attributes."""
    rng = np.random.default_rng(seed)
    cols: dict[str, object] = {"state": rng.choice(STATES, n),
                               "sex": rng.choice(["F", "M"], n),
                               "race": rng.choice(["A", "B", "C", "D"], n)}
    for i in range(20):
        cols[f"q{i:02d}"] = rng.choice(["never", "rarely", "sometimes", "often"], n)
    cols["hired"] = rng.choice(["yes", "no"], n, p=[.3, .7])
    return pd.DataFrame(cols)


#: The fault a new user meets: a run that fails after its noise (the disk, a crash), here
#: raised in the post-noise fairness stage the way tests/test_resume.py injects it.
FAIL_AFTER_NOISE = ("-c", "import sys\n"
                    "from privfair.cli import main\n"
                    "from privfair.core.errors import PrivfairError\n"
                    "from privfair.release.kinds.table import kind\n"
                    "def fail(*a, **k):\n"
                    "    raise PrivfairError('the disk filled up while publishing')\n"
                    "kind.fairness_transform = fail\n"
                    "sys.exit(main(sys.argv[1:]))\n")


#: What the first runs of this walk met and the fixes (each with a test that fails on the old
#: behaviour); the walk now checks the fixed behaviour and lists only what is left.
FIXED = [
    {"step": "loans: release mst --fairness tot --eta 0.05",
     "saw": "exit 2: 'TOT infeasible ... the intersectional setting formed 40 groups' with the "
            "draft's tot block adopted as proposed, at its own eta 0.05, on a table with three "
            "protected attributes; the draft never said that groups multiply",
     "fix": "contract draft's TOT comment: with several protected attributes, add "
            "`fairness: {groups: per_attribute}`; the walk's review pastes it and the release "
            "passes at eta 0.05 (tests/test_report_readability.py::"
            "test_draft_says_how_to_constrain_each_protected_attribute_on_its_own)"},
    {"step": "loans: release mst --fairness tot --eta 0.05 (the same refusal's line)",
     "saw": "'... or move more columns (tot.features).; the run drew noise: ...'",
     "fix": "the CLI drops a message's closing full stop before its notes "
            "(tests/test_resume.py::test_a_failed_runs_sentence_and_its_notes_read_as_one_line)"},
    {"step": "loans: releases list",
     "saw": "n_rows 0 for the model:dpsgd and graph:privpc releases (read as empty releases)",
     "fix": "'-' for a model, graph or embedding release (tests/test_report_honesty.py::"
            "test_releases_list_shows_no_row_count_for_a_model_or_graph)"},
]

#: Refusals and words the walk met that a new user should expect (judged not surprises).
EXPECTED = [
    "train --model pflr on a contract whose first protected column has three labels: one "
    "line naming --group (pflr needs a two-label group); the walk's table now has a binary sex",
    "evaluate without --privileged for a non-binary protected column: one line naming "
    "--privileged with an example; the walk now names every protected column's group",
    "train pflr / dpsgd at epsilon 1 on 3,000 rows: 'TRIVIAL (predicts one class ...); not "
    "called fair', exit 0: an honest first line, the model card says why",
    "discover: 'roles audit FAIL (... paths avoid every admissible attribute)', exit 0: a "
    "finding about the declared roles, not an error",
    "mst / aim: 'model-graph fairness FAIL (not claimed by this method)': said as not claimed",
]

def stop15_walk(work: Path, *, rows: int, wide_rows: int, aim_seconds: str) -> None:
    """Issue 35's walk: draft (CSV and Parquet) -> review -> check -> dry run -> releases
    (mst, prefair-greedy, aim, mst + TOT, one through Prefect) -> a failed run and its
    --resume -> train pflr and dpsgd -> discover -> ledger, releases, store -> evaluate."""
    loans_csv, loans_pq = work / "loans.csv", work / "loans.parquet"
    table = loans_table(rows)
    table.to_csv(loans_csv, index=False)
    table.to_parquet(loans_pq, index=False)
    draft, draft_pq = work / "loans.yaml", work / "loans-parquet.yaml"
    store, scratch = str(work / "releases"), str(work / "work")
    run("loans: contract draft (CSV)", "contract", "draft", "--data", str(loans_csv),
        "--out", str(draft))
    run("loans: contract draft (Parquet)", "contract", "draft", "--data", str(loans_pq),
        "--name", "loans", "--out", str(draft_pq))
    review(draft, protected=["sex", "race", "age_band"], admissible=["income", "grade"],
           outcome="approved", tot_features=["home", "term_months"], per_attribute=True)
    review(draft_pq, protected=["sex", "race", "age_band"], admissible=["income", "grade"],
           outcome="approved")
    contract = str(draft)
    run("loans: contract check --data (CSV)", "contract", "check", contract, "--data",
        str(loans_csv))
    run("loans: contract check --data (Parquet draft, Parquet data)", "contract", "check",
        str(draft_pq), "--data", str(loans_pq))
    table_args = ["--contract", contract, "--data", str(loans_csv), "--epsilon", "1",
                  "--delta", "1e-7", "--out", store, "--work-dir", scratch]
    run("loans: release --dry-run (mst + TOT)", "release", *table_args, "--method", "mst",
        "--fairness", "tot", "--eta", "0.05", "--dry-run")
    first = run("loans: release mst", "release", *table_args, "--method", "mst",
                "--no-prefect")
    run("loans: release prefair-greedy", "release", *table_args, "--method",
        "prefair-greedy", "--no-prefect")
    run(f"loans: release aim (--max-time {aim_seconds})", "release", *table_args, "--method",
        "aim", "--max-time", aim_seconds, "--no-prefect")
    tot = run("loans: release mst --fairness tot --eta 0.05", "release", *table_args,
              "--method", "mst", "--fairness", "tot", "--eta", "0.05", "--no-prefect")
    if not tot and "`privfair release --resume" in STEPS[-1]["last"]:
        # the user follows the refusal: its --resume command at the smallest feasible eta
        last = str(STEPS[-1]["last"])
        eta = re.search(r"smallest feasible eta on this synthetic table is ([0-9.]+)", last)
        tot = run("loans: the printed --resume at the suggested eta",
                  *shlex.split(last.split("`")[1])[1:],
                  *(["--eta", eta.group(1)] if eta else []), "--no-prefect")
    run("loans: release independent (through Prefect)", "release", *table_args, "--method",
        "independent")
    failed = run("loans: release mst that fails after its noise", "release", *table_args,
                 "--method", "mst", "--no-prefect", expect=2, prefix=FAIL_AFTER_NOISE)
    last = failed.splitlines()[-1] if failed else ""
    if "`privfair release --resume" in last:
        command = shlex.split(last.split("`")[1])[1:]
        run("loans: the printed --resume command", *command, "--no-prefect")
    else:
        SURPRISES.append({"step": "loans: release mst that fails after its noise",
                          "command": STEPS[-1]["command"],
                          "why": [f"the last line prints no --resume command: {last}"]})
    model_args = ["--contract", contract, "--data", str(loans_csv), "--epsilon", "1",
                  "--delta", "1e-6", "--out", store, "--work-dir", scratch, "--no-prefect"]
    run("loans: train --model pflr", "train", *model_args, "--model", "pflr")
    run("loans: train --model dpsgd (2 epochs)", "train", *model_args, "--model", "dpsgd",
        "--epochs", "2")
    run("loans: discover privpc", "discover", *model_args, "--method", "privpc",
        "--max-order", "1")
    run("loans: ledger show", "ledger", "show", "--out", store, "--dataset", "loans")
    run("loans: releases list", "releases", "list", "--out", store)
    run("loans: store check", "store", "check", "--out", store, "--work-dir", scratch)
    evaluations = str(work / "evaluations")
    run("loans: evaluate own data (mst, eps 1, 1 seed, + TOT)", "evaluate", "--contract",
        contract, "--data", str(loans_csv), "--methods", "mst", "--epsilons", "1", "--seeds",
        "1", "--etas", "0.05", "--classifiers", "logistic", "--privileged", *LOANS_PRIVILEGED,
        "--out", evaluations, "--no-prefect")
    for label, folder in (("mst", first), ("mst + TOT", tot)):
        if folder:
            run(f"loans: evaluate --release ({label})", "evaluate", "--release", folder,
                "--data", str(loans_csv), "--privileged", *LOANS_PRIVILEGED, "--out",
                evaluations)
    # the wide one: a 50-value state column, drafted as the user would (no options)
    wide_csv, wide_draft = work / "wide.csv", work / "wide.yaml"
    wide_table(wide_rows).to_csv(wide_csv, index=False)
    run("wide: contract draft", "contract", "draft", "--data", str(wide_csv), "--out",
        str(wide_draft))
    review(wide_draft, protected=["sex", "race"], admissible=["state"], outcome="hired")
    run("wide: contract check --data", "contract", "check", str(wide_draft), "--data",
        str(wide_csv))
    wide = run("wide: release mst", "release", "--contract", str(wide_draft), "--data",
               str(wide_csv), "--epsilon", "1", "--delta", "1e-7", "--method", "mst",
               "--out", store, "--work-dir", scratch, "--no-prefect")
    if wide:
        run("wide: evaluate --release", "evaluate", "--release", wide, "--data",
            str(wide_csv), "--privileged", "sex=M", "race=A", "--out", evaluations)
    run("wide: ledger show", "ledger", "show", "--out", store, "--dataset", "wide")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walk", choices=["stop15", "issue25"], default="stop15",
                        help="stop15: issue 35's walk on generated tables (default); issue25: "
                             "the earlier walk on COMPAS and a credit table")
    parser.add_argument("--out", help="write the steps here as JSON (default: "
                        "benchmarks/results/publisher_walk[_stop15].json)")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--rows", type=int, default=3000, help="stop15: rows of the loans table")
    parser.add_argument("--wide-rows", type=int, default=2000,
                        help="stop15: rows of the wide table")
    parser.add_argument("--quick", action="store_true",
                        help="stop15 with the smallest sizes (CI): 400 and 300 rows, AIM 5 s")
    parser.add_argument("--census-rows", type=int, default=0,
                        help="issue25: also walk a census-style table of this many rows "
                             "(0: skip)")
    args = parser.parse_args()
    global WORK
    work = WORK = Path(args.keep or tempfile.mkdtemp(prefix="privfair-walk-"))
    work.mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out or ROOT / "benchmarks/results" / (
        "publisher_walk_stop15.json" if args.walk == "stop15" else "publisher_walk.json"))
    started = time.perf_counter()
    published: list[str] = []
    if args.walk == "stop15":
        rows, wide_rows = (400, 300) if args.quick else (args.rows, args.wide_rows)
        stop15_walk(work, rows=rows, wide_rows=wide_rows, aim_seconds="5" if args.quick
                    else "15")
    else:
        published = issue25_walk(work, census_rows=args.census_rows)
    failed = [s["step"] for s in STEPS if s["exit"] != 0]
    out = {"walk": args.walk, "quick": args.quick, "cores": os.cpu_count(),
           "seconds": round(time.perf_counter() - started, 1), "steps": STEPS,
           "failed": failed, "surprises": SURPRISES,
           **({"fixed": FIXED, "expected": EXPECTED} if args.walk == "stop15" else {}),
           "releases": published,
           "work": str(work)}
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{len(STEPS)} steps, {len(failed)} failed, {len(SURPRISES)} surprises, "
          f"{out['seconds']} s; written to {out_path}")


def issue25_walk(work: Path, *, census_rows: int) -> list[str]:
    from privfair.contracts.datasets import dataset_path

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
    if census_rows:
        census_walk(census_rows, work)
    return [*compas, *published]

if __name__ == "__main__":
    main()
