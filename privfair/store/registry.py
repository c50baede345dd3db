"""The lifetime privacy registry: every dataset's hash-chained ledger, in one database.

Lifetime ledgers live in the **privacy registry**, not in a release store: one chain per
dataset id (``dataset_id:`` in the contract; the contract's ``name`` when it declares none)
in one transactional database (``privfair/store/backends.py``): by default the SQLite file
``registry.sqlite`` in ``$PRIVFAIR_REGISTRY`` or ``~/.local/share/privfair/registry``, or a
team's PostgreSQL database (``PRIVFAIR_REGISTRY=postgresql://…``). Several workers, users and
machines that share a registry share each dataset's budget: every operation below (reserve,
spend, cancel, publish, raise) is one serializable transaction that reads the dataset's
chain, verifies it (HMAC under the registry key, head and entry count), checks and appends.

Each store keeps a read-only copy of the chain (``<store>/<name>/lifetime_ledger.json``) and
its ``catalog.duckdb``: a cache, cross-checked against the registry on every run, so a
registry that was deleted and re-created is refused by the stores it does not account for.
"""

from __future__ import annotations

import contextlib
import getpass
import hmac
import json
import logging
import math
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from privfair.contracts.schema import Contract
from privfair.core.budget import check_delta, check_epsilon
from privfair.store import backends, registry_sql
from privfair.store.catalog import list_releases
from privfair.store.chain import GENESIS, Entry, NewEntries, finite, verify_chain
from privfair.store.files import StoreError, atomic_write
from privfair.store.ledger import LifetimeLedger, charge_curve, fold
from privfair.store.witness import StateFolderError

log = logging.getLogger(__name__)


# --- where ledgers live ---------------------------------------------------------------------


def registry_root() -> Path:
    """The local registry folder: the SQLite registry, or where a PostgreSQL one keeps its key."""
    return backends.registry_folder()


def registry_name() -> str:
    """The registry as messages name it: its folder or its URL (without a password)."""
    url = backends.registry_url()
    if url is None:
        return str(registry_root())
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def dataset_id(contract: Contract) -> str:
    """The stable identity of the contract's dataset: ``dataset_id:``, else its ``name``."""
    declared = getattr(contract, "dataset_id", None)
    return str(declared) if declared else contract.name


def ledger_path(store: Path, dataset: str) -> Path:
    """The store's copy of a dataset's lifetime ledger (the registry holds the original)."""
    return store / dataset / "lifetime_ledger.json"


def read_chain(ident: str) -> list[Entry]:
    """The verified chain of dataset ``ident`` in the registry ([] if it has none)."""
    return registry_sql.read(ident)


def has_ledger(ident: str) -> bool:
    """Whether dataset ``ident`` has a (verified) lifetime ledger in the registry."""
    return bool(read_chain(ident))


def dataset_name(entries: list[Entry], ident: str) -> str:
    """The dataset's name (its contract's, from the ``open`` entry), else its id."""
    return str(entries[0].get("dataset") or ident) if entries else ident


def _legacy_releases(store: Path | None, name: str) -> list[dict[str, Any]]:
    """Releases of a store's pre-registry ledger (format 1), checked, to import once."""
    if store is None:
        return []
    path = ledger_path(store, name)
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
    except ValueError as exc:
        raise StoreError(f"lifetime ledger {path} is unreadable ({exc})") from None
    if not isinstance(raw, dict) or "entries" in raw or "releases" not in raw:
        return []
    out = []
    for i, r in enumerate(raw["releases"]):
        try:
            finite(r.get("rho"), "rho")
        except (ValueError, AttributeError) as exc:
            raise StoreError(f"lifetime ledger {path}: release {i}: {exc}") from None
        out.append(dict(r))
    return out


