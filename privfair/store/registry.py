"""The release store and the lifetime privacy registry.

This module is long on purpose: the lifetime ledger's hash chain, its run states and the
catalog are one protocol, and its invariants are easier to check in one file.

Lifetime ledgers live in the **privacy registry**, not in a release store: one hash-chained
ledger per dataset id (``dataset_id:`` in the contract; the contract's ``name`` when it declares
none) at ``<registry>/<dataset_id>/lifetime_ledger.json``. The registry folder is
``$PRIVFAIR_REGISTRY`` or, by default, ``$XDG_DATA_HOME/privfair/registry``
(``~/.local/share/privfair/registry``): one per user and machine, so a new ``--out`` folder or a
renamed contract reaches the same ledger. Each store keeps a read-only copy of the chain
(``<store>/<name>/lifetime_ledger.json``) and its ``catalog.duckdb``; every run checks the chain
(hashes, numbers), the copy, the catalog and the release folders against each other.

A ledger is an append-only list of entries: ``open`` (the budget, fixed at the first release),
``raise`` (a recorded budget raise), ``reserve`` (a run's ρ, before its first private read),
``spend`` (the run drew noise: it stays charged), ``cancel`` (a run that drew no noise gives its
reservation back) and ``publish`` (the run's release is in a store). Each entry holds the hash
of the one before it, so an edited, truncated or reset ledger is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from privfair.contracts.schema import Contract
from privfair.core.accounting import RDP_ORDERS, rdp_epsilon, zcdp_epsilon, zcdp_rdp, zcdp_rho
from privfair.core.errors import BudgetExceededError
from privfair.store.artefacts import StoreError, atomic_write, utc_now

log = logging.getLogger(__name__)

LEDGER_FORMAT = "privfair-lifetime-ledger/2"
#: The registry file holding a dataset's secret key for test-seed fingerprints.
SEED_KEY_FILE = "seed-fingerprint.key"
_GENESIS = "0" * 64
_ENTRY_KINDS = ("open", "raise", "reserve", "spend", "cancel", "publish")


# --- where ledgers live ---------------------------------------------------------------------


def registry_root() -> Path:
    """The privacy registry folder: ``$PRIVFAIR_REGISTRY``, else the user's data folder."""
    env = os.environ.get("PRIVFAIR_REGISTRY")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser().resolve() / "privfair" / "registry"


def dataset_id(contract: Contract) -> str:
    """The stable identity of the contract's dataset: ``dataset_id:``, else its ``name``."""
    declared = getattr(contract, "dataset_id", None)
    return str(declared) if declared else contract.name


def registry_ledger_path(ident: str) -> Path:
    return registry_root() / ident / "lifetime_ledger.json"


def ledger_path(store: Path, dataset: str) -> Path:
    """The store's copy of a dataset's lifetime ledger (the registry holds the original)."""
    return store / dataset / "lifetime_ledger.json"


# --- the hash chain ---------------------------------------------------------------------------


