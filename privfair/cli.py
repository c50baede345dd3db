"""``privfair`` command line.

This module is long on purpose: it is the one command-line front end, each subcommand's
parser beside its handler, so `privfair --help` and the code read in the same order.

Commands::

    privfair release --contract PATH [--data PATH] --epsilon E --delta D --method M
                     [--fairness tot --eta ETA [--distortion NAME] [--discrimination ratio]]
                     [--seed S] --out DIR [--sample-mode round] [--no-prefect]
    privfair discretize --contract PATH [--data PATH] --out FILE
    privfair contract check PATH [--data FILE]
    privfair contract draft --data FILE [--max-categories K] [--out FILE]
    privfair releases list [--store DIR] [--dataset NAME] [--json]
    privfair ledger show [--dataset NAME] [--json]
    privfair ledger raise --contract PATH --epsilon E --delta D --reason TEXT
    privfair ledger verify | export --dataset X [--out FILE] | import FILE
    privfair ledger reset --dataset X --reason TEXT
    privfair evaluate [--datasets ... | --contract C --data FILE] [grid options]
    privfair evaluate --release DIR --data FILE [--contract C]
    privfair train --model pflr|pflr-star|privlr|dpsgd|dpsgd-f|naive --epsilon E [--delta D]
                   [--contract PATH] [--data PATH] [--group COL] [--holdout P] [--out DIR]
                   [--no-prefect] [--dry-run]
    privfair predict --release DIR --data FILE [--out FILE]
    privfair audit [--mechanism NAME ...] [--quick] [--scale F] [--scale-noise F]
                   [--misdeclare KEY=F ...] [--noise-only] [--json]
    privfair store gc [--work-dir DIR] [--older-than DAYS] [--dry-run]
    privfair --version
    privfair discover --contract PATH --epsilon E [--delta D] [--data PATH]
                      [--method privpc|lapmech|privpc-star] [--coarsen NAME|FILE] [--out DIR]

Bad input (parameters, contract, data, budget, store) prints one line ``privfair: error: ...``
on stderr and exits with code 2, with nothing written to the release store or the ledger.
Other failures exit with code 1. ``release`` prints the new release folder as its last line.

Only the standard library is imported at module level so that ``--help`` is instant; pandas,
DuckDB, Great Expectations and Prefect are imported inside the commands that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import math
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from privfair.version import VERSION

METHODS = ("mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair", "independent")
GAN_METHODS = ("dpgan", "fairgan", "fairgan-plus", "cfgan")


class UsageError(Exception):
    """Bad command-line usage (reported on one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of usage + message
        raise UsageError(message)


def _decimal(text: str) -> float:
    from privfair.cli_options import decimal  # a plain finite decimal: no 1_0, nan, inf

    return decimal(text)


def _whole(text: str) -> int:
    from privfair.cli_options import whole

    return whole(text)


def _add_store(p: argparse.ArgumentParser) -> None:
    # --out names the release store in every command (--store: the older spelling)
    p.add_argument("--out", "--store", dest="store", default="releases",
                   help="release store folder (default: releases)")
    p.add_argument("--dataset", help="only this dataset")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``privfair`` parser; given the ``command`` about to run, only that publishing
    command gets its generated options (the others import no kind: issue 23.5)."""
    parser = _Parser(prog="privfair", description=(
        "Differentially private, justifiably fair synthetic releases of sensitive tables."))
    parser.add_argument("--version", action="version", version=f"privfair {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    from privfair.release.registry import FAMILIES

    for family in FAMILIES:
        _add_publishing_command(sub, family, options=command in (None, family.command))

    disc = sub.add_parser("discretize", help="write the integer codes of a table (owner's view)",
                          description="Map a table onto its contract's codes (private output).")
    disc.add_argument("--contract", help="data contract YAML (default: embedded Adult contract)")
    disc.add_argument("--data", help="CSV or Parquet (default: embedded Adult)")
    disc.add_argument("--out", required=True, help="codes Parquet file to write")
    disc.add_argument("--batch-size", type=_whole, default=200_000)
    disc.set_defaults(func=cmd_discretize)

    con = sub.add_parser("contract", help="data contract commands")
    con_sub = con.add_subparsers(dest="contract_command", required=True, parser_class=_Parser)
    check = con_sub.add_parser("check", help="validate a contract and summarise it")
    check.add_argument("path", help="contract YAML")
    check.add_argument("--data", help="also check this CSV/Parquet file against the contract: "
                                      "every failing column, offending values and counts, "
                                      "suggested fixes (local diagnostic; writes nothing)")
    check.add_argument("--max-examples", type=_whole, default=8,
                       help="offending values shown per column (default: 8)")
    check.set_defaults(func=cmd_contract_check)
    draft = con_sub.add_parser("draft", help="draft a contract from a data file",
                               description="Write a draft contract YAML from a CSV/Parquet "
                                           "file's schema and values; review it before use.")
    draft.add_argument("--data", required=True, help="CSV or Parquet file")
    draft.add_argument("--max-categories", type=_whole, default=100,
                       help="text columns and code columns with more distinct values are "
                            "left out until their universe is declared (default: 100)")
    draft.add_argument("--max-codes", type=_whole, default=12,
                       help="whole-number columns with more distinct values are drafted with "
                            "bins, not categories (default: 12)")
    draft.add_argument("--name", help="contract name (default: the file's stem)")
    draft.add_argument("--out", help="write the YAML here instead of stdout (not overwritten)")
    draft.set_defaults(func=cmd_contract_draft)
    pin = con_sub.add_parser(
        "pin", help="copy a contract pinned to this privacy registry (registry_id)",
        description="Write a copy of a contract (a packaged one by its name, or a file) with "
                    "registry_id: set to the registry PRIVFAIR_REGISTRY names, so that every "
                    "other registry refuses its dataset (one dataset, one budget), even one "
                    "with a new store and a new client.")
    pin.add_argument("contract", help="a packaged contract's name (e.g. compas) or a YAML file")
    pin.add_argument("--out", required=True, help="the pinned copy (a new file; never "
                                                  "overwritten)")
    pin.set_defaults(func=cmd_contract_pin)

    rels = sub.add_parser("releases", help="release catalog commands")
    rels_sub = rels.add_subparsers(dest="releases_command", required=True, parser_class=_Parser)
    lst = rels_sub.add_parser("list", help="list published releases")
    _add_store(lst)
    lst.set_defaults(func=cmd_releases_list)

    led = sub.add_parser("ledger", help="lifetime privacy ledger commands")
    led_sub = led.add_subparsers(dest="ledger_command", required=True, parser_class=_Parser)
    show = led_sub.add_parser("show", help="show the lifetime ledgers (computed from the "
                                           "verified registry chain) and every charged run")
    _add_store(show)
    show.set_defaults(func=cmd_ledger_show)
    rse = led_sub.add_parser("raise", help="raise a dataset's lifetime budget (recorded in its "
                                           "hash-chained ledger)")
    rse.add_argument("--contract", required=True, help="contract of the dataset")
    rse.add_argument("--epsilon", type=_decimal, default=None,
                     help="new lifetime epsilon, in [1e-6, 100] (default: the contract's "
                          "budget.epsilon, which must be at least this)")
    rse.add_argument("--delta", type=_decimal, default=None,
                     help="new lifetime delta, in (1e-50, 1) (default: the contract's "
                          "budget.delta)")
    rse.add_argument("--reason", required=True, help="why (recorded with your user name)")
    rse.set_defaults(func=cmd_ledger_raise)
    ver = led_sub.add_parser("verify", help="verify every ledger of the privacy registry "
                                            "(exit 2 naming the first that fails)")
    ver.set_defaults(func=cmd_ledger_verify)
    exp = led_sub.add_parser("export", help="a dataset's verified ledger as JSON, for auditors")
    exp.add_argument("--dataset", required=True, help="dataset id")
    exp.add_argument("--out", help="write the JSON here instead of stdout")
    exp.set_defaults(func=cmd_ledger_export)
    imp = led_sub.add_parser("import", help="import JSON lifetime ledgers of earlier versions "
                                            "(FILE, or a folder of <dataset>/lifetime_ledger.json)")
    imp.add_argument("file", help="a lifetime_ledger.json, or the old registry folder")
    imp.set_defaults(func=cmd_ledger_import)
    rst = led_sub.add_parser("reset", help="start a lost or broken ledger anew (refused for "
                                           "one that verifies); its verified prefix stays "
                                           "charged; recorded, and prints what was lost")
    rst.add_argument("--dataset", required=True, help="dataset id")
    rst.add_argument("--reason", required=True, help="why (recorded with your user name)")
    rst.set_defaults(func=cmd_ledger_reset)

    sto = sub.add_parser("store", help="release store commands")
    sto_sub = sto.add_subparsers(dest="store_command", required=True, parser_class=_Parser)
    chk = sto_sub.add_parser("check", help="reconcile release folders, lifetime ledgers and "
                                           "the catalog (exit 1 if inconsistent)")
    chk.add_argument("--out", default="releases", help="release store folder")
    chk.add_argument("--work-dir", default=".privfair",
                     help="work folder whose dead runs' private leftovers to find (default "
                          ".privfair); runs that hold their lock are never touched")
    chk.add_argument("--repair", action="store_true",
                     help="finish or undo unfinished publications, drop stale catalog rows "
                          "and private leftovers")
    chk.set_defaults(func=cmd_store_check)
    gc = sto_sub.add_parser("gc", help="remove old files from a working folder: post-noise "
                                       "artefacts, the result cache, private reports, "
                                       "staging left by killed runs")
    gc.add_argument("--work-dir", default=".privfair",
                    help="working folder (default: .privfair)")
    gc.add_argument("--older-than", type=_decimal, default=7.0, metavar="DAYS",
                    help="remove what is older than this many days (default: 7)")
    gc.add_argument("--dry-run", action="store_true", help="list, remove nothing")
    gc.set_defaults(func=cmd_store_gc)

    ev = sub.add_parser("evaluate", help="privacy-fairness-utility grid on real data",
                        description="Run methods x epsilons x seeds (x TOT etas) on a fixed "
                                    "train/test split (Prefect flow by default). Results are "
                                    "computed from real data and are NOT privacy-protected.")
    ev.add_argument("--datasets", nargs="+", choices=("adult", "adult_safes", "compas"),
                    help="embedded datasets (default: compas)")
    ev.add_argument("--methods", nargs="+",
                    choices=("mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair",
                             "dpgan", "fairgan", "fairgan-plus", "cfgan"),
                    help="synthesis methods, table and GAN families (default: mst "
                         "prefair-greedy)")
    ev.add_argument("--epsilons", nargs="+", type=_decimal, help="default: 0.5 1 2 4")
    ev.add_argument("--seeds", type=_whole, help="repetitions per cell (default: 3)")
    ev.add_argument("--etas", nargs="+", type=_decimal,
                    help="TOT bounds, run besides no TOT on adult_safes and compas")
    ev.add_argument("--classifiers", nargs="+", choices=("logistic", "random_forest", "mlp"),
                    help="downstream classifiers (default: mlp)")
    ev.add_argument("--split-seed", type=_whole, help="seed of the train/test split (default: 2023)")
    ev.add_argument("--out", help="output folder, not a release store (default: evaluations)")
    ev.add_argument("--dask", action="store_true",
                    help="run cells on a local Dask cluster (pip install -e '.[dask]')")
    ev.add_argument("--contract", help="your own data: its contract YAML (with --data); "
                                       "replaces --datasets")
    ev.add_argument("--data", help="your own table, CSV or Parquet (with --contract or "
                                   "--release)")
    ev.add_argument("--release", help="score this published release folder against --data "
                                      "(utility, fairness, train-synthetic-test-real)")
    ev.add_argument("--test-fraction", type=_decimal,
                    help="with --contract: held-out share of the split (default: 0.2)")
    ev.add_argument("--privileged", nargs="+", metavar="COLUMN=LABEL",
                    help="with --contract or --release: the privileged group of each "
                         "protected column (needed for non-binary ones)")
    ev.add_argument("--no-prefect", action="store_true",
                    help="run the same grid in-process (threads), without Prefect")
    ev.set_defaults(func=cmd_evaluate)

    _add_predict_and_audit(sub)
    return parser


def _add_publishing_command(sub: Any, family: Any, *, options: bool) -> None:
    """A publishing command's parser, generated from its kinds' parameter model (with
    ``options`` False, the command's name and help only)."""
    from privfair.cli_options import add_options

    p = sub.add_parser(family.command, help=family.description,
                       description=f"{family.description[:1].upper()}{family.description[1:]} "
                                   "(through a Prefect flow by default).")
    if options:
        add_options(p, family.params)
    p.add_argument("--no-prefect", action="store_true",
                   help="run the same stages in-process, without Prefect")
    p.add_argument("--dry-run", action="store_true",
                   help="check everything and print the cost without reading data or "
                        "charging anything")
    p.add_argument("--resume", metavar="RUN",
                   help="re-run only the post-noise stages of charged run RUN (kept in "
                        "--work-dir) with new post-processing options; no privacy cost")
    p.set_defaults(func=cmd_publish, family=family.command)


def _add_predict_and_audit(sub: Any) -> None:
    pr = sub.add_parser("predict", help="score new rows with a model release")
    pr.add_argument("--release", required=True, help="model release folder")
    pr.add_argument("--data", required=True, help="rows to score, CSV or Parquet")
    pr.add_argument("--out", help="write predictions here (.csv or .parquet) instead of stdout")
    pr.set_defaults(func=cmd_predict)

    au = sub.add_parser("audit", help="empirical privacy audit: per mechanism, a 95%% lower "
                                      "bound on epsilon beside the claim, and negative "
                                      "controls (less noise) that the audit must catch")
    au.add_argument("--mechanism", nargs="*", help="audit only these (default: all)")
    au.add_argument("--quick", action="store_true",
                    help="the quick trial counts (CI: about a CPU-minute); every negative "
                         "control still exceeds its claim")
    au.add_argument("--scale", type=_decimal, default=1.0,
                    help="trial count multiplier (default: 1; the full audit takes 3-4 CPU-"
                         "minutes, under 10 minutes on 2 busy cores)")
    au.add_argument("--scale-noise", type=_decimal, default=1.0, metavar="F",
                    help="draw every privacy noise of the real code at F x its declared "
                         "scale (the ledger still claims the declared one): at 0.7 the "
                         "audit must fail and name what it caught")
    au.add_argument("--misdeclare", action="append", default=[], metavar="KEY=F",
                    help="run the real code with one declaration at F x its true value "
                         "(aim-measure, selection, policy-counts: the sensitivity; "
                         "dpsgd-sample-rate: q), its noise calibrated to it: the noise tests "
                         "cannot see it, the epsilon audit must fail and name the mechanism")
    au.add_argument("--noise-only", action="store_true",
                    help="only the noise-distribution tests (seconds), not the epsilon "
                         "audits")
    au.add_argument("--json", action="store_true", help="print JSON instead of a table")
    au.set_defaults(func=cmd_audit)


# --- helpers --------------------------------------------------------------------------------


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _one_line(exc: Exception) -> str:
    from privfair.release.options import params_error_line

    # A note says what a failed run left charged (privfair.release.protocol).
    notes = [str(n) for n in getattr(exc, "__notes__", ())]
    # A message's closing full stop would read ".;" before a note.
    head = params_error_line(exc)
    parts = [head.rstrip().rstrip(".") if notes else head, *notes]
    return " ".join("; ".join(parts).split())


def _is_bad_input(exc: Exception) -> bool:
    from privfair.core.errors import PrivfairError

    return isinstance(exc, PrivfairError | ValueError | OSError | UsageError)


def _progress() -> Any:
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    console = _stderr_console()
    # No bar when stderr is not a terminal (CI, pipes): errors stay one line there.
    return Progress(TextColumn("{task.description:<18}"), BarColumn(), TaskProgressColumn(),
                    TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


# --- commands -------------------------------------------------------------------------------


def cmd_publish(args: argparse.Namespace) -> int:
    """``release``, ``train``, ``discover``, ``embed``: one protocol, two drivers."""
    from privfair.cli_options import missing_required, options_from_args
    from privfair.release.registry import family as family_of

    family = family_of(args.family)
    if args.resume is not None:  # `--resume ''` too: never a fresh, charged run instead
        return _resume(args, family)
    missing = missing_required(family.params, args)
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)}")
    # Through Prefect without PREFECT_API_URL: the temporary API server boots from here on,
    # while the library loads and the input is checked (issue 15); bad input below stops it.
    server = None if args.no_prefect or args.dry_run else _start_temporary_server()
    from privfair.release.options import refuse_idle_options
    from privfair.release.protocol import plan_release, run_release

    given = options_from_args(family.params, args)
    options = family.params.model_validate(given)
    refuse_idle_options(options, given)  # an option the run would ignore: a typo, refused
    planned = plan_release(family.kind_for(options), options)  # no data read, nothing charged
    if args.dry_run:  # the plan and its cost are the answer
        print(planned.kind.summary(planned.plan), flush=True)
        print(_cost_line(planned), flush=True)
        print("dry run: nothing was read or charged", flush=True)
        return 0
    console = _stderr_console()
    if console.is_terminal:  # people see the cost before anything runs; pipes keep one line
        console.print(planned.kind.summary(planned.plan), markup=False)
        console.print(_cost_line(planned), markup=False)
    with _progress() as bar:
        task = bar.add_task("check", total=1.0)

        def progress(stage: str, fraction: float) -> None:
            bar.update(task, description=stage, completed=fraction)

        if args.no_prefect:
            final = run_release(planned, progress=progress)  # the plan above: one run id
        else:
            final = _run_flow(options, progress, server, command=family.command,
                              planned=planned)  # the flow runs the plan above: one run id
    manifest = json.loads((Path(final) / "manifest.json").read_text())
    console.print(planned.kind.outcome(manifest), markup=False)
    print(final, flush=True)
    return 0


def _resume(args: argparse.Namespace, family: Any) -> int:
    """``--resume RUN``: the run's post-noise stages again, with the options given."""
    from privfair.cli_options import options_from_args
    from privfair.release.resume import resume_release, resumed_kind

    if args.dry_run:
        raise UsageError("--resume and --dry-run: a resume reads no data and costs nothing")
    work_dir = args.work_dir or ".privfair"
    kind = resumed_kind(family.kinds, args.resume, work_dir=work_dir)
    changes = {k: v for k, v in options_from_args(family.params, args).items()
               if k != "work_dir"}
    with _progress() as bar:
        task = bar.add_task("resume", total=1.0)
        final = resume_release(kind, args.resume, changes, work_dir=work_dir,
                               progress=lambda stage, fraction: bar.update(
                                   task, description=stage, completed=fraction))
    manifest = json.loads((Path(final) / "manifest.json").read_text())
    _stderr_console().print(kind.outcome(manifest), markup=False)
    print(final, flush=True)
    return 0


def _cost_line(planned: Any) -> str:
    """The run's own charge (its privacy curve's ε at the lifetime δ, and its ρ when it is
    charged in zCDP) and the lifetime's composed spend before and after it."""
    lifetime, cost = planned.lifetime, planned.cost
    delta = lifetime.delta_budget
    own = cost.epsilon_at(delta)
    before = lifetime.epsilon_spent()
    after = lifetime.epsilon_spent(**cost.charge())
    unit = (f"rho {planned.rho:.6g}, " if planned.rho is not None else "its Renyi curve, ")
    return (f"cost: {unit}epsilon {own:.4g} at the lifetime delta {delta:g} "
            f"({100 * own / lifetime.epsilon_budget:.1f} % of the lifetime epsilon "
            f"{lifetime.epsilon_budget:g} of dataset {planned.plan.dataset!r}); "
            f"composed spend {before:.4g} before this run, {after:.4g} after")


def _not_a_refusal(record: Any) -> bool:
    return not getattr(record, "privfair_refusal", False)


def _start_temporary_server() -> Any:
    # Imported here, as every flows/tasks import of this module: they import Prefect (~2 s),
    # which --no-prefect and --dry-run never need.
    from flows import temporary_server

    temporary_server.startup_timeout_s()  # stated, for Prefect's own server too
    return temporary_server.start()


@contextlib.contextmanager
def _console_logs_at_warning(*, keep_refusals: bool = True) -> Iterator[None]:
    """While a progress bar is shown, the terminal gets WARNING and above from Prefect: the
    console handlers of this process (root's and ``prefect``'s) are raised to WARNING, and
    processes started meanwhile (Dask workers) configure theirs so. The run's INFO logs still go
    to the API (the UI). ``keep_refusals=False`` also keeps the flow's refusal record off the
    console (the command prints its own line)."""
    consoles = [h for name in ("", "prefect") for h in logging.getLogger(name).handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    levels = [h.level for h in consoles]
    variable = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"
    before = os.environ.get(variable)
    os.environ[variable] = "WARNING"
    for handler in consoles:
        if not keep_refusals:
            handler.addFilter(_not_a_refusal)
        handler.setLevel(max(handler.level, logging.WARNING))
    try:
        yield
    finally:
        for handler, level in zip(consoles, levels, strict=True):
            handler.removeFilter(_not_a_refusal)
            handler.setLevel(level)
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


def _run_flow(params: Any, progress: Any, server: Any, *, command: str,
              planned: Any = None) -> Path:
    """A publishing flow in this process; ``server``: a booting temporary server, or None."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

    from flows import temporary_server as temporary
    from flows.kinds import run_local
    from tasks._common import PROGRESS_LISTENERS as listeners
    if server is None and not temporary.configured_api_url():
        temporary.prefect_server_dies_with_this_process()  # Prefect may start its own server
    listeners.append(progress)
    try:
        # The flow's refusal line goes to the run's logs; on the console this command prints it.
        with _console_logs_at_warning(keep_refusals=False), \
                server.serving() if server is not None else contextlib.nullcontext():
            # the seed stays in-process, never a flow parameter
            final = run_local(params, command=command, planned=planned)
    finally:
        listeners.remove(progress)
        # The ephemeral API server logs its shutdown at exit; keep the release path last.
        logging.getLogger("prefect").setLevel(logging.WARNING)
    return Path(final)


def cmd_discretize(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts.datasets import default_contract_path, embedded_dataset_for
    from privfair.contracts.encoding import iter_discretized_batches
    from privfair.contracts.schema import load_contract
    from privfair.release.ingest import code_type
    from privfair.release.tabular.plan import open_columns

    contract_path = args.contract or default_contract_path()
    contract = load_contract(contract_path)
    _check_dataset_name(contract, contract_path)
    if open_columns(contract):
        raise ValueError(f"contract {contract.name!r}: open-domain columns "
                         f"{open_columns(contract)} have no categories until a release "
                         "runs CatHist on them")
    data = Path(args.data) if args.data else embedded_dataset_for(contract.name)
    if data is None:
        raise ValueError(f"contract {contract.name!r} describes no embedded dataset; "
                         "pass --data")
    if not data.is_file():
        raise ValueError(f"data file {data} does not exist")
    from privfair.store.outputs import check_output

    # never the data, the contract, a store, a release or the registry (issue 45.1)
    check_output(args.out, flag="--out", new_file=True,
                 inputs={"--data": data, "--contract": contract_path})
    out = Path(args.out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; expected a file path")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    if not 1 <= args.batch_size <= MAX_COUNT:
        raise UsageError(f"--batch-size must be in [1, {MAX_COUNT:,}], got {args.batch_size}")
    from privfair.contracts.encoding import check_source_schema

    check_source_schema(data, contract)  # the file's schema, one line naming it
    domain = contract.domain()
    schema = pa.schema([(a, code_type(domain.size(a))) for a in domain])
    tmp = out.with_name(f".{out.name}.tmp")
    rows = 0
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for codes in iter_discretized_batches(data, contract, batch_size=args.batch_size):
                # pa.table on a dict is Table.from_pydict, whose types take numpy arrays
                table = pa.Table.from_pydict({a: codes[a] for a in domain}).cast(schema)
                writer.write_table(table)
                rows += table.num_rows
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    _stderr_console().print(
        f"wrote {rows} rows x {len(domain)} columns of codes (private: keep it local)")
    print(out, flush=True)
    return 0


def cmd_contract_check(args: argparse.Namespace) -> int:
    from privfair.contracts.schema import load_contract
    from privfair.core.budget import Budget

    contract = load_contract(args.path)
    unfair = _release_checks(contract)  # what every release refuses is refused here first
    if not 0 <= args.max_examples <= MAX_COUNT:
        raise UsageError(f"--max-examples must be in [0, {MAX_COUNT:,}], got "
                         f"{args.max_examples}")
    checked = None
    if args.data:  # before the summary: a file that cannot be checked gets one line
        from privfair.contracts.tools import check_data

        _existing(args.data, "--data", folder=False)
        checked = check_data(contract, args.data, max_examples=args.max_examples)
    roles = contract.role_spec
    console = _stderr_console()
    if unfair:
        console.print(f"WARNING: release with the fair methods (prefair-greedy, prefair-exact, "
                      f"aim-fair) would be refused: {unfair}", markup=False)
    console.print(f"contract {contract.name!r} version {contract.version}: OK"
                  + (" for mst, aim and independent only" if unfair else ""))
    for spec in contract.columns:
        size = len(spec.declared_labels()) if spec.type != "text" else "open"
        console.print(f"  {spec.name:<24} {spec.type:<12} {size!s:>5} categories  "
                      f"nulls={spec.nulls} out_of_domain={spec.out_of_domain}")
    console.print(f"  roles: protected={list(roles.protected)} "
                  f"admissible={list(roles.admissible)} outcome={list(roles.outcome)}")
    b = contract.budget
    console.print(f"  lifetime budget: epsilon={b.epsilon:g} delta={b.delta:g} "
                  f"(rho={Budget(epsilon=b.epsilon, delta=b.delta).rho:.6g})")
    return _check_data_and_review(args, contract, console, checked)


def _check_dataset_name(contract: Any, path: str | Path) -> None:
    """The contract's name names the dataset's folders and ledger: a name such as
    ``../x`` is refused by every command that reads a contract, not only by the releases."""
    from privfair.release.checks import DATASET_NAME

    if not DATASET_NAME.fullmatch(contract.name):
        raise UsageError(f"contract {path}: name {contract.name!r} cannot name a dataset; "
                         "expected letters, digits, '.', '_' or '-' (not starting with '.')")


def _release_checks(contract: Any) -> str | None:
    """Every data-free check ``release`` runs on a contract: raises what every method
    refuses; returns what only the fair methods refuse (None when they accept it)."""
    from privfair.release.checks import RESERVED_NAMES, RESERVED_SUFFIXES
    from privfair.release.tabular.plan import check_contract_shape

    if contract.name.lower() in RESERVED_NAMES or contract.name.lower().endswith(
            RESERVED_SUFFIXES):  # every release refuses it (release/checks.py)
        raise UsageError(f"contract name {contract.name!r} is reserved by the release store; "
                         "choose another name")
    check_contract_shape(contract, fair=False)
    try:
        check_contract_shape(contract, fair=True)
    except ValueError as exc:
        return " ".join(str(exc).split())
    return None


def _existing(path: str, flag: str, *, folder: bool = True) -> Path:
    """A path that must exist (a folder, or a file); one line naming the option if not."""
    if not path.strip():  # Path('') is '.': never read the current folder instead
        raise UsageError(f"{flag} is empty; expected a {'folder' if folder else 'file'} path")
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{flag} {path}: no such {'folder' if folder else 'file'}")
    if folder and not p.is_dir():
        raise UsageError(f"{flag} {path} is a file, not a folder")
    if not folder and p.is_dir():
        raise UsageError(f"{flag} {path} is a folder, not a file")
    if not folder and not p.is_file():  # reading a FIFO waits forever, a device never ends
        raise UsageError(f"{flag} {path} is not a regular file (a FIFO, device or socket)")
    return p


#: Counts of rows, categories or examples: more than this is a typo, and the engines'
#: 64-bit integers overflow far above it (``--batch-size 10**30`` was an OverflowError).
MAX_COUNT = 10**9
#: ``store gc --older-than``: a century; more is a typo, not an age.
MAX_OLDER_THAN_DAYS = 36_500
#: ``audit --scale-noise``: noise a million times its declared scale is already caught by
#: every test; larger factors only approach float overflow in the mechanisms.
MAX_SCALE_NOISE = 1e6
#: ``audit --scale``: the full audit takes 3-4 CPU-minutes at 1, so 1000 is days; beyond it
#: the trial counts (an int) overflow.
MAX_AUDIT_SCALE = 1e3


def _store_folder_option(path: str, flag: str) -> None:
    """A store option that may be absent (nothing published yet) but, if there, is a folder:
    a file, an impossible name or an empty path is refused rather than silently ignored."""
    if not path.strip():
        raise UsageError(f"{flag} is empty; expected a release store folder")
    try:
        info = Path(path).stat()
    except FileNotFoundError:
        return
    except OSError as exc:  # a name too long, a file used as a folder
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}; expected a release store "
                         "folder") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{flag} {path} is a file, not a release store folder")


def _check_data_and_review(args: argparse.Namespace, contract: Any, console: Any,
                           result: Any) -> int:
    from privfair.contracts.tools import review_warning

    warning = review_warning(contract)
    if warning:
        console.print(f"WARNING: {warning}")
    if result is not None:
        console.print(f"checking {args.data} (local diagnostic: it quotes private values; "
                      "nothing is written)")
        for line in result.lines():
            console.print(line, markup=False)
        if not result.passed:
            return 1
    print(f"contract fingerprint: {contract.fingerprint()}", flush=True)
    return 0


def cmd_contract_draft(args: argparse.Namespace) -> int:
    from privfair.contracts.tools import draft_contract
    from privfair.release.checks import DATASET_NAME, RESERVED_NAMES, RESERVED_SUFFIXES

    out = Path(args.out) if args.out else None
    if out is not None and out.exists():
        raise UsageError(f"--out {out} exists; expected a new file (a draft never overwrites)")
    if out is not None and not out.parent.is_dir():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    if out is not None:  # a draft quotes the data's values: never among releases
        from privfair.store.outputs import check_output

        check_output(out, flag="--out", inputs={"--data": args.data})
    if args.name is not None and (not DATASET_NAME.fullmatch(args.name)
                                  or args.name.lower() in RESERVED_NAMES
                                  or args.name.lower().endswith(RESERVED_SUFFIXES)):
        # what `contract check` and every release refuse, refused before it is written
        raise UsageError(f"--name {args.name!r}: cannot name a dataset; expected letters, "
                         "digits, '.', '_' or '-' (not starting with '.'), not a name the "
                         "release store reserves")
    for flag, value in (("--max-categories", args.max_categories),
                        ("--max-codes", args.max_codes)):
        if not 1 <= value <= MAX_COUNT:
            raise UsageError(f"{flag} must be in [1, {MAX_COUNT:,}], got {value}")
    from privfair.store.registry_sql import open_registry

    # The draft pins the dataset to this registry (one dataset, one budget: issue 36.4).
    text = draft_contract(args.data, max_categories=args.max_categories,
                          max_codes=args.max_codes, name=args.name,
                          registry_id=open_registry().ident)
    console = _stderr_console()
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        print(out, flush=True)
    console.print("draft written: its domains were copied from data and are public in every "
                  "release; review them, declare roles and budget, then set 'reviewed: true'")
    return 0


def cmd_contract_pin(args: argparse.Namespace) -> int:
    """A copy of the contract with ``registry_id:`` of this registry (issue 45.2): the
    packaged contracts carry none, so a second registry with its own store and client could
    start their dataset's budget afresh; the pinned copy is refused by every other one."""
    from privfair.contracts.datasets import resolve_contract_name
    from privfair.contracts.schema import load_contract
    from privfair.store.outputs import check_output
    from privfair.store.registry_sql import open_registry

    source = resolve_contract_name(args.contract)
    contract = load_contract(source)  # a contract that does not load is refused as usual
    check_output(args.out, flag="--out", new_file=True, inputs={"contract": str(source)})
    ident = open_registry().ident
    if contract.registry_id and contract.registry_id != ident:
        raise UsageError(f"contract {args.contract}: already pins registry "
                         f"{contract.registry_id}, not this one ({ident}); a dataset has one "
                         "registry")
    text = source.read_text(encoding="utf-8")
    if not contract.registry_id:
        # a top-level key, first: the YAML stays the publisher's, with one line added
        line = (f"registry_id: '{ident}'  # pinned by `privfair contract pin`: only this "
                f"registry may charge dataset {contract.name!r}\n")
        head, marker, body = text.partition("---\n")
        text = (head + marker + line + body) if marker and not head.strip("\n") else (
            line + text)
    out = Path(args.out)
    with open(out, "x", encoding="utf-8") as fh:  # never over a file it did not make
        fh.write(text)
    if load_contract(out).registry_id != ident:  # the copy is read back as releases read it
        out.unlink()
        raise UsageError(f"contract {args.contract}: the pinned copy did not read back with "
                         f"registry_id; add the line `registry_id: {ident}` by hand")
    print(out, flush=True)
    return 0


def cmd_releases_list(args: argparse.Namespace) -> int:
    from privfair.release.checks import check_catalog_file
    from privfair.store.catalog import fairness_label, list_releases, rows_label

    check_catalog_file(_existing(args.store, "--out"))
    rows = list_releases(args.store, args.dataset)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print(f"no releases in {args.store}")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"releases in {args.store}")
    for col in ("dataset", "version", "published_at", "epsilon", "delta", "method", "n_rows",
                "fair", "path"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["dataset"], r["version"], r["published_at"], f"{r['epsilon']:g}",
                      f"{r['delta']:g}", r["method"], rows_label(r),
                      fairness_label(r), r["path"])
    Console(width=200).print(table)
    return 0


def cmd_ledger_show(args: argparse.Namespace) -> int:
    from privfair.store.check import pid_alive
    from privfair.store.ledger import budget_history, run_history, run_state_words
    from privfair.store.registry import registry_ledgers, registry_name

    # Computed from the registry's verified chain, never from a store copy's summary fields.
    # A damaged ledger is reported (stderr, exit 1) and the others are still shown.
    _store_folder_option(args.store, "--out")
    damaged: list[str] = []
    ledgers = registry_ledgers(args.dataset, damaged=damaged)
    for line in damaged:
        _stderr_console().print(f"damaged: {line}", markup=False)
    status = 1 if damaged else 0
    if args.json:
        print(json.dumps([led | {"runs": run_history(led["entries"]),
                                 "budget_history": budget_history(led["entries"])}
                          for led in ledgers], indent=2))
        return status
    if not ledgers:
        print(f"no lifetime ledgers in registry {registry_name()}")
        return status
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    console.print(f"registry {registry_name()}: computed from the verified chain (HMAC, head "
                  "and entry count checked)", markup=False)
    for led in ledgers:
        b, s = led["budget"], led["spent"]
        table = Table(title=(
            f"{led['dataset_id']}: epsilon {s['epsilon_at_budget_delta']:.4g} of "
            f"{b['epsilon']:g} spent at delta {b['delta']:g} (every charge composed); "
            f"{len(led['entries'])} entries, head {led['head'][:12]}"))
        for col in ("run", "state", "version", "store", "charge", "epsilon", "method", "at",
                    "reason"):
            table.add_column(col, overflow="fold")  # a long store path wraps, whole
        for change in budget_history(led["entries"]):
            table.add_row("-", f"budget {change['change']}", "-", "-",
                          f"delta {change['delta']:g}", f"{change['epsilon']:g}", "-", change["at"],
                          " ".join(filter(None, (change["reason"],
                                                 change["by"] and f"(by {change['by']})"))))
        holders = {p["run_id"]: p for p in led["pending"]}
        for r in run_history(led["entries"]):
            charge = "Renyi curve" if r["rho"] is None else f"rho {r['rho']:.6g}"
            holder = holders.get(r["run_id"], {})
            state = run_state_words(r["state"],
                                    alive=pid_alive(holder.get("pid"), holder.get("host")))
            table.add_row(str(r["run_id"] or "-"), state, str(r["version"] or "-"),
                          str(r.get("store") or "-"), charge, f"{r['epsilon']:.4g}",
                          str(r["method"] or "-"), r["at"], r["reason"])
        console.print(table)
    return status


def cmd_ledger_raise(args: argparse.Namespace) -> int:
    from privfair.contracts.schema import load_contract
    from privfair.store.registry import check_budget_bounds, raise_budget

    if args.epsilon is not None or args.delta is not None:  # before the contract is read
        check_budget_bounds(1.0 if args.epsilon is None else args.epsilon,
                            1e-9 if args.delta is None else args.delta)
    contract = load_contract(args.contract)
    _check_dataset_name(contract, args.contract)
    book = raise_budget(
        contract, reason=args.reason,
        epsilon=float(contract.budget.epsilon) if args.epsilon is None else args.epsilon,
        delta=float(contract.budget.delta) if args.delta is None else args.delta)
    print(f"{book.dataset_id}: lifetime budget now epsilon={book.epsilon_budget:g}, "
          f"delta={book.delta_budget:g} (entry {book.head[:12]})")
    return 0


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    from privfair.store.registry import registry_name
    from privfair.store.registry_admin import verify_registry

    checked = verify_registry()
    for c in checked:
        print(f"damaged: {c.problem}" if c.problem
              else f"ok: {c.dataset}: {c.entries} entries, head {c.head[:12]}")
    bad = sum(c.problem is not None for c in checked)
    print(f"registry {registry_name()}: {len(checked) - bad} ledger(s) verified"
          + (f", {bad} damaged" if bad else ""))
    return 1 if bad else 0


def cmd_ledger_export(args: argparse.Namespace) -> int:
    from privfair.store.registry_admin import export_ledger

    if args.out:  # never the registry's database or key, a catalog or a store's ledger copy
        from privfair.store.outputs import check_output

        check_output(args.out, flag="--out", new_file=True)
    text = json.dumps(export_ledger(args.dataset), indent=2, sort_keys=True) + "\n"
    if args.out:
        from privfair.store.files import atomic_write

        atomic_write(Path(args.out), text.encode("utf-8"))
        print(args.out)
    else:
        sys.stdout.write(text)
    return 0


def cmd_ledger_import(args: argparse.Namespace) -> int:
    from privfair.store.registry_admin import ledger_files
    from privfair.store.registry_sql import import_files, open_registry

    files = ledger_files(Path(args.file).expanduser())
    if not files:
        raise UsageError(f"no lifetime_ledger.json under {args.file}")
    from privfair.store.registry import read_chain

    for path in import_files(open_registry(), files):
        entries = read_chain(path.parent.name)
        print(f"imported {path} as dataset {path.parent.name!r}: {len(entries)} entries, "
              f"head {entries[-1]['hash'][:12]}")
    return 0


def cmd_ledger_reset(args: argparse.Namespace) -> int:
    from privfair.store.registry_admin import reset_ledger

    lost = reset_ledger(args.dataset, reason=args.reason)
    print(f"{args.dataset}: ledger reset in registry {lost['registry']} (recorded, generation "
          f"{lost['generation'] + 1}); the registry had recorded "
          f"{lost['recorded_entries'] if lost['recorded_entries'] is not None else 'unknown'} "
          f"entries (head {str(lost['recorded_head'])[:12]}), {len(lost['entries_left'])} "
          f"were left, {lost['entries_verified']} of them verified")
    if lost["carried"]:
        print(f"carried over (still charged): the {lost['entries_verified']} verified entries: "
              f"releases {lost['carried_releases']}, runs not published "
              f"{lost['carried_runs']}, epsilon {lost['carried_epsilon']:.6g} of "
              f"{lost['budget'][0]:g} spent at delta {lost['budget'][1]:g}; whatever the lost "
              "entries charged is not counted: lower the contract's budget to account for it")
    else:
        print("nothing verified was left to carry over: everything charged to this dataset is "
              "lost; lower the contract's budget to account for it")
    return 0


def cmd_store_check(args: argparse.Namespace) -> int:
    from privfair.release.checks import check_catalog_file
    from privfair.store.check import check_store

    check_catalog_file(_existing(args.out, "--out"))
    _not_a_store(args.out)
    _work_dir(args.work_dir)
    report = check_store(args.out, repair=args.repair, work_dir=args.work_dir)
    _dead_slots(report, repair=args.repair)
    for line in report.repaired:
        print(f"repaired: {line}")
    for line in report.problems:
        print(f"problem: {line}")
    print("consistent" if report.consistent else f"{len(report.problems)} problem(s)")
    return 0 if report.consistent else 1


def _dead_slots(report: Any, *, repair: bool) -> None:
    """A killed Prefect release leaves its dataset's concurrency slot held, and every later
    Prefect release of the dataset waits for it (issue 45.3): this client's holder records
    name the dead holders; ``--repair`` frees their slots on the Prefect API (a temporary
    server when none is configured: an ephemeral server keeps its slots in its database)."""
    from tasks.ops import dead_slot_holders, free_dead_slots

    dead = dead_slot_holders()
    if not dead:
        return
    if not repair:
        report.problems += [f"concurrency slot {name!r} is held by a dead run (pid "
                            f"{holder.get('pid')} on {holder.get('host')}, since "
                            f"{holder.get('since')}): later Prefect releases of its dataset "
                            "wait for it" for name, holder in dead]
        return
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    server = _start_temporary_server()
    try:
        with server.serving() if server is not None else contextlib.nullcontext():
            free_dead_slots(log=lambda line: report.repaired.append(line))
    except Exception as exc:  # noqa: BLE001 - no API to free them on: said, not a traceback
        report.problems.append(f"could not free the concurrency slots of dead runs "
                               f"({', '.join(name for name, _ in dead)}): {_one_line(exc)}")


def _not_a_store(path: str) -> None:
    """``store check`` on a folder of other things (a work folder, a project) would say
    "consistent" about nothing: a folder that holds files but no catalog, no dataset
    ledger and nothing of privfair's (its names start with '.') is refused."""
    from privfair.store.outputs import is_release_store

    folder = Path(path)
    entries = list(folder.iterdir())
    # privfair's own names start with '.': its locks, and a dataset folder's publication
    # intents and staging (a store whose first publication stopped holds only those)
    ours = any(e.name.startswith(".") for e in entries) or any(
        child.name.startswith(".") for e in entries if e.is_dir() and not e.is_symlink()
        for child in e.iterdir())
    if entries and not is_release_store(folder) and not ours:
        raise UsageError(f"--out {path} is not a release store (no catalog.duckdb, no "
                         "dataset ledger); expected the folder releases are published to")


def _work_dir(path: str) -> None:
    """A work folder ``store check`` and ``store gc`` may delete in: a folder (or none yet),
    never a file, a release store, a release or privfair's state (issue 45.1)."""
    from privfair.store.outputs import check_output

    if not path.strip():
        raise UsageError("--work-dir is empty; expected a folder path")
    if Path(path).exists() and not Path(path).is_dir():
        raise UsageError(f"--work-dir {path} is a file, not a folder")
    if Path(path).exists():  # a folder not there yet holds nothing to delete (the default)
        check_output(path, flag="--work-dir")


def cmd_store_gc(args: argparse.Namespace) -> int:
    from privfair.store.gc import RUN_TIME_LIMIT_S, collect_garbage

    if not 0 <= args.older_than <= MAX_OLDER_THAN_DAYS:
        raise UsageError(f"--older-than must be a number of days in [0, "
                         f"{MAX_OLDER_THAN_DAYS}], got {args.older_than:g}")
    _work_dir(args.work_dir)
    report = collect_garbage(args.work_dir, older_than_s=args.older_than * 86_400,
                             stale_staging_s=RUN_TIME_LIMIT_S, dry_run=args.dry_run)
    for path in report.removed:
        print(path)
    _stderr_console().print(report.line())
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 0 when every noise test passes at its declared scale with both scaled-noise
    controls caught, and every ε bound is within its claim with its controls caught; 1
    otherwise (a violation, noise off its declared scale, or a check without power), naming
    what failed."""
    from privfair.evaluation.audit import MECHANISMS, NOISE_CASES, run_audit

    if not 0 < args.scale <= MAX_AUDIT_SCALE:
        raise UsageError(f"--scale: expected a number in (0, {MAX_AUDIT_SCALE:g}], got "
                         f"{args.scale:g}")
    if not (math.isfinite(args.scale_noise) and 0 < args.scale_noise <= MAX_SCALE_NOISE):
        raise UsageError(f"--scale-noise: expected a number in (0, {MAX_SCALE_NOISE:g}], got "
                         f"{args.scale_noise:g}")
    known = set(MECHANISMS) | set(NOISE_CASES)
    unknown = sorted(set(args.mechanism or ()) - known)
    if unknown:
        raise UsageError(f"--mechanism: unknown {unknown}; expected some of {sorted(known)}")
    misdeclare = _misdeclarations(args.misdeclare)
    console = _stderr_console()

    def progress(result: Any) -> None:
        if not args.json:
            # A noise test (name, status) or an epsilon audit (mechanism, verdict).
            label, status = ((result.name, result.status) if hasattr(result, "status")
                             else (result.mechanism, result.verdict))
            console.print(f"{label}: {status} ({result.seconds:.1f} s)", markup=False)

    report = run_audit(names=args.mechanism or None, quick=args.quick, scale=args.scale,
                       factor=args.scale_noise, noise_only=args.noise_only,
                       progress=progress, misdeclare=misdeclare)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.table import Table

    out = Console(width=220)
    noise = Table(title=f"noise of the release functions at exact answers the audit built "
                        f"(every draw at {args.scale_noise:g} x its declared scale)")
    for col in ("key", "release function", "mechanism", "claim (ledger)", "drawn/declared",
                "p", "draws", "caught at 0.7", "caught at 1.3", "status"):
        noise.add_column(col, justify="left" if col in ("key", "release function", "mechanism",
                                                        "claim (ledger)", "status")
                         else "right")
    for r in report.noise:
        v = r.verdict
        noise.add_row(r.key, r.function, r.mechanism, r.claim,
                      f"{v.ratio:.3f}" if v else "-", f"{v.p_value:.2g}" if v else "-",
                      f"{v.draws:,}" if v else "-",
                      *(("yes" if r.caught[f] else "NO") if v else "-" for f in (0.7, 1.3)),
                      r.status)
    if report.noise:
        out.print(noise)
    audits = Table(title="privacy audit (95% lower bounds on epsilon: Clopper-Pearson on an "
                         "event, or a Gaussian-DP / subsampled-Gaussian fit; the claim is "
                         "the ledger's)")
    for col in ("key", "mechanism", "claimed eps", "delta", "lower bound", "bound/claim",
                "trials", "fit", "negative control", "its bound", "verdict"):
        audits.add_column(col, justify="left" if col in ("key", "mechanism",
                                                         "negative control") else "right")
    audited = [] if args.noise_only else [k for k in MECHANISMS
                                          if not args.mechanism or k in args.mechanism]
    for key, audit in zip(audited, report.results, strict=True):
        audits.add_row(key, audit.mechanism, f"{audit.claimed_epsilon:.3f}", f"{audit.delta:g}",
                       f"{audit.epsilon_lower_bound:.3f}",
                       f"{audit.epsilon_lower_bound / audit.claimed_epsilon:.2f}",
                       f"{audit.trials:,}", audit.fit,
                       "; ".join(c.label for c in audit.controls) or "-",
                       ", ".join(f"{c.epsilon_lower_bound:.3f}" for c in audit.controls) or "-",
                       audit.verdict)
    if report.results:
        out.print(audits)
    out.print(report.coverage_line(), markup=False)
    if report.passed:
        out.print("audit: ok", markup=False)
        return 0
    wrong = "".join(f" --misdeclare {k}={f:g}" for k, f in misdeclare.items())
    out.print(f"audit FAILED at --scale-noise {args.scale_noise:g}{wrong}; caught: "
              + "; ".join(report.caught), markup=False)
    return 1


def _misdeclarations(values: list[str]) -> dict[str, float]:
    """``--misdeclare KEY=F`` values as {key: factor}, refused unless each names a known
    declaration and a factor in (0, MAX_SCALE_NOISE]."""
    from privfair.evaluation.audit import MISDECLARATIONS

    out: dict[str, float] = {}
    for value in values:
        key, _, factor = value.partition("=")
        if key not in MISDECLARATIONS:
            raise UsageError(f"--misdeclare: unknown {key!r} in {value!r}; expected KEY=F with "
                             f"KEY one of {sorted(MISDECLARATIONS)}")
        try:
            f = _decimal(factor)  # the strict parser: no 1_0, nan, inf
        except argparse.ArgumentTypeError:
            f = math.nan
        if not (math.isfinite(f) and 0 < f <= MAX_SCALE_NOISE):
            raise UsageError(f"--misdeclare: expected KEY=F with F a number in (0, "
                             f"{MAX_SCALE_NOISE:g}], got {value!r}")
        out[key] = f
    return out


def cmd_evaluate(args: argparse.Namespace) -> int:
    from privfair.evaluation.grid import EvaluateParams, cells, check_out, grid_inputs

    privileged = _privileged(args.privileged)
    if args.data and not Path(args.data).is_dir():  # a FIFO or device is read forever
        _existing(args.data, "--data", folder=False)
    if args.release:
        return _score_release(args, privileged)
    given = {k: getattr(args, k) for k in ("datasets", "methods", "epsilons", "seeds", "etas",
                                           "classifiers", "split_seed", "out", "contract",
                                           "data", "test_fraction")
             if getattr(args, k) is not None}
    if args.contract and args.datasets:
        raise UsageError("--contract evaluates your own table; drop --datasets")
    if privileged:
        if not args.contract:
            raise UsageError("--privileged goes with --contract or --release")
        given["privileged"] = privileged
    params = EvaluateParams(**given)  # refuses bad values before any real data is read
    check_out(params.out, inputs=grid_inputs(params))  # never an input, a store, the registry
    if args.dask and args.no_prefect:
        raise UsageError("--dask runs cells through Prefect; drop --no-prefect")
    if args.dask and importlib.util.find_spec("prefect_dask") is None:
        raise UsageError("--dask needs prefect-dask: pip install -e '.[dask]'")
    if params.contract:  # one clear line now for a table that breaks its contract
        from privfair.evaluation.grid import cached_dataset, dataset_names

        cached_dataset(dataset_names(params)[0], params.split_seed, params.contract,
                       params.data, params.privileged, params.test_fraction)
    n = len(cells(params))
    console = _stderr_console()
    console.print(f"evaluation grid: {n} cells; results are NOT privacy-protected")
    with _progress() as bar:
        task = bar.add_task(f"cells 0/{n}", total=1.0)

        def progress(stage: str, fraction: float) -> None:
            bar.update(task, description=stage, completed=fraction)

        if args.no_prefect:
            from privfair.evaluation.grid import run_grid, write_outputs

            results = run_grid(params, progress=progress)
            folder = write_outputs(results, params)
        else:
            os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
            os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
            from flows.temporary_server import startup_timeout_s

            startup_timeout_s()  # Prefect's own server gets the stated bound, not its 20 s
            from flows.evaluate import run_evaluation  # configures Prefect's logging
            try:
                with _console_logs_at_warning():  # no Prefect INFO lines inside the bar
                    folder = run_evaluation(params, dask=args.dask, progress=progress)
            finally:
                # The ephemeral API server logs its shutdown at exit; keep the folder last.
                logging.getLogger("prefect").setLevel(logging.WARNING)
            import pandas as pd

            results = pd.read_parquet(folder / "results.parquet", columns=["error"])
    failed = int(results["error"].notna().sum())
    if failed:
        console.print(f"{failed} of {n} cells failed (see the error column of results.parquet)")
    console.print("wrote results.parquet and report.html: NOT privacy-protected, keep them "
                  "apart from releases")
    print(folder, flush=True)
    return 1 if n and failed == n else 0  # nothing was evaluated: not a success


def cmd_predict(args: argparse.Namespace) -> int:
    from privfair.release.kinds.model.predict import predict

    _existing(args.release, "--release")
    _existing(args.data, "--data", folder=False)
    if args.out is not None:  # never its rows, its release, a store or the registry
        from privfair.store.outputs import check_output

        if not args.out.lower().endswith((".csv", ".parquet", ".pq")):
            raise UsageError(f"--out {args.out}: expected a .csv or .parquet file name")
        check_output(args.out, flag="--out", new_file=True,
                     inputs={"--release": args.release, "--data": args.data})
    scored = predict(args.release, args.data)
    if args.out is None:
        print(scored.to_csv(index=False), end="", flush=True)
    elif args.out.lower().endswith((".parquet", ".pq")):
        scored.to_parquet(args.out, index=False)
    else:
        scored.to_csv(args.out, index=False)
    return 0


def _privileged(pairs: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        column, sep, label = pair.partition("=")
        if not sep or not column or not label:
            raise UsageError(f"--privileged {pair!r}: expected COLUMN=LABEL")
        out[column] = label
    return out


def _score_release(args: argparse.Namespace, privileged: dict[str, str]) -> int:
    from privfair.evaluation.evaluate import NOT_PRIVATE
    from privfair.evaluation.grid import check_out
    from privfair.evaluation.score_release import score_release, write_release_score

    if not args.data:
        raise UsageError("--release needs --data, the real table to score it against")
    out = args.out or "evaluations"
    # never an input, a release store or the registry
    check_out(out, inputs={"--release": args.release, "--data": args.data,
                           "--contract": args.contract})
    classifiers = args.classifiers or ["logistic"]
    record = score_release(args.release, args.data, contract_path=args.contract,
                           classifiers=classifiers, privileged=privileged)
    folder = write_release_score(record, out)
    console = _stderr_console()
    console.print(f"NOT privacy-protected: {NOT_PRIVATE}")
    if record.get("kind") == "model":
        gaps = ", ".join(f"{k.removeprefix('model_rd_')} {v:.3f}" for k, v in record.items()
                         if k.startswith("model_rd_"))
        console.print(f"release {record['dataset']} {record['version']} ({record['method']}): "
                      f"accuracy on real {record['model_accuracy']:.4f} (majority "
                      f"{record['model_baseline_accuracy']:.4f})"
                      + ("; predicts one class only" if record["model_predicts_one_class"]
                         else "") + f"; positive-prediction rate gap: {gaps}")
        print(folder, flush=True)
        return 0
    clf = classifiers[0]
    console.print(f"release {record['dataset']} {record['version']}: tvd1 "
                  f"{record['tvd1']:.4f}, tvd2 {record['tvd2']:.4f}; {clf} trained on "
                  f"synthetic, accuracy on real {record[f'{clf}_accuracy']:.4f} (baseline "
                  f"{record[f'{clf}_baseline_accuracy']:.4f})")
    print(folder, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        command = next((w for w in words if not w.startswith("-")), "")
        args = build_parser(command).parse_args(words)
        return int(args.func(args))
    except KeyboardInterrupt:
        print("privfair: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line, never a traceback, for every failure
        from flows.temporary_server import startup_failure_line

        server = startup_failure_line(exc)  # the machine, not privfair: no "internal error"
        if server is not None:
            print(f"privfair: error: {server}", file=sys.stderr, flush=True)
            return 1
        if _is_bad_input(exc):
            print(f"privfair: error: {_one_line(exc)}", file=sys.stderr, flush=True)
            return 2
        print(f"privfair: internal error: {type(exc).__name__}: {_one_line(exc)}",
              file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