def _budget(contract: Contract, fixed: LifetimeLedger, ident: str) -> tuple[float, float]:
    """The fixed budget of the ledger; the contract may lower it, never raise it."""
    declared = (float(contract.budget.epsilon), float(contract.budget.delta))
    if not fixed.entries:
        return declared
    fixed_budget = (fixed.epsilon_budget, fixed.delta_budget)
    if declared[0] > fixed_budget[0] * (1 + 1e-12) or declared[1] > fixed_budget[1] * (1 + 1e-12):
        raise StoreError(
            f"contract {contract.name!r} declares budget epsilon={declared[0]:g}, "
            f"delta={declared[1]:g} but dataset {ident!r} has epsilon={fixed_budget[0]:g}, "
            f"delta={fixed_budget[1]:g} fixed in its lifetime ledger; raise it with "
            "`privfair ledger raise` (recorded)")
    return min(declared[0], fixed_budget[0]), min(declared[1], fixed_budget[1])


def _ledger_from(contract: Contract, entries: list[Entry]) -> LifetimeLedger:
    ident = dataset_id(contract)
    registry_sql.check_pinned(getattr(contract, "registry_id", None), ident)  # issue 36.4
    book = fold(entries, contract.name, ident)
    book.epsilon_budget, book.delta_budget = _budget(contract, book, ident)
    return book


def read_lifetime_ledger(store: str | Path | None, contract: Contract) -> LifetimeLedger:
    """The dataset's lifetime ledger from the registry, checked against ``store``.

    Refuses (``StoreError``) a chain that fails its check, a registry that cannot be reached,
    a contract budget above the fixed one, and a store whose copy, catalog or release folders
    the ledger does not account for.
    """
    ident = dataset_id(contract)
    entries = read_chain(ident)
    if not entries and store is not None:
        legacy = _legacy_releases(Path(store), contract.name)
        if legacy:
            entries = _import_legacy(contract, legacy, Path(store))
    book = _ledger_from(contract, entries)
    if store is not None:
        cross_check(Path(store), book)
    return book


def _import_legacy(contract: Contract, legacy: list[dict[str, Any]],
                   store: Path) -> list[Entry]:
    def build(entries: list[Entry]) -> NewEntries:
        if entries:  # another process imported it first
            return []
        new: NewEntries = [("open", {"epsilon": float(contract.budget.epsilon),
                                     "delta": float(contract.budget.delta),
                                     "dataset": contract.name,
                                     "registry_id": registry_id(),
                                     "note": "imported from a pre-registry store ledger"})]
        for r in legacy:
            fields = {k: v for k, v in r.items() if k not in ("kind", "seq", "prev", "hash")}
            fields["store"] = str(store.resolve())
            if "kind" in r:
                fields["release_kind"] = r["kind"]
            new.append(("publish", fields))
        return new

    return registry_sql.transact(dataset_id(contract), build)


def registry_id() -> str:
    """The random id of the registry this process uses (``meta.registry_id``)."""
    return registry_sql.open_registry().ident


