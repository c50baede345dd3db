"""Backends of the privacy registry: the lifetime ledgers in one transactional SQL database.

``$PRIVFAIR_REGISTRY`` names the registry: a folder (default
``~/.local/share/privfair/registry``) holds an embedded SQLite database ``registry.sqlite`` and
its key ``registry.key`` (0600); a ``postgresql://…`` URL names a team's PostgreSQL database,
whose key is read from ``$PRIVFAIR_REGISTRY_KEY_FILE``, else ``registry.key`` in
``$PRIVFAIR_REGISTRY_HOME`` (default: the folder above). Both go through SQLAlchemy Core.
A process may instead be handed the registry explicitly (:class:`RegistrySettings` through
:func:`using_registry`: an orchestrator's stored connection and key); the environment is the
fallback.

Tables: ``entries`` (append-only: triggers refuse UPDATE and DELETE), ``heads`` (per dataset
its generation, entry count and head hash, HMAC'd), ``meta`` (the key check, the HMAC'd
registry id and list of every dataset ever opened), ``resets`` (recorded ``ledger reset``) and
``seed_keys`` (wrapped under the key: ``registry_sql.wrap_seed_key``).

Issue 36.4: a contract's ``registry_id`` pins its dataset to one registry
(``registry_sql.check_pinned``); each client's witness (``store/witness.py``, outside the registry)
refuses a registry that shows less than it has seen; a team registry's key is made by the
first client only (:func:`_first_contact`); a folder registry's files are 0600 whatever the
folder's mode.
Every operation is one serializable transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL
SERIALIZABLE, retried on a conflict) that reads the dataset's chain, verifies it against the
key and its head, and appends; so concurrent processes never overspend, and an edited,
truncated or deleted ledger is refused instead of read as a fresh one.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import random
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from privfair.store.chain import canonical
from privfair.store.files import StoreError
from privfair.store.locks import locked, locked_file

DB_FILE = "registry.sqlite"
KEY_FILE = "registry.key"
#: The per-dataset seed key file of the JSON registry (imported into ``seed_keys``).
LEGACY_SEED_KEY_FILE = "seed-fingerprint.key"
_KEY_CHECK = b"privfair-registry-key-check/1"
#: SQLSTATEs of a PostgreSQL transaction that lost a race: serialization failure, deadlock,
#: and a unique violation (two first entries of one dataset); all are retried.
_RETRY_SQLSTATES = {"40001", "40P01", "23505"}
_RETRY_FOR_S = 120.0

T = TypeVar("T")

#: What a new folder registry imports before it is put in place: ``migrate(reg, folder)``
#: imports the JSON ledgers of earlier versions found in ``folder`` and returns the step that
#: renames them once the database is in place (``registry_sql.migrate_folder``).
Migrate = Callable[["Registry", Path], Callable[[], None]]

_meta = sa.MetaData()
ENTRIES = sa.Table(
    "entries", _meta,
    sa.Column("dataset", sa.String(200), primary_key=True),
    sa.Column("generation", sa.Integer, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False))
HEADS = sa.Table(
    "heads", _meta,
    sa.Column("dataset", sa.String(200), primary_key=True),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("entry_count", sa.Integer, nullable=False),
    sa.Column("head", sa.String(64), nullable=False),
    sa.Column("mac", sa.String(64), nullable=False))
META = sa.Table(
    "meta", _meta,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("mac", sa.String(64), nullable=False))
RESETS = sa.Table(
    "resets", _meta,
    sa.Column("dataset", sa.String(200), primary_key=True),
    sa.Column("generation", sa.Integer, primary_key=True),
    sa.Column("body", sa.Text, nullable=False))
SEED_KEYS = sa.Table(
    "seed_keys", _meta,
    sa.Column("dataset", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(64), nullable=False))
_APPEND_ONLY = ("entries", "resets", "seed_keys")

_SQLITE_TRIGGERS = [
    f"CREATE TRIGGER IF NOT EXISTS {t}_no_{op.lower()} BEFORE {op} ON {t} BEGIN "
    f"SELECT RAISE(ABORT, 'privfair registry: {t} is append-only'); END"
    for t in _APPEND_ONLY for op in ("UPDATE", "DELETE")]
_PG_TRIGGERS = [
    "CREATE OR REPLACE FUNCTION privfair_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'privfair registry: % on % is refused (append-only)', "
    "TG_OP, TG_TABLE_NAME; END $$",
    *[f"CREATE OR REPLACE TRIGGER {t}_append_only BEFORE UPDATE OR DELETE ON {t} "
      "FOR EACH ROW EXECUTE FUNCTION privfair_append_only()" for t in _APPEND_ONLY],
    *[f"CREATE OR REPLACE TRIGGER {t}_no_truncate BEFORE TRUNCATE ON {t} "
      "FOR EACH STATEMENT EXECUTE FUNCTION privfair_append_only()" for t in _APPEND_ONLY]]


@dataclass(frozen=True)
class Registry:
    """An open privacy registry: its engine, its key, a name for messages and its id.

    ``ident`` is the registry's random id (``meta.registry_id``, HMAC'd), made with its key
    check: a contract's ``registry_id`` pins its dataset to this registry (issue 36.4).
    """

    name: str
    engine: sa.Engine
    key: bytes
    dialect: str
    ident: str = ""


# --- where the registry is --------------------------------------------------------------------

def default_folder() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser().resolve() / "privfair" / "registry"


_PG_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")


@dataclass(frozen=True)
class RegistrySettings:
    """The registry handed to this process explicitly, over ``$PRIVFAIR_REGISTRY``.

    Parameters
    ----------
    url : str
        A folder (SQLite registry) or a ``postgresql://`` URL, as ``$PRIVFAIR_REGISTRY``.
    key : bytes or None
        The registry's 32-byte key; None reads the key file as the environment would
        (``registry.key`` in the folder, or ``$PRIVFAIR_REGISTRY_KEY_FILE``).
    source : str
        The setting's name in messages (where the value came from).
    """

    url: str
    key: bytes | None = None
    source: str = "RegistrySettings.url"

    def __post_init__(self) -> None:
        _check_url(self.url, source=self.source)
        if self.key is not None and len(self.key) != 32:
            raise StoreError(f"{self.source}: the registry key must be 32 bytes, got "
                             f"{len(self.key)}")

    def __repr__(self) -> str:  # the key never reaches a log line or a traceback
        return (f"RegistrySettings(url={_display(self.url)!r}, "
                f"key={'<32 bytes>' if self.key is not None else None}, "
                f"source={self.source!r})")


_EXPLICIT: RegistrySettings | None = None


def _display(url: str) -> str:
    if url.startswith(_PG_SCHEMES):
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    return url


def _check_url(url: str, *, source: str) -> None:
    """Refuse a value that is neither a folder nor a PostgreSQL URL, in one line."""
    if not url.strip():
        raise StoreError(f"{source}: empty; give a registry folder or a postgresql:// URL")
    if "://" in url and not url.startswith(_PG_SCHEMES):
        scheme = url.split("://", 1)[0]
        raise StoreError(f"{source}: {scheme}:// is not a registry; give a folder or a "
                         "postgresql:// URL")


@contextlib.contextmanager
def using_registry(settings: RegistrySettings | None) -> Iterator[None]:
    """Use ``settings`` as this process's registry inside the block (None: the environment).

    Process-wide, not per thread: a flow's task threads see the registry its run set.
    """
    global _EXPLICIT
    previous, _EXPLICIT = _EXPLICIT, settings if settings is not None else _EXPLICIT
    try:
        yield
    finally:
        _EXPLICIT = previous


def _registry_location() -> str:
    """The registry's folder or URL: handed over explicitly, else the environment."""
    if _EXPLICIT is not None:
        return _EXPLICIT.url
    env = os.environ.get("PRIVFAIR_REGISTRY", "")
    if env:
        _check_url(env, source="PRIVFAIR_REGISTRY")
    return env


