"""Bad-input battery, round four (issue 45's "Done when"): every ``privfair`` command, both
drivers, one clear line or a correct release for each case.

How the cases were chosen
-------------------------
Written without reading the cases of ``benchmarks/bad_inputs.py``,
``benchmarks/bad_inputs_fresh.py`` or the tests that hold them; the sources were
``privfair --help`` (every subcommand and every option it lists), README.md, docs/guide
(contracts, budgets) and the library's public behaviour on a toy dataset made here at run
time (a 4-column CSV of 400 rows with its own contract, a 10-node edge list for ``embed``).

* **numbers**: every numeric option of every command (49 options listed in ``NUMBER_OPTIONS``
  from the ``--help`` pages) gets -1, 0 and a huge value whose expected outcome is stated
  per option (refused, or either refused before the reservation or run correctly), and a
  rotating share of the values no strict parser takes: nan, inf, -inf, 1e400, Arabic-Indic
  and full-width digits, ``1_0``, ``0x10``, an empty string, ``' 1'``, ``abc`` and, for
  whole-number options, ``1.5``.
* **paths**: for every path option (inputs, ``--out``, ``--work-dir``, exports, coarsening
  and causal-graph files, ``ledger import``) a missing file, a directory, a FIFO with no
  writer (a hang is a crash), ``/dev/zero``, a symlink loop, an empty file, and for every
  output each file the command did not make: its own input, the contract, the registry
  database and key, the store's catalog, a published release's files, a user's notes; the
  guarded files' bytes are compared before and after.
* **contracts**: YAML tricks (1.1 octal/hex/binary/sexagesimal/underscore numbers, anchors
  bomb, python tags, duplicate keys, tabs, BOM, CRLF, Latin-1, NUL), wrong types, duplicate
  and NFC-equal categories, bad bins, bad budgets, bad roles, names that are paths or too
  long, and huge domains, each through ``contract check`` and a publishing command.
* **data**: encodings, ragged rows, nulls, out-of-domain values, text and inf in a numeric
  column, empty file, header-only, BOM, CRLF, embedded newlines and quotes, missing,
  duplicate, extra and reordered columns, a corrupt Parquet file; value faults must publish
  (the contract's policy) and header faults must refuse before the reservation.
* **env**: a state home or registry that is a file, an unreachable PostgreSQL, an unknown
  registry URL, a read-only registry, store and work folder and a full disk (a 256 KiB
  tmpfs in a user and mount namespace, ``unshare -rm``; skipped where it cannot be made).
* **budgets, seeds, concurrency**: over, exactly at and far below the lifetime budget, the
  δ bounds, ``--seed`` with and without ``--insecure-seed`` and the same seed twice, and two
  releases started at once against a budget for one (exactly one must publish).
* **Prefect**: a sample of 12 cases (each kind of fault) also run through the Prefect flow.

Classes: *clear* (non-zero exit, one line naming the parameter or the path, nothing
reserved), *acceptable* (a correct run: e.g. a bad record gets the contract's policy and the
release publishes), *unclear* (a vague line, a refusal after the reservation, or a refusal of a
run that should publish), *wrongly accepted* (exit 0 where a refusal was due, or a guarded
file changed), *crash* (a traceback, an internal error, a timeout).

Run: ``nice -n 10 python benchmarks/bad_inputs_round4.py [--only WORD] [--no-prefect]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("clear", "acceptable", "unclear", "wrongly accepted", "crash")
TIMEOUT_S = 60.0
PREFECT_TIMEOUT_S = 150.0

TOY = """\
name: toy
version: "1.0.0"
columns:
  - name: sex
    type: categorical
    categories: [F, M]
    out_of_domain: drop
    nulls: drop
  - name: grp
    type: categorical
    categories: [a, b, c]
    out_of_domain: drop
    nulls: drop
  - name: age
    type: numeric
    integer: true
    bins: [0, 30, 60, 100]
    out_of_domain: clamp
    nulls: drop
  - name: y
    type: categorical
    categories: ["0", "1"]
    out_of_domain: drop
    nulls: drop
roles:
  protected: [sex]
  admissible: [grp, age]
  outcome: [y]
  free: []
budget: {epsilon: 4.0, delta: 1.0e-6}
reviewed: true
"""

TOY_TOT = TOY.replace("reviewed: true", """reviewed: true
tot:
  features: [grp, age]
  eta: 0.1
  distortion:
    combine: max
    thresholds: [0.99, 1.99]
    bounds: [0.2, 0.0]
    columns:
      age: {ordinal: [0, 1, 2]}
      grp: {changes: {a: {b: 1}}}
      y: {changes: {"1": {"0": 1}}}
""")

NODES = [f"v{i}" for i in range(10)]
GRAPH = f"""\
name: toygraph
version: "1.0.0"
columns:
  - name: source
    type: categorical
    categories: [{", ".join(NODES)}]
    out_of_domain: drop
    nulls: drop
  - name: target
    type: categorical
    categories: [{", ".join(NODES)}]
    out_of_domain: drop
    nulls: drop
budget: {{epsilon: 4.0, delta: 1.0e-6}}
reviewed: true
"""


def toy_rows(n: int = 400, seed: int = 1) -> list[tuple[str, str, int, int]]:
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        s = rng.choice("FM")
        rows.append((s, rng.choice("abc"), rng.randint(18, 90),
                     int(rng.random() < (0.3 if s == "F" else 0.5))))
    return rows


def toy_csv(rows=None) -> str:
    rows = toy_rows() if rows is None else rows
    return "sex,grp,age,y\n" + "".join(f"{s},{g},{a},{y}\n" for s, g, a, y in rows)


@dataclass
class Case:
    name: str
    command: str                      # the leaf command, e.g. "ledger export"
    category: str
    argv: list[str]
    expect: str = "refuse"            # refuse | accept | either
    words: tuple[str, ...] = ()       # one of these must be in the refusal line
    setup: Callable[[Path], None] | None = None
    guard: tuple[str, ...] = ()       # extra files (relative) whose bytes must not change
    prefect: bool = False
    env: dict[str, str] = field(default_factory=dict)
    wrap: str = ""                    # "tmpfs:<dir>" | "ro:<dir>"
    together: int = 1                 # >1: that many copies run at once (concurrency)
    timeout: float = TIMEOUT_S
    check: Callable[[Path], str | None] | None = None  # extra check after an exit 0
    late_ok: bool = False             # a machine fault: a refusal after the reservation is
    #                                   right if the reservation is cancelled (or charged)


@dataclass
class Outcome:
    name: str
    command: str
    category: str
    prefect: bool
    verdict: str
    why: str
    code: int | None
    line: str
    seconds: float


# ---------------------------------------------------------------- fixture


def _env(d: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIVFAIR_", "PREFECT_"))}
    env.update(PRIVFAIR_REGISTRY=str(d / "reg"), PRIVFAIR_STATE_HOME=str(d / "state"),
               PREFECT_HOME=str(d / "prefect"), HOME=str(d / "home"), DO_NOT_TRACK="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    return env


def _cli(argv: list[str], d: Path, env: dict[str, str] | None = None,
         timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privfair.cli", *argv], cwd=d,
                          env=env or _env(d), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def build_base(d: Path) -> Path:
    """A project folder: toy contract and data, a graph dataset, a store holding a table
    release (toy/v1) and a model release (toy/v2), the registry and a user's files."""
    (d / "home").mkdir(parents=True)
    (d / "toy.yaml").write_text(TOY)
    (d / "toy.csv").write_text(toy_csv())
    (d / "toytot.yaml").write_text(TOY_TOT)
    (d / "graph.yaml").write_text(GRAPH)
    edges = [(NODES[i], NODES[(i + k) % 10]) for i in range(10) for k in (1, 2)]
    (d / "edges.csv").write_text("source,target\n" + "".join(f"{a},{b}\n" for a, b in edges))
    (d / "notes.txt").write_text("a user's notes\n")
    (d / "proj" / "artefacts").mkdir(parents=True)
    (d / "proj" / "private-reports").mkdir()
    (d / "proj" / "artefacts" / "thesis.docx").write_text("thesis")
    (d / "proj" / "private-reports" / "taxes.pdf").write_text("taxes")
    (d / "proj" / "keep.txt").write_text("keep")
    old = time.time() - 40 * 86400
    for p in (d / "proj").rglob("*"):
        os.utime(p, (old, old))
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = toy_rows()
    pq.write_table(pa.table({"sex": [r[0] for r in rows], "grp": [r[1] for r in rows],
                             "age": [r[2] for r in rows], "y": [str(r[3]) for r in rows]}),
                   d / "toy.parquet")
    for argv in (["release", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon", "0.5",
                  "--delta", "1e-8", "--no-prefect", "--out", "rel"],
                 ["train", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon", "0.5",
                  "--model", "pflr", "--no-prefect", "--out", "rel"]):
        r = _cli(argv, d, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"fixture {argv[0]} failed: {r.stderr[-2000:]}")
    assert (d / "rel" / "toy" / "v1" / "synthetic.parquet").is_file()
    assert (d / "rel" / "toy" / "v2" / "weights.npz").is_file()
    return d


GUARDED = ("toy.yaml", "toytot.yaml", "toy.csv", "toy.parquet", "graph.yaml", "edges.csv", "notes.txt",
           "proj/artefacts/thesis.docx", "proj/private-reports/taxes.pdf", "proj/keep.txt",
           "reg/registry.key", "rel/toy/v1/manifest.json", "rel/toy/v1/synthetic.parquet",
           "rel/toy/v1/report.html", "rel/toy/v2/manifest.json", "rel/toy/v2/weights.npz")


def _digest(p: Path) -> str | None:
    try:
        if p.is_symlink() or not p.is_file():
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def _entries(d: Path) -> Counter:
    db = d / "reg" / "registry.sqlite"
    out: Counter = Counter()
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for (kind,) in con.execute("select kind from entries"):
                out[kind] += 1
        finally:
            con.close()
    except sqlite3.Error as exc:
        out["<unreadable: " + str(exc) + ">"] += 1
    return out


