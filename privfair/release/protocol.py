"""The release protocol: the one skeleton every release kind runs through.

::

    parse ─► check ─► cost ─► reserve ─► private stages ─► post-noise stages ─► publish
    (one line   (data-free:  (public   (lifetime   (read, then draw    (no private read;   (intent, 0700 tmp,
     on bad      contract,    inputs    ledger,     noise: charged     cacheable)          ledger, rename,
     numbers)    store, ...)  only)     seed)       from here on)                          catalog)

A release kind (:class:`ReleaseKind`) is a declaration: its parameter model, its data-free
check, its cost, its stage list and what it writes. :func:`run_release` is the only code that
orders those steps, so a kind cannot skip one:

* the run's cost is reserved in the dataset's lifetime ledger before the first stage runs,
  never more than the kind declared, and a fixed test seed is fingerprinted with the
  dataset's registry key and refused when a published release of the dataset used it;
* the first stage that draws noise marks the run as charged (``spend``); a run that fails
  before that gets its reservation back (``cancel``), one that fails after it stays charged
  and says so;
* the private staging folder is removed after the last private stage, whatever happens;
* publication follows the store's protocol (:mod:`privfair.store.publication`).

Two drivers iterate the same stage list: :class:`InProcess` (``--no-prefect``, the library)
and the Prefect driver in ``flows/`` (each stage a task; stages that draw noise are never
retried). Both call the stages' functions with the same context and state, so they publish
the same bytes for the same test seed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import shlex
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from privfair.contracts.schema import Contract
from privfair.core.budget import Budget
from privfair.core.errors import ContractError, PrivfairError, ReleaseInputError
from privfair.release.checkpoint import save_checkpoint
from privfair.release.checks import check_run_folders
from privfair.release.options import ReleaseOptions, params_error_line
from privfair.release.seeds import (
    check_seed_given,
    check_seed_policy,
    kind_rng,
    seed_fingerprint,
)
from privfair.store import publication
from privfair.store.catalog import next_version
from privfair.store.files import StoreError, Workspace, json_bytes, sha256_file, utc_now
from privfair.store.ledger import charge_epsilon
from privfair.store.locks import locked
from privfair.store.publication import commit_publication, recover_store, write_intent
from privfair.store.registry import (
    RunCharge,
    check_seed_unused,
    dataset_id,
    mark_noise_drawn,
    read_lifetime_ledger,
    release_unspent,
    reserve_run,
)

log = logging.getLogger(__name__)

#: ``progress(stage, fraction of the whole run)``.
Progress = Callable[[str, float], None]
#: The state a run carries from stage to stage: stage outputs by name (file references and
#: post-noise values; never private rows).
State = Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class RequestPlan:
    """What every kind's plan holds: the public facts the protocol reads. A kind's plan
    subclasses it (``@dataclass(frozen=True, kw_only=True)``) and adds its own settings."""

    run_id: str
    dataset: str
    contract: Contract
    contract_path: str
    data_path: str
    data_source: str
    store: str
    work_dir: str
    #: The ledger's label of the run (e.g. ``mst``, ``model:pflr``, ``graph:privpc``).
    method: str
    epsilon: float
    delta: float
    #: The zCDP ρ of (ε, δ): what a kind accounted in zCDP reserves.
    rho: float
    started_at: str
    #: Whether the run has an insecure test seed (the seed itself is never in a plan).
    seeded: bool
    #: Insecure test mode only: the seed's keyed fingerprint (the protocol fills it in).
    seed_fingerprint: str | None = None

    @property
    def seed_policy(self) -> str:
        """The manifest's ``seed_policy``: how the run drew its randomness."""
        if self.seeded:
            return ("INSECURE test mode: fixed operator-supplied seed; the seed is not recorded "
                    "(whoever knows it can remove the noise)")
        return "fresh OS entropy for every noise draw and sample; no seed exists"