def registry_url() -> str | None:
    """The registry's PostgreSQL URL, or None for a folder (SQLite)."""
    url = _registry_location()
    return url if url.startswith(_PG_SCHEMES) else None


def registry_folder() -> Path:
    """The local registry folder: the SQLite registry, or where a PostgreSQL one keeps its key."""
    url = _registry_location()
    if url and registry_url() is None:
        return Path(url).expanduser().resolve()
    home = os.environ.get("PRIVFAIR_REGISTRY_HOME")
    return Path(home).expanduser().resolve() if home else default_folder()


def key_path() -> Path:
    if registry_url() is not None and os.environ.get("PRIVFAIR_REGISTRY_KEY_FILE"):
        return Path(os.environ["PRIVFAIR_REGISTRY_KEY_FILE"]).expanduser().resolve()
    return registry_folder() / KEY_FILE


def _explicit_key() -> bytes | None:
    return _EXPLICIT.key if _EXPLICIT is not None else None


def _key_name() -> str:
    """The key as messages name it: its file, or the setting that handed it over."""
    if _EXPLICIT is not None and _EXPLICIT.key is not None:
        return f"handed by {_EXPLICIT.source}"
    return str(key_path())


# --- opening ------------------------------------------------------------------------------------


_OPEN: dict[tuple[Any, ...], Registry] = {}


