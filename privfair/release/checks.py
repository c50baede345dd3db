"""Data-free refusals of a release request (issue 10.4, 10.9, 10.10), run by
each kind's ``check`` (:mod:`privfair.release.request`) before the run's ρ is reserved.

Numbers that break the accounting (ε that overflows or vanishes, δ that underflows), TOT's η
without TOT, a plan whose marginals cannot fit in memory (estimated from the declared
domain, naming the cliques at fault), store and work-folder names that cannot work, and a
catalog another process holds: each is refused with one line, before any private read.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from privfair.contracts.fields import plain_decimal
from privfair.contracts.schema import Contract
from privfair.core.domain import Domain
from privfair.core.errors import ContractError, PrivfairError, ReleaseInputError
from privfair.store.files import StoreError
from privfair.store.witness import state_folder

#: Bytes held per marginal cell: true counts, noisy counts, model potentials, a working copy.
BYTES_PER_CELL = 32
#: Bytes per synthetic cell while sampling and decoding (codes, labels, a working copy).
BYTES_PER_SAMPLED_CELL = 24
#: Store file names (and suffixes) that a dataset folder may not take.
RESERVED_NAMES = ("catalog.duckdb", "lifetime_ledger.json", "releases")
RESERVED_SUFFIXES = (".duckdb", ".wal", ".lock", ".json", ".tmp")
_ODD_PATH = re.compile(r"[?*\[\]\x00-\x1f\x7f]")


class PlanTooLargeError(PrivfairError, ValueError):
    """The plan cannot fit in memory; the message names the cliques or the parameter."""


def memory_limit() -> int:
    """Bytes a plan may use: ``$PRIVFAIR_MEMORY_GB``, else half the machine's memory."""
    env = os.environ.get("PRIVFAIR_MEMORY_GB")
    if env:
        try:  # the one strict reading: float() would take 1_0 as 10 GiB (issue 45.4)
            gib = plain_decimal(env)
        except ValueError as exc:
            raise ReleaseInputError(f"PRIVFAIR_MEMORY_GB: {exc}") from None
        if not gib > 0:
            raise ReleaseInputError(f"PRIVFAIR_MEMORY_GB: expected a number of GiB > 0, got "
                                    f"{env!r}")
        return int(gib * 2**30)
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


def check_eta_with_tot(*, eta: float | None, fairness_transform: str) -> None:
    """Refuse η without the TOT transform. (ε, δ and η themselves are checked once, when the
    parameters are parsed: :mod:`privfair.contracts.fields`.)"""
    if eta is not None and fairness_transform != "tot":
        raise ValueError("eta: given without --fairness tot; expected eta only with the TOT "
                         "transform")


def check_memory(domain: Domain, *, n_rows: int | None, limit: int | None = None) -> None:
    """Refuse a plan whose pair marginals or synthetic table cannot fit in ``limit`` bytes."""
    limit = memory_limit() if limit is None else limit
    sizes = {a: int(domain.size(a)) for a in domain}
    heavy = sorted(((sizes[a] * sizes[b], a, b)
                    for a, b in itertools.combinations(sizes, 2)
                    if sizes[a] * sizes[b] * BYTES_PER_CELL > limit), reverse=True)
    if heavy:
        named = ", ".join(f"({a}, {b}): {cells:.3g} cells" for cells, a, b in heavy[:3])
        more = f" and {len(heavy) - 3} more" if len(heavy) > 3 else ""
        raise PlanTooLargeError(
            f"plan needs about {heavy[0][0] * BYTES_PER_CELL / 2**30:.3g} GiB for clique "
            f"{named}{more}, over the {limit / 2**30:.3g} GiB limit (PRIVFAIR_MEMORY_GB); "
            "coarsen or drop these columns")
    if n_rows is not None and n_rows * len(sizes) * BYTES_PER_SAMPLED_CELL > limit:
        raise PlanTooLargeError(
            f"n_rows: {n_rows:g} rows of {len(sizes)} columns need about "
            f"{n_rows * len(sizes) * BYTES_PER_SAMPLED_CELL / 2**30:.3g} GiB, over the "
            f"{limit / 2**30:.3g} GiB limit (PRIVFAIR_MEMORY_GB); ask for fewer rows")