@dataclass(frozen=True)
class Cost:
    """What a run charges the lifetime ledger, computed from public inputs before any read.

    ``rdp`` is the Rényi curve (on :data:`privfair.core.accounting.RDP_ORDERS`) of a kind that
    accounts in RDP: the lifetime ledger composes it as it is, whatever the lifetime's size.
    Otherwise the run costs the zCDP ρ of its (ε, δ).
    """

    epsilon: float
    delta: float
    rdp: tuple[float, ...] | None = None

    @property
    def rho(self) -> float | None:
        return None if self.rdp is not None else Budget(epsilon=self.epsilon,
                                                        delta=self.delta).rho

    def charge(self) -> dict[str, Any]:
        """The lifetime ledger's ``check`` arguments for this cost."""
        return {"rho": 0.0, "rdp": self.rdp} if self.rdp is not None else {"rho": self.rho}

    def epsilon_at(self, delta: float) -> float:
        """The cost alone as ε at ``delta`` (e.g. the lifetime's δ)."""
        return charge_epsilon({"rdp": list(self.rdp)} if self.rdp is not None
                              else {"rho": self.rho}, delta)


@dataclass(frozen=True)
class Stage:
    """One step of a kind's run.

    ``run(context, state)`` returns the new entries of the state. ``private``: it reads the
    private data or its true counts. ``noise``: it draws noise, so the run is charged from its
    start on (every data check that can fail must come in an earlier stage). ``cache``: it is
    post-processing and deterministic in its inputs, so a driver may cache it.
    """

    name: str
    run: Callable[[RunContext, State], Mapping[str, Any]]
    private: bool = False
    noise: bool = False
    cache: bool = False
    #: Where this stage starts, as a share of the whole run (for progress bars).
    at: float = 0.0


@dataclass(frozen=True)
class Written:
    """What a kind wrote into the staged release folder (see :meth:`ReleaseKind.write`)."""

    manifest: dict[str, Any]
    #: Files written, relative to the folder (the manifest records their sha256).
    files: Sequence[str]
    #: The catalog's ``n_rows`` (a released, noisy count, or 0 for non-tabular kinds).
    n_rows: int
    fairness_passed: bool
    #: Extra fields of the ledger's ``publish`` entry (e.g. the run's Rényi curve).
    ledger_fields: Mapping[str, Any] = field(default_factory=dict)
    #: sha256 of files hashed as they were written (e.g. by the Dask workers that wrote the
    #: parts); the others are hashed at publication.
    digests: Mapping[str, str] = field(default_factory=dict)
    #: Whether the method promises the fairness criterion ``fairness_passed`` checks; the
    #: catalog shows "not claimed" instead of yes/no when it does not (issue 35.2).
    fairness_claimed: bool = True


@dataclass
class RunContext:
    """What every stage of one run receives besides the state: public facts only."""

    kind: ReleaseKind
    plan: Any
    #: The insecure test seed, or None (fresh OS entropy). Never recorded.
    seed: int | None
    workspace: Workspace
    charge: RunCharge
    progress: Progress
    #: Public log lines (stage logs in the Prefect UI, nothing on the quiet CLI).
    say: Callable[[str], None]
    orchestrator: dict[str, Any] | None = None
    #: For ``--resume``: the run resumed and the post-processing parameters changed.
    resumed: dict[str, Any] | None = None
    #: The dataset's lifetime ledger as read just after the run's reservation (which it
    #: holds), for a kind whose lifetime charge is known only once it ran (a GAN's Rényi
    #: curve) and that must keep it within its reservation. None on ``--resume``.
    lifetime: Any = None

    def rng(self, stage: str) -> np.random.Generator:
        """The generator of one of this kind's stages (distinct spawn key per kind/stage)."""
        return kind_rng(self.seed, self.kind.name, stage, stages=self.kind.seed_stages)


