"""Cells, the resumable results log, verdicts and paper tables (shared by every section).

A *cell* is one (paper table, setting, seed) run. Each finished cell is appended to
``results.jsonl`` as one JSON line; a later run skips the cells already there, so an
interrupted run resumes where it stopped. Evaluation reads real data: nothing here is a
privacy-protected release.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1]
ROOT = BENCHMARKS.parent
PAPER_TABLES = Path(__file__).resolve().parent / "paper_tables"
for _path in (str(ROOT), str(BENCHMARKS)):  # the benchmark scripts import ``_common``
    if _path not in sys.path:
        sys.path.insert(0, _path)

#: Row verdicts. ``uninformative``: the compared outputs are identical across the methods the
#: row compares, or its classifier predicts the majority class, in every run: it tests
#: nothing, whatever its number.
VERDICTS = ("within", "better", "worse", "uninformative", "not comparable")
#: Verdicts of rows that compare a number of ours with the paper's.
COMPARED = ("within", "better", "worse")
#: The error of a cell the report found no record of: listed apart from cells that failed.
NOT_RUN = "not run"


def cell(section: str, setting: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A cell: its section, setting and seed, and a stable id built from them."""
    key = ",".join(f"{k}={setting[k]}" for k in sorted(setting))
    return {"section": section, "id": f"{section}|{key}|seed={seed}", "setting": dict(setting),
            "seed": seed}


def load_results(path: Path) -> dict[str, dict[str, Any]]:
    """Finished cells of ``results.jsonl`` by id (a torn last line is ignored)."""
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[record["id"]] = record
    return done


def git(*args: str, cwd: Path = ROOT) -> str | None:
    """``git ARGS`` in ``cwd``: its stripped output, or None (no git, not a checkout)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def code_version() -> str:
    """The checkout's commit, and a digest of its uncommitted changes to tracked files (the
    reports under ``results/`` excluded: they are output). It names the code that wrote a
    report; a cell's own code is its section's :func:`section_code`."""
    head = git("rev-parse", "HEAD")
    if head is None:
        return "unknown"
    diff = git("diff", "HEAD", "--", ".", ":(exclude)benchmarks/reproduce/results")
    if not diff:
        return head
    return f"{head}+{hashlib.sha256(diff.encode()).hexdigest()[:12]}"


#: Top-level packages of this repository whose modules a section can run.
_OWN_PACKAGES = ("privfair", "benchmarks")


def _module_file(name: str) -> Path | None:
    """The file of repository module ``name`` (a dotted name), or None when it is not ours."""
    parts = name.split(".")
    # Outside the two packages, a name may be a benchmark script imported by its bare name
    # (``_common``, ``reproduce``: the scripts put ``benchmarks/`` on ``sys.path``).
    base = (ROOT if parts[0] in _OWN_PACKAGES else BENCHMARKS).joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _nodes_that_run(tree: Any) -> Iterable[Any]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (never executed)."""
    import ast

    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imported_names(path: Path) -> set[str]:
    """Dotted module names ``path`` may load: every import at any depth (inside functions
    too, not under ``if TYPE_CHECKING:``), each imported name as a possible submodule or
    lazy export, every attribute read of a package of ours (``privfair.Name``), and every
    string constant naming a module of ours (``importlib.import_module`` calls) except in
    a package that exports lazily, whose strings load only through
    :func:`_lazy_export_modules`."""
    import ast

    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] if "." in package else package
        package += ".__init__"
    tree = ast.parse(path.read_text(), filename=str(path))
    lazy = _exports_lazily(tree)
    names: set[str] = set()
    for node in _nodes_that_run(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[:-node.level]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in _OWN_PACKAGES):
            names.add(f"{node.value.id}.{node.attr}")
        elif (not lazy and isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.split(".")[0] in _OWN_PACKAGES
              and all(part.isidentifier() for part in node.value.split("."))):
            names.add(node.value)
    return names


def _exports_lazily(tree: Any) -> bool:
    """Whether a module defines a module-level ``__getattr__`` (PEP 562 lazy exports)."""
    import ast

    return any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
               for node in tree.body)