def _entry_hash(body: Mapping[str, Any]) -> str:
    text = json.dumps(dict(body), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _finite(value: Any, what: str, *, positive: bool = False, below_one: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0) \
            or (below_one and number >= 1):
        raise ValueError(f"{what} is {value!r}; expected a finite "
                         f"{'positive' if positive else 'non-negative'} number"
                         f"{' below 1' if below_one else ''}")
    return number


def _check_entry(entry: Mapping[str, Any], index: int) -> None:
    kind = entry.get("kind")
    if kind not in _ENTRY_KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if kind in ("open", "raise"):
        _finite(entry.get("epsilon"), "epsilon", positive=True)
        _finite(entry.get("delta"), "delta", positive=True, below_one=True)
    if kind == "reserve" or (kind == "publish" and "rho" in entry):
        _finite(entry.get("rho"), "rho")
    if kind in ("reserve", "spend", "cancel") and not entry.get("run_id"):
        raise ValueError("no run_id")
    if kind == "open" and index != 0:
        raise ValueError("a second 'open' entry")
    if index == 0 and kind != "open":
        raise ValueError("the chain does not start with 'open'")


def verify_chain(entries: list[dict[str, Any]], *, where: str) -> None:
    """Refuse a chain whose hashes, order or numbers were changed."""
    prev = _GENESIS
    for i, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise ValueError("not an object")
            body = {k: v for k, v in entry.items() if k != "hash"}
            if body.get("seq") != i or body.get("prev") != prev:
                raise ValueError("out of order or an entry is missing")
            if _entry_hash(body) != entry.get("hash"):
                raise ValueError("its hash does not match (edited)")
            _check_entry(entry, i)
        except ValueError as exc:
            raise StoreError(f"lifetime ledger {where} fails its check at entry {i}: {exc}; "
                             "restore it from a backup (never edit it by hand)") from None
        prev = entry["hash"]


def _chain_append(entries: list[dict[str, Any]], kind: str, **fields: Any) -> dict[str, Any]:
    body = {"seq": len(entries), "prev": entries[-1]["hash"] if entries else _GENESIS,
            "kind": kind, "at": utc_now(), **fields}
    _check_entry(body, len(entries))
    entry = {**body, "hash": _entry_hash(body)}
    entries.append(entry)
    return entry


# --- the ledger --------------------------------------------------------------------------------


@dataclass
class LifetimeLedger:
    """Everything charged to one dataset, composed in zCDP against its lifetime budget.

    ``releases`` are the published releases; ``pending`` the reservations of runs that have
    not published (state ``reserved`` or ``spent, not published``): both count as spent.
    """

    dataset: str
    epsilon_budget: float
    delta_budget: float
    releases: list[dict[str, Any]]
    pending: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    dataset_id: str = ""

    @property
    def rho_budget(self) -> float:
        return zcdp_rho(epsilon=self.epsilon_budget, delta=self.delta_budget)

    @property
    def rho_spent(self) -> float:
        return math.fsum([float(r["rho"]) for r in self.releases]
                         + [float(r["rho"]) for r in self.pending])

    @property
    def rho_remaining(self) -> float:
        return max(0.0, self.rho_budget - self.rho_spent)

    def epsilon_spent(self) -> float:
        return zcdp_epsilon(rho=self.rho_spent, delta=self.delta_budget)

    def check(self, *, rho: float) -> None:
        """Refuse a release of cost ``rho`` that would pass the lifetime budget."""
        if not math.isfinite(rho) or rho < 0:
            raise BudgetExceededError(f"a release cost of rho={rho!r} cannot be charged")
        if self.rho_spent + rho > self.rho_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"lifetime budget of dataset {self.dataset!r} exceeded: this release costs "
                f"rho={rho:.6g} but only {self.rho_remaining:.6g} of {self.rho_budget:.6g} "
                f"(epsilon={self.epsilon_budget:g}, delta={self.delta_budget:g}) is left")

    def run_state(self, run_id: str) -> str | None:
        """``reserved``, ``spent, not published``, ``published`` or None (unknown/cancelled)."""
        for p in self.pending:
            if p["run_id"] == run_id:
                return str(p["state"])
        if any(r.get("run_id") == run_id for r in self.releases):
            return "published"
        return None

    @property
    def head(self) -> str:
        return self.entries[-1]["hash"] if self.entries else _GENESIS

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "dataset": self.dataset,
            "dataset_id": self.dataset_id or self.dataset,
            "budget": {"epsilon": self.epsilon_budget, "delta": self.delta_budget,
                       "rho": self.rho_budget},
            "spent": {"rho": self.rho_spent,
                      "epsilon_at_budget_delta": self.epsilon_spent()},
            "accounting": "zCDP: rho of releases and of unpublished runs that drew noise add "
                          "up; converted with the lifetime delta",
            "releases": self.releases,
            "pending": self.pending,
            "head": self.head,
            "entries": self.entries,
        }


def fold(entries: list[dict[str, Any]], name: str, ident: str) -> LifetimeLedger:
    budget = (math.nan, math.nan)
    reserves: dict[str, dict[str, Any]] = {}
    releases: list[dict[str, Any]] = []
    for e in entries:
        kind = e["kind"]
        if kind in ("open", "raise"):
            budget = (float(e["epsilon"]), float(e["delta"]))
        elif kind == "reserve":
            reserves[e["run_id"]] = {k: e[k] for k in (
                "run_id", "rho", "epsilon", "delta", "method", "contract_fingerprint", "pid",
                "host", "store", "seed_fingerprint", "rdp", "release_kind") if k in e} | {"state": "reserved", "reserved_at": e["at"]}
        elif kind == "spend" and e["run_id"] in reserves:
            reserves[e["run_id"]]["state"] = "spent, not published"
        elif kind == "cancel" and e["run_id"] in reserves:
            reserves.pop(e["run_id"])
        elif kind == "publish":
            held = reserves.pop(e.get("run_id") or "", None) or {}
            release = {k: v for k, v in e.items()
                       if k not in ("seq", "prev", "hash", "kind", "at", "release_kind")}
            if "release_kind" in e:
                release["kind"] = e["release_kind"]
            release.setdefault("rho", held.get("rho", 0.0))
            for key in ("epsilon", "delta", "method", "contract_fingerprint",
                        "seed_fingerprint"):
                if key in held:
                    release.setdefault(key, held[key])
            releases.append(release)
    return LifetimeLedger(name, budget[0], budget[1], releases, list(reserves.values()),
                          entries, ident)