class ReleaseKind(ABC):
    """A kind of release, declared once; :func:`run_release` runs it.

    A subclass sets ``name`` (the ledger's ``kind``), ``command`` (the CLI command that
    publishes it), ``params`` (its pydantic parameter model, from which the CLI options and
    the Prefect form are generated) and ``seed_stages`` (the names of the stages that draw
    randomness, each given its own stream), and implements the four methods below.
    """

    name: ClassVar[str]
    command: ClassVar[str]
    params: ClassVar[type[ReleaseOptions]]
    seed_stages: ClassVar[tuple[str, ...]] = ()
    #: Parameters that only change post-processing: ``--resume`` may change these, and only
    #: these, to re-run the post-noise stages of a charged run at no privacy cost.
    post_noise_params: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""

    @abstractmethod
    def check(self, params: Any) -> Any:
        """Every data-free check; returns the kind's public plan (a :class:`RequestPlan`).
        """

    def cost(self, plan: Any) -> Cost:
        """What the run will charge, from public inputs only: by default the zCDP ρ of the
        plan's (ε, δ); a kind accounted in Rényi DP returns its declared curve."""
        return Cost(epsilon=plan.epsilon, delta=plan.delta)

    def check_lifetime(self, plan: Any, lifetime: Any) -> None:
        """Refuse, before any noise, a run whose lifetime charge could not stay within its
        cost next to ``lifetime`` (the dataset's lifetime ledger; checked when planning and
        again once the run holds its reservation). By default nothing to check."""
        return None

    @abstractmethod
    def stages(self, plan: Any) -> list[Stage]:
        """The run's stages, in order: private ones first, post-noise ones after."""

    @abstractmethod
    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        """Write the release files into ``folder`` (mode 0700, not yet published)."""

    def runs(self, options: Any) -> bool:
        """Whether this kind runs ``options`` of its command (a command with several kinds
        runs the first that does; see :mod:`privfair.release.registry`)."""
        return True

    def summary(self, plan: Any) -> str:
        """One public line naming what the run will do (logged before it reserves)."""
        return f"{self.name} release of {plan.dataset!r} ({plan.method})"

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        """One public line saying what was built and the result of its checks."""
        guarantee = manifest.get("guarantee", {})
        return (f"{self.name} release {manifest.get('dataset')} {manifest.get('version')}: "
                f"({guarantee.get('epsilon')}, {guarantee.get('delta')})-DP")

    def ledger_table(self, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The release's ledger as table rows (the Prefect artifact): public, charged."""
        keys = ("name", "mechanism", "rho", "sigma", "epsilon", "queries")
        return [{k: e.get(k) for k in keys if k in e}
                for e in manifest.get("ledger", []) if isinstance(e, Mapping)]

    def markdown(self, folder: Path, manifest: Mapping[str, Any]) -> str:
        """A public summary of a published release (the Prefect artifact)."""
        guarantee = manifest.get("guarantee", {})
        return "\n".join([
            f"# {self.name} release {manifest.get('dataset')} {manifest.get('version')}", "",
            f"({guarantee.get('epsilon')}, {guarantee.get('delta')})-DP; folder `{folder}`; "
            f"files: {', '.join(sorted(manifest.get('files', {})))}."])

    def parse(self, params: Any) -> ReleaseOptions:
        """The checked parameter model; one line naming the first bad parameter."""
        if isinstance(params, self.params):
            return params
        try:
            return self.params.model_validate(
                params.model_dump() if isinstance(params, BaseModel) else dict(params))
        except ValueError as exc:
            raise ReleaseInputError(params_error_line(exc)) from None


class InProcess:
    """The driver of ``--no-prefect`` and of library use: stages are plain calls."""

    orchestrator: dict[str, Any] | None = None

    @contextlib.contextmanager
    def slot(self, dataset: str) -> Iterator[None]:
        yield  # the store's and the registry's locks still serialise what must be

    def run_stage(self, stage: Stage, context: RunContext, state: State) -> Mapping[str, Any]:
        return stage.run(context, state)

    def say(self, line: str) -> None:
        log.info(line)

    def published(self, kind: ReleaseKind, folder: Path, written: Written) -> None:
        return None


@dataclass(frozen=True)
class Planned:
    """A checked request: what :func:`plan_release` found, before anything is reserved."""

    kind: ReleaseKind
    params: ReleaseOptions
    plan: Any
    cost: Cost
    #: The run's zCDP ρ, or None for a kind charged by its Rényi curve.
    rho: float | None
    lifetime: Any


def plan_release(kind: ReleaseKind, params: Any) -> Planned:
    """Parse and check a request without reading data or charging anything (``--dry-run``)."""
    options = kind.parse(params)
    check_seed_policy(options.seed, options.insecure_seed, error=ReleaseInputError)
    check_seed_given(options.seed, options.insecure_seed, error=ReleaseInputError)
    plan = kind.check(options)
    # Folders the run will write: created (or not) now, not after the noise (issue 36).
    check_run_folders(out=options.out, work_dir=options.work_dir, dataset=plan.dataset)
    if plan.contract.reviewed is False:  # a draft's lists were copied from the data
        raise ContractError(
            f"contract {plan.contract.name!r} is a draft (reviewed: false): its category lists "
            "and bin edges were copied from the data and would be public in the release; "
            "review each against the codebook, then set 'reviewed: true'")
    if options.seed is not None:  # keyed by the dataset's secret in the registry
        plan = replace(plan, seed_fingerprint=seed_fingerprint(
            options.seed, dataset=dataset_id(plan.contract)))
    cost = kind.cost(plan)
    lifetime = read_lifetime_ledger(plan.store, plan.contract)
    lifetime.check(**cost.charge())
    kind.check_lifetime(plan, lifetime)
    return Planned(kind, options, plan, cost, cost.rho, lifetime)


def run_release(request: ReleaseKind | Planned, params: Any = None, *, driver: Any = None,
                progress: Progress | None = None) -> Path:
    """Run one release by the protocol above; returns the release folder.

    ``request``: a kind and its ``params``, or what :func:`plan_release` returned for them
    (the CLI plans once, for its cost line, and runs that plan: one run id). A planned
    request is checked again where it matters once the run holds the dataset: the
    reservation composes its cost with the ledger as it is then, refuses a used seed, and
    the kind's lifetime check runs again."""
    driver = driver or InProcess()
    report = progress or getattr(driver, "progress", None) or (lambda stage, fraction: None)
    report("check", 0.0)
    planned = request if isinstance(request, Planned) else plan_release(request, params)
    kind, plan, options = planned.kind, planned.plan, planned.params
    driver.say(kind.summary(plan))
    with driver.slot(plan.dataset):
        charge = reserve(planned)
        try:
            workspace = Workspace.open(plan.work_dir, plan.run_id)
        except BaseException as exc:
            release_unspent(charge)  # no stage ran: the reservation goes back
            if isinstance(exc, OSError) and is_disk_error(exc):
                raise disk_error(exc, where=f"the work folder {plan.work_dir}") from None
            raise
        context = RunContext(kind=kind, plan=plan, seed=options.seed, workspace=workspace,
                             charge=charge, progress=report, say=driver.say,
                             orchestrator=driver.orchestrator)
        stages = kind.stages(plan)
        last_private = max((i for i, s in enumerate(stages) if s.private), default=-1)
        state: dict[str, Any] = {}
        drawn = checkpointed = False
        try:
            context.lifetime = read_lifetime_ledger(plan.store, plan.contract)
            kind.check_lifetime(plan, context.lifetime)  # again: others may have reserved
            for i, stage in enumerate(stages):
                stage = _naming_the_disk(stage, plan.work_dir)
                if not drawn:
                    stage = _naming_the_file(stage, plan.data_path)
                if stage.noise and not drawn:
                    mark_noise_drawn(charge)  # charged from here on, whatever happens
                    drawn = True
                report(stage.name, stage.at)
                state.update(driver.run_stage(stage, context, state))
                if i == last_private:
                    workspace.cleanup_private()  # nothing below reads private data
                    if kind.post_noise_params:  # what --resume needs: post-noise only
                        save_checkpoint(plan.work_dir, plan.run_id, kind=kind.name,
                                        options=options.model_dump(exclude={"seed"}),
                                        state=state)
                        checkpointed = True
            report("publish", 0.95)
            try:
                folder, written = publish(context, state)
            except OSError as exc:  # a full store disk: named, one line (issue 45.5)
                if not is_disk_error(exc):
                    raise
                raise disk_error(exc, where=f"the release store {plan.store}") from None
        except BaseException as exc:
            release_unspent(charge)  # a run that drew no noise gets its reservation back
            if isinstance(exc, Exception):
                if drawn:
                    exc.add_note(_still_charged(charge))
                elif isinstance(exc, DiskError):
                    exc.add_note("the run stopped before any noise: its reservation is "
                                 "cancelled, nothing is charged")
                # last: the run's id and what --resume can do with it (issue 35)
                exc.add_note(_what_next(kind, plan, drawn=drawn, checkpointed=checkpointed))
            raise
        finally:
            workspace.cleanup_private()
    driver.published(kind, folder, written)
    report("done", 1.0)
    return folder


def _naming_the_file(stage: Stage, data_path: str) -> Stage:
    """``stage`` (a reading stage before any noise) with a reader's error turned into a
    refusal naming the data file: one line on both drivers, no task traceback (issue 36: a
    damaged Parquet page said "Corrupt snappy compressed data." and nothing else). Only the
    error's type is named: a reader's message may quote a value read from the rows, and
    nothing private reaches a message (rule 3). The run has drawn no noise: it is
    cancelled."""
    if not stage.private or stage.noise:
        return stage
    run = stage.run

    def reading(context: RunContext, state: State) -> Mapping[str, Any]:
        try:
            return run(context, state)
        except Exception as exc:
            if not _unreadable(exc):
                raise
            raise ReleaseInputError(
                f"data file {data_path} cannot be read ({type(exc).__name__}: the file is "
                "damaged or not in its declared format); the run stopped before any noise: "
                "its reservation is cancelled, nothing is charged") from None

    return replace(stage, run=reading)


#: Errors of a disk or a folder, not of privfair: a full disk or quota, a read-only or
#: failing file system, a name too long, a file where a folder should be.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO,
                         errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EACCES,
                         errno.EPERM, errno.EMFILE, errno.EFBIG})