def _read_copy(copy: Path) -> dict[str, Any] | None:
    """The store's ledger copy as JSON (None when there is none or it is not an object)."""
    try:
        raw = json.loads(copy.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StoreError(f"the store's ledger copy {copy} is unreadable ({exc}); `privfair "
                         "store check --repair` rewrites it from the registry") from None
    return raw if isinstance(raw, dict) else None


def bound_registry(copy: dict[str, Any]) -> str | None:
    """The registry id a store's ledger copy binds its dataset to: its ``registry_id``, else
    the one its chain's ``open`` entry records (None for copies written before issue 45.2)."""
    bound = copy.get("registry_id")
    entries = copy.get("entries")
    if not bound and isinstance(entries, list) and entries and isinstance(entries[0], dict):
        bound = entries[0].get("registry_id")
    return str(bound) if bound else None


def check_store_binding(store: Path, name: str, ident: str) -> None:
    """Refuse dataset ``ident`` when ``store``'s ledger copy binds it to another registry.

    A dataset's budget lives in one registry (issue 45.2): the store records the registry
    that charged the dataset first (its ledger copy is written at the first reservation), so
    a second registry pointed at the same store cannot start the dataset's budget afresh.
    """
    copy = ledger_path(store, name)
    try:
        raw = _read_copy(copy)
    except StoreError:  # an unreadable copy binds nothing; copy_problems reports it
        return
    bound = bound_registry(raw) if raw else None
    here = registry_id()
    if bound and not hmac.compare_digest(bound, here):
        raise StoreError(
            f"store {store} binds dataset {ident!r} to registry {bound} (its ledger copy "
            f"{copy}), but PRIVFAIR_REGISTRY is registry {here} ({registry_name()}); a "
            "dataset's budget lives in one registry: point PRIVFAIR_REGISTRY at the one that "
            "charged it")


def copy_problems(store: Path, book: LifetimeLedger) -> list[str]:
    """The store's ledger copy against the registry's chain: every entry it holds is the
    registry's (HMAC under the registry key), and its budget, spend, releases and pending
    runs are what those entries fold to, so an edited copy (a ρ divided by 100) is found."""
    copy = ledger_path(store, book.dataset)
    try:
        raw = _read_copy(copy)
    except StoreError as exc:
        return [str(exc)]
    if raw is None or "entries" not in raw:
        return []  # none yet, or a pre-registry copy (imported into the registry once)
    head = raw.get("head")
    if head and head != GENESIS and head not in _hashes(book):
        return [f"the store's ledger copy {copy} has entries the registry ledger lacks "
                "(deleted or rolled back?)"]
    entries = raw.get("entries")
    edited = f"the store's ledger copy {copy} differs from the registry ({{}}): edited"
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries) or (
            entries[-1].get("hash") if entries else GENESIS) != (head or GENESIS):
        return [edited.format("its head is not its last entry")]
    ours = [e["hash"] for e in book.entries]
    if head in ours or not entries:
        if entries != book.entries[:len(entries)]:
            return [edited.format("its entries")]
    else:  # a generation carried over by a reset: its entries still carry the registry's HMAC
        try:
            verify_chain(entries, where=str(copy), key=registry_sql.open_registry().key,
                         ident=book.dataset_id or book.dataset)
        except StoreError:
            return [edited.format("its entries")]
    bound = bound_registry(raw)
    if bound and bound != registry_id():
        return [edited.format("its registry_id")]
    folded = json.loads(_ledger_bytes(fold(entries, dataset_name(entries, book.dataset),
                                           book.dataset_id or book.dataset)))
    for key in ("dataset_id", "budget", "spent", "charges", "releases", "pending"):
        if key in raw and raw[key] != folded.get(key):
            return [edited.format(f"its {key!r} is not what its entries add up to")]
    return []


def cross_check(store: Path, book: LifetimeLedger) -> None:
    """The store's ledger copy, catalog rows and release folders, against the ledger.

    Every published version of ``book.dataset`` in ``store`` (a ``vN`` folder, a catalog row)
    needs a ``publish`` entry for this store, and the store's copy of the chain must be a
    prefix of the ledger (a deleted or rolled-back ledger is refused).
    """
    check_store_binding(store, book.dataset, book.dataset_id or book.dataset)
    problems = store_problems(store, book)
    if problems:
        raise StoreError(f"store {store} and the lifetime ledger of {book.dataset_id!r} "
                         f"disagree: {problems[0]}; run `privfair store check --out {store} "
                         "--repair`")


def _hashes(book: LifetimeLedger) -> set[str]:
    """Every hash a store copy's head may be: the chain's, and those of an imported chain or
    of a generation carried over by a reset."""
    return {e["hash"] for e in book.entries} | {
        e[k] for e in book.entries for k in ("legacy_hash", "carried_hash") if k in e}


def _published_here(store: Path, book: LifetimeLedger) -> set[str]:
    here = str(store.resolve())
    return {str(r.get("version")) for r in book.releases
            if r.get("store") in (None, here, str(store))}