def _lazy_export_modules(name: str) -> list[str]:
    """The modules that loading ``name`` (``package.Attribute``) runs when ``package``
    exports ``Attribute`` lazily: the module defining it or, when that cannot be told
    (a constant), every module the package's lazy table names. Empty otherwise."""
    import ast
    import importlib
    import inspect

    package, _, attribute = name.rpartition(".")
    path = _module_file(package) if package else None
    if path is None or path.name != "__init__.py":
        return []
    tree = ast.parse(path.read_text(), filename=str(path))
    if not _exports_lazily(tree):
        return []
    try:
        defining = inspect.getmodule(getattr(importlib.import_module(package), attribute))
    except Exception:  # noqa: BLE001  (not an export: nothing lazy is loaded)
        return []
    if defining is not None and defining.__name__ != package:
        return [defining.__name__]
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.startswith(package + ".")]


def section_sources(section: str) -> list[Path]:
    """The repository files whose content can change a cell of ``section``, sorted.

    They are the section module's import closure within the repository, found statically
    and over-approximated (see :func:`_imported_names`; every parent package's
    ``__init__.py`` too; a lazy export the module that defines it), the package data
    under ``privfair/`` (contracts, embedded datasets) and ``pyproject.toml`` (the pinned
    dependencies). The paper tables are not among them: they change verdicts, which
    every report recomputes, not cells.
    """
    seen: set[Path] = set()
    visited: set[str] = set()
    queue = [f"benchmarks.reproduce.{section}"]
    while queue:
        name = queue.pop()
        if name in visited:
            continue
        visited.add(name)
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            path = _module_file(".".join(parts[:depth]))
            if path is not None and path not in seen:
                seen.add(path)
                queue.extend(_imported_names(path))
        if _module_file(name) is None:
            queue.extend(_lazy_export_modules(name))
    data = {p for p in (ROOT / "privfair").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    return sorted(seen | data | {ROOT / "pyproject.toml"})


def section_code(section: str) -> str:
    """A cell's code version: ``src-`` and a digest of :func:`section_sources`'s paths and
    contents as they are on disk now (uncommitted changes included).

    A cell recorded under another version is stale: :func:`pending` runs it again. A commit
    that changes none of those files (tests, docs, another section's method) leaves the
    section's cells current, so a report at the final commit may reuse them, and says so
    by this digest rather than by trust.
    """
    digest = hashlib.sha256()
    for path in section_sources(section):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"src-{digest.hexdigest()[:16]}"


def cell_code(code: str | Mapping[str, str] | None, c: Mapping[str, Any]) -> str | None:
    """The code version ``c`` runs under: ``code`` itself, or its entry for ``c``'s section."""
    if code is None or isinstance(code, str):
        return code
    return code[c["section"]]


def run_cell(c: Mapping[str, Any], runner: Callable[[Mapping[str, Any]], dict]
             ) -> dict[str, Any]:
    """Run one cell and return its record (never raises: a failure is recorded).

    Parameters
    ----------
    c : mapping
        The cell (see :func:`cell`).
    runner : callable
        Its section's ``run``: the cell's metrics.

    Returns
    -------
    dict
        The cell with ``status`` (``ok`` or ``failed``), ``error``, ``metrics``, ``wall_s``
        and, for a failure, ``traceback``.
    """
    start = time.perf_counter()
    trace = None
    try:
        metrics, status, error = runner(c), "ok", None
    except Exception as exc:  # noqa: BLE001  (a failed cell is reported, not fatal)
        metrics, status = {}, "failed"
        error = f"{type(exc).__name__}: {exc}"
        trace = traceback.format_exc()
    record = {**c, "status": status, "error": error, "metrics": metrics,
              "wall_s": round(time.perf_counter() - start, 2)}
    if trace:
        record["traceback"] = trace
    return record


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append one finished cell to ``results.jsonl`` (one JSON line, flushed on close)."""
    with path.open("a") as handle:
        handle.write(json.dumps(record, default=_json_default) + "\n")


def pending(cells: Sequence[Mapping[str, Any]], done: Mapping[str, Mapping[str, Any]], *,
            retry_failed: bool = True, code: str | Mapping[str, str] | None = None
            ) -> list[Mapping[str, Any]]:
    """The cells still to run: not in ``done``, failed there when ``retry_failed``, or, when
    ``code`` is given (one version, or one per section), recorded under another code version
    (a record without one included)."""
    return [c for c in cells if c["id"] not in done
            or (done[c["id"]]["status"] != "ok" and retry_failed)
            or (code is not None and done[c["id"]].get("code") != cell_code(code, c))]


def cells_code(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many of ``records`` ran under each code version ("not recorded" for old ones)."""
    counts: dict[str, int] = {}
    for record in records:
        key = str(record.get("code") or "not recorded")
        counts[key] = counts.get(key, 0) + 1
    return counts


def describe(record: Mapping[str, Any], *, detail: bool = True) -> str:
    """One log line for a finished cell; without ``detail``, an error only by its type (its
    message may quote values computed from the real rows)."""
    error = record["error"]
    if error and not detail:
        error = error.split(":", 1)[0]
    return (f"[{record['wall_s']:7.1f} s] {record['status']:6s} {record['id']}"
            + (f"  ({error})" if error else ""))


def longest_first(cells: Sequence[Mapping[str, Any]], expected_s: Mapping[str, float]
                  ) -> list[Mapping[str, Any]]:
    """The cells in the order a pool should start them.

    Longest first by ``expected_s`` (seconds by id; unknown cells count as longest), so no
    long cell is left alone at the end; ties by seed, so a run without timings (a first
    ``--full``) gives every row its seed 0 before any row its seed 1.
    """
    return sorted(cells, key=lambda c: (-expected_s.get(c["id"], math.inf), c["seed"]))


def _one_thread_per_worker() -> None:
    # Two worker processes share two cores: a BLAS or torch pool per worker would
    # oversubscribe them. torch reads OMP_NUM_THREADS when a cell first imports it.
    import os

    os.environ["OMP_NUM_THREADS"] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def run_cells(cells: Sequence[Mapping[str, Any]], runner: Callable[[Mapping[str, Any]], dict],
              path: Path, *, retry_failed: bool = True, log=print, workers: int = 1,
              expected_s: Mapping[str, float] | None = None,
              code: str | Mapping[str, str] | None = None, reuse_stale: bool = False
              ) -> list[dict[str, Any]]:
    """Run each cell not yet in ``path`` and append its record; return all records.

    A cell that raises is recorded with ``status: failed`` and the error, and is run again
    by the next invocation when ``retry_failed``.

    Parameters
    ----------
    cells : sequence of mapping
        The cells, in the order of the returned records.
    runner : callable
        A cell's metrics; with ``workers > 1`` a module-level function (it is pickled).
    path : Path
        ``results.jsonl``: read first (finished cells are skipped), appended to by this
        process only, one line per cell as it finishes.
    retry_failed : bool
        Run again the cells recorded as failed.
    log : callable
        Receives one line per finished cell, and a failed cell's traceback.
    workers : int
        Processes running cells at once (one BLAS/torch thread each). 1 runs them here, in
        order.
    expected_s : mapping of str to float, optional
        Seconds a cell took before, by id: with ``workers > 1`` cells start in the order of
        :func:`longest_first`.
    code : str or mapping of str to str, optional
        The code version, or each section's (:func:`section_code`): stamped on every new
        record, and a recorded cell of another version runs again unless ``reuse_stale``.
        None stamps nothing and reuses any recorded cell.
    reuse_stale : bool
        Keep cells recorded under another code version (a resume across commits, said so in
        the report by ``cells_code``); new records are still stamped with ``code``.

    Returns
    -------
    list of dict
        One record per cell, in the order of ``cells``.
    """
    done = load_results(path)
    todo = pending(cells, done, retry_failed=retry_failed, code=None if reuse_stale else code)

    def finish(record: dict[str, Any]) -> None:
        if record.get("traceback"):
            log(record["traceback"])
        record = {k: v for k, v in record.items() if k != "traceback"}
        if code is not None:
            record["code"] = cell_code(code, record)
        append_record(path, record)
        log(describe(record))
        done[record["id"]] = record

    if workers <= 1 or len(todo) <= 1:
        for c in todo:
            finish(run_cell(c, runner))
    else:
        import concurrent.futures as cf
        import multiprocessing

        todo = longest_first(todo, expected_s or {})
        # forkserver: workers fork from a fresh single-threaded server, never from a caller
        # that runs threads (a Prefect test harness, torch), which could fork a held lock.
        with cf.ProcessPoolExecutor(max_workers=workers,
                                    mp_context=multiprocessing.get_context("forkserver"),
                                    initializer=_one_thread_per_worker) as pool:
            futures = {pool.submit(run_cell, c, runner): c for c in todo}
            for future in cf.as_completed(futures):
                try:
                    record = future.result()
                except Exception as exc:  # noqa: BLE001  (a worker died: the cell failed)
                    record = {**futures[future], "status": "failed", "metrics": {},
                              "error": f"{type(exc).__name__}: {exc}", "wall_s": 0.0}
                finish(record)
    return [done[c["id"]] for c in cells]


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def mean_sd(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean, sample sd (0 for one value) and count of the finite values (nan, nan, 0 if none)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return math.nan, math.nan, 0
    sd = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return statistics.fmean(finite), sd, len(finite)


def standard_error(sd: float, n: int) -> float:
    """The standard error of a mean of ``n`` values with sample sd ``sd`` (0 for one value:
    the spread is then the paper's alone)."""
    if n <= 1 or not _finite(sd):
        return 0.0
    return sd / math.sqrt(n)


def verdict(ours: float, ours_se: float, paper: float | None, paper_sd: float | None = None,
            *, better: str | None = None, rel_tol: float = 0.1, abs_tol: float = 0.0,
            extra_sd: float = 0.0, extra_label: str = "") -> tuple[str, str]:
    """Compare our mean with the paper's number; returns ``(verdict, why)``.

    The paper's spread is its sd when it reports one, else the section's stated tolerance,
    ``rel_tol`` of its value (at least ``abs_tol``); it is combined with the *standard error
    of our mean* (``sqrt(a² + b²)``), not our seeds' sd: more seeds make our number more
    certain, never the comparison looser. Within that spread the verdict is ``within``;
    outside it ``better`` or ``worse`` by ``better`` (``"higher"``, ``"lower"``,
    ``"abs_lower"`` for a disparity, or None when only agreement counts, which makes any gap
    ``worse``). A missing number on either side is ``not comparable``.

    Parameters
    ----------
    ours, ours_se : float
        Our mean over seeds and its standard error (see :func:`standard_error`).
    paper, paper_sd : float or None
        The paper's number and its reported sd.
    better : {"higher", "lower", "abs_lower"} or None
        Which direction is an improvement.
    rel_tol, abs_tol : float
        The tolerance stated for the metric when the paper gives no sd; ``abs_tol`` also
        floors the combined spread.
    extra_sd, extra_label : float, str
        A stated per-metric tolerance measured in the same report: the sd of the paper's
        number over what its one run fixed and no run of ours can reproduce (SAFES's one
        80/20 split), combined with the other two. It is only sound when our own runs vary
        that choice too (our mean is then over it, and our standard error includes it).

    Returns
    -------
    tuple of str
        The verdict (``within``, ``better``, ``worse`` or ``not comparable``) and a one-line
        reason.
    """
    if paper is None or not _finite(paper):
        return "not comparable", "the paper reports no number for this cell"
    if not _finite(ours):
        return "not comparable", "no finite result of ours"
    have_sd = paper_sd is not None and _finite(paper_sd)
    spread = paper_sd if have_sd else max(rel_tol * abs(paper), abs_tol)
    extra = extra_sd if _finite(extra_sd) else 0.0
    spread = max(math.hypot(spread, ours_se if _finite(ours_se) else 0.0, extra), abs_tol)
    gap = ours - paper
    basis = "paper sd" if have_sd else f"stated tolerance {rel_tol:.0%} of the paper's value"
    if extra:
        basis += f" ⊕ {extra_label or 'stated sd'} {extra:.3g}"
    if abs(gap) <= spread:
        return "within", (f"|ours − paper| = {abs(gap):.3g} ≤ {spread:.3g} ({basis} ⊕ our "
                          "standard error)")
    if better == "higher":
        improved = gap > 0
    elif better == "lower":
        improved = gap < 0
    elif better == "abs_lower":
        improved = abs(ours) < abs(paper)
    else:
        improved = False
    word = "better" if improved else "worse"
    return word, (f"ours − paper = {gap:+.3g}, outside ±{spread:.3g} ({basis} ⊕ our standard "
                  "error)")


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def paper_table(name: str) -> list[dict[str, Any]]:
    """Rows of ``paper_tables/<name>.csv`` with ``value``/``sd`` as floats (None if blank)."""
    with (PAPER_TABLES / f"{name}.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in ("value", "sd"):
            text = (row.get(key) or "").strip()
            row[key] = float(text) if text else None
    return rows


def paper_json(name: str) -> dict[str, Any]:
    """``paper_tables/<name>.json``."""
    return json.loads((PAPER_TABLES / f"{name}.json").read_text())


#: Paper-row columns that are its number, not which cell it is.
_NUMBER_COLUMNS = ("value", "sd")


def paper_cell_key(setting: str, metric: str, paper: Mapping[str, Any] | None) -> str:
    """Which paper cell a row compares: the paper row's columns but its number, and the
    metric.

    Rows built from one paper row compare one paper cell. A paper row that carries only its
    number and source (a ratio or a difference built by the section) is identified by the
    row's own setting, so it is never merged with another. A section whose paper prints one
    experiment in several tables passes its own key (``compare_row(paper_cell=...)``).
    """
    columns = {k: v for k, v in (paper or {}).items() if k not in _NUMBER_COLUMNS}
    if set(columns) <= {"source"}:
        return json.dumps(["row", setting, metric], ensure_ascii=False)
    return json.dumps(["paper", metric, sorted((k, str(v)) for k, v in columns.items())],
                      ensure_ascii=False)


def counter_run(label: str, values: Sequence[float | None], paper: Mapping[str, Any] | None,
                *, better: str | None = None, rel_tol: float = 0.1, abs_tol: float = 0.0,
                extra_sd: float = 0.0, extra_label: str = "") -> dict[str, Any]:
    """A measured counter-run at the paper's setting, judged by the same rule as its row."""
    mean, sd, n = mean_sd(values)
    se = standard_error(sd, n)
    word, _ = verdict(mean, se, paper["value"] if paper else None,
                      paper["sd"] if paper else None, better=better, rel_tol=rel_tol,
                      abs_tol=abs_tol, extra_sd=extra_sd, extra_label=extra_label)
    return {"label": label, "ours": mean, "ours_sd": sd, "ours_se": se, "n": n,
            "verdict": word}


def compare_row(setting: str, metric: str, values: Sequence[float | None],
                paper: Mapping[str, Any] | None, *, better: str | None = None,
                rel_tol: float = 0.1, abs_tol: float = 0.0, why: str | None = None,
                paper_accounting: Sequence[float | None] | None = None,
                counter_runs: Mapping[str, Sequence[float | None]] | None = None,
                trivial: Sequence[bool | None] | None = None,
                trivial_why: str = "every run's compared outputs are trivial",
                paper_cell: str | None = None, at_paper_setting: bool = True,
                extra_sd: float = 0.0, extra_label: str = "") -> dict[str, Any]:
    """One row of a section's verdict table: ours (mean ± sd, standard error, n) beside the
    paper's.

    Parameters
    ----------
    setting, metric : str
        The row's labels.
    values : sequence of float or None
        Our metric, one value per run (None or non-finite values are left out).
    paper : mapping or None
        The paper's row (``value``, ``sd``, ``source`` and its identifying columns).
    better, rel_tol, abs_tol, extra_sd, extra_label
        See :func:`verdict` (they judge the counter-runs too).
    why : str, optional
        A note appended to the reason of a row outside the paper's spread (see :func:`note`).
        It never marks the row explained: only a counter-run does.
    paper_accounting : sequence of float or None, optional
        The same metric run at the paper's own neighbouring relation and sensitivity (or,
        where a section's ``accounting_label`` says so, under the paper's own protocol): a
        counter-run at the paper's setting, also shown in its own column.
    counter_runs : mapping of str to sequence, optional
        Further measured counter-runs at the paper's setting, by label.
    trivial : sequence of bool or None, optional
        Per run: whether its compared outputs test nothing (identical across the methods the
        row compares, or a classifier that predicts the majority class); None where the run
        did not record what is needed to tell. Every run trivial makes the row
        ``uninformative``; a run that cannot be told leaves the row's verdict as it is and
        its ``informative`` field ``"unchecked"``.
    trivial_why : str
        What makes a run trivial, for the reason.
    paper_cell : str, optional
        Which paper cell the row compares (default :func:`paper_cell_key`): rows of one paper
        cell are merged into one by :func:`one_row_per_paper_cell`.
    at_paper_setting : bool
        False for a setting of ours that is not the paper's (more rows sampled, another
        fairness weight, another loss): such a row is shown beside the paper-setting row of
        its paper cell, never counted.

    Returns
    -------
    dict
        The row. ``explained`` is True only for a ``worse`` row with a counter-run that is
        itself ``within``.
    """
    mean, sd, n = mean_sd(values)
    se = standard_error(sd, n)
    value = paper["value"] if paper else None
    paper_sd = paper["sd"] if paper else None
    judged = {"better": better, "rel_tol": rel_tol, "abs_tol": abs_tol,
              "extra_sd": extra_sd, "extra_label": extra_label}
    word, reason = verdict(mean, se, value, paper_sd, **judged)
    row = {"setting": setting, "metric": metric, "paper": value, "paper_sd": paper_sd,
           "source": paper.get("source") if paper else None, "ours": mean, "ours_sd": sd,
           "ours_se": se, "n": n, "verdict": word, "why": reason, "explained": False,
           "informative": "yes",
           "paper_cell": paper_cell or paper_cell_key(setting, metric, paper),
           "at_paper_setting": at_paper_setting}
    if trivial is not None:
        mark_trivial(row, trivial, trivial_why)
    if why is not None:
        note(row, why)
    runs = []
    if paper_accounting is not None:
        accounting = counter_run("paper accounting", paper_accounting, paper, **judged)
        row.update(paper_accounting=accounting["ours"],
                   paper_accounting_sd=accounting["ours_sd"],
                   paper_accounting_se=accounting["ours_se"],
                   paper_accounting_verdict=accounting["verdict"])
        runs.append(accounting)
    runs += [counter_run(label, v, paper, **judged) for label, v in (counter_runs or {}).items()]
    row["counter_runs"] = runs
    return settle_explanation(row)


def mark_trivial(row: dict[str, Any], trivial: Sequence[bool | None], why: str
                 ) -> dict[str, Any]:
    """Mark ``row`` uninformative when every run is trivial (see :func:`compare_row`)."""
    flags = list(trivial)
    if not flags or row["verdict"] not in COMPARED:
        return row
    if any(flag is None for flag in flags):
        row["informative"] = "unchecked"
        row["why"] += ("; whether the compared outputs are trivial is not recorded in "
                       f"{sum(flag is None for flag in flags)} of {len(flags)} runs (cells "
                       "from before the check)")
        return row
    count = sum(bool(flag) for flag in flags)
    if count == len(flags):
        row["informative"] = "no"
        row["why"] = f"uninformative: {why} in {count} of {count} runs (would read {row['verdict']}: {row['why']})"
        row["verdict"] = "uninformative"
    elif count:
        row["why"] += f"; {why} in {count} of {len(flags)} runs"
    return row


def settle_explanation(row: dict[str, Any]) -> dict[str, Any]:
    """Mark a ``worse`` row explained when one of its counter-runs at the paper's setting is
    within the paper's spread; otherwise say what each counter-run found."""
    runs = row.get("counter_runs") or []
    row["explained"] = False
    if row["verdict"] != "worse" or not runs:
        return row
    within = [c for c in runs if c["verdict"] == "within"]
    if within:
        row["explained"] = True
        row["why"] += "; explained by the counter-run " + ", ".join(
            f"{c['label']} {c['ours']:.4g} ± {c['ours_se']:.2g} (n {c['n']}): within"
            for c in within)
    else:
        row["why"] += "; not explained: the counter-run " + ", ".join(
            f"{c['label']} {c['ours']:.4g} ± {c['ours_se']:.2g} (n {c['n']}) is also "
            f"{c['verdict']}" for c in runs)
    return row


def one_row_per_paper_cell(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows with one row per paper cell (by ``paper_cell``).

    Of the rows that compare one paper cell, the first at the paper's setting is kept; a row
    at the paper's setting with the same runs (the cell printed in another table) is listed
    in its ``also_as``, and the others (our other settings) in its ``other_settings``, shown
    beside it and never counted. A cell with no row at the paper's setting keeps its first
    row, which says so. Rows neither with a paper number nor compared (judged against a
    bound the paper states, such as SAFES's failed-attempt share) are kept as they are.
    """
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        compared = row.get("paper") is not None or row.get("verdict") in COMPARED
        if compared and row.get("paper_cell"):
            groups.setdefault(row["paper_cell"], []).append(i)
    keep: dict[int, dict[str, Any]] = {}
    for members in groups.values():
        at_paper = [i for i in members if rows[i].get("at_paper_setting", True)]
        first = (at_paper or members)[0]
        primary = dict(rows[first])
        also, others = [], []
        for i in members:
            if i == first:
                continue
            other = rows[i]
            same_runs = (other.get("at_paper_setting", True) and other["n"] == primary["n"]
                         and _same_number(other["ours"], primary["ours"])
                         and _same_number(other["ours_sd"], primary["ours_sd"]))
            if same_runs:
                also.append(other["setting"])
            else:
                others.append({k: other.get(k) for k in (
                    "setting", "ours", "ours_sd", "ours_se", "n", "verdict",
                    "at_paper_setting")})
        if also:
            primary["also_as"] = also
        if others:
            primary["other_settings"] = others
        if not at_paper:
            primary["why"] += "; no run of ours at the paper's setting"
        keep[first] = primary
    grouped = {i for members in groups.values() for i in members}
    return [keep[i] if i in keep else dict(row) for i, row in enumerate(rows)
            if i in keep or i not in grouped]


def _same_number(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if not (_finite(a) and _finite(b)):
        return not _finite(a) and not _finite(b)
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-15)


def note(row: dict[str, Any], text: str) -> dict[str, Any]:
    """Append a measured reading to a row outside the paper's spread (a row within needs
    none). A note never marks the row explained: only a counter-run does."""
    if row["verdict"] in ("better", "worse"):
        row["why"] = f"{row['why']}; {text}"
    return row


def failed_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The failed cells of a section, for its report."""
    return [{"id": r["id"], "error": r["error"]} for r in records if r["status"] != "ok"]


def ok_metrics(records: Sequence[Mapping[str, Any]], **setting: Any) -> list[dict[str, Any]]:
    """Metrics of the successful cells whose setting matches ``setting``."""
    return [r["metrics"] for r in records if r["status"] == "ok"
            and all(r["setting"].get(k) == v for k, v in setting.items())]


def png_of(fig) -> str:
    """A matplotlib figure as base64 PNG (closed afterwards), for inline ``<img>``."""
    import base64
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()