class DiskError(StoreError):
    """A disk or folder error after the reservation, naming its path (one line)."""


def is_disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def disk_error(exc: OSError, *, where: str) -> DiskError:
    """One line naming the path a disk error hit (its file, else the folder ``where``): a
    refusal on both drivers (no task traceback), never a private value (only a path)."""
    why = exc.strerror or type(exc).__name__
    path = exc.filename if exc.filename is not None else where
    verb = "written" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                      errno.EFBIG) else "used"
    return DiskError(f"{path} cannot be {verb} ({why}); free space or fix the folder, "
                      "then run again")


def _naming_the_disk(stage: Stage, work_dir: str) -> Stage:
    """``stage`` with a disk or folder error (:data:`DISK_ERRNOS`) turned into a
    :class:`StoreError` that names the path (the work folder where it has none): the run
    gives its reservation back if it drew no noise, and the Prefect driver logs one line,
    no traceback (issue 45.5: a full disk printed whole tracebacks)."""
    run = stage.run

    def writing(context: RunContext, state: State) -> Mapping[str, Any]:
        try:
            return run(context, state)
        except OSError as exc:
            if not is_disk_error(exc):
                raise
            raise disk_error(exc, where=f"the work folder {work_dir}") from None

    return replace(stage, run=writing)