def _catalog_ok(d: Path) -> bool:
    try:
        head = (d / "rel" / "catalog.duckdb").read_bytes()[:16]
    except OSError:
        return False
    return b"DUCK" in head


# ---------------------------------------------------------------- running


def _wrap(c: Case, d: Path, argv: list[str]) -> list[str]:
    if not c.wrap:
        return argv
    how, _, where = c.wrap.partition(":")
    target = str(d / where)
    if how == "tmpfs":
        # the folder's own files, then the rest of the 256 KiB filled: the disk is full
        script = ('mount -t tmpfs -o size=256k tmpfs "$0" && cp -a "$0.seed/." "$0/" 2>/dev/null;'
                  ' dd if=/dev/zero of="$0/.filler" bs=4k 2>/dev/null; exec "$@"')
    else:  # read-only bind mount of an existing folder
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", script, target, *argv]


def _limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


#: The commands whose refusal is a report: one line per problem, then a summary line.
REPORTS = frozenset({"ledger verify", "store check", "contract check"})
#: The commands that run through a Prefect flow unless told ``--no-prefect``.
FLOW_COMMANDS = frozenset({"release", "train", "discover", "embed", "evaluate"})


def _one(c: Case, d: Path) -> tuple[int | None, str, str, bool]:
    argv = list(c.argv)
    if not c.prefect and c.command in FLOW_COMMANDS and "--no-prefect" not in argv:
        argv.append("--no-prefect")
    if c.prefect:
        argv = [a for a in argv if a != "--no-prefect"]
    cmd = _wrap(c, d, [sys.executable, "-m", "privfair.cli", *argv])
    env = _env(d)
    env.update({k: v.replace("{d}", str(d)) for k, v in c.env.items()})
    if any(v == "" for v in c.env.values()):
        env = {k: v for k, v in env.items() if v != ""}
    try:
        p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                             preexec_fn=_limit, start_new_session=True)
    except OSError as exc:
        return None, "", f"could not start: {exc}", False
    try:
        out, err = p.communicate(timeout=c.timeout)
        return p.returncode, out, err, False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        return None, out, err, True


def _line(out: str, err: str) -> str:
    lines = [s for s in err.splitlines() if s.strip()]
    for s in reversed(lines):
        if "error" in s.lower() or s.startswith("privfair"):
            return s.strip()
    if lines:
        return lines[-1].strip()
    lines = [s for s in out.splitlines() if s.strip()]
    return lines[-1].strip() if lines else ""


def _names(c: Case, line: str) -> bool:
    low = line.lower()
    return any(w.lower() in low for w in c.words) if c.words else True


def run_case(c: Case, d: Path, snapshot: Path) -> Outcome:
    """Run ``c`` in the project folder ``d``, restored first from ``snapshot`` (the store
    and the ledger record absolute paths, so a case runs where its fixture was built)."""
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(snapshot, d, symlinks=True)
    t0 = time.perf_counter()
    try:
        if c.setup is not None:
            c.setup(d)
        if c.wrap.startswith("tmpfs:"):
            target = d / c.wrap.partition(":")[2]
            if target.exists():
                target.rename(target.with_name(target.name + ".seed"))
            else:
                target.with_name(target.name + ".seed").mkdir(parents=True)
            target.mkdir(parents=True)
        before = {g: _digest(d / g) for g in GUARDED + c.guard}
        entries0 = _entries(d)
        if c.together > 1:
            with ThreadPoolExecutor(c.together) as pool:
                results = list(pool.map(lambda _: _one(c, d), range(c.together)))
        else:
            results = [_one(c, d)]
        after = {g: _digest(d / g) for g in before}
        entries1 = _entries(d)
        verdict, why = _classify(c, d, results, before, after, entries0, entries1)
        code, out, err, _ = results[0]
        line = " | ".join(_line(o, e) for _, o, e, _ in results)[:400]
    except Exception as exc:  # a fault of the battery itself: say so, never hide it
        verdict, why, code, line = "crash", f"battery: {type(exc).__name__}: {exc}", None, ""
    finally:
        for p in d.rglob("*"):  # a FIFO or a read-only folder left behind
            if p.is_fifo():
                p.unlink()
    return Outcome(c.name, c.command, c.category, c.prefect, verdict, why, code, line,
                   round(time.perf_counter() - t0, 2))


def _classify(c: Case, d: Path, results, before, after, e0: Counter, e1: Counter):
    changed = [g for g in before if before[g] is not None and before[g] != after[g]]
    new = e1 - e0
    if c.together > 1:
        return _classify_together(c, results, new, changed)
    code, out, err, timed_out = results[0]
    text = out + err
    line = _line(out, err)
    if timed_out:
        return "crash", f"no answer within {c.timeout:.0f} s"
    if "Traceback (most recent call last)" in text:
        return "crash", "traceback"
    if "internal error" in line:
        return "crash", "internal error"
    if changed:
        return "wrongly accepted", f"changed a file it did not make: {changed}"
    if any(k.startswith("<unreadable") for k in e1) and not any(
            k.startswith("<unreadable") for k in e0):
        return "wrongly accepted", f"registry destroyed: {list(e1)}"
    if (d / "rel" / "catalog.duckdb").exists() and not _catalog_ok(d):
        return "wrongly accepted", "catalog destroyed"
    if code == 0:
        if c.expect == "refuse":
            return "wrongly accepted", "exit 0"
        if c.check is not None:
            problem = c.check(d)
            if problem:
                return "wrongly accepted", problem
        return "acceptable", "ran"
    # a refusal
    if c.expect == "accept":
        return "unclear", (f"refused a run that should publish (reserved {new['reserve']})"
                           if new["reserve"] else "refused a run that should publish")
    if c.late_ok and new["reserve"] > new["cancel"] + new["spend"]:
        return "unclear", f"the reservation is left held ({dict(new)})"
    if not c.late_ok and (new["reserve"] or new["spend"]):
        return "unclear", f"late: refused after the reservation ({dict(new)})"
    if c.command in REPORTS:  # a report lists each problem on its own line, then a total
        line = out + err
    if len(line) < 12 or not _names(c, line):
        return "unclear", f"does not name {c.words}"
    return "clear", "refused"


def _classify_together(c: Case, results, new: Counter, changed):
    if any(t for *_, t in results):
        return "crash", "a run did not finish"
    if any("Traceback (most recent call last)" in o + e for _, o, e, _ in results):
        return "crash", "traceback"
    if changed:
        return "wrongly accepted", f"changed {changed}"
    ok = sum(1 for code, *_ in results if code == 0)
    if ok != 1 or new["publish"] != 1:
        return "wrongly accepted" if ok > 1 else "unclear", (
            f"{ok} of {len(results)} exited 0, {new['publish']} published (budget for one)")
    refused = [_line(o, e) for code, o, e, _ in results if code != 0]
    if not all(_names(c, line) for line in refused):
        return "unclear", f"the refusal does not name {c.words}: {refused}"
    return "acceptable", "exactly one published"


# ---------------------------------------------------------------- cases

BASE = {
    "release": ["release", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon", "0.3",
                "--delta", "1e-8", "--out", "rel"],
    "train": ["train", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon", "0.3",
              "--model", "dpsgd", "--epochs", "1", "--out", "rel"],
    "release-tot": ["release", "--contract", "toytot.yaml", "--data", "toy.csv", "--epsilon",
                    "0.3", "--delta", "1e-8", "--out", "rel"],
    "train-pflr": ["train", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon", "0.3",
                   "--model", "pflr-star", "--out", "rel"],
    "discover": ["discover", "--contract", "toy.yaml", "--data", "toy.csv", "--epsilon",
                 "0.3", "--out", "rel"],
    "embed": ["embed", "--contract", "graph.yaml", "--data", "edges.csv", "--epsilon", "0.3",
              "--out", "rel"],
    "discretize": ["discretize", "--contract", "toy.yaml", "--data", "toy.csv", "--out",
                   "codes.parquet"],
    "contract check": ["contract", "check", "toy.yaml", "--data", "toy.csv"],
    "contract draft": ["contract", "draft", "--data", "toy.csv", "--out", "draft.yaml"],
    "contract pin": ["contract", "pin", "toy.yaml", "--out", "pinned.yaml"],
    "ledger raise": ["ledger", "raise", "--contract", "toy.yaml", "--reason", "test"],
    "store gc": ["store", "gc", "--work-dir", ".privfair"],
    "store check": ["store", "check", "--out", "rel"],
    "evaluate": ["evaluate", "--contract", "toy.yaml", "--data", "toy.csv", "--out", "ev",
                 "--methods", "mst", "--epsilons", "1", "--seeds", "1", "--classifiers",
                 "logistic"],
    "audit": ["audit", "--noise-only", "--mechanism", "gaussian", "--quick"],
    "predict": ["predict", "--release", "rel/toy/v2", "--data", "toy.csv"],
}

