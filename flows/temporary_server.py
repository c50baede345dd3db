"""A temporary Prefect API server for one ``privfair`` command, started before Prefect loads.

Without ``PREFECT_API_URL`` Prefect starts its own temporary ("ephemeral") server the first
time a flow needs the API: the command first imports ``prefect.server.api.server`` in its own
process (the whole server stack, ~4 s on a 2-core machine, used only to spawn a subprocess),
then spawns the server and waits for it (~5 s more). Nothing overlaps.

:func:`start` spawns the same server process (uvicorn on Prefect's app factory, with the
environment Prefect gives its ephemeral server: no UI, no background services) as soon as
the command knows it will run a flow and no API is configured (``PREFECT_API_URL`` in the
environment or the active profile). The server boots while the command imports Prefect and
the flow and checks its input; :meth:`TemporaryServer.serving` then waits only for what is
left and points Prefect at it for the run (or stops it, if Prefect's settings name an API
after all, e.g. in a ``prefect.toml``).

The server lives in its own session, so a Ctrl-C at the terminal reaches the command, which
can still report the run's final state to the API, and not the server; it is stopped when the
command exits (``atexit``), and gets SIGTERM if the command dies without exiting (Linux
``PR_SET_PDEATHSIG``, so even a SIGKILL leaves no orphaned server).

This module does not import Prefect (that is the point); ``tasks``/``flows`` are the only
places that do.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import types
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: Seconds to wait for the server when ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` is
#: unset (Prefect's own default, 20 s, timed out on a 2-core machine at load 8: issue 45.3).
DEFAULT_STARTUP_TIMEOUT_S = 120.0
#: The setting both servers read: this module's, and the one Prefect starts itself.
STARTUP_TIMEOUT_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
#: A wait for the server longer than this many seconds is said on stderr, with its bound.
SAY_WAIT_AFTER_S = 5.0
#: How Prefect's own temporary server says it did not start (prefect/server/api/server.py).
PREFECT_STARTUP_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"


class ServerStartError(RuntimeError):
    """The temporary Prefect API server did not start (exited, or did not answer in time)."""


def startup_timeout_s() -> float:
    """The stated bound on a temporary server's start: the setting, else the default.

    Also sets the default in the environment, so a server Prefect starts itself (a process
    that imported Prefect first) gets the same bound instead of Prefect's 20 s.
    """
    text = os.environ.get(STARTUP_TIMEOUT_SETTING, "").strip()
    try:
        value = float(text) if text else DEFAULT_STARTUP_TIMEOUT_S
    except ValueError:
        value = math.nan
    if not 0 < value < 1e6:  # NaN included
        raise ServerStartError(f"{STARTUP_TIMEOUT_SETTING} must be a number of seconds in "
                               f"(0, 1e6), got {text!r}")
    os.environ.setdefault(STARTUP_TIMEOUT_SETTING, f"{value:g}")
    return value


def startup_failure_line(exc: BaseException) -> str | None:
    """One line for a temporary server that did not start (this module's or Prefect's own),
    found anywhere in ``exc``'s chain; None for any other error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if isinstance(current, ServerStartError):
            return " ".join(text.split())
        if PREFECT_STARTUP_TIMEOUT in text:
            bound = os.environ.get(STARTUP_TIMEOUT_SETTING) or "20"
            return (f"the temporary Prefect API server did not answer within {bound} s "
                    f"({STARTUP_TIMEOUT_SETTING}; the machine may be busy): {_FIX}")
        current = current.__cause__ or current.__context__
    return None


_FIX = (f"run again, raise {STARTUP_TIMEOUT_SETTING}, set PREFECT_API_URL to a running "
        "server (`prefect server start`), or use --no-prefect")