def _unreadable(exc: BaseException) -> bool:
    """An error of the file reader itself: Arrow's or DuckDB's, or an OSError without an
    errno (how Arrow reports a page it cannot decompress), not one of the library."""
    module = type(exc).__module__.split(".")[0]
    return (module in ("pyarrow", "duckdb", "_duckdb")
            or (type(exc) is OSError and exc.errno is None))


def reserve(planned: Planned) -> RunCharge:
    """Reserve a checked request's cost in the lifetime ledger (before any private read)."""
    plan, cost = planned.plan, planned.cost
    fingerprint = plan.seed_fingerprint
    charge = RunCharge(
        run_id=plan.run_id, kind=planned.kind.name, dataset=plan.dataset,
        contract=plan.contract, store=Path(plan.store), epsilon=cost.epsilon,
        delta=cost.delta, rho=cost.rho, rdp=cost.rdp, method=plan.method,
        contract_fingerprint=plan.contract.fingerprint(), seed_fingerprint=fingerprint)
    # Finish or undo a publication a killed run left first: the ledger is checked against
    # the store in the reservation's transaction.
    recover_store(charge.store, charge.dataset)
    return reserve_run(charge)


def _still_charged(charge: RunCharge) -> str:
    try:
        book = read_lifetime_ledger(None, charge.contract)
        own = charge_epsilon({"rdp": list(charge.rdp)} if charge.rdp is not None
                             else {"rho": charge.rho}, book.delta_budget)
        what = f"its charge (epsilon {own:.6g} at delta {book.delta_budget:g})"
        left = (f" (composed epsilon {book.epsilon_spent():.6g} of {book.epsilon_budget:g} "
                "spent)")
    except Exception:  # the note must not hide the run's own error
        what = "its charge"
        left = ""
    return f"the run drew noise: {what} stays charged to dataset {charge.dataset!r}{left}"