# (base, flag, zero, negative, huge value, huge expectation, whole number?, extra argv)
NUMBER_OPTIONS: list[tuple[str, str, str, str, str, str, bool, tuple[str, ...]]] = [
    ("release", "--epsilon", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("release", "--delta", "refuse", "refuse", "2", "refuse", False, ()),
    ("release", "--seed", "either", "refuse", str(2 ** 80), "either", True,
     ("--insecure-seed",)),
    ("release", "--n-rows", "refuse", "refuse", str(10 ** 15), "refuse", True, ()),
    ("release-tot", "--eta", "either", "refuse", "5", "refuse", False, ("--fairness", "tot")),
    ("release", "--batch-size", "refuse", "refuse", str(10 ** 30), "either", True, ()),
    ("release", "--max-iters", "refuse", "refuse", str(10 ** 30), "either", True, ()),
    ("release", "--part-rows", "refuse", "refuse", str(10 ** 30), "either", True,
     ("--output", "partitioned", "--method", "mst")),
    ("release", "--max-time", "refuse", "refuse", "1e308", "either", False,
     ("--method", "aim")),
    ("release", "--gan-epochs", "refuse", "refuse", str(10 ** 12), "refuse", True,
     ("--method", "dpgan")),
    ("train", "--epsilon", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("train", "--delta", "refuse", "refuse", "1", "refuse", False, ()),
    ("train", "--seed", "either", "refuse", str(2 ** 80), "either", True, ("--insecure-seed",)),
    ("train", "--holdout", "either", "refuse", "1", "refuse", False, ()),
    ("train", "--evaluation-share", "either", "refuse", "1.5", "refuse", False, ()),
    ("train", "--epochs", "refuse", "refuse", str(10 ** 12), "refuse", True, ()),
    ("train", "--batch-size", "refuse", "refuse", str(10 ** 30), "refuse", True, ()),
    ("train", "--min-rows", "refuse", "refuse", str(10 ** 30), "either", True, ()),
    ("train", "--clip", "refuse", "refuse", "1e308", "either", False, ()),
    ("train", "--learning-rate", "refuse", "refuse", "1e308", "either", False, ()),
    ("train", "--hidden", "refuse", "refuse", "200000", "either", True, ()),
    ("train-pflr", "--alpha", "either", "refuse", "1e308", "either", False, ()),
    ("train-pflr", "--fairness-share", "refuse", "refuse", "1.5", "refuse", False, ()),
    ("discover", "--epsilon", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("discover", "--delta", "refuse", "refuse", "1", "refuse", False, ()),
    ("discover", "--seed", "either", "refuse", str(2 ** 80), "either", True,
     ("--insecure-seed",)),
    ("discover", "--alpha", "refuse", "refuse", "1.5", "refuse", False, ()),
    ("discover", "--max-order", "either", "refuse", str(10 ** 30), "either", True, ()),
    ("discover", "--max-rows", "refuse", "refuse", str(10 ** 30), "either", True, ()),
    ("embed", "--epsilon", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("embed", "--delta", "refuse", "refuse", "1", "refuse", False, ()),
    ("embed", "--seed", "either", "refuse", str(2 ** 80), "either", True, ("--insecure-seed",)),
    ("embed", "--dim", "refuse", "refuse", str(10 ** 9), "refuse", True, ()),
    ("embed", "--regularization", "either", "refuse", "1e308", "either", False, ()),
    ("discretize", "--batch-size", "refuse", "refuse", str(10 ** 30), "either", True, ()),
    ("contract check", "--max-examples", "either", "refuse", str(10 ** 30), "either", True,
     ()),
    ("contract draft", "--max-categories", "either", "refuse", str(10 ** 30), "either", True,
     ()),
    ("contract draft", "--max-codes", "either", "refuse", str(10 ** 30), "either", True, ()),
    ("ledger raise", "--epsilon", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("ledger raise", "--delta", "refuse", "refuse", "1", "refuse", False, ()),
    ("store gc", "--older-than", "either", "refuse", "1e308", "either", False, ()),
    ("evaluate", "--epsilons", "refuse", "refuse", "1e6", "refuse", False, ()),
    ("evaluate", "--seeds", "refuse", "refuse", str(10 ** 9), "refuse", True, ()),
    ("evaluate", "--etas", "either", "refuse", "5", "refuse", False, ()),
    ("evaluate", "--split-seed", "either", "refuse", str(2 ** 80), "either", True, ()),
    ("evaluate", "--test-fraction", "refuse", "refuse", "1", "refuse", False, ()),
    ("audit", "--scale", "refuse", "refuse", "1e308", "refuse", False, ()),
    ("audit", "--scale-noise", "refuse", "refuse", "1e308", "refuse", False, ()),
    ("audit", "--misdeclare", "refuse", "refuse", "aim-measure=1e308", "refuse", False, ()),
]

NEVER = ["nan", "inf", "-inf", "1e400", "\u0663", "\uff13", "1_0", "0x10", "", " 1", "abc",
         "0b11", "1e-400"]


def _with(argv: list[str], flag: str, value: str, extra: tuple[str, ...]) -> list[str]:
    out = list(argv)
    if flag in out:  # replace the base's own value
        i = out.index(flag)
        del out[i:i + 2]
    if flag == "--misdeclare" and "=" not in value:
        value = f"aim-measure={value}"
    return [*out, *extra, f"{flag}={value}" if value.startswith("-") or value == ""
            else flag, *([] if value.startswith("-") or value == "" else [value])]


def _cmd_of(base: str) -> str:
    return {"train-pflr": "train", "release-tot": "release"}.get(base, base)


def number_cases() -> list[Case]:
    cases = []
    k = 0
    for base, flag, zero, neg, huge, huge_expect, whole, extra in NUMBER_OPTIONS:
        words = (flag, flag.lstrip("-"), flag.lstrip("-").replace("-", "_"),
                 flag.lstrip("-").replace("-", " "))
        if flag == "--misdeclare":
            words += ("aim-measure",)
        if flag in ("--seed", "--gan-epochs"):  # one message for --epochs and --gan-epochs
            words += (flag.rpartition("-")[2],)
        slug = f"{base.replace(' ', '-')}{flag}"
        values = [("neg", "-1", neg), ("zero", "0", zero), ("huge", huge, huge_expect)]
        for _ in range(2):
            v = NEVER[k % len(NEVER)]
            k += 1
            values.append((f"never{k}", v, "refuse"))
        if whole:
            values.append(("frac", "1.5", "refuse"))
        for tag, value, expect in values:
            argv = _with(BASE[base], flag, value, extra)
            if flag == "--seed" and "--insecure-seed" not in argv:
                argv.append("--insecure-seed")
            cases.append(Case(f"num-{slug}-{tag}", _cmd_of(base), "numbers", argv, expect,
                              words, timeout=90 if expect != "refuse" else TIMEOUT_S))
    return cases


def _w(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    return setup


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda d: os.mkfifo(d / name)


def _loop(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        os.symlink(d / (name + ".b"), d / name)
        os.symlink(d / name, d / (name + ".b"))
    return setup


def _dir(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).mkdir(parents=True, exist_ok=True)


def _devzero(name: str) -> Callable[[Path], None]:
    return lambda d: os.symlink("/dev/zero", d / name)


def _chain(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for s in setups:
            s(d)
    return setup


def _set(argv: list[str], flag: str, value: str | None) -> list[str]:
    out = list(argv)
    if flag in out:
        i = out.index(flag)
        if value is None:
            del out[i:i + 2]
        else:
            out[i + 1] = value
    elif value is not None:
        out += [flag, value]
    return out


def _empty(name: str) -> Callable[[Path], None]:
    return _w(name, "")


BAD_INPUT_FILES: list[tuple[str, Callable[[str], Callable[[Path], None]] | None, str]] = [
    ("missing", None, "nothere.{ext}"),
    ("dir", _dir, "adir.{ext}"),
    ("fifo", _fifo, "pipe.{ext}"),
    ("devzero", _devzero, "zero.{ext}"),
    ("loop", _loop, "loop.{ext}"),
    ("empty", _empty, "empty.{ext}"),
]


def _fmt(maker, name: str, ext: str):
    return None if maker is None else maker(name.format(ext=ext))


def path_cases() -> list[Case]:
    cases: list[Case] = []
    # inputs that are not regular readable files
    inputs = [("release", "--contract", "yaml"), ("release", "--data", "csv"),
              ("train", "--contract", "yaml"), ("train", "--data", "csv"),
              ("discover", "--data", "csv"), ("embed", "--contract", "yaml"),
              ("embed", "--data", "csv"), ("discretize", "--contract", "yaml"),
              ("discretize", "--data", "csv"), ("contract draft", "--data", "csv"),
              ("ledger raise", "--contract", "yaml"), ("predict", "--data", "csv"),
              ("evaluate", "--data", "csv"), ("contract check", "--data", "csv")]
    for base, flag, ext in inputs:
        for tag, setup, name in BAD_INPUT_FILES:
            fname = name.format(ext=ext)
            if base == "release" and flag == "--data" and tag == "dir":
                continue  # a folder is a Parquet dataset there: covered below
            cases.append(Case(f"path-{base.replace(' ', '-')}{flag}-{tag}", base, "paths",
                              _set(BASE[base], flag, fname), "refuse",
                              (flag, fname, flag.lstrip("-")),
                              setup=_fmt(setup, name, ext), timeout=45))
    for tag, setup, name in BAD_INPUT_FILES:  # the contract positional of check and pin
        fname = name.format(ext="yaml")
        for base in ("contract check", "contract pin"):
            argv = list(BASE[base])
            argv[2] = fname
            cases.append(Case(f"path-{base.replace(' ', '-')}-{tag}", base, "paths", argv,
                              "refuse", (fname, "contract"), setup=_fmt(setup, name, "yaml"),
                              timeout=45))
        cases.append(Case(f"path-ledger-import-{tag}", "ledger import", "paths",
                          ["ledger", "import", name.format(ext="json")], "refuse",
                          (name.format(ext="json"), "file", "import"),
                          setup=_fmt(setup, name, "json"), timeout=45))
    for tag, setup, name in BAD_INPUT_FILES[:5]:
        fname = name.format(ext="yaml")
        cases.append(Case(f"path-discover--coarsen-{tag}", "discover", "paths",
                          [*BASE["discover"], "--coarsen", fname], "refuse",
                          ("--coarsen", fname, "coarsen"), setup=_fmt(setup, name, "yaml"),
                          timeout=45))
        cases.append(Case(f"path-release--causal-graph-{tag}", "release", "paths",
                          [*BASE["release"], "--method", "cfgan", "--causal-graph", fname],
                          "refuse", ("--causal-graph", fname, "causal"),
                          setup=_fmt(setup, name, "yaml"), timeout=45))
    cases.append(Case("path-release--data-empty-dir", "release", "paths",
                      _set(BASE["release"], "--data", "adir"), "refuse", ("adir", "--data"),
                      setup=_dir("adir")))
    # outputs onto files the command did not make
    targets = {"data": "toy.csv", "contract": "toy.yaml", "registry-db": "reg/registry.sqlite",
               "registry-key": "reg/registry.key", "catalog": "rel/catalog.duckdb",
               "manifest": "rel/toy/v1/manifest.json",
               "synthetic": "rel/toy/v1/synthetic.parquet", "notes": "notes.txt",
               "ledger-copy": "rel/toy/lifetime_ledger.json"}
    extra_guard = ("reg/registry.sqlite", "rel/catalog.duckdb", "rel/toy/lifetime_ledger.json")
    for tag, target in targets.items():
        for base, flag in (("discretize", "--out"), ("predict", "--out"),
                           ("contract draft", "--out"), ("contract pin", "--out")):
            cases.append(Case(f"out-{base.replace(' ', '-')}-onto-{tag}", base, "paths",
                              _set(BASE[base], flag, target), "refuse",
                              (flag, target, "exists", "overwrit"), guard=extra_guard))
        cases.append(Case(f"out-ledger-export-onto-{tag}", "ledger export", "paths",
                          ["ledger", "export", "--dataset", "toy", "--out", target], "refuse",
                          ("--out", target, "exists", "overwrit"), guard=extra_guard))
    for tag, target in {"data-as-store": "toy.csv", "registry-as-store": "reg",
                        "release-as-store": "rel/toy/v1", "contract-as-store": "toy.yaml",
                        "notes-as-store": "notes.txt", "state-as-store": "state"}.items():
        for base in ("release", "train", "discover"):
            cases.append(Case(f"out-{base}-{tag}", base, "paths",
                              _set(BASE[base], "--out", target), "refuse", ("--out", target),
                              guard=extra_guard))
    for tag, target in {"store-as-work": "rel", "registry-as-work": "reg",
                        "release-as-work": "rel/toy/v1", "file-as-work": "notes.txt"}.items():
        cases.append(Case(f"work-release-{tag}", "release", "paths",
                          [*BASE["release"], "--work-dir", target], "refuse",
                          ("--work-dir", target, "work"), guard=extra_guard))
        cases.append(Case(f"work-store-gc-{tag}", "store gc", "paths",
                          ["store", "gc", "--work-dir", target, "--older-than", "0"], "refuse",
                          ("--work-dir", target, "work"), guard=extra_guard))
    cases += [
        Case("work-store-gc-user-project", "store gc", "paths",
             ["store", "gc", "--work-dir", "proj", "--older-than", "0"], "either",
             ("--work-dir", "proj")),
        Case("work-store-gc-user-project-default-age", "store gc", "paths",
             ["store", "gc", "--work-dir", "proj"], "either", ("--work-dir", "proj")),
        Case("work-store-check-file", "store check", "paths",
             ["store", "check", "--out", "rel", "--work-dir", "notes.txt"], "refuse",
             ("--work-dir", "notes.txt")),
        Case("work-store-check-repair-project", "store check", "paths",
             ["store", "check", "--out", "rel", "--work-dir", "proj", "--repair"], "either",
             ("--work-dir", "proj")),
        Case("out-store-check-missing", "store check", "paths",
             ["store", "check", "--out", "nostore"], "refuse", ("nostore", "--out", "store")),
        Case("out-store-check-file", "store check", "paths",
             ["store", "check", "--out", "notes.txt"], "refuse", ("notes.txt", "--out")),
        Case("out-releases-list-file", "releases list", "paths",
             ["releases", "list", "--out", "notes.txt"], "refuse", ("notes.txt", "--out",
                                                                   "store")),
        Case("out-releases-list-missing", "releases list", "paths",
             ["releases", "list", "--out", "nostore"], "either", ("nostore", "store")),
        Case("out-ledger-show-file", "ledger show", "paths",
             ["ledger", "show", "--out", "notes.txt"], "refuse", ("notes.txt", "--out",
                                                                 "store")),
        Case("out-evaluate-onto-store", "evaluate", "paths",
             _set(BASE["evaluate"], "--out", "rel"), "refuse", ("--out", "rel", "store"),
             guard=extra_guard),
        Case("out-evaluate-onto-file", "evaluate", "paths",
             _set(BASE["evaluate"], "--out", "notes.txt"), "refuse", ("--out", "notes.txt")),
        Case("out-evaluate-onto-registry", "evaluate", "paths",
             _set(BASE["evaluate"], "--out", "reg"), "refuse", ("--out", "reg")),
        Case("out-ledger-export-dir", "ledger export", "paths",
             ["ledger", "export", "--dataset", "toy", "--out", "rel"], "refuse",
             ("--out", "rel")),
        Case("out-predict-onto-own-data-parquet", "predict", "paths",
             ["predict", "--release", "rel/toy/v2", "--data", "toy.parquet", "--out",
              "toy.parquet"], "refuse", ("--out", "toy.parquet")),
        Case("out-predict-bad-suffix", "predict", "paths",
             [*BASE["predict"], "--out", "pred.xlsx"], "refuse", ("--out", "pred.xlsx",
                                                                 "suffix", ".csv")),
        Case("out-discretize-into-missing-dir", "discretize", "paths",
             _set(BASE["discretize"], "--out", "no/such/dir/codes.parquet"), "either",
             ("--out", "no/such")),
        Case("out-discretize-name-too-long", "discretize", "paths",
             _set(BASE["discretize"], "--out", "x" * 300 + ".parquet"), "refuse",
             ("--out", "too long", "name")),
        Case("out-release-name-too-long", "release", "paths",
             _set(BASE["release"], "--out", "s" * 300), "refuse", ("--out", "too long")),
        Case("predict-release-missing", "predict", "paths",
             _set(BASE["predict"], "--release", "rel/toy/v9"), "refuse", ("--release",
                                                                          "rel/toy/v9")),
        Case("predict-release-is-table", "predict", "paths",
             _set(BASE["predict"], "--release", "rel/toy/v1"), "refuse", ("--release",
                                                                          "rel/toy/v1",
                                                                          "model")),
        Case("predict-release-is-file", "predict", "paths",
             _set(BASE["predict"], "--release", "notes.txt"), "refuse", ("--release",
                                                                         "notes.txt")),
        # a model release is scored on the real rows since issue 42.7 (it used to refuse)
        Case("evaluate-release-is-model", "evaluate", "paths",
             ["evaluate", "--release", "rel/toy/v2", "--data", "toy.csv", "--contract",
              "toy.yaml", "--out", "ev"], "accept"),
        Case("evaluate-release-missing", "evaluate", "paths",
             ["evaluate", "--release", "rel/toy/v7", "--data", "toy.csv", "--contract",
              "toy.yaml", "--out", "ev"], "refuse", ("--release", "rel/toy/v7")),
        Case("release-resume-unknown", "release", "paths",
             [*BASE["release"], "--resume", "nosuchrun"], "refuse", ("--resume", "nosuchrun",
                                                                   "run")),
        Case("release-resume-traversal", "release", "paths",
             [*BASE["release"], "--resume", "../../etc"], "refuse", ("--resume", "../../etc",
                                                                   "run")),
        Case("ledger-import-malformed-json", "ledger import", "paths",
             ["ledger", "import", "bad.json"], "refuse", ("bad.json", "json"),
             setup=_w("bad.json", "{not json")),
        Case("ledger-import-json-list", "ledger import", "paths",
             ["ledger", "import", "list.json"], "refuse", ("list.json", "ledger"),
             setup=_w("list.json", "[1, 2, 3]")),
        Case("ledger-import-own-store-copy", "ledger import", "paths",
             ["ledger", "import", "rel/toy/lifetime_ledger.json"], "refuse",
             ("toy", "already", "lifetime_ledger")),
        Case("ledger-export-unknown-dataset", "ledger export", "paths",
             ["ledger", "export", "--dataset", "nosuch"], "refuse", ("nosuch", "dataset")),
        Case("ledger-reset-verifying", "ledger reset", "paths",
             ["ledger", "reset", "--dataset", "toy", "--reason", "x"], "refuse",
             ("toy", "verif")),
        Case("ledger-reset-unknown", "ledger reset", "paths",
             ["ledger", "reset", "--dataset", "nosuch", "--reason", "x"], "refuse",
             ("nosuch", "dataset")),
        Case("ledger-reset-traversal", "ledger reset", "paths",
             ["ledger", "reset", "--dataset", "../../x", "--reason", "x"], "refuse",
             ("../../x", "dataset")),
        Case("ledger-export-empty-dataset", "ledger export", "paths",
             ["ledger", "export", "--dataset", ""], "refuse", ("dataset",)),
        Case("ledger-verify-ok", "ledger verify", "paths", ["ledger", "verify"], "accept"),
        Case("ledger-show-ok", "ledger show", "paths", ["ledger", "show", "--out", "rel"],
             "accept"),
        Case("releases-list-ok", "releases list", "paths",
             ["releases", "list", "--out", "rel", "--json"], "accept"),
        Case("store-check-ok", "store check", "paths", ["store", "check", "--out", "rel"],
             "accept"),
        Case("ledger-verify-edited-registry", "ledger verify", "paths", ["ledger", "verify"],
             "refuse", ("toy",), setup=_edit_registry),
        Case("store-check-edited-ledger-copy", "store check", "paths",
             ["store", "check", "--out", "rel"], "refuse", ("toy", "lifetime_ledger"),
             setup=_edit_copy),
    ]
    return cases


def _edit_registry(d: Path) -> None:
    con = sqlite3.connect(d / "reg" / "registry.sqlite")
    con.execute("drop trigger entries_no_update")
    con.execute("update entries set body = replace(body, '\"epsilon\":0.5', "
                "'\"epsilon\":0.005') where kind = 'reserve'")
    con.commit()
    con.close()


def _edit_copy(d: Path) -> None:
    p = d / "rel" / "toy" / "lifetime_ledger.json"
    doc = json.loads(p.read_text())

    def walk(x):
        if isinstance(x, dict):
            return {k: (v / 100 if k in ("rho", "spent_rho") and isinstance(v, float)
                        else walk(v)) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    p.write_text(json.dumps(walk(doc)))


# -- contracts

def _contract_variants() -> list[tuple[str, str | bytes, tuple[str, ...]]]:
    """(tag, contract text, words the refusal must name)."""
    t = TOY
    big = "[" + ", ".join(f"c{i}" for i in range(300_000)) + "]"
    return [
        ("yaml-syntax", t.replace("categories: [F, M]", "categories: [F, M"), ("line", "yaml")),
        ("tabs", t.replace("  - name: sex", "\t- name: sex"), ("line", "yaml", "tab")),
        ("octal-epsilon", t.replace("epsilon: 4.0", "epsilon: 010"), ("epsilon", "010")),
        ("hex-epsilon", t.replace("epsilon: 4.0", "epsilon: 0x0A"), ("epsilon", "0x0A")),
        ("binary-epsilon", t.replace("epsilon: 4.0", "epsilon: 0b11"), ("epsilon", "0b11")),
        ("sexagesimal-epsilon", t.replace("epsilon: 4.0", "epsilon: 1:30"), ("epsilon",)),
        ("underscore-epsilon", t.replace("epsilon: 4.0", "epsilon: 1_0"), ("epsilon",)),
        ("quoted-underscore-epsilon", t.replace("epsilon: 4.0", 'epsilon: "1_0"'),
         ("epsilon",)),
        ("quoted-arabic-epsilon", t.replace("epsilon: 4.0", 'epsilon: "\u0663"'),
         ("epsilon",)),
        ("quoted-hex-bin", t.replace("bins: [0, 30, 60, 100]", 'bins: [0, "0x1E", 60, 100]'),
         ("bins", "0x1E")),
        ("nan-epsilon", t.replace("epsilon: 4.0", "epsilon: .nan"), ("epsilon",)),
        ("inf-epsilon", t.replace("epsilon: 4.0", "epsilon: .inf"), ("epsilon",)),
        ("neg-epsilon", t.replace("epsilon: 4.0", "epsilon: -4"), ("epsilon",)),
        ("bool-epsilon", t.replace("epsilon: 4.0", "epsilon: yes"), ("epsilon",)),
        ("delta-one", t.replace("delta: 1.0e-6", "delta: 1"), ("delta",)),
        ("delta-zero", t.replace("delta: 1.0e-6", "delta: 0"), ("delta",)),
        ("budget-list", t.replace("budget: {epsilon: 4.0, delta: 1.0e-6}", "budget: [4, 1e-6]"),
         ("budget",)),
        ("octal-bin", t.replace("bins: [0, 30, 60, 100]", "bins: [0, 030, 060, 100]"),
         ("bins", "030")),
        ("hex-bin", t.replace("bins: [0, 30, 60, 100]", "bins: [0, 0x1E, 60, 100]"),
         ("bins", "0x1E")),
        ("bins-decreasing", t.replace("bins: [0, 30, 60, 100]", "bins: [0, 60, 30, 100]"),
         ("bins", "increasing")),
        ("bins-nan", t.replace("bins: [0, 30, 60, 100]", "bins: [0, .nan, 60, 100]"),
         ("bins",)),
        ("bins-one", t.replace("bins: [0, 30, 60, 100]", "bins: [0]"), ("bins",)),
        ("dup-key", t.replace("version: \"1.0.0\"", "version: \"1.0.0\"\nname: other"),
         ("name", "duplicate")),
        ("dup-column", t.replace("  - name: grp", "  - name: sex\n    type: categorical\n"
                                 "    categories: [x]\n  - name: grp"), ("sex", "duplicate")),
        ("dup-category", t.replace("categories: [a, b, c]", "categories: [a, b, a]"),
         ("grp", "duplicate", "'a'")),
        ("nfc-duplicate", t.replace("categories: [a, b, c]", 'categories: ["\u00e9", "e\u0301"'
                                    ', c]'), ("grp", "duplicate", "\u00e9")),
        ("int-str-category", t.replace('categories: ["0", "1"]', 'categories: [0, "0"]'),
         ("y", "duplicate", "categor")),
        ("columns-mapping", t.replace("columns:\n  - name: sex", "columns:\n  sex:\n    name: sex"
                                      ).split("  - name: grp")[0] + "roles: {}\n",
         ("columns",)),
        ("no-columns", "name: toy\nversion: '1'\ncolumns: []\nbudget: {epsilon: 1, "
         "delta: 1.0e-6}\n", ("columns",)),
        ("unknown-key", t.replace("reviewed: true", "reviewed: true\ncolour: blue"),
         ("colour",)),
        ("unknown-column-key", t.replace("    nulls: drop\n  - name: grp",
                                         "    nulls: drop\n    colour: red\n  - name: grp"),
         ("colour",)),
        ("role-unknown", t.replace("protected: [sex]", "protected: [gender]"), ("gender",)),
        ("role-overlap", t.replace("admissible: [grp, age]", "admissible: [grp, age, sex]"),
         ("sex",)),
        ("outcome-protected", t.replace("outcome: [y]", "outcome: [sex]").replace(
            "protected: [sex]", "protected: [sex]"), ("sex",)),
        ("type-unknown", t.replace("type: numeric", "type: float"), ("type", "float")),
        ("integer-string", t.replace("integer: true", "integer: \"maybe\""), ("integer",)),
        ("policy-unknown", t.replace("out_of_domain: clamp", "out_of_domain: explode"),
         ("out_of_domain", "explode")),
        ("other-not-category", t.replace("out_of_domain: drop\n    nulls: drop\n  - name: age",
                                         "out_of_domain: \"other:zzz\"\n    nulls: drop\n"
                                         "  - name: age"), ("zzz",)),
        ("nulls-not-category", t.replace("out_of_domain: drop\n    nulls: drop\n  - name: age",
                                         "out_of_domain: drop\n    nulls: \"as:qqq\"\n"
                                         "  - name: age"), ("qqq",)),
        ("categories-empty", t.replace("categories: [a, b, c]", "categories: []"),
         ("grp", "categories")),
        ("categories-null-item", t.replace("categories: [a, b, c]", "categories: [a, ~, c]"),
         ("grp", "categor")),
        ("name-traversal", t.replace("name: toy", "name: ../../escape"), ("name",)),
        ("name-slash", t.replace("name: toy", "name: a/b"), ("name",)),
        ("name-empty", t.replace("name: toy", 'name: ""'), ("name",)),
        ("name-long", t.replace("name: toy", "name: " + "n" * 300), ("name",)),
        ("name-number", t.replace("name: toy", "name: 12"), ("name",)),
        ("yaml-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
         "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
         "e: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e]\n"
         "g: [*f, *f, *f, *f, *f, *f, *f, *f]\n" + t, ("alias", "anchor", "yaml", "a")),
        ("python-tag", t.replace("name: toy", "name: !!python/object/apply:os.system [\"true\"]"),
         ("tag", "yaml", "python")),
        ("bom", b"\xef\xbb\xbf" + t.encode(), ("bom", "contract")),
        ("crlf", t.replace("\n", "\r\n"), ("contract",)),
        ("latin1", t.replace("categories: [a, b, c]", "categories: [a, b, \u00e7]").encode(
            "latin-1"), ("utf-8", "encod")),
        ("nul-byte", t.replace("name: toy", "name: to\x00y"), ("name", "nul", "yaml",
                                                                "character")),
        ("scalar", "just a string\n", ("contract", "mapping")),
        ("top-list", "- 1\n- 2\n", ("contract", "mapping")),
        ("huge-domain", t.replace("categories: [a, b, c]", "categories: " + big),
         ("grp", "categories", "domain", "memory", "size", "cells")),
        ("registry-other", t.replace("reviewed: true", "reviewed: true\nregistry_id: "
                                     "0123456789abcdef0123456789abcdef"), ("registry",)),
        ("dialect-bad-delimiter", t.replace("reviewed: true", "reviewed: true\ndialect: "
                                            "{delimiter: \";;\"}"), ("delimiter",)),
        ("dialect-bad-terminator", t.replace("reviewed: true", "reviewed: true\ndialect: "
                                             "{line_terminator: foo}"), ("line_terminator",)),
        ("dialect-neg-bytes", t.replace("reviewed: true", "reviewed: true\ndialect: "
                                        "{max_record_bytes: -1}"), ("max_record_bytes",)),
        ("open-domain-bare-size", t.replace("  - name: y\n", "  - name: note\n    type: text\n"
                                            "    open_domain: {universe: 1000}\n  - name: y\n"),
         ("universe", "note")),
        ("dp-bins-inverted", t.replace("    integer: true\n    bins: [0, 30, 60, 100]",
                                       "    dp_bins: 3\n    lower: 100\n    upper: 0"),
         ("lower", "upper", "age")),
        ("labels-mismatch", t.replace("bins: [0, 30, 60, 100]", "bins: [0, 30, 60, 100]\n"
                                      "    labels: [young, old]"), ("labels", "age")),
        ("tot-unknown-feature", t.replace("reviewed: true", "reviewed: true\ntot: {features: "
                                          "[nosuch], eta: 0.1}"), ("nosuch", "tot")),
        ("fairness-unknown", t.replace("reviewed: true", "reviewed: true\nfairness: "
                                       "{protected: [nosuch]}"), ("nosuch", "fairness")),
    ]


#: Variants a contract reader may accept as they are: YAML allows a byte-order mark and
#: CRLF line ends, and the meaning is unchanged.
HARMLESS = frozenset({"bom", "crlf"})
#: Variants that are valid contracts, refused only where they matter: a huge domain where a
#: model must hold it, a registry_id of another registry where a budget is charged.
VALID_ELSEWHERE = {"huge-domain": {"train"},
                   "registry-other": {"release", "train", "discover", "embed",
                                      "ledger raise"}}


def contract_cases() -> list[Case]:
    cases = []
    for i, (tag, text, words) in enumerate(_contract_variants()):
        setup = _w("c.yaml", text)
        expect = "either" if tag in HARMLESS or tag in VALID_ELSEWHERE else "refuse"
        cases.append(Case(f"contract-check-{tag}", "contract check", "contracts",
                          ["contract", "check", "c.yaml"], expect, words, setup=setup))
        if i % 2 and tag != "huge-domain":
            continue  # every other variant through a second command too
        base = ("release", "train", "discover", "discretize", "ledger raise",
                "contract pin")[i // 2 % 6]
        argv = _set(BASE[base], "--contract", "c.yaml") if base != "contract pin" else [
            "contract", "pin", "c.yaml", "--out", "p.yaml"]
        if tag == "huge-domain":
            argv = _set(_set(BASE["train-pflr"], "--contract", "c.yaml"), "--model", "pflr")
            base = "train"
        if tag in VALID_ELSEWHERE:
            expect = "refuse" if base in VALID_ELSEWHERE[tag] else "either"
        cases.append(Case(f"contract-{base.replace(' ', '-')}-{tag}", base, "contracts", argv,
                          expect, words, setup=setup))
    other = {t: x for t, x, _ in _contract_variants()}["registry-other"]
    cases += [Case(f"contract-{b.replace(' ', '-')}-registry-other-pinned", b, "contracts",
                   _set(BASE[b], "--contract", "c.yaml"), "refuse", ("registry",),
                   setup=_w("c.yaml", other)) for b in ("release", "ledger raise")]
    cases.append(Case("contract-release-huge-domain", "release", "contracts",
                      _set(BASE["release"], "--contract", "c.yaml"), "either",
                      ("grp", "domain", "memory", "size", "cells"),
                      setup=_w("c.yaml", {t: x for t, x, _ in _contract_variants()}[
                          "huge-domain"]), timeout=90))
    return cases


# -- data

def _rows_text(*extra: str, header: str = "sex,grp,age,y", body: bool = True) -> str:
    lines = [header] + ([f"{s},{g},{a},{y}" for s, g, a, y in toy_rows()] if body else [])
    return "\n".join(lines + list(extra)) + "\n"


def _manifest_has_policy(d: Path) -> str | None:
    found = sorted((d / "rel" / "toy").glob("v*/manifest.json"))
    if len(found) < 3:
        return f"exit 0 but no new release folder ({len(found)} versions)"
    return None


def data_cases() -> list[Case]:
    rows = _rows_text()
    variants: list[tuple[str, str | bytes, str, tuple[str, ...]]] = [
        ("latin1-values", _rows_text("F,\u00e7,30,1").encode("latin-1"), "accept", ()),
        ("utf16", rows.encode("utf-16"), "refuse", ("header", "sex", "column", "utf")),
        ("ragged-extra", _rows_text("F,a,30,1,EXTRA", "M,b"), "accept", ()),
        ("nulls", _rows_text(",a,30,1", "F,,30,1", "F,a,,1", "F,a,30,"), "accept", ()),
        ("out-of-domain", _rows_text("X,a,30,1", "F,z,30,1", "F,a,300,1", "F,a,30,7"),
         "accept", ()),
        ("text-in-numeric", _rows_text("F,a,old,1", "F,a,3O,1"), "accept", ()),
        ("inf-nan-numeric", _rows_text("F,a,inf,1", "F,a,nan,1", "F,a,1e999,0", "F,a,-inf,0"),
         "accept", ()),
        ("empty-file", "", "refuse", ("header", "empty", "column", "data")),
        ("header-only", "sex,grp,age,y\n", "either", ("row", "data", "empty")),
        ("bom", "\ufeff" + rows, "either", ("header", "sex", "bom")),
        ("crlf", rows.replace("\n", "\r\n"), "refuse", ("crlf", "line_terminator", "\\r")),
        ("embedded-newline", _rows_text('F,"a\nb",30,1', 'M,"a",30,"1\n"'), "accept", ()),
        ("embedded-quotes", _rows_text('F,"a""b",30,1', 'F,a"b,30,1', '"F",a,30,1'),
         "accept", ()),
        ("open-quote", _rows_text('M,"A,HS,30,low'), "accept", ()),
        ("missing-column", "sex,grp,age\n" + "".join(f"{s},{g},{a}\n" for s, g, a, _ in
                                                     toy_rows()), "refuse", ("y", "column")),
        ("duplicate-column", "sex,grp,age,y,sex\n" + "".join(
            f"{s},{g},{a},{y},{s}\n" for s, g, a, y in toy_rows()), "refuse",
         ("sex", "duplicate", "twice")),
        ("extra-column", "sex,grp,age,y,zz\n" + "".join(
            f"{s},{g},{a},{y},1\n" for s, g, a, y in toy_rows()), "either", ("zz", "column")),
        ("reordered", "y,age,grp,sex\n" + "".join(
            f"{y},{a},{g},{s}\n" for s, g, a, y in toy_rows()), "accept", ()),
        ("header-case", rows.replace("sex,grp,age,y", "Sex,Grp,Age,Y", 1), "refuse",
         ("sex", "column")),
        ("header-spaces", rows.replace("sex,grp,age,y", "sex, grp, age, y", 1), "either",
         ("grp", "column")),
        ("nul-bytes", _rows_text("F,a\x00,30,1", "\x00\x00\x00"), "accept", ()),
        ("long-field", _rows_text("F," + "a" * 200_000 + ",30,1"), "accept", ()),
        ("all-out-of-domain", "sex,grp,age,y\n" + "Q,z,30,9\n" * 50, "accept", ()),
        ("one-row", "sex,grp,age,y\nF,a,30,1\n", "accept", ()),
        ("binary-garbage", bytes(range(256)) * 40, "refuse", ("header", "column", "sex")),
        ("gzip", __import__("gzip").compress(rows.encode()), "refuse", ("header", "column",
                                                                         "sex", "gzip")),
    ]
    cases = []
    for i, (tag, text, expect, words) in enumerate(variants):
        bases = ("release", "discretize") if i % 3 == 0 else ("release", "train") if (
            i % 3 == 1) else ("release", "discover", "contract check")
        for base in bases:
            e = expect
            if base == "contract check" and expect == "accept":
                e = "either"  # the local diagnostic exits 1 while the data breaks the contract
            if base == "discretize" and expect == "accept":
                e = "accept"
            chk = _manifest_has_policy if (base == "release" and e == "accept") else None
            cases.append(Case(f"data-{base.replace(' ', '-')}-{tag}", base, "data",
                              _set(BASE[base], "--data", "d.csv"), e, words or ("d.csv",),
                              setup=_w("d.csv", text), check=chk, timeout=90))
    # Parquet: a wrong type, a corrupt file, a file with the wrong suffix
    cases += [
        Case("data-release-parquet-corrupt", "release", "data",
             _set(BASE["release"], "--data", "bad.parquet"), "refuse",
             ("bad.parquet", "parquet"), setup=_corrupt_parquet),
        Case("data-release-parquet-as-csv", "release", "data",
             _set(BASE["release"], "--data", "p.csv"), "refuse", ("p.csv", "header",
                                                                  "column"),
             setup=lambda d: shutil.copy(d / "toy.parquet", d / "p.csv")),
        Case("data-release-parquet-int-category", "release", "data",
             _set(BASE["release"], "--data", "t.parquet"), "either", ("y", "type"),
             setup=_typed_parquet, check=_manifest_has_policy),
        Case("data-train-parquet-ok", "train", "data",
             _set(BASE["train"], "--data", "toy.parquet"), "accept"),
        Case("data-embed-self-loops-unknown", "embed", "data",
             _set(BASE["embed"], "--data", "e.csv"), "accept",
             setup=_w("e.csv", "source,target\nv0,v0\nv1,zz\nv2,v3\nv2,v3\n,v4\n")),
        Case("data-embed-header-only", "embed", "data", _set(BASE["embed"], "--data", "e.csv"),
             "either", ("row", "edge"), setup=_w("e.csv", "source,target\n")),
        Case("data-predict-out-of-domain", "predict", "data",
             _set(BASE["predict"], "--data", "p.csv"), "either", ("p.csv", "value"),
             setup=_w("p.csv", "sex,grp,age,y\nQ,z,999,1\nF,a,30,0\n")),
        Case("data-predict-missing-column", "predict", "data",
             _set(BASE["predict"], "--data", "p.csv"), "refuse", ("grp", "column"),
             setup=_w("p.csv", "sex,age\nF,30\n")),
        Case("data-evaluate-header-case", "evaluate", "data",
             _set(BASE["evaluate"], "--data", "d.csv"), "refuse", ("sex", "column"),
             setup=_w("d.csv", rows.replace("sex,grp,age,y", "Sex,Grp,Age,Y", 1))),
        Case("data-train-one-label", "train", "data",
             _set(_set(BASE["train-pflr"], "--data", "d.csv"), "--model", "pflr"), "accept",
             setup=_w("d.csv", "sex,grp,age,y\n" + "F,a,30,1\nM,b,40,1\n" * 100)),
        Case("data-train-one-group", "train", "data",
             _set(_set(BASE["train"], "--data", "d.csv"), "--model", "dpsgd-f"), "accept",
             setup=_w("d.csv", "sex,grp,age,y\n" + "F,a,30,1\nF,b,40,0\n" * 100)),
        Case("data-discover-constant", "discover", "data", _set(BASE["discover"], "--data",
                                                                "d.csv"), "accept",
             setup=_w("d.csv", "sex,grp,age,y\n" + "F,a,30,1\n" * 200)),
    ]
    return cases


def _corrupt_parquet(d: Path) -> None:
    b = (d / "toy.parquet").read_bytes()
    (d / "bad.parquet").write_bytes(b[: len(b) // 2] + b"garbage" + b[-8:])


def _typed_parquet(d: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = toy_rows()
    pq.write_table(pa.table({"sex": [r[0] for r in rows], "grp": [r[1] for r in rows],
                             "age": [r[2] for r in rows], "y": [r[3] for r in rows]}),
                   d / "t.parquet")


# -- environment, budgets, seeds, concurrency

def env_cases() -> list[Case]:
    cases = [
        Case("env-state-home-file", "release", "env", BASE["release"], "refuse",
             ("PRIVFAIR_STATE_HOME", "notes.txt"), env={"PRIVFAIR_STATE_HOME": "{d}/notes.txt"}),
        Case("env-state-home-file-ledger-show", "ledger show", "env", ["ledger", "show"],
             "refuse", ("PRIVFAIR_STATE_HOME", "notes.txt"),
             env={"PRIVFAIR_STATE_HOME": "{d}/notes.txt"}),
        Case("env-registry-file", "release", "env", BASE["release"], "refuse",
             ("PRIVFAIR_REGISTRY", "notes.txt"), env={"PRIVFAIR_REGISTRY": "{d}/notes.txt"}),
        Case("env-registry-file-verify", "ledger verify", "env", ["ledger", "verify"],
             "refuse", ("PRIVFAIR_REGISTRY", "notes.txt"),
             env={"PRIVFAIR_REGISTRY": "{d}/notes.txt"}),
        Case("env-registry-postgres-unreachable", "release", "env", BASE["release"], "refuse",
             ("PRIVFAIR_REGISTRY", "registry", "connect"),
             env={"PRIVFAIR_REGISTRY": "postgresql://u:p@127.0.0.1:1/none"}),
        Case("env-registry-unknown-scheme", "release", "env", BASE["release"], "refuse",
             ("PRIVFAIR_REGISTRY", "registry", "ftp"),
             env={"PRIVFAIR_REGISTRY": "ftp://example.invalid/reg"}),
        Case("env-registry-new-folder", "release", "env", BASE["release"], "refuse",
             ("registry",), env={"PRIVFAIR_REGISTRY": "{d}/reg2"}),
        Case("env-registry-deleted-recreated", "release", "env", BASE["release"], "refuse",
             ("registry",), setup=lambda d: shutil.rmtree(d / "reg")),
        Case("env-home-is-a-file", "ledger show", "env", ["ledger", "show", "--out", "rel"],
             "refuse", ("notes.txt", "PRIVFAIR_STATE_HOME", "HOME"),
             env={"HOME": "{d}/notes.txt", "PRIVFAIR_STATE_HOME": ""}),
        Case("env-prefect-home-file", "release", "env", BASE["release"], "refuse",
             ("PREFECT_HOME", "notes.txt"), prefect=True,
             env={"PREFECT_HOME": "{d}/notes.txt"}, timeout=PREFECT_TIMEOUT_S),
    ]
    if _can_unshare():
        cases += [
            Case("env-full-disk-store", "release", "env", BASE["release"], "refuse",
                 ("space", "rel", "disk"), wrap="tmpfs:rel", late_ok=True),
            Case("env-full-disk-work-dir", "release", "env", BASE["release"], "refuse",
                 ("space", ".privfair", "disk"), wrap="tmpfs:.privfair", late_ok=True),
            Case("env-full-disk-state-home", "release", "env", BASE["release"], "refuse",
                 ("space", "state", "disk"), wrap="tmpfs:state", late_ok=True),
            Case("env-full-disk-discretize", "discretize", "env",
                 _set(BASE["discretize"], "--out", "full/codes.parquet"), "either",
                 ("space", "full", "disk"), wrap="tmpfs:full", late_ok=True,
                 setup=lambda d: (d / "toy.csv").write_text(toy_csv(toy_rows(20000)))),
            Case("env-full-disk-export", "ledger export", "env",
                 ["ledger", "export", "--dataset", "toy", "--out", "full/l.json"], "either",
                 ("space", "full", "disk"), wrap="tmpfs:full", late_ok=True,
                 setup=lambda d: None),
            Case("env-read-only-store", "release", "env", BASE["release"], "refuse",
                 ("read-only", "rel", "permission"), wrap="ro:rel"),
            Case("env-read-only-registry", "release", "env", BASE["release"], "refuse",
                 ("read-only", "reg", "registry", "permission"), wrap="ro:reg"),
            Case("env-read-only-work-dir", "release", "env", BASE["release"], "refuse",
                 ("read-only", ".privfair", "permission", "work"), wrap="ro:.privfair"),
            Case("env-read-only-state", "release", "env", BASE["release"], "refuse",
                 ("read-only", "state", "permission"), wrap="ro:state"),
            Case("env-read-only-prefect-home", "release", "env", BASE["release"], "refuse",
                 ("read-only", "prefect", "PREFECT_HOME"), wrap="ro:prefect", prefect=True,
                 setup=_dir("prefect"), timeout=PREFECT_TIMEOUT_S),
        ]
    return cases


def _can_unshare() -> bool:
    if not shutil.which("unshare"):
        return False
    with tempfile.TemporaryDirectory() as t:
        r = subprocess.run(["unshare", "-rm", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs {t}"], capture_output=True)
    return r.returncode == 0


SMALL = TOY.replace("name: toy", "name: small").replace("epsilon: 4.0", "epsilon: 1.0")


def budget_cases() -> list[Case]:
    small = _w("small.yaml", SMALL)
    rel = ["release", "--contract", "small.yaml", "--data", "toy.csv", "--delta", "1e-7",
           "--out", "rel"]
    return [
        Case("budget-over-lifetime", "release", "budgets", [*rel, "--epsilon", "2"], "refuse",
             ("budget", "epsilon"), setup=small),
        Case("budget-over-lifetime-train", "train", "budgets",
             _set(_set(BASE["train"], "--contract", "small.yaml"), "--epsilon", "5"),
             "refuse", ("budget", "epsilon"), setup=small),
        Case("budget-over-lifetime-discover", "discover", "budgets",
             _set(_set(BASE["discover"], "--contract", "small.yaml"), "--epsilon", "3"),
             "refuse", ("budget", "epsilon"), setup=small),
        Case("budget-exactly-at", "release", "budgets",
             ["release", "--contract", "small.yaml", "--data", "toy.csv", "--epsilon", "1",
              "--delta", "1e-6", "--out", "rel"], "either", ("budget",), setup=small),
        Case("budget-tiny-epsilon", "release", "budgets", [*rel, "--epsilon", "1e-6"],
             "accept", setup=small),
        Case("budget-below-tiny-epsilon", "release", "budgets", [*rel, "--epsilon", "9e-7"],
             "refuse", ("epsilon",), setup=small),
        Case("budget-tiny-delta", "release", "budgets",
             ["release", "--contract", "small.yaml", "--data", "toy.csv", "--epsilon", "0.1",
              "--delta", "1e-49", "--out", "rel"], "accept", setup=small),
        Case("budget-delta-at-bound", "release", "budgets",
             ["release", "--contract", "small.yaml", "--data", "toy.csv", "--epsilon", "0.1",
              "--delta", "1e-50", "--out", "rel"], "refuse", ("delta",), setup=small),
        Case("budget-delta-above-lifetime", "release", "budgets",
             ["release", "--contract", "small.yaml", "--data", "toy.csv", "--epsilon", "0.1",
              "--delta", "1e-5", "--out", "rel"], "either", ("delta", "budget"), setup=small),
        Case("budget-second-over", "release", "budgets",
             _set(_set(BASE["release"], "--epsilon", "3.99"), "--delta", "1e-6"), "refuse",
             ("budget", "epsilon")),
        Case("budget-raise-above-contract", "ledger raise", "budgets",
             ["ledger", "raise", "--contract", "toy.yaml", "--epsilon", "8", "--reason", "x"],
             "refuse", ("epsilon", "contract")),
        Case("budget-raise-below-spend", "ledger raise", "budgets",
             ["ledger", "raise", "--contract", "toy.yaml", "--epsilon", "0.01", "--reason",
              "x"], "refuse", ("epsilon", "spen", "lower", "below")),
        Case("budget-raise-unknown-dataset", "ledger raise", "budgets",
             ["ledger", "raise", "--contract", "small.yaml", "--reason", "x"], "either",
             ("small", "dataset"), setup=small),
        Case("budget-raise-empty-reason", "ledger raise", "budgets",
             ["ledger", "raise", "--contract", "toy.yaml", "--reason", ""], "refuse",
             ("reason",)),
        Case("budget-dry-run-over", "release", "budgets",
             [*rel, "--epsilon", "2", "--dry-run"], "refuse", ("budget", "epsilon"),
             setup=small),
        Case("budget-evaluate-over-100", "evaluate", "budgets",
             _set(BASE["evaluate"], "--epsilons", "101"), "refuse", ("epsilon",)),
    ]


def seed_cases() -> list[Case]:
    return [
        Case("seed-without-insecure", "release", "seeds", [*BASE["release"], "--seed", "5"],
             "refuse", ("--insecure-seed", "insecure")),
        Case("seed-insecure-without-seed", "release", "seeds",
             [*BASE["release"], "--insecure-seed"], "refuse", ("--seed", "seed")),
        Case("seed-insecure-without-seed-train", "train", "seeds",
             [*BASE["train"], "--insecure-seed"], "refuse", ("--seed", "seed")),
        Case("seed-without-insecure-embed", "embed", "seeds", [*BASE["embed"], "--seed", "5"],
             "refuse", ("--insecure-seed", "insecure")),
        Case("num-train--hidden-two-huge-layers", "train", "numbers",
             [*BASE["train"], "--hidden", "200000", "200000"], "refuse", ("hidden",)),
        Case("num-train--hidden-many-layers", "train", "numbers",
             [*BASE["train"], "--hidden", *["50000"] * 20], "refuse", ("hidden",)),
        Case("seed-ok", "release", "seeds", [*BASE["release"], "--seed", "5",
                                             "--insecure-seed"], "accept"),
        Case("seed-twice", "release", "seeds", [*BASE["release"], "--seed", "6",
                                                "--insecure-seed"], "refuse",
             ("seed",), setup=lambda d: _cli([*BASE["release"], "--seed", "6",
                                              "--insecure-seed", "--no-prefect"], d)),
        Case("seed-discover-without-insecure", "discover", "seeds",
             [*BASE["discover"], "--seed", "1"], "refuse", ("--insecure-seed", "insecure")),
    ]


def concurrency_cases() -> list[Case]:
    one = TOY.replace("name: toy", "name: once").replace("epsilon: 4.0", "epsilon: 1.0")
    argv = ["release", "--contract", "once.yaml", "--data", "toy.csv", "--epsilon", "0.8",
            "--delta", "1e-7", "--out", "rel"]
    return [
        Case("concurrent-two-releases-budget-for-one", "release", "concurrency", argv,
             together=2, words=("budget", "epsilon"), setup=_w("once.yaml", one), timeout=120),
        Case("concurrent-three-releases-budget-for-one", "release", "concurrency",
             [*argv[:-2], "--out", "rel2"], together=3, words=("budget", "epsilon"),
             setup=_w("once.yaml", one), timeout=120),
    ]


def prefect_cases() -> list[Case]:
    """A sample through the Prefect flow: each kind of fault once (the temporary server
    takes ~10 s a run, so few)."""
    one = TOY.replace("name: toy", "name: once").replace("epsilon: 4.0", "epsilon: 1.0")
    argv = ["release", "--contract", "once.yaml", "--data", "toy.csv", "--epsilon", "0.8",
            "--delta", "1e-7", "--out", "rel"]
    t = PREFECT_TIMEOUT_S
    return [
        Case("prefect-release-ok-bad-records", "release", "prefect",
             _set(BASE["release"], "--data", "d.csv"), "accept", prefect=True, timeout=t,
             setup=_w("d.csv", _rows_text("X,a,30,1", "F,a,old,1", "F,a,30,1,EXTRA")),
             check=_manifest_has_policy),
        Case("prefect-release-epsilon-nan", "release", "prefect",
             _set(BASE["release"], "--epsilon", "nan"), "refuse", ("epsilon",), prefect=True,
             timeout=t),
        Case("prefect-release-over-budget", "release", "prefect",
             _set(_set(BASE["release"], "--epsilon", "3.99"), "--delta", "1e-6"), "refuse",
             ("budget", "epsilon"),
             prefect=True, timeout=t),
        Case("prefect-release-contract-fifo", "release", "prefect",
             _set(BASE["release"], "--contract", "pipe.yaml"), "refuse", ("pipe.yaml",),
             setup=_fifo("pipe.yaml"), prefect=True, timeout=t),
        Case("prefect-release-out-onto-data", "release", "prefect",
             _set(BASE["release"], "--out", "toy.csv"), "refuse", ("--out", "toy.csv"),
             prefect=True, timeout=t),
        Case("prefect-release-octal-budget", "release", "prefect",
             _set(BASE["release"], "--contract", "c.yaml"), "refuse", ("epsilon", "010"),
             setup=_w("c.yaml", TOY.replace("epsilon: 4.0", "epsilon: 010")), prefect=True,
             timeout=t),
        Case("prefect-release-crlf-data", "release", "prefect",
             _set(BASE["release"], "--data", "d.csv"), "refuse",
             ("crlf", "line_terminator", "\\r"),
             setup=_w("d.csv", _rows_text().replace("\n", "\r\n")), prefect=True, timeout=t),
        Case("prefect-train-hidden-huge", "train", "prefect",
             [*BASE["train"], "--hidden", "200000", "200000"], "refuse", ("hidden",),
             prefect=True, timeout=t),
        Case("prefect-discover-alpha-hex", "discover", "prefect",
             [*BASE["discover"], "--alpha", "0x1"], "refuse", ("alpha",), prefect=True,
             timeout=t),
        Case("prefect-embed-dim-zero", "embed", "prefect", [*BASE["embed"], "--dim", "0"],
             "refuse", ("dim",), prefect=True, timeout=t),
        Case("prefect-evaluate-bad-epsilons", "evaluate", "prefect",
             _set(BASE["evaluate"], "--epsilons", "-1"), "refuse", ("epsilon",), prefect=True,
             timeout=t),
        Case("prefect-seed-without-insecure", "release", "prefect",
             [*BASE["release"], "--seed", "3"], "refuse", ("insecure",), prefect=True,
             timeout=t),
        Case("prefect-state-home-file", "release", "prefect", BASE["release"], "refuse",
             ("PRIVFAIR_STATE_HOME", "notes.txt"), env={"PRIVFAIR_STATE_HOME":
                                                        "{d}/notes.txt"},
             prefect=True, timeout=t),
        Case("prefect-concurrent-budget-for-one", "release", "prefect", argv, together=2,
             words=("budget", "epsilon"), setup=_w("once.yaml", one), prefect=True,
             timeout=t),
    ]


def all_cases(*, prefect: bool = True) -> list[Case]:
    cases = (number_cases() + path_cases() + contract_cases() + data_cases() + env_cases()
             + budget_cases() + seed_cases() + concurrency_cases())
    if prefect:
        cases += prefect_cases()
    names = Counter(c.name for c in cases)
    dup = [n for n, k in names.items() if k > 1]
    if dup:
        raise ValueError(f"duplicate case names: {dup[:5]}")
    return cases


def _table(outcomes: list[Outcome]) -> str:
    commands = sorted({o.command for o in outcomes})
    head = f"{'command':16}{'cases':>6}" + "".join(f"{k[:10]:>12}" for k in CLASSES)
    lines = [head, "-" * len(head)]
    for cmd in commands + ["(all)"]:
        sel = [o for o in outcomes if cmd == "(all)" or o.command == cmd]
        lines.append(f"{cmd:16}{len(sel):6}" + "".join(
            f"{sum(1 for o in sel if o.verdict == k):12}" for k in CLASSES))
    pre = [o for o in outcomes if o.prefect]
    lines.append(f"{'(prefect)':16}{len(pre):6}" + "".join(
        f"{sum(1 for o in pre if o.verdict == k):12}" for k in CLASSES))
    return "\n".join(lines)


def run_battery(*, only: str = "", prefect: bool = True, jobs: int = 2, every: int = 1,
                out: Path | None = None, verbose: bool = True) -> dict:
    cases = [c for c in all_cases(prefect=prefect) if only in c.name][::every]
    base = Path(tempfile.mkdtemp(prefix="privfair-round4-"))
    t0 = time.perf_counter()
    try:
        import queue

        slots: queue.Queue = queue.Queue()
        for k in range(max(1, jobs)):
            build_base(base / f"slot{k}")
            shutil.copytree(base / f"slot{k}", base / f"snapshot{k}", symlinks=True)
            slots.put(k)
        quick = [c for c in cases if not c.prefect]
        slow = [c for c in cases if c.prefect]
        outcomes: list[Outcome] = []

        def go(c: Case) -> Outcome:
            k = slots.get()
            try:
                o = run_case(c, base / f"slot{k}", base / f"snapshot{k}")
            finally:
                slots.put(k)
            if verbose and o.verdict not in ("clear", "acceptable"):
                print(f"[{o.verdict}] {o.name}: {o.why}: {o.line}", file=sys.stderr,
                      flush=True)
            return o

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            outcomes += list(pool.map(go, quick))
        outcomes += [go(c) for c in slow]  # one Prefect server at a time
    finally:
        shutil.rmtree(base, ignore_errors=True)
    totals = Counter(o.verdict for o in outcomes)
    result = {
        "cases": len(outcomes),
        "totals": {k: totals.get(k, 0) for k in CLASSES},
        "prefect_cases": sum(1 for o in outcomes if o.prefect),
        "commands": sorted({o.command for o in outcomes}),
        "categories": dict(Counter(o.category for o in outcomes)),
        "wall_s": round(time.perf_counter() - t0, 1),
        "not_clear": [o.__dict__ for o in outcomes if o.verdict not in ("clear",
                                                                        "acceptable")],
        "table": _table(outcomes),
        "slowest": sorted(([o.name, o.seconds] for o in outcomes), key=lambda x: -x[1])[:8],
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**result, "outcomes": [o.__dict__ for o in outcomes]},
                                  indent=1, ensure_ascii=False) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="cases whose name holds this")
    parser.add_argument("--no-prefect", action="store_true", help="skip the Prefect sample")
    parser.add_argument("--every", type=int, default=1, help="every k-th case only")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                             "bad_inputs_round4.json"))
    args = parser.parse_args(argv)
    if args.list:
        cases = all_cases(prefect=not args.no_prefect)
        for c in cases:
            print(c.category, c.command, c.name, c.expect, " ".join(c.argv), sep="\t")
        print(len(cases), dict(Counter(c.category for c in cases)), file=sys.stderr)
        return 0
    partial = bool(args.only) or args.every > 1 or args.no_prefect
    result = run_battery(only=args.only, prefect=not args.no_prefect, jobs=args.jobs,
                         every=args.every, out=None if partial else Path(args.out))
    print(result["table"])
    print(json.dumps({k: v for k, v in result.items() if k not in ("table", "not_clear")},
                     indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
