"""Evaluation grids: methods × ε × seeds (× TOT η) on a fixed split, without Prefect.

This is the library side of ``privfair evaluate`` and of the ``privfair-evaluate`` flow
(``flows/evaluate.py``): the typed parameters, the list of grid cells, one cell as a flat
record (a failure becomes an ``error`` value, never an exception), the in-process runner
:func:`run_grid`, and the output folder (results, trade-off report, not-private marker).

Evaluation reads the real data, so nothing written here is privacy-protected: outputs go to
their own folder (``evaluations/`` by default), which may not be inside a release store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from privfair.contracts.fields import Delta, Epsilon, Eta
from privfair.evaluation.evaluate import NOT_PRIVATE, TOT_SETUPS, EvaluationData, load_embedded
from privfair.store.outputs import check_output

Dataset = Literal["adult", "adult_safes", "compas"]
GridMethod = Literal["mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair", "dpgan",
                     "fairgan", "fairgan-plus", "cfgan"]
Classifier = Literal["logistic", "random_forest", "mlp"]

#: Columns that identify a cell; they lead the results table, in this order.
CELL_COLUMNS = ("dataset", "method", "epsilon", "seed", "eta")
MARKER = "NOT_PRIVACY_PROTECTED.txt"


class EvaluateParams(BaseModel):
    """An evaluation grid; the Prefect UI renders this model as the run form."""

    model_config = ConfigDict(extra="forbid")

    # `default=` by keyword: mypy reads a pydantic field's default only from the keyword.
    datasets: list[Dataset] = Field(
        default=["compas"], min_length=1,
        description="Embedded datasets (each split once, 80/20).")
    methods: list[GridMethod] = Field(
        default=["mst", "prefair-greedy"], min_length=1, description="Synthesis methods.")
    # Each cell is a release: the bounds every release checks, refused here before any cell
    # runs rather than in every cell (issue 36: --epsilons 1e300 failed them all).
    epsilons: list[Epsilon] = Field(
        default=[0.5, 1.0, 2.0, 4.0], min_length=1, description="ε values of (ε, δ)-DP.")
    seeds: int = Field(default=3, ge=1, le=1000,
                       description="Repetitions per cell (seeds 0..N-1).")
    etas: list[Eta] = Field(
        default=[], description="TOT discrimination bounds η, run in addition to 'none' (no "
                                f"TOT) on the datasets with a TOT set-up "
                                f"({', '.join(sorted(TOT_SETUPS))}).")
    classifiers: list[Classifier] = Field(
        default=["mlp"], min_length=1,
        description="Downstream classifiers trained on synthetic data.")
    split_seed: int = Field(default=2023, ge=0, description="Seed of the fixed train/test split.")
    delta: Delta = Field(default=1e-9, description="δ of (ε, δ)-DP.")
    sample_mode: Literal["iid", "round"] = Field(default="iid", description="Sampling mode.")
    out: str = Field(default="evaluations",
                     description="Output folder (never inside a release store): each run writes "
                                 "<out>/<timestamp>/.")
    contract: str | None = Field(
        default=None,
        description="Own data: the contract YAML (with 'data'); replaces 'datasets'.")
    data: str | None = Field(default=None,
                             description="Own data: the CSV/Parquet file (with 'contract').")
    test_fraction: float = Field(
        default=0.2, gt=0.0, lt=1.0, description="Own data: held-out share of the seeded split.")
    privileged: dict[str, str] = Field(
        default={}, description="Own data: privileged group label per protected column (needed "
                                "for non-binary ones).")

    @field_validator("datasets", "methods", "classifiers", "epsilons", "etas")
    @classmethod
    def _unique(cls, values: list[Any]) -> list[Any]:
        return list(dict.fromkeys(values))

    @model_validator(mode="after")
    def _etas_need_tot(self) -> EvaluateParams:
        if (self.contract is None) != (self.data is None):
            raise ValueError("contract and data go together (evaluate on your own table)")
        if self.contract is not None:
            from privfair.contracts.schema import load_contract

            if self.etas and load_contract(self.contract).tot is None:
                raise ValueError(f"etas: contract {self.contract} declares no 'tot:' block "
                                 "(the columns and distortion TOT uses)")
            return self
        if self.etas and not any(d in TOT_SETUPS for d in self.datasets):
            raise ValueError(f"etas: TOT runs only on {sorted(TOT_SETUPS)}, none of which is in "
                             f"datasets {self.datasets}")
        return self


def cells(params: EvaluateParams) -> list[dict[str, Any]]:
    """The grid in a fixed order: dataset, method, ε, η (None first), seed."""
    grid = []
    for dataset in dataset_names(params):
        etas = [None, *params.etas] if dataset in TOT_SETUPS or params.contract else [None]
        for method in params.methods:
            for epsilon in params.epsilons:
                for eta in etas:
                    for seed in range(params.seeds):
                        grid.append({"dataset": dataset, "method": method, "epsilon": epsilon,
                                     "seed": seed, "eta": eta})
    return grid


def dataset_names(params: EvaluateParams) -> list[str]:
    """The grid's datasets: the embedded ones, or the own contract's name."""
    if params.contract is None:
        return list(params.datasets)
    from privfair.contracts.schema import load_contract

    return [load_contract(params.contract).name]


_CACHE: dict[tuple[Any, ...], EvaluationData] = {}
_CACHE_LOCK = threading.Lock()


def cached_dataset(name: str, split_seed: int, contract: str | None = None,
                   data: str | None = None, privileged: dict[str, str] | None = None,
                   test_fraction: float = 0.2) -> EvaluationData:
    """:func:`load_embedded` (or :func:`load_own`), once per process (threads share it; each
    Dask worker loads it)."""
    from privfair.evaluation.evaluate import load_own

    key = (name, split_seed, contract, data, tuple(sorted((privileged or {}).items())),
           test_fraction)
    with _CACHE_LOCK:
        if key not in _CACHE:
            if contract is None:
                _CACHE[key] = load_embedded(name, split_seed=split_seed)
            elif data is None:
                raise ValueError(f"dataset {name!r}: an own contract needs its data file")
            else:
                _CACHE[key] = load_own(contract, data, split_seed=split_seed,
                                       privileged=privileged, test_fraction=test_fraction)
        return _CACHE[key]


def error_record(cell: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    message = " ".join(str(exc).split()) or type(exc).__name__
    return {**cell, "error": f"{type(exc).__name__}: {message}"}


def run_cell(*, dataset: str, method: str, epsilon: float, seed: int, eta: float | None,
             classifiers: Sequence[str], split_seed: int, delta: float,
             sample_mode: str, contract: str | None = None, data: str | None = None,
             privileged: dict[str, str] | None = None, test_fraction: float = 0.2
             ) -> dict[str, Any]:
    """One grid cell as a flat record; any failure is returned in ``error``, not raised."""
    from privfair.evaluation.evaluate import evaluate_cell

    cell = {"dataset": dataset, "method": method, "epsilon": epsilon, "seed": seed, "eta": eta}
    start = time.perf_counter()
    try:
        real = cached_dataset(dataset, split_seed, contract, data, privileged, test_fraction)
        record = evaluate_cell(real, method=method, epsilon=epsilon, seed=seed, eta=eta,
                               delta=delta, classifiers=tuple(classifiers),
                               sample_mode=sample_mode)
    except Exception as exc:  # a failed cell (e.g. infeasible η) must not kill the grid
        return error_record(cell, exc)
    return {**record, "error": None, "cell_s": time.perf_counter() - start}


def cell_kwargs(params: EvaluateParams) -> dict[str, Any]:
    """The per-grid arguments of :func:`run_cell` (besides the cell itself)."""
    return {"classifiers": list(params.classifiers), "split_seed": params.split_seed,
            "delta": params.delta, "sample_mode": params.sample_mode,
            "contract": params.contract, "data": params.data,
            "privileged": dict(params.privileged), "test_fraction": params.test_fraction}


def results_frame(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Records (in grid order) as a table: cell columns, ``error``, then the metrics."""
    frame = pd.DataFrame(list(records))
    if "error" not in frame:
        frame["error"] = None
    first = [*CELL_COLUMNS, "error"]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    frame["eta"] = pd.to_numeric(frame["eta"], errors="coerce").astype("float64")
    frame["error"] = frame["error"].astype("string")
    if "fair_structure" in frame:
        frame["fair_structure"] = frame["fair_structure"].astype("boolean")
    return frame