def _what_next(kind: ReleaseKind, plan: Any, *, drawn: bool, checkpointed: bool) -> str:
    """The failed run's id and whether ``--resume`` can finish it, as the exact command.

    Only public facts: the run id, the command and the work folder (parameters), and how
    far the run got (whether it reached its checkpoint depends on the stages, not on values).
    """
    run = plan.run_id
    if checkpointed:
        changeable = ", ".join(_cli_flag(kind, p) for p in kind.post_noise_params)
        return (f"run {run} kept its post-noise checkpoint: finish it at no further privacy "
                f"cost with `privfair {kind.command} --resume {run} --work-dir "
                f"{shlex.quote(str(plan.work_dir))}` (adding any of {changeable} to change "
                "the post-processing)")
    if drawn:
        why = ("it failed before its post-noise checkpoint" if kind.post_noise_params
               else f"a {kind.name} release keeps no post-noise checkpoint")
        return f"run {run} is charged and cannot be resumed ({why})"
    return f"run {run} is cancelled (not charged) and cannot be resumed: nothing to finish"


def _cli_flag(kind: ReleaseKind, name: str) -> str:
    """A parameter's command-line option: its ``cli`` spelling, else its name in kebab case."""
    info = kind.params.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    spelled = extra.get("cli") if isinstance(extra, dict) else None
    return str(spelled or "--" + name.replace("_", "-"))