def check_folders(*, out: str, store: Path, contract: Contract, work_dir: str) -> None:
    """Store and work-folder names that cannot work, an unwritable dataset folder, a held
    catalog."""
    if _ODD_PATH.search(out):
        raise StoreError(f"--out {out!r} holds a wildcard or control character; expected a "
                         "plain folder path")
    name = contract.name
    if name.lower() in RESERVED_NAMES or name.lower().endswith(RESERVED_SUFFIXES):
        raise StoreError(f"contract name {name!r} is reserved by the release store; choose "
                         "another name")
    folder = store / name
    if folder.exists() and (not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK)):
        raise StoreError(f"dataset folder {folder} is not a writable folder; fix its "
                         "permissions or choose another --out")
    work = Path(work_dir).expanduser()
    probe = work
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        what = "is" if probe == work else f"has a parent {probe} that is"
        raise StoreError(f"--work-dir {work} {what} a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"--work-dir {work}: folder {probe} is not writable")
    check_catalog_file(store)
    if (store / "catalog.duckdb").is_file():
        from privfair.store.catalog import catalog

        with catalog(store, read_only=True, wait=1.0):
            pass


# --- shared by every kind's check: names, folders, the request's files -------------------

DATASET_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def check_store_writable(store: Path) -> None:
    """Refuse a store that cannot be created or written, without creating anything."""
    probe = store
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is" if probe == store else f"has a parent {probe} that is"
        raise StoreError(f"release store {store} {what} a file, not a folder; choose another --out")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"release store {store}: folder {probe} is not writable")


def resolve_data(params: Any, contract: Contract, *,
                 dataset: bool = False) -> tuple[Path, str]:
    """The data file (source ``"file"``), the contract's embedded dataset (``"embedded"``)
    or, with ``dataset``, a folder of Parquet files (source ``"dataset"``)."""
    if params.data is None:
        from privfair.contracts.datasets import embedded_dataset_for

        embedded = embedded_dataset_for(contract.name)
        if embedded is None:
            raise ReleaseInputError(f"contract {contract.name!r} describes no embedded "
                                    "dataset; pass --data")
        return embedded, "embedded"
    path = Path(params.data).expanduser()
    if not path.exists():
        raise ReleaseInputError(f"data file {path} does not exist")
    if dataset and path.is_dir():
        return path.resolve(), "dataset"
    if not path.is_file():
        raise ReleaseInputError(f"data path {path} is not a file")
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise ReleaseInputError(
            f"data file {path}: unsupported extension {path.suffix!r}; expected .csv or .parquet")
    return path.resolve(), "file"


def resolve_contract(params: Any) -> Path:
    """The contract file of a request: a path, a packaged contract's name, or Adult's."""
    from privfair.contracts.datasets import default_contract_path, resolve_contract_name

    if params.contract is None:
        return default_contract_path()
    try:
        return resolve_contract_name(params.contract)
    except ValueError as exc:  # a bare name that is neither a file nor packaged
        raise ContractError(str(exc)) from None


# --- every kind, before the reservation: the run's folders (issue 36) ---------------------

#: Bytes 8-11 of every DuckDB database file.
DUCKDB_MAGIC = b"DUCK"


#: The longest file name (bytes) and path the release folders may use: Linux's NAME_MAX and
#: PATH_MAX, so that a long name is refused naming its flag, not as a raw OS error.
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 4096