def run_grid(params: EvaluateParams | dict[str, Any], *, workers: int | None = None,
             progress: Callable[[str, float], None] | None = None) -> pd.DataFrame:
    """Run the whole grid in this process (a thread pool), without Prefect."""
    params = EvaluateParams.model_validate(params)
    grid = cells(params)
    kwargs = cell_kwargs(params)
    workers = workers or os.cpu_count() or 2
    records: list[dict[str, Any] | None] = [None] * len(grid)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="privfair-cell") as pool:
        futures = {pool.submit(run_cell, **cell, **kwargs): i for i, cell in enumerate(grid)}
        for done, future in enumerate(as_completed(futures), start=1):
            records[futures[future]] = future.result()
            if progress is not None:
                progress(f"cells {done}/{len(grid)}", done / len(grid))
    return results_frame(records)  # type: ignore[arg-type]


# --- output folder ----------------------------------------------------------------------------


def grid_inputs(params: EvaluateParams) -> dict[str, str | None]:
    """The grid's input files by option: its ``--out`` never overwrites one."""
    return {"--contract": params.contract, "--data": params.data}


def check_out(out: str | Path, *,
              inputs: Mapping[str, str | Path | None] | None = None) -> Path:
    """The resolved output folder; refuses an empty path, a file, one that is or is inside
    an input (``inputs``: the command's, by option), privfair's state or a release store
    (evaluation results are not privacy-protected: never among releases), and one that
    cannot be created (probed: nothing is left behind)."""
    if not str(out).strip():
        raise ValueError("--out is empty; expected a folder path")
    root = check_output(out, flag="--out", inputs=inputs)
    probe = root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: folder {probe} is not writable")
    if probe != root and probe.is_dir():
        try:  # create and remove the missing folders: /proc/x cannot be created
            made = root
            root.mkdir(parents=True)
        except OSError as exc:
            raise ValueError(f"--out {out}: cannot be created ({exc.strerror})") from None
        while made != probe:
            with contextlib.suppress(OSError):
                made.rmdir()
            made = made.parent
    for folder in (root, *root.parents):
        if folder.is_file():
            raise ValueError(f"--out {out}: {folder} is a file, not a folder")
    return root


def timestamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def new_run_folder(root: Path, stamp: str) -> Path:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for i in range(1, 1000):
        folder = root / (stamp if i == 1 else f"{stamp}-{i}")
        try:
            folder.mkdir(mode=0o700)  # real-data results: owner only
        except FileExistsError:
            continue
        return folder
    raise OSError(f"could not create a new run folder under {root}")


def write_outputs(results: pd.DataFrame, params: EvaluateParams | dict[str, Any], *,
                  stamp: str | None = None) -> Path:
    """``<out>/<stamp>/``: results.parquet, report.html, params.json and the marker file."""
    from privfair.evaluation.evaluate import trade_off_report

    params = EvaluateParams.model_validate(params)
    folder = new_run_folder(check_out(params.out, inputs=grid_inputs(params)),
                            stamp or timestamp())
    (folder / MARKER).write_text(NOT_PRIVATE + "\n")
    results.to_parquet(folder / "results.parquet", index=False)
    ok = results[results["error"].isna()]
    title = f"privfair evaluation {folder.name}"
    if ok.empty:  # nothing to plot: say so (and why) instead of an empty report

        page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
                f"</head><body><h1>{title}</h1><p><b>Not privacy-protected.</b> "
                f"{html.escape(NOT_PRIVATE)}</p><p>Every cell failed; first error: "
                f"{html.escape(str(results['error'].iloc[0]) if len(results) else 'no cells')}"
                "</p></body></html>")
    else:
        page = trade_off_report(ok, title=title)
    (folder / "report.html").write_text(page, encoding="utf-8")
    # What was evaluated: on own data the contract's dataset, not the unused embedded default.
    recorded = {**params.model_dump(), "datasets": dataset_names(params)}
    (folder / "params.json").write_text(json.dumps(recorded, indent=2) + "\n")
    return folder