def read_chain(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
        entries = raw["entries"]
        if not isinstance(entries, list):
            raise TypeError("entries is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"lifetime ledger {path} is unreadable ({exc}); restore it before "
                         "releasing again") from None
    verify_chain(entries, where=str(path))
    if not entries:
        raise StoreError(f"lifetime ledger {path} is empty (reset?); restore it before "
                         "releasing again")
    return entries


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
            _finite(r.get("rho"), "rho")
        except (ValueError, AttributeError) as exc:
            raise StoreError(f"lifetime ledger {path}: release {i}: {exc}") from None
        out.append(dict(r))
    return out


def _budget(contract: Contract, entries: list[dict[str, Any]], ident: str) -> tuple[float, float]:
    """The fixed budget of the ledger; the contract may lower it, never raise it."""
    declared = (float(contract.budget.epsilon), float(contract.budget.delta))
    if not entries:
        return declared
    fixed = fold(entries, contract.name, ident)
    fixed_budget = (fixed.epsilon_budget, fixed.delta_budget)
    if declared[0] > fixed_budget[0] * (1 + 1e-12) or declared[1] > fixed_budget[1] * (1 + 1e-12):
        raise StoreError(
            f"contract {contract.name!r} declares budget epsilon={declared[0]:g}, "
            f"delta={declared[1]:g} but dataset {ident!r} has epsilon={fixed_budget[0]:g}, "
            f"delta={fixed_budget[1]:g} fixed in its lifetime ledger; raise it with "
            "`privfair ledger raise` (recorded)")
    return min(declared[0], fixed_budget[0]), min(declared[1], fixed_budget[1])


def _ledger_from(contract: Contract, entries: list[dict[str, Any]]) -> LifetimeLedger:
    ident = dataset_id(contract)
    book = fold(entries, contract.name, ident)
    book.epsilon_budget, book.delta_budget = _budget(contract, entries, ident)
    return book


def read_lifetime_ledger(store: str | Path | None, contract: Contract) -> LifetimeLedger:
    """The dataset's lifetime ledger from the registry, checked against ``store``.

    Refuses (``StoreError``) a chain that fails its check, a contract budget above the fixed
    one, and a store whose copy, catalog or release folders the ledger does not account for.
    """
    ident = dataset_id(contract)
    entries = read_chain(registry_ledger_path(ident))
    if not entries:
        legacy = _legacy_releases(Path(store) if store is not None else None, contract.name)
        if legacy:
            entries = _import_legacy(contract, legacy, Path(store))  # type: ignore[arg-type]
    book = _ledger_from(contract, entries)
    if store is not None:
        cross_check(Path(store), book)
    return book


def _import_legacy(contract: Contract, legacy: list[dict[str, Any]],
                   store: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    _chain_append(entries, "open", epsilon=float(contract.budget.epsilon),
                  delta=float(contract.budget.delta), dataset=contract.name,
                  note="imported from a pre-registry store ledger")
    for r in legacy:
        _chain_append(entries, "publish", **{k: v for k, v in r.items()
                                             if k not in ("kind", "seq", "prev", "hash")},
                      store=str(store.resolve()),
                      **({"release_kind": r["kind"]} if "kind" in r else {}))
    return entries


def cross_check(store: Path, book: LifetimeLedger) -> None:
    """The store's ledger copy, catalog rows and release folders, against the ledger.

    Every published version of ``book.dataset`` in ``store`` (a ``vN`` folder, a catalog row)
    needs a ``publish`` entry for this store, and the store's copy of the chain must be a
    prefix of the ledger (a deleted or rolled-back ledger is refused).
    """
    problems = store_problems(store, book)
    if problems:
        raise StoreError(f"store {store} and the lifetime ledger of {book.dataset_id!r} "
                         f"disagree: {problems[0]}; run `privfair store check --out {store} "
                         "--repair`")


def _published_here(store: Path, book: LifetimeLedger) -> set[str]:
    here = str(store.resolve())
    return {str(r.get("version")) for r in book.releases
            if r.get("store") in (None, here, str(store))}


def store_problems(store: Path, book: LifetimeLedger) -> list[str]:
    """Disagreements between ``store`` and ``book`` (empty when consistent)."""
    folder = store / book.dataset
    problems: list[str] = []
    copy = ledger_path(store, book.dataset)
    if copy.is_file():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            head = json.loads(copy.read_text()).get("head")
            if head and head != _GENESIS and head not in {e["hash"] for e in book.entries}:
                problems.append(f"the store's ledger copy {copy} has entries the registry "
                                "ledger lacks (deleted or rolled back?)")
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


def _ledger_bytes(book: LifetimeLedger) -> bytes:
    return (json.dumps(book.to_dict(), indent=2, sort_keys=True, allow_nan=False)
            + "\n").encode("utf-8")


@contextlib.contextmanager
def registry_lock(ident: str) -> Iterator[Path]:
    """Hold the registry lock of dataset ``ident`` (always taken after a store lock)."""
    folder = registry_root() / ident
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StoreError(f"privacy registry {folder.parent} cannot be written ({exc.strerror}); "
                         "set PRIVFAIR_REGISTRY to a writable folder") from None
    with locked(folder):
        yield folder


def _append(ident: str, name: str, budget: tuple[float, float], entries_in: list[dict[str, Any]],
            new: list[tuple[str, dict[str, Any]]]) -> LifetimeLedger:
    entries = list(entries_in)
    if not entries:
        _chain_append(entries, "open", epsilon=budget[0], delta=budget[1], dataset=name)
    for kind, fields in new:
        _chain_append(entries, kind, **fields)
    book = fold(entries, name, ident)
    atomic_write(registry_ledger_path(ident), _ledger_bytes(book))
    return book


@dataclass(frozen=True)
class RunCharge:
    """What one run charges a dataset's lifetime ledger (public facts only).

    ``rho`` is in the ledger's unit; a kind that accounts in Rényi DP gives its ``rdp``
    curve instead, and :func:`reserve_run` fixes its ``rho`` under the registry lock.
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
            "run_id": self.run_id, "rho": float(self.rho or 0.0), "epsilon": float(self.epsilon),
            "delta": float(self.delta), "method": self.method, "release_kind": self.kind,
            "contract_fingerprint": self.contract_fingerprint, "store": str(self.store),
            "pid": os.getpid(), "host": socket.gethostname()}
        if self.rdp is not None:
            fields["rdp"] = [float(v) for v in self.rdp]
        if self.seed_fingerprint:  # only the keyed fingerprint of a test seed, never the seed
            fields["seed_fingerprint"] = self.seed_fingerprint
        return fields


def check_seed_unused(book: LifetimeLedger, fingerprint: str | None, run_id: str) -> None:
    """Refuse a second release made with the published test seed of another: the difference
    of two releases with one seed cancels their noise (issue 10.3). A failed run published
    nothing, so its seed may be used again."""
    if not fingerprint:
        return
    for r in book.releases:
        if r.get("seed_fingerprint") == fingerprint and r.get("run_id") != run_id:
            raise StoreError(
                f"seed: dataset {book.dataset_id or book.dataset!r} already has a release made "
                f"with this seed ({r.get('version')}); two releases with one "
                "seed cancel the noise: use another seed, or none")


def _declared(contract: Contract) -> tuple[float, float]:
    return float(contract.budget.epsilon), float(contract.budget.delta)


def reserve_run(charge: RunCharge) -> RunCharge:
    """Reserve the run's cost in the lifetime ledger; call before the first private read.

    Recovers a publication a killed run left in the store, checks the ledger against the
    store, refuses a reused test seed and a run the remaining budget cannot pay for. Returns
    the charge with its ρ fixed (an RDP cost's ρ depends on what is spent, so it is fixed
    here, under the lock).
    """
    from privfair.store.publication import recover_store

    recover_store(charge.store, charge.dataset)
    ident = dataset_id(charge.contract)
    with registry_lock(ident):
        book = read_lifetime_ledger(charge.store, charge.contract)
        check_seed_unused(book, charge.seed_fingerprint, charge.run_id)
        if charge.rho is None:
            charge = replace(charge, rho=rho_reservation(
                book, np.asarray(charge.rdp, dtype=float)))
        if book.run_state(charge.run_id) is not None:
            raise StoreError(f"run {charge.run_id} is already in the lifetime ledger")
        book.check(rho=float(charge.rho))
        _append(ident, charge.contract.name, _declared(charge.contract), book.entries,
                [("reserve", charge.fields())])
    return charge


def mark_noise_drawn(charge: RunCharge) -> LifetimeLedger:
    """Record that the run is about to draw noise: from now on it stays charged."""
    ident = dataset_id(charge.contract)
    with registry_lock(ident):
        book = read_lifetime_ledger(None, charge.contract)
        if book.run_state(charge.run_id) != "reserved":
            raise StoreError(f"run {charge.run_id} holds no reservation; it may not draw noise")
        return _append(ident, charge.contract.name, _declared(charge.contract), book.entries,
                       [("spend", {"run_id": charge.run_id})])


def release_unspent(charge: RunCharge, *,
                    reason: str = "the run failed before drawing noise") -> None:
    """Give back the reservation of a failed run that drew no noise (else it stays charged)."""
    ident = dataset_id(charge.contract)
    if not registry_ledger_path(ident).is_file():
        return
    try:
        with registry_lock(ident):
            book = read_lifetime_ledger(None, charge.contract)
            if book.run_state(charge.run_id) == "reserved":
                _append(ident, charge.contract.name, _declared(charge.contract), book.entries,
                        [("cancel", {"run_id": charge.run_id, "reason": reason})])
    except Exception as exc:  # the reservation stays charged: safe, and store check sees it
        log.warning("could not give back the reservation of run %s: %s", charge.run_id, exc)


def seed_key(ident: str) -> bytes:
    """The dataset's secret key for test-seed fingerprints, held by the registry (0600).

    Kept beside the dataset's ledger, never in a work or release folder, so that the same
    seed has the same fingerprint whoever runs the release and from wherever.
    """
    with registry_lock(ident) as folder:
        path = folder / SEED_KEY_FILE
        if not path.is_file():
            atomic_write(path, secrets.token_bytes(32))
        os.chmod(path, 0o600)
        return path.read_bytes()


def cancel_reservation(ident: str, name: str, run_id: str, *, reason: str) -> bool:
    """Give back a reservation that drew no noise (e.g. of a run that died while loading);
    returns whether one was cancelled. A run that drew noise stays charged."""
    with registry_lock(ident):
        entries = read_chain(registry_ledger_path(ident))
        book = fold(entries, name, ident)
        if book.run_state(run_id) != "reserved":
            return False
        _append(ident, name, (book.epsilon_budget, book.delta_budget), entries,
                [("cancel", {"run_id": run_id, "reason": reason})])
        return True


def record_published(*, ident: str, name: str, budget: tuple[float, float], store: Path,
                     releases: list[dict[str, Any]]) -> LifetimeLedger:
    """Append ``publish`` entries (the commit point of a publication); a release without a
    reservation (``run_id`` unknown) carries and is checked for its own ``rho``."""
    with registry_lock(ident):
        entries = read_chain(registry_ledger_path(ident))
        book = fold(entries, name, ident) if entries else LifetimeLedger(
            name, budget[0], budget[1], [], dataset_id=ident)
        book.epsilon_budget = min(book.epsilon_budget, budget[0])
        book.delta_budget = min(book.delta_budget, budget[1])
        new = []
        for r in releases:
            fields = {k: v for k, v in r.items() if k not in ("seq", "prev", "hash", "at",
                                                                "kind")}
            if "kind" in r:  # the release's kind (e.g. "model"), not the entry's
                fields["release_kind"] = r["kind"]
            fields["store"] = str(store.resolve())
            state = book.run_state(str(r.get("run_id"))) if r.get("run_id") else None
            if state == "published":
                raise StoreError(f"run {r['run_id']} has already published")
            if state is None:
                book.check(rho=float(r["rho"]))
                book.releases.append(fields)
            else:
                # A release may name its exact cost in place of the reservation (a DP-SGD
                # model or GAN, whose Rényi curve is known only once it ran); any excess over
                # the reservation must still fit the budget.
                held = next(q for q in book.pending if q["run_id"] == r["run_id"])
                if "rho" in fields and float(fields["rho"]) > float(held["rho"]):
                    book.check(rho=float(fields["rho"]) - float(held["rho"]))
            new.append(("publish", fields))
        return _append(ident, name, budget, entries, new)


def write_store_copy(store: Path, book: LifetimeLedger) -> None:
    """The store's read-only copy of the chain (cross-checked on every run)."""
    atomic_write(ledger_path(store, book.dataset), _ledger_bytes(book))


def raise_budget(contract: Contract, *, epsilon: float, delta: float, reason: str) -> LifetimeLedger:
    """Record a new lifetime budget for the contract's dataset (``privfair ledger raise``)."""
    _finite(epsilon, "epsilon", positive=True)
    _finite(delta, "delta", positive=True, below_one=True)
    if not reason.strip():
        raise StoreError("a budget raise needs a --reason (it is recorded in the ledger)")
    ident = dataset_id(contract)
    with registry_lock(ident):
        entries = read_chain(registry_ledger_path(ident))
        if not entries:
            raise StoreError(f"dataset {ident!r} has no lifetime ledger yet; its first release "
                             "fixes the contract's budget")
        return _append(ident, contract.name, (epsilon, delta), entries,
                       [("raise", {"epsilon": float(epsilon), "delta": float(delta),
                                   "reason": reason, "by": getpass.getuser()})])


def registry_ledgers(ident: str | None = None) -> list[dict[str, Any]]:
    """Every lifetime ledger of the registry (checked), as written."""
    root = registry_root()
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.glob("*/lifetime_ledger.json")):
        if ident is None or path.parent.name == ident:
            read_chain(path)
            out.append(read_ledger_file(path))
    return out


def read_ledger_file(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    private = folder / ".lock"
    with open(private, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS releases (
    dataset VARCHAR NOT NULL,
    version VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    published_at VARCHAR NOT NULL,
    epsilon DOUBLE NOT NULL,
    delta DOUBLE NOT NULL,
    rho DOUBLE NOT NULL,
    method VARCHAR NOT NULL,
    n_rows BIGINT NOT NULL,
    contract_fingerprint VARCHAR NOT NULL,
    fairness_passed BOOLEAN NOT NULL,
    orchestrator VARCHAR,
    PRIMARY KEY (dataset, version)
);
ALTER TABLE releases ADD COLUMN IF NOT EXISTS orchestrator VARCHAR;
"""
CATALOG_COLUMNS = ("dataset", "version", "path", "published_at", "epsilon", "delta", "rho",
                    "method", "n_rows", "contract_fingerprint", "fairness_passed",
                    "orchestrator")


@contextlib.contextmanager
def catalog(store: Path, *, read_only: bool = False, wait: float = 10.0) -> Iterator[Any]:
    """Open ``catalog.duckdb`` briefly; waits ``wait`` seconds if another process holds it."""
    import duckdb

    path = store / "catalog.duckdb"
    deadline = time.monotonic() + wait
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if time.monotonic() > deadline:
                holder = re.search(r"PID (\d+)", str(exc))
                raise StoreError(
                    f"release catalog {path} is held by another process"
                    f"{f' (pid {holder.group(1)})' if holder else ''}; close it and retry"
                ) from None
            time.sleep(0.1)
    try:
        if not read_only:
            con.execute(_CATALOG_SCHEMA)
        yield con
    finally:
        con.close()


def list_releases(store: str | Path, dataset: str | None = None) -> list[dict[str, Any]]:
    """Rows of the release catalog, oldest first (empty if the store has none)."""
    store = Path(store)
    if not (store / "catalog.duckdb").is_file():
        return []
    with catalog(store, read_only=True) as con:
        # SELECT *: a catalog written before a column was added reads it as None
        query = "SELECT * FROM releases"
        args: list[Any] = []
        if dataset is not None:
            query += " WHERE dataset = ?"
            args.append(dataset)
        result = con.execute(query + " ORDER BY published_at, dataset, version", args)
        names = [d[0] for d in result.description]
        rows = [dict(zip(names, r, strict=True)) for r in result.fetchall()]
    return [{c: r.get(c) for c in CATALOG_COLUMNS} for r in rows]


def lifetime_ledgers(store: str | Path, dataset: str | None = None) -> list[dict[str, Any]]:
    """The lifetime ledger of every dataset of the store: the registry's (checked, with runs
    that are charged but unpublished), else the store's copy."""
    store = Path(store)
    if not store.is_dir():
        return []
    out = []
    for path in sorted(store.glob("*/lifetime_ledger.json")):
        if dataset is None or path.parent.name == dataset:
            copy = read_ledger_file(path)
            ident = str(copy.get("dataset_id") or path.parent.name)
            original = registry_ledger_path(ident)
            if "entries" in copy and original.is_file():
                read_chain(original)
                copy = read_ledger_file(original)
            out.append(copy)
    return out


def next_version(folder: Path, ledger: LifetimeLedger) -> str:
    """One past every version a folder, the ledger or the catalog has used (a stale catalog
    row never blocks a release)."""
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    here = str(folder.parent.resolve())
    names += [str(r.get("version", "")) for r in ledger.releases
              if r.get("store") in (None, here)]
    names += [re.sub(r"^\.(tmp|intent)-", "", n).split("-")[0].removesuffix(".json")
              for n in names if n.startswith((".tmp-", ".intent-"))]
    store = folder.parent
    if (store / "catalog.duckdb").is_file():
        names += [str(r["version"]) for r in list_releases(store, folder.name)]
    numbers = [int(m.group(1)) for n in names if (m := re.fullmatch(r"v(\d+)", n))]
    return f"v{max(numbers, default=0) + 1}"


def code_version() -> dict[str, Any]:
    """privfair version and, in a git checkout, the commit (with a dirty flag)."""
    try:
        version = importlib.metadata.version("privfair")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        if pyproject.is_file():
            m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
            version = m.group(1) if m else version
    out: dict[str, Any] = {"privfair": version, "git_commit": None}
    repo = Path(__file__).resolve().parents[2]
    if (repo / ".git").exists():
        try:
            commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                                    capture_output=True, text=True, timeout=5, check=True)
            out["git_commit"] = commit.stdout.strip()
            dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                    "--untracked-files=no", "--", "privfair"],
                                   capture_output=True, text=True, timeout=5, check=True)
            out["git_dirty"] = bool(dirty.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return out


# --- lifetime composition in Rényi DP ----------------------------------------------------------


def release_curve(release: Mapping[str, Any]) -> np.ndarray:
    """A release's (or pending run's) Rényi curve: its own, or ρα for a zCDP charge."""
    if release.get("rdp") is not None:
        curve = np.asarray(release["rdp"], dtype=float)
        if curve.size != len(RDP_ORDERS):
            raise StoreError("a lifetime ledger entry has an RDP curve on another grid")
        return curve
    return zcdp_rdp(rho=float(release["rho"]))


def lifetime_curve(lifetime: LifetimeLedger) -> np.ndarray:
    """Composed RDP curve of every release (and pending reservation) in ``lifetime``."""
    total = np.zeros(len(RDP_ORDERS))
    # Reservations of runs that have not published count as spent, like releases.
    for release in [*lifetime.releases, *lifetime.pending]:
        total += release_curve(release)
    return total


def lifetime_epsilon(lifetime: LifetimeLedger, extra: np.ndarray | None = None) -> float:
    """ε at the lifetime δ of everything charged (plus ``extra``), composed in RDP."""
    curve = lifetime_curve(lifetime) + (0 if extra is None else extra)
    return rdp_epsilon(rdp=curve, delta=lifetime.delta_budget)[0]


def rho_reservation(lifetime: LifetimeLedger, curve: np.ndarray) -> float:
    """ρ to record for a release of RDP ``curve`` so the zCDP check of later table releases
    stays sound: ``ρ_budget − (table ρ so far) − ρ'``, with ρ' the most zCDP that still fits
    next to every curve."""
    base = lifetime_curve(lifetime) + curve
    orders = np.asarray(RDP_ORDERS)
    lo, hi = 0.0, lifetime.rho_budget
    for _ in range(60):
        mid = (lo + hi) / 2
        fits = rdp_epsilon(rdp=base + mid * orders,
                           delta=lifetime.delta_budget)[0] <= lifetime.epsilon_budget
        lo, hi = (mid, hi) if fits else (lo, mid)
    return max(0.0, lifetime.rho_budget - lifetime.rho_spent - lo)