def store_problems(store: Path, book: LifetimeLedger) -> list[str]:
    """Disagreements between ``store`` and ``book`` (empty when consistent)."""
    folder = store / book.dataset
    problems = copy_problems(store, book)
    published = _published_here(store, book)
    if folder.is_dir():  # a publication in progress (or to recover) is not a disagreement
        published |= {p.name[len(".intent-"):-len(".json")] for p in folder.glob(".intent-*.json")}
        for p in sorted(folder.iterdir()):
            if re.fullmatch(r"v\d+", p.name) and p.is_dir() and p.name not in published:
                problems.append(f"release folder {p} is not in the ledger (uncharged)")
    if (store / "catalog.duckdb").is_file():
        for row in list_releases(store, book.dataset):
            if row["version"] not in published:
                problems.append(f"catalog row {book.dataset} {row['version']} is not in the "
                                "ledger")
    return problems


# --- writing the ledger ------------------------------------------------------------------------


def _ledger_bytes(book: LifetimeLedger, **extra: Any) -> bytes:
    return (json.dumps(book.to_dict() | extra, indent=2, sort_keys=True, allow_nan=False)
            + "\n").encode("utf-8")


def _write(ident: str, name: str, budget: tuple[float, float],
           build: Callable[[list[Entry]], NewEntries]) -> LifetimeLedger:
    """One registry transaction: ``build(chain)`` checks and returns the entries to append.

    The first entry of a dataset's chain is its ``open`` (the budget ``budget``). ``build``
    may run more than once (a PostgreSQL transaction that lost a race is retried).
    """
    def step(entries: list[Entry]) -> NewEntries:
        new = build(entries)
        if new and not entries:  # the binding of the dataset to this registry (45.2)
            new = [("open", {"epsilon": budget[0], "delta": budget[1], "dataset": name,
                             "registry_id": registry_id()}), *new]
        return new

    entries = registry_sql.transact(ident, step)
    return fold(entries, dataset_name(entries, name), ident)


@dataclass(frozen=True)
class RunCharge:
    """What one run charges a dataset's lifetime ledger (public facts only).

    A run is charged by its own privacy curve: ``rho`` (zCDP, the table kinds) or its Rényi
    ``rdp`` curve (model and GAN kinds; ``rho`` is then None), never by a ρ that depends on
    what the lifetime has spent.
    """

    run_id: str
    kind: str
    dataset: str
    contract: Contract
    store: Path
    epsilon: float
    delta: float
    rho: float | None
    method: str
    contract_fingerprint: str
    seed_fingerprint: str | None = None
    rdp: tuple[float, ...] | None = None

    def fields(self) -> dict[str, Any]:
        """The ``reserve`` entry's fields."""
        fields: dict[str, Any] = {
            "run_id": self.run_id, "epsilon": float(self.epsilon),
            "delta": float(self.delta), "method": self.method, "release_kind": self.kind,
            "contract_fingerprint": self.contract_fingerprint, "store": str(self.store),
            "pid": os.getpid(), "host": socket.gethostname()}
        if self.rdp is not None:
            fields["rdp"] = [float(v) for v in self.rdp]
        else:
            fields["rho"] = float(self.rho or 0.0)
        if self.seed_fingerprint:  # only the keyed fingerprint of a test seed, never the seed
            fields["seed_fingerprint"] = self.seed_fingerprint
        return fields


def check_seed_unused(book: LifetimeLedger, fingerprint: str | None, run_id: str) -> None:
    """Refuse a test seed that another charged run of the dataset used: two runs with one
    seed draw the same noise, and the difference of their outputs cancels it (issue 10.3).

    Every charged run counts, published or not: a run that drew noise and published nothing
    (an infeasible TOT) can still publish later (``--resume``), and a run holding its
    reservation may be drawing noise now. Only a cancelled run (it drew nothing) frees it.
    """
    if not fingerprint:
        return
    for r in [*book.releases, *book.pending]:
        if r.get("seed_fingerprint") == fingerprint and r.get("run_id") != run_id:
            what = (f"a release made with this seed ({r.get('version')})" if "version" in r
                    else f"a charged run made with this seed ({r.get('run_id')}, "
                         f"{r.get('state')})")
            raise StoreError(
                f"seed: dataset {book.dataset_id or book.dataset!r} already has {what}; two "
                "runs with one seed cancel the noise: use another seed, or none")