# --- summary ----------------------------------------------------------------------------------


def summary_table(results: pd.DataFrame) -> pd.DataFrame:
    """Means over seeds per dataset × method (+ η) × ε: tvd2, accuracy, |DP|, |CDP|.

    ``abs DP`` and ``abs CDP`` are the absolute disparities of the first classifier, averaged
    over the single protected attributes (as in
    :func:`privfair.evaluation.evaluate.trade_off_report`).
    """
    ok = results[results["error"].isna()].copy()
    if ok.empty:
        return pd.DataFrame()
    ok["variant"] = ok["method"] + ok["eta"].map(lambda e: "" if pd.isna(e) else f" + TOT η={e:g}")
    columns = ["tvd2"]
    clf = next((c.removesuffix("_accuracy") for c in ok.columns
                if c.endswith("_accuracy") and "baseline" not in c), None)
    if clf:
        columns.append(f"{clf}_accuracy")
        for key in ("DP", "CDP"):
            cols = [c for c in ok.columns if c.startswith(f"{clf}_") and c.endswith(f"_{key}")
                    and "+" not in c]
            if cols:
                ok[f"abs {key}"] = ok[cols].abs().mean(axis=1)
                columns.append(f"abs {key}")
    table = ok.groupby(["dataset", "variant", "epsilon"], sort=False)[columns].mean()
    table["cells"] = ok.groupby(["dataset", "variant", "epsilon"], sort=False).size()
    return table.reset_index().sort_values(["dataset", "variant", "epsilon"], kind="stable")


def _cell(name: str, value: Any) -> str:
    if name == "epsilon":
        return f"{value:g}"
    if isinstance(value, float | np.floating):
        return "–" if np.isnan(value) else f"{value:.4f}"
    return str(value)


def summary_markdown(results: pd.DataFrame, folder: str | Path, *, seconds: float | None = None,
                     runner: str | None = None, own_data: bool = False) -> str:
    """Markdown summary of a grid run (for the Prefect artifact).

    With ``own_data`` (a publisher's contract and file) the artifact, which everyone who can
    open the Prefect UI sees, says only that the grid ran and where its output is: no metric
    and no cell's error text (issue 21.8). The embedded public datasets keep their summary.
    """
    failed = results[results["error"].notna()]
    # Own data: the grid's size is public (the parameters); how many cells failed is counted
    # from real rows, so it stays in the local output like the metrics (issue 32 item 10).
    cells = (f"- cells: **{len(results)}**" if own_data else
             f"- cells: **{len(results)}** ({len(results) - len(failed)} ok, "
             f"{len(failed)} failed)")
    lines = ["# privfair evaluation", "",
             f"> **Not privacy-protected.** {NOT_PRIVATE}", "",
             cells, f"- output: `{folder}` (results.parquet, report.html)"]
    if runner:
        lines.append(f"- task runner: {runner}")
    if seconds is not None:
        lines.append(f"- wall time: {seconds:.1f} s")
    if own_data:
        lines += ["", "Metrics of the publisher's own data stay in the local output folder "
                  "above; they are not copied into Prefect."]
        return "\n".join(lines) + "\n"
    table = summary_table(results)
    if not table.empty:
        lines += ["", "## Means over seeds", "",
                  "| " + " | ".join(table.columns) + " |",
                  "|" + "---|" * len(table.columns)]
        for row in table.itertuples(index=False):
            lines.append("| " + " | ".join(
                _cell(name, v) for name, v in zip(table.columns, row, strict=True)) + " |")
    if len(failed):
        lines += ["", "## Failed cells", ""]
        for cell in failed.head(20).to_dict("records"):
            eta = "" if pd.isna(cell["eta"]) else f" η={cell['eta']:g}"
            error = cell["error"] if len(cell["error"]) <= 200 else cell["error"][:199] + "…"
            lines.append(f"- {cell['dataset']} {cell['method']} ε={cell['epsilon']:g} "
                         f"seed={cell['seed']}{eta}: {error}")
        if len(failed) > 20:
            lines.append(f"- … and {len(failed) - 20} more (see results.parquet)")
    return "\n".join(lines) + "\n"
