"""A throw-away PostgreSQL server for the registry tests and benchmark.

``initdb`` and ``pg_ctl`` come from PATH (or ``/usr/lib/postgresql/*/bin``). A cluster refuses
to run as root, so under root it runs as the ``postgres`` OS user (created if missing) via
``runuser``; its data folder is a fresh temporary folder owned by that user, and it listens on
127.0.0.1 at a free port with trust authentication.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def find_initdb() -> Path | None:
    found = shutil.which("initdb") or next(iter(sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)), None)
    return Path(found).resolve() if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres() -> list[str]:
    """The command prefix that runs a server command as a non-root user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return ["runuser", "-u", "postgres", "--"]


@dataclass(frozen=True)
class PgServer:
    folder: Path
    bindir: Path
    port: int
    prefix: tuple[str, ...]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run([*self.prefix, str(self.bindir / "pg_ctl"), "-D",
                        str(self.folder / "data"), "-m", "immediate", "stop"],
                       capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def start(*, durable: bool = False) -> PgServer:
    """Start a server (``durable``: with fsync, as in production; else faster, for tests)."""
    initdb = find_initdb()
    if initdb is None:
        raise FileNotFoundError("initdb not found (PostgreSQL server binaries not installed)")
    prefix = tuple(_as_postgres())
    # Under /tmp itself: a test's temporary folder (0700, root's) is closed to the server user.
    folder = Path(tempfile.mkdtemp(prefix="privfair-pg-", dir="/tmp"))
    if prefix:
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    subprocess.run([*prefix, str(initdb), "-D", str(data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8", "--no-sync"], check=True, capture_output=True)
    port = _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {folder} -c max_connections=200"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    subprocess.run([*prefix, str(initdb.parent / "pg_ctl"), "-D", str(data), "-l",
                    str(folder / "server.log"), "-o", options, "-w", "-t", "60", "start"],
                   check=True, capture_output=True)
    return PgServer(folder, initdb.parent, port, prefix)