@dataclass
class TemporaryServer:
    """A running temporary server: its process, API URL and (private) log file."""

    process: subprocess.Popen[bytes]
    api_url: str
    log: IO[bytes]
    #: Spawns the server again on the same port; None: no second try.
    respawn: Callable[[], subprocess.Popen[bytes]] | None = None
    #: Starts left after an early exit: two servers that start at once on one fresh
    #: PREFECT_HOME race to create its database and the loser exits with code 3 (no
    #: output); on a second try the database is there.
    tries_left: int = 2

    def wait(self, *, timeout: float | None = None) -> None:
        """Block until the API answers ``/health``; one clear error if it never does."""
        if timeout is None:
            timeout = startup_timeout_s()
        started = time.monotonic()
        deadline, said = started + timeout, False
        while True:
            if self.process.poll() is not None:
                if (self.respawn is None or self.tries_left <= 0
                        or time.monotonic() >= deadline):
                    break
                self.tries_left -= 1
                time.sleep(0.5)
                self.process = self.respawn()
                continue
            with contextlib.suppress(OSError, urllib.error.URLError), \
                    urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                if response.status == 200:
                    return
            now = time.monotonic()
            if now >= deadline:
                break
            if not said and now - started >= SAY_WAIT_AFTER_S:
                said = True  # every wait says what it waits for, and for how long at most
                print(f"privfair: waiting for the temporary Prefect API server to start (up "
                      f"to {timeout:g} s, {STARTUP_TIMEOUT_SETTING})", file=sys.stderr,
                      flush=True)
            time.sleep(0.05)
        code = self.process.poll()
        self.stop()
        what = (f"exited with code {code} ({self._log_tail()})" if code is not None
                else f"did not answer within {timeout:g} s ({STARTUP_TIMEOUT_SETTING}; the "
                     "machine may be busy)")
        raise ServerStartError(f"the temporary Prefect API server {what}: {_FIX}")

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Prefect's API is this server for the ``with`` body (after :meth:`wait`).

        If Prefect's settings already name an API (a source :func:`start` does not read),
        that API is used and this server is stopped.
        """
        from prefect.settings import (
            PREFECT_API_URL,
            PREFECT_UI_URL,
            get_current_settings,
            temporary_settings,
        )

        if get_current_settings().api.url:
            self.stop()
            yield
            return
        self.wait()
        # No UI is served and the server goes away with the command: no run link to record.
        with temporary_settings(updates={PREFECT_API_URL: self.api_url, PREFECT_UI_URL: ""}):
            yield

    def stop(self) -> None:
        """Terminate the server and reap it (idempotent)."""
        stop_process(self.process)
        with contextlib.suppress(OSError):
            self.log.close()

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.log.seek(0)
            lines = self.log.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else "no output"
        return "no output"


def stop_process(process: subprocess.Popen[bytes], *, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; always reaped (idempotent)."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start() -> TemporaryServer | None:
    """Spawn the server and point this process's Prefect at it; None when not applicable.

    Not applicable when ``PREFECT_API_URL`` is set in the environment or the active Prefect
    profile (the operator's server is used), or when Prefect is already imported here (a
    caller that set Prefect up itself, e.g. a test harness; without an API, Prefect then
    starts its own temporary server as usual).
    """
    if configured_api_url() or "prefect" in sys.modules:
        return None
    check_prefect_home()
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # kept open for the server's lifetime (closed by stop()): its stderr, for a failure line
    log = tempfile.TemporaryFile(prefix="privfair-prefect-server-")  # noqa: SIM115
    # The command and environment Prefect's SubprocessASGIServer uses for its ephemeral
    # server (prefect/server/api/server.py): no UI, no background services.
    app_dir = str(Path(next(iter(spec.submodule_search_locations))).parent)

    def spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", app_dir,
             "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "error", "--lifespan", "on"],
            env={"PREFECT_SERVER_ANALYTICS_ENABLED": "false", **os.environ,
                 "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                 "PREFECT__SERVER_FINAL": "1"},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True, preexec_fn=_die_with_parent(os.getpid()))

    server = TemporaryServer(spawn(), f"http://127.0.0.1:{port}/api", log, respawn=spawn)
    atexit.register(server.stop)  # registered before Prefect's handlers: runs after them
    return server


def check_prefect_home() -> None:
    """Refuse, naming it, a ``PREFECT_HOME`` the server cannot write its database in: it
    otherwise exits with code 3 and no output (a file, a read-only folder)."""
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    if home.exists() and not home.is_dir():
        raise ValueError(f"PREFECT_HOME {home} is not a folder; point PREFECT_HOME at a "
                         "writable folder, or use --no-prefect")
    if home.is_dir() and not os.access(home, os.W_OK):
        raise ValueError(f"PREFECT_HOME {home} is not writable (read-only or not yours); "
                         "point PREFECT_HOME at a writable folder, or use --no-prefect")


def configured_api_url() -> str | None:
    """``PREFECT_API_URL`` from the environment or the active profile (no Prefect import)."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]

    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    return (profiles.get("profiles", {}).get(active) or {}).get("PREFECT_API_URL") or None


def prefect_server_dies_with_this_process() -> None:
    """When Prefect starts its own temporary server (Prefect imported before :func:`start`),
    make that server get SIGTERM when this process dies, even by SIGKILL during start-up, so
    a killed run leaves no orphaned server (issue 10.11). Elsewhere Prefect's own atexit stop
    remains."""
    death_signal = _die_with_parent(os.getpid())
    if death_signal is None:
        return
    from prefect.server.api import server

    def popen(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("preexec_fn", death_signal)
        return subprocess.Popen(*args, **kwargs)

    if not isinstance(server.subprocess, types.SimpleNamespace):
        # The server module's `subprocess` replaced by a namespace whose Popen dies with us.
        server.subprocess = types.SimpleNamespace(  # type: ignore[assignment]
            **{**vars(subprocess), "Popen": popen})


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """``preexec_fn``: SIGTERM the child when this process dies (Linux only).

    The kernel sends it when the *thread* that spawned the child ends, so spawn from the main
    thread.
    """
    if not sys.platform.startswith("linux"):
        return None

    libc = ctypes.CDLL(None, use_errno=True)

    def set_death_signal() -> None:
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return set_death_signal