def _declared(contract: Contract) -> tuple[float, float]:
    return float(contract.budget.epsilon), float(contract.budget.delta)


def reserve_run(charge: RunCharge) -> RunCharge:
    """Reserve the run's cost in the lifetime ledger; call before the first private read.

    Checks the ledger against the store, refuses a reused test seed and a run the remaining
    budget cannot pay for (its ρ or curve composed with everything charged), all in the
    registry transaction that appends the reservation. Returns the charge. The caller first
    recovers a publication a killed run left in the store
    (:func:`privfair.store.publication.recover_store`): its staged folder is not a release.
    """
    if _legacy_releases(Path(charge.store), charge.contract.name):
        read_lifetime_ledger(charge.store, charge.contract)  # imports it into the registry
    fixed: list[RunCharge] = []

    def build(entries: list[Entry]) -> NewEntries:
        book = _ledger_from(charge.contract, entries)
        cross_check(Path(charge.store), book)
        check_seed_unused(book, charge.seed_fingerprint, charge.run_id)
        if book.run_state(charge.run_id) is not None:
            raise StoreError(f"run {charge.run_id} is already in the lifetime ledger")
        # One composed check for both: a zCDP ρ, or the run's Rényi curve.
        book.check(rho=float(charge.rho or 0.0) if charge.rdp is None else 0.0,
                   rdp=charge.rdp)
        fixed[:] = [charge]
        return [("reserve", charge.fields())]

    copy = ledger_path(Path(charge.store), charge.contract.name)
    try:
        book = _write(dataset_id(charge.contract), charge.contract.name,
                      _declared(charge.contract), build)
        # The store records the binding at the first charge, before any private read (45.2).
        if not copy.is_file():
            write_store_copy(Path(charge.store), book)
    except (StateFolderError, OSError) as exc:
        # The reservation may have committed before the client's state or the store could be
        # written (a full disk): it is given back, and the error names the path (45.5).
        if not fixed:
            raise
        _cancel_quietly(charge, reason="the client's state or the store could not be written")
        what = str(exc) if isinstance(exc, StateFolderError) else (
            f"{exc.filename or copy} cannot be written ({exc.strerror or type(exc).__name__})")
        raise StoreError(f"{what}; the run's reservation is cancelled, nothing is "
                         "charged") from None
    return fixed[0]


def _cancel_quietly(charge: RunCharge, *, reason: str) -> None:
    """Cancel ``charge``'s reservation; a cancel that committed but whose witness could not
    be written (the same full disk) still counts as done."""
    with contextlib.suppress(StateFolderError):
        cancel_reservation(dataset_id(charge.contract), charge.contract.name, charge.run_id,
                           reason=reason)


def mark_noise_drawn(charge: RunCharge) -> LifetimeLedger:
    """Record that the run is about to draw noise: from now on it stays charged."""
    def build(entries: list[Entry]) -> NewEntries:
        if _ledger_from(charge.contract, entries).run_state(charge.run_id) != "reserved":
            raise StoreError(f"run {charge.run_id} holds no reservation; it may not draw noise")
        return [("spend", {"run_id": charge.run_id})]

    return _write(dataset_id(charge.contract), charge.contract.name,
                  _declared(charge.contract), build)


def release_unspent(charge: RunCharge, *,
                    reason: str = "the run failed before drawing noise") -> None:
    """Give back the reservation of a failed run that drew no noise (else it stays charged)."""
    ident = dataset_id(charge.contract)
    try:
        cancel_reservation(ident, charge.contract.name, charge.run_id, reason=reason)
    except Exception as exc:  # the reservation stays charged: safe, and store check sees it
        log.warning("could not give back the reservation of run %s: %s", charge.run_id, exc)