def resolved_folder(path: str | Path, flag: str) -> Path:
    """``path`` made absolute (symbolic links followed); one line naming ``flag`` when it
    cannot be (a symbolic link that points to itself, a name too long for the file
    system)."""
    text = str(path)
    longest = max((len(os.fsencode(part)) for part in Path(text).parts), default=0)
    if longest > NAME_MAX_BYTES or len(os.fsencode(text)) > PATH_MAX_BYTES:
        raise StoreError(f"{flag} {text[:40]}...: a folder name of {longest} bytes (path "
                         f"{len(os.fsencode(text))}); file systems take names of at most "
                         f"{NAME_MAX_BYTES} bytes and paths of {PATH_MAX_BYTES}")
    try:
        return Path(path).expanduser().resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise StoreError(f"{flag} {path}: cannot be resolved (a symbolic link loop?): "
                         f"{' '.join(str(exc).split())}") from None


def check_catalog_file(store: Path) -> None:
    """Refuse a ``catalog.duckdb`` that is not a DuckDB database at all (truncated,
    overwritten), at once, rather than after the catalog's wait for another process."""
    path = store / "catalog.duckdb"
    if not path.is_file():
        return
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except OSError as exc:
        raise StoreError(f"release catalog {path} cannot be read ({exc.strerror})") from None
    if len(head) < 12 or head[8:12] != DUCKDB_MAGIC:
        raise StoreError(f"release catalog {path} is not a DuckDB database (damaged or "
                         "overwritten); restore it from a backup or move it away, then run "
                         "`privfair store check --repair`")


def probe_folder(folder: Path, flag: str) -> None:
    """Refuse a folder that cannot be created or written, by creating what is missing of it
    and a file in it, then removing what the probe made (nothing is left behind, also in
    ``--dry-run``). Root passes every permission check, so only trying tells."""
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        if probe.is_symlink():
            raise StoreError(f"{flag} {folder}: {probe} is a symbolic link to nothing "
                             f"({os.readlink(probe)}); expected a folder")
        if probe.parent == probe:
            break
        missing.append(probe)
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is" if probe == folder else f"has a parent {probe} that is"
        raise StoreError(f"{flag} {folder} {what} a file, not a folder")
    try:
        for made in reversed(missing):
            made.mkdir(mode=0o700)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".privfair-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise StoreError(f"{flag} {folder}: cannot be created or written ({why})") from None
    finally:
        for made in missing:  # deepest first
            with contextlib.suppress(OSError):
                made.rmdir()


def check_run_folders(*, out: str, work_dir: str, dataset: str) -> None:
    """Every kind's folder checks before the reservation (and in ``--dry-run``): the store
    and the work folder resolve, the work folder is not the store nor inside it (it holds
    private staging; the store is published), both can be created and written; the dataset's name is not one the store
    reserves; the catalog, if any, is a DuckDB file."""
    store = resolved_folder(out, "--out")
    work = resolved_folder(work_dir, "--work-dir")
    if store == work or store in work.parents:
        where = "is" if store == work else "is inside"
        raise StoreError(f"--work-dir {work_dir} {where} the release store --out {out}; "
                         "expected separate folders (the work folder holds private staging)")
    if dataset.lower() in RESERVED_NAMES or dataset.lower().endswith(RESERVED_SUFFIXES):
        raise StoreError(f"contract name {dataset!r} is reserved by the release store; choose "
                         "another name")
    probe_folder(store, "--out")
    probe_folder(work, "--work-dir")
    check_state_folder()
    check_catalog_file(store)


def check_state_folder() -> None:
    """The client's state folder (its registry witness, its slot records) is a writable
    folder or can be made one: refused naming ``PRIVFAIR_STATE_HOME`` before the
    reservation, where a raw ``File exists`` came after it."""
    state = state_folder()
    probe = state
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        what = "is" if probe == state else f"has a parent {probe} that is"
        raise StoreError(f"state folder {state} (PRIVFAIR_STATE_HOME, else XDG_STATE_HOME) "
                         f"{what} a file, not a folder; point PRIVFAIR_STATE_HOME at a folder")
    probe_folder(state, "state folder (PRIVFAIR_STATE_HOME)")