def open_registry(*, migrate: Migrate) -> Registry:
    """The registry of this process's environment, opened and its key checked (cached).

    A folder registry is created on first use, importing the earlier JSON ledgers found in
    its folder by ``migrate`` (callers use :func:`privfair.store.registry_sql.open_registry`).
    """
    url, key = registry_url(), _explicit_key()
    # Keyed by the key's digest, never the key itself, when it was handed over.
    key_id = hashlib.sha256(key).hexdigest() if key is not None else str(key_path())
    cache_key = (url or str(registry_folder()), key_id, os.getpid())
    if url is None:
        folder = registry_folder()
        if not ((folder / DB_FILE).is_file() and (folder / KEY_FILE).is_file()):
            stale = _OPEN.pop(cache_key, None)
            if stale is not None:  # its pooled connections hold the deleted file
                stale.engine.dispose()
            _create_sqlite(folder, migrate, key=key)
    cached = _OPEN.get(cache_key)
    if cached is None:
        cached = _OPEN[cache_key] = (_open_pg(url, key=key) if url
                                     else _open_sqlite(registry_folder(), key=key))
    return cached


def _sqlite_engine(path: Path, *, create: bool) -> sa.Engine:
    # mode=rw: a registry whose file was deleted is refused, never silently re-created.
    mode = "rwc" if create else "rw"
    # Pooled connections: a new one per transaction would pay a connect and, as the last
    # one closes, a WAL checkpoint. A deleted file is still noticed: open_registry looks for
    # it before every use.
    pool = {"poolclass": NullPool} if create else {}
    engine = sa.create_engine(f"sqlite:///file:{path}?mode={mode}&uri=true", **pool,
                              connect_args={"timeout": 60, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # Transactions are begun by hand (BEGIN IMMEDIATE), not by the driver.
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=FULL")

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        # The write lock from the first statement: a reservation's read, check and append
        # are one serial step among every process sharing the file.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


#: The files of a folder registry, each 0600 whatever the folder's mode (issue 36.4).
_PRIVATE_FILES = (DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal",
                  KEY_FILE, "registry.lock", ".lock")


def _private_files(folder: Path) -> None:
    """Make the registry's files in ``folder`` 0600 (those of older versions were 0644)."""
    for name in _PRIVATE_FILES:
        path = folder / name
        with contextlib.suppress(OSError):
            st = path.lstat()
            if st.st_uid == os.getuid() and st.st_mode & 0o077 and path.is_file():
                os.chmod(path, 0o600)


def _open_sqlite(folder: Path, *, key: bytes | None) -> Registry:
    # A handed key is checked against the registry's key check like the file's would be.
    key = key if key is not None else _read_key(folder / KEY_FILE)
    _private_files(folder)
    reg = Registry(str(folder / DB_FILE), _sqlite_engine(folder / DB_FILE, create=False), key,
                   "sqlite")
    return replace(reg, ident=run(reg, lambda conn: _check_key(conn, reg)))


def _create_sqlite(folder: Path, migrate: Migrate, *, key: bytes | None) -> None:
    """Create the SQLite registry (key, schema, migrated JSON ledgers) or refuse a half one.

    ``key`` (handed over explicitly) is the new registry's key, else a fresh one; either is
    written to its folder, where a folder registry keeps its key.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StoreError(f"privacy registry {folder} cannot be written ({exc.strerror}); set "
                         "PRIVFAIR_REGISTRY to a writable folder") from None
    db, key_file = folder / DB_FILE, folder / KEY_FILE
    with locked(folder):  # one creator; the others wait, then see both files
        if db.is_file() and key_file.is_file():
            return  # another process created it while this one waited
        if key_file.is_file():
            raise StoreError(f"privacy registry {db} is missing but its key {key_file} exists: "
                             "the database was deleted; restore it from a backup")
        if db.is_file():
            raise StoreError(f"privacy registry {db} has no key {key_file}: restore the key "
                             "from a backup (without it no ledger can be verified)")
        # Build under a temporary name and rename last, so no process ever uses a registry
        # whose JSON ledgers are not imported yet; a failed build leaves nothing behind (else
        # its key would read as a deleted database).
        tmp = folder / f".{DB_FILE}.new"
        for leftover in folder.glob(f".{DB_FILE}.new*"):
            leftover.unlink()
        try:
            key = _write_key(key_file, key=key)
            # Created 0600 before SQLite opens it: its journal files take the same mode.
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            engine = _sqlite_engine(tmp, create=True)
            reg = Registry(str(db), engine, key, "sqlite")
            run(reg, lambda conn: _create_schema(conn, reg))
            mark_imported = migrate(reg, folder)
            engine.dispose()
            # Fold the write-ahead log into the file before it is renamed (the log keeps
            # its name).
            con = sqlite3.connect(tmp)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                con.execute("PRAGMA journal_mode=DELETE")
            finally:
                con.close()
            os.rename(tmp, db)
        except BaseException:
            for path in [key_file, *folder.glob(f".{DB_FILE}.new*")]:
                path.unlink(missing_ok=True)
            raise
        mark_imported()


def _open_pg(url: str, *, key: bytes | None) -> Registry:
    driver_url = sa.engine.make_url(url).set(drivername="postgresql+psycopg")
    # No pre-ping (a round trip per transaction): a connection the server dropped fails
    # as invalidated, and run() retries it on a fresh one.
    engine = sa.create_engine(driver_url, isolation_level="SERIALIZABLE",
                              connect_args={"connect_timeout": 10})
    name = driver_url.render_as_string(hide_password=True).replace("+psycopg", "")
    path = key_path()
    probe = Registry(name, engine, b"", "postgresql")
    run(probe, lambda conn: _pg_schema(conn, probe))
    if key is not None:  # handed over: it claims a new registry, else must be its key
        handed = replace(probe, key=key)
        if not run(handed, lambda conn: _claim_key(conn, handed)):
            engine.dispose()  # its pooled connection, not left to the garbage collector
            raise StoreError(f"privacy registry {name}: the key {_key_name()} is not this "
                             "registry's key")
    elif not path.is_file():
        _first_contact(probe, path)
    reg = Registry(name, engine, key if key is not None else _read_key(path), "postgresql")
    return replace(reg, ident=run(reg, lambda conn: _check_key(conn, reg)))


def _first_contact(probe: Registry, path: Path) -> None:
    """Make the key of a registry that has none, or refuse: one key, whoever races.

    The key is written as ``registry.key.pending`` and becomes ``registry.key`` only once this
    client's key check is the one the registry recorded (one serial transaction decides);
    a client that lost the race, or comes later, keeps no key of its own and is told to copy
    the team's. The key never goes into the database: whoever can write the database
    could then recompute every chain.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pending = path.with_name(path.name + ".pending")
    with locked(path.parent):  # the processes sharing this home: one at a time
        if path.is_file():
            return
        key = pending.read_bytes() if pending.is_file() else b""
        if len(key) != 32:  # none, or a write cut short: never claimed with it
            pending.unlink(missing_ok=True)
            key = _write_key(pending)
        reg = replace(probe, key=key)
        if run(reg, lambda conn: _claim_key(conn, reg)):
            os.rename(pending, path)  # this key is the registry's (now or after a crash)
            return
        pending.unlink(missing_ok=True)
    raise StoreError(f"privacy registry {probe.name}: its key file {path} is missing (the "
                     "registry's key was made by another client); copy the team's "
                     "registry.key there or set PRIVFAIR_REGISTRY_KEY_FILE")


def _claim_key(conn: sa.Connection, reg: Registry) -> bool:
    """Record ``reg.key``'s check if the registry has none; whether it is the registry's."""
    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7417220411)")
    row = conn.execute(sa.select(META.c.value).where(META.c.name == "key_check")).first()
    if row is None:
        _check_key(conn, reg)
        return True
    return hmac.compare_digest(row.value, _key_check(reg.key))


def _pg_schema(conn: sa.Connection, reg: Registry) -> None:
    """Create the tables and triggers once."""
    # One process at a time creates the schema (concurrent CREATE TABLE IF NOT EXISTS races).
    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7417220411)")
    if conn.exec_driver_sql("SELECT to_regclass('public.meta')").scalar() is None:
        _meta.create_all(conn)
        for sql in _PG_TRIGGERS:
            conn.exec_driver_sql(sql.replace("%", "%%"))  # the driver's placeholder escape