def seed_key(ident: str) -> bytes:
    """The dataset's secret key for test-seed fingerprints, held by the registry database.

    Never in a work or release folder, so that the same seed has the same fingerprint
    whoever runs the release and from wherever.
    """
    return registry_sql.seed_key(ident)


def cancel_reservation(ident: str, name: str, run_id: str, *, reason: str) -> bool:
    """Give back a reservation that drew no noise (e.g. of a run that died while loading);
    returns whether one was cancelled. A run that drew noise stays charged."""
    done: list[bool] = []

    def build(entries: list[Entry]) -> NewEntries:
        reserved = fold(entries, name, ident).run_state(run_id) == "reserved"
        done[:] = [reserved]
        return [("cancel", {"run_id": run_id, "reason": reason})] if reserved else []

    _write(ident, name, (math.nan, math.nan), build)
    return done[0]


def record_published(*, ident: str, name: str, budget: tuple[float, float], store: Path,
                     releases: list[dict[str, Any]]) -> LifetimeLedger:
    """Append ``publish`` entries (the commit point of a publication); a release without a
    reservation (``run_id`` unknown) carries and is checked for its own ``rho``."""
    def build(entries: list[Entry]) -> NewEntries:
        book = fold(entries, name, ident) if entries else LifetimeLedger(
            name, budget[0], budget[1], [], dataset_id=ident)
        book.epsilon_budget = min(book.epsilon_budget, budget[0])
        book.delta_budget = min(book.delta_budget, budget[1])
        new: NewEntries = []
        for r in releases:
            fields = {k: v for k, v in r.items() if k not in ("seq", "prev", "hash", "at",
                                                                "kind")}
            if "kind" in r:  # the release's kind (e.g. "model"), not the entry's
                fields["release_kind"] = r["kind"]
            fields["store"] = str(store.resolve())
            state = book.run_state(str(r.get("run_id"))) if r.get("run_id") else None
            if state == "published":
                if not fields.get("post_processing_of"):
                    raise StoreError(f"run {r['run_id']} has already published")
                # A new version of a published run by post-processing alone (--resume): its
                # run is charged already, so this version costs nothing.
                fields["rho"] = 0.0
                fields.pop("rdp", None)
                new.append(("publish", fields))
                continue
            if state is None:
                book.check(rho=float(r.get("rho") or 0.0) if r.get("rdp") is None else 0.0,
                           rdp=r.get("rdp"))
                book.releases.append(fields)
            else:
                # A release may name its exact cost in place of the reservation (a DP-SGD
                # model or GAN, whose Rényi curve is known only once it ran): at or below the
                # reservation it fits; otherwise it must fit next to the others.
                held = next(q for q in book.pending if q["run_id"] == r["run_id"])
                others = book.without(r["run_id"])
                if fields.get("rdp") is not None:
                    reserved, curve = charge_curve(held), charge_curve(fields)
                    if reserved is None or curve is None or not np.all(
                            curve <= reserved * (1 + 1e-9) + 1e-15):
                        others.check(rdp=fields["rdp"])
                elif "rho" in fields and float(fields["rho"]) > float(held.get("rho") or 0.0):
                    others.check(rho=float(fields["rho"]))
            new.append(("publish", fields))
        return new

    return _write(ident, name, budget, build)


def write_store_copy(store: Path, book: LifetimeLedger) -> None:
    """The store's read-only copy of the chain (cross-checked on every run), naming the
    registry that holds the original (the store's binding of the dataset: issue 45.2)."""
    path = ledger_path(store, book.dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, _ledger_bytes(book, registry_id=registry_id()))


def check_budget_bounds(epsilon: Any, delta: Any) -> tuple[float, float]:
    """Refuse a lifetime budget outside ε ∈ [1e-6, 100], δ ∈ (1e-50, 1), in one line."""
    return (check_epsilon(epsilon, name="--epsilon"), check_delta(delta, name="--delta"))


