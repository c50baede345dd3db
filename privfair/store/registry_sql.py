"""The registry's operations on its tables: load and verify a chain, append, reset, seed keys.

Each function takes a connection inside :func:`privfair.store.backends.run`'s serializable
transaction, or opens one; see ``backends.py`` for the tables.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from privfair.store import backends, witness
from privfair.store.backends import (
    ENTRIES,
    HEADS,
    LEGACY_SEED_KEY_FILE,
    META,
    RESETS,
    SEED_KEYS,
    Registry,
    mac,
    run,
)
from privfair.store.chain import (
    GENESIS,
    Entry,
    NewEntries,
    canonical,
    chain_append,
    verify_chain,
)
from privfair.store.files import StoreError

#: A lifetime ledger file of earlier versions (a JSON chain), imported into the registry.
LEDGER_FILE = "lifetime_ledger.json"


def open_registry() -> Registry:
    """The registry of this process's environment (cached); a new folder registry imports
    the JSON ledgers of earlier versions found in its folder (:func:`migrate_folder`)."""
    return backends.open_registry(migrate=migrate_folder)


def check_pinned(pinned: str | None, dataset: str) -> None:
    """Refuse a dataset whose contract pins another registry (``registry_id:``).

    One dataset, one registry: a second registry (another user's SQLite file, a team's
    PostgreSQL) would keep a second budget for the same people.
    """
    if not pinned:
        return
    reg = open_registry()
    if not hmac.compare_digest(str(pinned), reg.ident):
        raise StoreError(f"contract of dataset {dataset!r} pins registry {pinned} "
                         f"(registry_id), but PRIVFAIR_REGISTRY is registry {reg.ident} "
                         f"({reg.name}); a dataset has one registry: set PRIVFAIR_REGISTRY "
                         "to the one its contract names")


def _known(conn: sa.Connection, reg: Registry) -> list[str]:
    """Every dataset the registry ever opened (HMAC'd, so a deleted ledger is noticed)."""
    row = conn.execute(sa.select(META).where(META.c.name == "datasets")).first()
    if row is None:
        if conn.execute(sa.select(sa.func.count()).select_from(HEADS)).scalar():
            raise StoreError(f"privacy registry {reg.name}: its list of datasets is missing "
                             "(tampered?); restore it from a backup")
        return []
    if not hmac.compare_digest(row.mac, mac(reg, "datasets", row.value)):
        raise StoreError(f"privacy registry {reg.name}: its list of datasets fails its check "
                         "(edited); restore it from a backup")
    return list(json.loads(row.value))


def _set_known(conn: sa.Connection, reg: Registry, names: list[str]) -> None:
    value = json.dumps(sorted(set(names)))
    check = mac(reg, "datasets", value)
    if conn.execute(sa.update(META).where(META.c.name == "datasets")
                    .values(value=value, mac=check)).rowcount == 0:
        conn.execute(sa.insert(META).values(name="datasets", value=value, mac=check))


@dataclass(frozen=True)
class Head:
    generation: int
    count: int
    head: str


def load(conn: sa.Connection, reg: Registry, ident: str) -> tuple[Head | None, list[Entry]]:
    """The dataset's verified chain and head (None, [] for a dataset never opened)."""
    where = f"of dataset {ident!r} in registry {reg.name}"
    row = conn.execute(sa.select(HEADS).where(HEADS.c.dataset == ident)).first()
    if row is None:
        # No head: a new dataset, unless the registry's list says it had a ledger.
        if ident in _known(conn, reg):
            raise StoreError(f"lifetime ledger {where} was deleted (the registry lists it); "
                             f"`privfair ledger reset --dataset {ident} --reason ...` records "
                             "the loss")
        witness.check(reg.key, ident, reg.name, None, [])  # seen here before: emptied?
        return None, []
    # The head's HMAC proves the registry wrote it (the list of datasets adds nothing here).
    if not hmac.compare_digest(
            row.mac, mac(reg, "head", ident, row.generation, row.entry_count, row.head)):
        raise StoreError(f"lifetime ledger {where}: its head record fails its check (edited)")
    rows = conn.execute(sa.select(ENTRIES).where(ENTRIES.c.dataset == ident,
                                                 ENTRIES.c.generation == row.generation)
                        .order_by(ENTRIES.c.seq)).all()
    entries = _verified(reg, ident, row.generation, rows, where)
    if len(entries) != row.entry_count or (entries[-1]["hash"] if entries else GENESIS) \
            != row.head:
        raise StoreError(f"lifetime ledger {where} has {len(entries)} entries but the registry "
                         f"recorded {row.entry_count} (truncated or rolled back); restore it "
                         "from a backup")
    head = Head(row.generation, row.entry_count, row.head)
    witness.check(reg.key, ident, reg.name, _seen(head), entries)
    return head, entries


def _seen(head: Head | None) -> witness.Seen | None:
    return None if head is None else witness.Seen(head.generation, head.count, head.head)


#: Per registry, dataset and generation: the rows (body text) this process has verified, and
#: their entries. A row is reused only while its text is unchanged and every row before it
#: was reused too, so only rows appended since are parsed and HMAC-checked again.
_VERIFIED: dict[tuple[str, bytes, str, int], NewEntries] = {}


def _verified(reg: Registry, ident: str, generation: int, rows: Sequence[sa.Row[Any]],
              where: str) -> list[Entry]:
    """The chain of ``rows``, each row checked against its entry, HMAC chain verified."""
    known = _VERIFIED.get((reg.name, reg.key, ident, generation), [])
    k = 0
    while k < min(len(known), len(rows)) and rows[k].seq == k and rows[k].body == known[k][0]:
        k += 1
    fresh = []
    for r in rows[k:]:
        entry = json.loads(r.body)
        if (entry.get("seq"), entry.get("kind"), entry.get("hash")) != (r.seq, r.kind, r.hash):
            raise StoreError(f"lifetime ledger {where} fails its check at entry {r.seq}: the "
                             "row and its entry differ (edited)")
        fresh.append(entry)
    verify_chain(fresh, where=where, key=reg.key, ident=ident, start=k,
                 prev=known[k - 1][1]["hash"] if k else GENESIS)
    kept = known[:k] + [(r.body, e) for r, e in zip(rows[k:], fresh, strict=True)]
    _VERIFIED[(reg.name, reg.key, ident, generation)] = kept
    return [dict(e) for _, e in kept]  # copies: callers may not edit the verified ones


def append(conn: sa.Connection, reg: Registry, ident: str, head: Head | None,
           entries: list[Entry], new: NewEntries) -> list[Entry]:
    """Append ``new`` (kind, fields) to the loaded chain and move its head; returns the chain."""
    out = list(entries)
    generation = head.generation if head else 0
    for kind, fields in new:
        entry = chain_append(out, kind, key=reg.key, ident=ident, **fields)
        conn.execute(sa.insert(ENTRIES).values(
            dataset=ident, generation=generation, seq=entry["seq"], kind=kind,
            hash=entry["hash"], body=canonical(entry).decode("utf-8")))
    _set_head(conn, reg, ident, Head(generation, len(out), out[-1]["hash"] if out else GENESIS),
              new=head is None)
    return out


def _set_head(conn: sa.Connection, reg: Registry, ident: str, head: Head, *, new: bool) -> None:
    values = {"generation": head.generation, "entry_count": head.count, "head": head.head,
              "mac": mac(reg, "head", ident, head.generation, head.count, head.head)}
    if new:
        known = _known(conn, reg)  # read before the new head row exists
        conn.execute(sa.insert(HEADS).values(dataset=ident, **values))
        _set_known(conn, reg, [*known, ident])
    else:
        conn.execute(sa.update(HEADS).where(HEADS.c.dataset == ident).values(**values))


def transact(ident: str, build: Callable[[list[Entry]], NewEntries]
             ) -> list[Entry]:
    """Load ``ident``'s chain, append what ``build(chain)`` returns, in one transaction."""
    reg = open_registry()

    def step(conn: sa.Connection) -> tuple[Head | None, list[Entry]]:
        head, entries = load(conn, reg, ident)
        new = build(entries)
        if not new:
            return head, entries
        out = append(conn, reg, ident, head, entries, new)
        return Head(head.generation if head else 0, len(out), out[-1]["hash"]), out

    return _witnessed(reg, ident, run(reg, step, queue=ident))


def read(ident: str) -> list[Entry]:
    """The dataset's verified chain ([] if it has none)."""
    reg = open_registry()
    return _witnessed(reg, ident, run(reg, lambda conn: load(conn, reg, ident), queue=ident))


def _witnessed(reg: Registry, ident: str,
               loaded: tuple[Head | None, list[Entry]]) -> list[Entry]:
    """The chain of a committed transaction, its head remembered by this client's witness."""
    head, entries = loaded
    if head is not None:
        witness.record(reg.key, ident, witness.Seen(head.generation, head.count, head.head),
                       registry=reg.name)
    return entries


def datasets() -> list[str]:
    """Every dataset with a ledger in the registry (each checked when it is read)."""
    reg = open_registry()
    return run(reg, lambda conn: sorted(_known(conn, reg)))


def seed_key(ident: str) -> bytes:
    """The dataset's 32-byte secret for test-seed fingerprints, created on first use.

    Stored wrapped under the registry key (:func:`wrap_seed_key`), never in clear: reading
    the database is not enough to compute a seed's fingerprint.
    """
    reg = open_registry()

    def step(conn: sa.Connection) -> bytes:
        row = conn.execute(sa.select(SEED_KEYS.c.key).where(SEED_KEYS.c.dataset == ident)).first()
        if row is not None:
            return unwrap_seed_key(reg, ident, row.key)
        key = secrets.token_bytes(32)
        conn.execute(sa.insert(SEED_KEYS).values(dataset=ident,
                                                 key=wrap_seed_key(reg, ident, key)))
        return key

    return run(reg, step)


def put_seed_key(conn: sa.Connection, reg: Registry, ident: str, key: bytes) -> None:
    if conn.execute(sa.select(SEED_KEYS.c.key).where(SEED_KEYS.c.dataset == ident)).first():
        raise StoreError(f"dataset {ident!r} already has a seed key in the registry")
    conn.execute(sa.insert(SEED_KEYS).values(dataset=ident, key=wrap_seed_key(reg, ident, key)))


#: How a wrapped seed key is stored: this prefix, then the RFC 3394 AES key wrap (40 bytes,
#: base64url: 56 characters; the column holds 64).
_WRAPPED = "aeskw1:"


def _wrapping_key(reg: Registry, ident: str) -> bytes:
    # One key-encryption key per dataset, derived from the registry key: a wrapped key copied
    # to another dataset's row fails to unwrap.
    return hmac.new(reg.key, b"privfair-seed-key-wrap/1\n" + ident.encode("utf-8"),
                    hashlib.sha256).digest()


def wrap_seed_key(reg: Registry, ident: str, key: bytes) -> str:
    """``key`` wrapped (AES key wrap, authenticated) under the registry key, for ``ident``."""
    # In the function: only seeded runs use a seed key (the import costs about 20 ms).
    wrapped = aes_key_wrap(_wrapping_key(reg, ident), key)
    return _WRAPPED + base64.urlsafe_b64encode(wrapped).decode("ascii")


def unwrap_seed_key(reg: Registry, ident: str, stored: str) -> bytes:
    """The seed key of a stored row; a 64-hex row of older registries is read as it is."""
    if not stored.startswith(_WRAPPED):
        return bytes.fromhex(stored)  # written in clear by an older version (append-only)
    # In the function: only seeded runs use a seed key (the import costs about 20 ms).

    try:
        return aes_key_unwrap(_wrapping_key(reg, ident),
                              base64.urlsafe_b64decode(stored[len(_WRAPPED):]))
    except (InvalidUnwrap, ValueError):
        raise StoreError(f"the seed key of dataset {ident!r} in registry {reg.name} fails its "
                         "check (edited or copied from another dataset)") from None


def import_chain(conn: sa.Connection, reg: Registry, ident: str,
                 legacy: list[Entry]) -> list[Entry]:
    """Re-chain a verified legacy chain under the key as a new ledger of ``ident``.

    Each entry keeps its fields and time and records its old hash (``legacy_hash``), so store
    copies written before the migration still match the registry.
    """
    head, entries = load(conn, reg, ident)
    if head is not None and entries:
        raise StoreError(f"dataset {ident!r} already has a lifetime ledger in registry "
                         f"{reg.name}; nothing imported")
    new = [(e["kind"], {k: v for k, v in e.items() if k not in ("seq", "prev", "hash", "kind")}
            | {"legacy_hash": e["hash"]}) for e in legacy]
    return append(conn, reg, ident, head, [], new)


def verified_prefix(reg: Registry, ident: str, entries: list[Entry]) -> list[Entry]:
    """The longest prefix of ``entries`` whose HMAC chain verifies (what a broken ledger
    still proves was charged)."""
    out: list[Entry] = []
    for i, entry in enumerate(entries):
        try:
            verify_chain([entry], where=ident, key=reg.key, ident=ident, start=i,
                         prev=out[-1]["hash"] if out else GENESIS)
        except StoreError:
            break
        out.append(entry)
    return out


Carry = Callable[[list[Entry]], NewEntries]


def reset(ident: str, *, reason: str, by: str, at: str, carry: Carry | None = None
          ) -> dict[str, Any]:
    """Start a new chain for a dataset whose ledger was lost or fails its check; returns what
    was lost. A ledger that verifies is never reset (that would give its spent budget back).

    ``carry(verified)`` gets the longest verified prefix of the broken chain and returns the
    new generation's first entries (its spend, carried over), appended in the same
    transaction.
    """
    reg = open_registry()

    def step(conn: sa.Connection) -> dict[str, Any]:
        known = ident in _known(conn, reg)
        row = conn.execute(sa.select(HEADS).where(HEADS.c.dataset == ident)).first()
        if not known and row is None:
            raise StoreError(f"dataset {ident!r} has no lifetime ledger in registry {reg.name}; "
                             "nothing to reset")
        if row is not None:
            try:
                _, entries = load(conn, reg, ident)
            except StoreError:
                pass  # broken: a reset is what it needs
            else:
                raise StoreError(
                    f"the lifetime ledger of dataset {ident!r} in registry {reg.name} verifies "
                    f"({len(entries)} entries): a reset would give back its spent budget; "
                    "nothing was reset")
        generation = row.generation if row else conn.execute(
            sa.select(sa.func.max(ENTRIES.c.generation)).where(ENTRIES.c.dataset == ident)
        ).scalar() or 0
        left = [json.loads(r.body) for r in conn.execute(
            sa.select(ENTRIES.c.body).where(ENTRIES.c.dataset == ident,
                                            ENTRIES.c.generation == generation)
            .order_by(ENTRIES.c.seq))]
        verified = verified_prefix(reg, ident, left)
        lost = {"dataset": ident, "registry": reg.name, "generation": generation,
                "recorded_entries": row.entry_count if row else None,
                "recorded_head": row.head if row else None, "entries_left": left,
                "entries_verified": len(verified), "reason": reason, "by": by, "at": at}
        conn.execute(sa.insert(RESETS).values(dataset=ident, generation=generation + 1,
                                              body=json.dumps(lost, sort_keys=True)))
        head = Head(generation + 1, 0, GENESIS)
        _set_head(conn, reg, ident, head, new=row is None)
        new = carry(verified) if carry is not None else []
        lost["carried"] = append(conn, reg, ident, head, [], new) if new else []
        return lost

    lost = run(reg, step)
    witness.record(reg.key, ident, witness.Seen(lost["generation"] + 1, 0, GENESIS),
                   registry=reg.name)
    return lost


# --- importing the JSON ledgers of earlier versions ---------------------------------------


def read_json_chain(path: Path) -> list[Entry]:
    """The verified entries of a legacy JSON ledger file."""
    try:
        entries = json.loads(path.read_text())["entries"]
        if not isinstance(entries, list) or not entries:
            raise TypeError("entries is not a non-empty list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"lifetime ledger {path} is unreadable ({exc}); nothing imported") \
            from None
    verify_chain(entries, where=str(path))
    return entries


def import_files(reg: Registry, files: list[Path], *,
                 rename: bool = True) -> list[Path]:
    """Verify every file first, then import each with its seed key; returns the files
    imported (renamed ``.imported`` unless ``rename`` is False: see :func:`mark_imported`)."""
    chains = [(p.parent.name, p, read_json_chain(p)) for p in files]
    for ident, path, chain in chains:
        seed = path.parent / LEGACY_SEED_KEY_FILE

        def step(conn: sa.Connection, ident: str = ident, chain: list[Entry] = chain,
                 seed: Path = seed) -> list[Entry]:
            out = import_chain(conn, reg, ident, chain)
            if seed.is_file() and len(seed.read_bytes()) == 32:
                put_seed_key(conn, reg, ident, seed.read_bytes())
            return out

        run(reg, step)
    done = [path for _, path, _ in chains]
    if rename:
        mark_imported(done)
    return done


def mark_imported(files: list[Path]) -> None:
    """Rename imported ledgers (and their seed keys) ``*.imported``: never imported twice."""
    for path in files:
        path.rename(path.with_name(LEDGER_FILE + ".imported"))
        seed = path.parent / LEGACY_SEED_KEY_FILE
        if seed.is_file():
            seed.rename(seed.with_name(seed.name + ".imported"))


def migrate_folder(reg: Registry, folder: Path) -> Callable[[], None]:
    """Import a JSON registry found in ``folder`` (when its database is created); returns
    the step that renames the files, run once the database is in place."""
    files = sorted(folder.glob(f"*/{LEDGER_FILE}"))
    imported = import_files(reg, files, rename=False) if files else []
    return lambda: mark_imported(imported)