def _create_schema(conn: sa.Connection, reg: Registry) -> None:
    _meta.create_all(conn)
    for sql in _SQLITE_TRIGGERS:
        conn.exec_driver_sql(sql)
    _check_key(conn, reg)


def _write_key(path: Path, *, key: bytes | None = None) -> bytes:
    key = key if key is not None else secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
        fh.flush()
        os.fsync(fh.fileno())
    return key


def _read_key(path: Path) -> bytes:
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"privacy registry key {path} cannot be read ({exc.strerror})") from None
    if len(key) != 32:
        raise StoreError(f"privacy registry key {path} is not a 32-byte key (damaged?)")
    return key


def mac(reg: Registry, *parts: Any) -> str:
    return hmac.new(reg.key, canonical(list(parts)), hashlib.sha256).hexdigest()


def _key_check(key: bytes) -> str:
    return hmac.new(key, _KEY_CHECK, hashlib.sha256).hexdigest()


def _check_key(conn: sa.Connection, reg: Registry) -> str:
    """Record the key's check value in a new registry; refuse another key in an old one.
    Returns the registry's id (made here for a new registry, or one of an older version)."""
    check = _key_check(reg.key)
    row = conn.execute(sa.select(META.c.value).where(META.c.name == "key_check")).first()
    if row is None:
        if conn.execute(sa.select(sa.func.count()).select_from(HEADS)).scalar():
            raise StoreError(f"privacy registry {reg.name} has ledgers but no key check "
                             "(tampered?); restore it from a backup")
        conn.execute(sa.insert(META).values(name="key_check", value=check, mac=check))
    elif not hmac.compare_digest(row.value, check):
        raise StoreError(f"privacy registry {reg.name}: the key {_key_name()} is not this "
                         "registry's key")
    return _registry_id(conn, reg)