def raise_budget(contract: Contract, *, epsilon: float, delta: float, reason: str) -> LifetimeLedger:
    """Record a new lifetime budget for the contract's dataset (``privfair ledger raise``).

    Refuses a budget outside the bounds, below what is already charged, above the contract's
    own ``budget:`` (which caps every run, so the raise could never be used), and a dataset
    with no ledger (its first release fixes the contract's budget).
    """
    epsilon, delta = check_budget_bounds(epsilon, delta)
    if not reason.strip():
        raise StoreError("a budget raise needs a --reason (it is recorded in the ledger)")
    declared = (float(contract.budget.epsilon), float(contract.budget.delta))
    ident = dataset_id(contract)
    # a contract that pins another registry is refused here as at every reservation
    registry_sql.check_pinned(getattr(contract, "registry_id", None), ident)

    def build(entries: list[Entry]) -> NewEntries:
        if not entries:
            raise StoreError(f"dataset {ident!r} has no lifetime ledger in registry "
                             f"{registry_name()}; its first release fixes the contract's "
                             "budget")
        if epsilon > declared[0] * (1 + 1e-12) or delta > declared[1] * (1 + 1e-12):
            # every run takes the lower of the contract's budget and the ledger's: a raise
            # above the contract would be recorded and never usable
            raise StoreError(
                f"contract {contract.name!r} declares budget epsilon={declared[0]:g}, "
                f"delta={declared[1]:g}, which caps every run below the raise to "
                f"epsilon={epsilon:g}, delta={delta:g}: set `budget: {{epsilon: {epsilon:g}, "
                f"delta: {delta:g}}}` in the contract first, then raise")
        book = fold(entries, contract.name, ident)
        spent = book.epsilon_spent()
        book.epsilon_budget, book.delta_budget = epsilon, delta
        if not book.fits():
            raise StoreError(f"dataset {ident!r} has already spent epsilon={spent:.6g} at "
                             f"delta={fold(entries, contract.name, ident).delta_budget:g} "
                             f"(composed); epsilon={epsilon:g}, delta={delta:g} is below it "
                             f"(epsilon={book.epsilon_spent():.6g} at that delta)")
        return [("raise", {"epsilon": epsilon, "delta": delta, "reason": reason,
                           "by": getpass.getuser()})]

    return _write(ident, contract.name, (epsilon, delta), build)


def registry_ledgers(ident: str | None = None, *,
                     damaged: list[str] | None = None) -> list[dict[str, Any]]:
    """Every lifetime ledger of the registry, folded from its verified chain.

    With a ``damaged`` list, a ledger that fails its check is reported there (one line) and
    the others are still returned; without one, it raises.
    """
    out = []
    for name in registry_sql.datasets():
        if ident is None or name == ident:
            try:
                entries = read_chain(name)
            except StoreError as exc:
                if damaged is None:
                    raise
                damaged.append(f"{name}: {exc}")
                continue
            if entries:
                out.append(fold(entries, dataset_name(entries, name), name).to_dict())
    return out


def read_ledger_file(path: str | Path) -> dict[str, Any]:
    ledger: dict[str, Any] = json.loads(Path(path).read_text())
    return ledger


def lifetime_ledgers(store: str | Path, dataset: str | None = None) -> list[dict[str, Any]]:
    """The lifetime ledger of every dataset of the store, from the registry's verified chain
    (the store's copy only names the dataset id; a pre-registry copy is shown as it is)."""
    store = Path(store)
    if not store.is_dir():
        return []
    out = []
    for path in sorted(store.glob("*/lifetime_ledger.json")):
        if dataset is None or path.parent.name == dataset:
            copy = read_ledger_file(path)
            ident = str(copy.get("dataset_id") or path.parent.name)
            entries = read_chain(ident) if "entries" in copy else []
            out.append(fold(entries, path.parent.name, ident).to_dict() if entries else copy)
    return out