def publish(context: RunContext, state: State) -> tuple[Path, Written]:
    """Publish a run's release by the store's protocol; returns the folder and the record.

    Under the dataset lock: finish or undo what a killed run left, check the seed again,
    write the intent record, then the files into a 0700 temporary folder, then append the
    ledger's ``publish`` entry (the commit point), rename the folder ``vN`` and add the
    catalog row.
    """
    plan, charge = context.plan, context.charge
    store = Path(plan.store)
    folder = store / plan.dataset
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        recover_store(store, plan.dataset, locked_already=True)
        lifetime = read_lifetime_ledger(store, plan.contract)
        check_seed_unused(lifetime, charge.seed_fingerprint, charge.run_id)
        allowed = ("reserved", "spent, not published") + (
            ("published",) if (context.resumed or {}).get("post_processing_of") else ())
        if lifetime.run_state(charge.run_id) not in allowed:
            raise PrivfairError(f"run {charge.run_id} holds no reservation in the lifetime "
                                "ledger; nothing is published")
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / publication.staged_name(version)
        intent = write_intent(folder, version, run_id=charge.run_id, staged=tmp)
        try:
            publication.reached("files")  # fault-injection tests stop here
            tmp.mkdir(mode=0o700)
            written = context.kind.write(tmp, context, state, version=version,
                                         lifetime=lifetime)
            manifest = written.manifest
            if context.resumed is not None:
                manifest["resume"] = context.resumed
            _check_within_declared(written.ledger_fields, charge)
            manifest["files"] = {name: written.digests.get(name) or sha256_file(tmp / name)
                                 for name in written.files}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            intent.unlink(missing_ok=True)
            raise
        published_at = manifest.get("published_at") or utc_now()
        release = {"version": version, "published_at": published_at, "run_id": charge.run_id,
                   "epsilon": charge.epsilon, "delta": charge.delta,
                   "method": plan.method, "kind": context.kind.name,
                   "contract_fingerprint": charge.contract_fingerprint,
                   **dict(written.ledger_fields)}
        if charge.rdp is not None:
            # Charged its declared Rényi curve, not its own: the own curve (DP-SGD's q and σ
            # follow a noisy row count) is at or below it at every order, and only the
            # declared one, fixed before any read, bounds the run whatever the count drew
            # (adaptive composition takes the supremum over the counts; issue 41.3). Recording
            # the smaller own curve would let the next runs in as if the run cost less.
            release["rdp"] = [float(v) for v in charge.rdp]
            release.pop("rho", None)
        else:
            release.setdefault("rho", charge.rho)
        of_version = (context.resumed or {}).get("post_processing_of")
        if of_version:  # a new version of a published run: post-processing, no cost
            release.update(rho=0.0, post_processing_of=of_version)
            release.pop("rdp", None)
        if charge.seed_fingerprint:
            release["seed_fingerprint"] = charge.seed_fingerprint
        row = [plan.dataset, version, str(final.relative_to(store)), published_at,
               # the catalog's rho: NaN for a release charged by its Rényi curve
               charge.epsilon, charge.delta, float(release.get("rho", math.nan)), plan.method,
               int(written.n_rows),
               charge.contract_fingerprint, bool(written.fairness_passed),
               _orchestrator_json(context.orchestrator), bool(written.fairness_claimed)]
        commit_publication(store=store, contract_budget=(plan.contract.budget.epsilon,
                                                         plan.contract.budget.delta),
                           ident=dataset_id(plan.contract), dataset=plan.dataset,
                           version=version, staged=tmp, final=final, intent=intent,
                           release=release, catalog_row=row)
    log.info("published %s", final)
    return final, written


def _check_within_declared(fields: Mapping[str, Any], charge: RunCharge) -> None:
    """Refuse to publish a run whose own accounting passes its declared cost (a curve must
    stay at or below the declared one at every order; a ρ at or below the declared ρ)."""
    if fields.get("rdp") is not None:
        own = np.asarray(fields["rdp"], dtype=float)
        if charge.rdp is None or own.shape != np.shape(charge.rdp) or not np.all(
                own <= np.asarray(charge.rdp) * (1 + 1e-9) + 1e-15):
            raise PrivfairError("the run's Renyi curve exceeds its declared curve at some "
                                "order; nothing is published")
    charged = fields.get("rho")
    if charged is not None and (charge.rho is None
                                or float(charged) > float(charge.rho) * (1 + 1e-9)):
        raise PrivfairError(f"the run's accounting (rho {float(charged):.6g}) exceeds its "
                            "declared cost; nothing is published")


def _orchestrator_json(record: Mapping[str, Any] | None) -> str | None:
    return json.dumps(dict(record)) if record else None