def _registry_id(conn: sa.Connection, reg: Registry) -> str:
    row = conn.execute(sa.select(META).where(META.c.name == "registry_id")).first()
    if row is None:
        value = uuid.uuid4().hex
        conn.execute(sa.insert(META).values(name="registry_id", value=value,
                                            mac=mac(reg, "registry_id", value)))
        return value
    if not hmac.compare_digest(row.mac, mac(reg, "registry_id", row.value)):
        raise StoreError(f"privacy registry {reg.name}: its id fails its check (edited); "
                         "restore it from a backup")
    return str(row.value)


# --- transactions ---------------------------------------------------------------------------------


def run(reg: Registry, fn: Callable[[sa.Connection], T], *, queue: str | None = None) -> T:
    """``fn(conn)`` in one serializable transaction, retried when it lost a race.

    ``queue`` (a dataset id) makes transactions on one dataset wait for their turn before
    they begin, so racing writers queue instead of failing and retrying (SERIALIZABLE and
    ``BEGIN IMMEDIATE`` still guarantee the result). A registry that cannot be reached is
    refused as one ``StoreError`` line naming it.
    """
    deadline = time.monotonic() + _RETRY_FOR_S
    attempt = 0
    while True:
        try:
            with reg.engine.connect() as conn, _turn(reg, conn, queue), conn.begin():
                return fn(conn)
        except sa.exc.DBAPIError as exc:
            if _retryable(exc) and time.monotonic() < deadline:
                attempt += 1
                # Jittered backoff: racing processes should not retry in lockstep.
                time.sleep(random.uniform(0, min(0.25, 0.002 * 2 ** min(attempt, 8))))
                continue
            detail = " ".join(str(exc.orig or exc).split())[:300]
            raise StoreError(f"privacy registry {reg.name} cannot be used: {detail}") from None


@contextlib.contextmanager
def _turn(reg: Registry, conn: sa.Connection, queue: str | None) -> Iterator[None]:
    """Hold the turn of dataset ``queue`` around a transaction (nothing if None).

    SQLite: an flock beside the database (the kernel wakes the next waiter, where SQLite's
    busy handler polls and starves some). PostgreSQL: a session advisory lock taken in its
    own short transaction, so the serializable transaction's snapshot is taken after it.
    """
    if queue is None:
        yield
    elif reg.dialect == "sqlite":
        with locked_file(Path(reg.name).with_suffix(".lock")):
            yield
    else:
        # In autocommit on the driver's connection: one round trip each, outside any
        # transaction (the serializable one begins after the lock is held).
        raw = conn.connection.dbapi_connection
        if raw is None:  # SQLAlchemy detaches the driver's connection only once invalidated
            raise sa.exc.ResourceClosedError("the registry's connection was invalidated")
        raw.autocommit = True
        try:
            raw.execute("SELECT pg_advisory_lock(7417, hashtext(%s))", [queue])
            try:
                raw.autocommit = False
                yield
            finally:
                raw.autocommit = True
                raw.execute("SELECT pg_advisory_unlock(7417, hashtext(%s))", [queue])
        finally:
            raw.autocommit = False


def _retryable(exc: sa.exc.DBAPIError) -> bool:
    if exc.connection_invalidated:  # a pooled connection the server had closed
        return True
    state = getattr(exc.orig, "sqlstate", None)
    if state in _RETRY_SQLSTATES:
        return True
    return "database is locked" in str(exc.orig)
