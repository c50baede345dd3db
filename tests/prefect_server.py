"""A real ``prefect server start`` for the slow operations tests.

The server runs in a subprocess with its own ``PREFECT_HOME`` and port, its scheduler polling
every second. :func:`running_server` skips the calling test, with the server's last log lines
as the reason, only when no server can start here; every other failure fails the test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flows.temporary_server import stop_process

ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uvicorn_children(pid: int) -> list[int]:
    """Process ids of the API servers (uvicorn) whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"uvicorn" in cmd:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def poll(probe: Callable[[], Any], *, until: Callable[[Any], bool], timeout: float,
         every: float = 1.0) -> Any:
    """Call ``probe`` until ``until(result)`` or ``timeout`` seconds; the last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if until(result) or time.monotonic() >= deadline:
            return result
        time.sleep(every)


def server_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({
        "PREFECT_HOME": str(home), "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",
    })
    return env


@dataclass
class Server:
    url: str
    env: dict[str, str]
    log: Path

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def python(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def api(self, method: str, path: str, **kw: Any) -> Any:
        import httpx

        response = httpx.request(method, f"{self.url}{path}", timeout=30, **kw)
        response.raise_for_status()
        return response.json()

    def scheduled_runs(self, deployment: str) -> list[dict[str, Any]]:
        flow, name = deployment.split("/")
        dep = self.api("GET", f"/deployments/name/{flow}/{name}")
        return self.api("POST", "/flow_runs/filter", json={
            "deployments": {"id": {"any_": [dep["id"]]}},
            "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}})

    def wait_for_scheduled_runs(self, deployment: str, *, timeout: float,
                                at_least: int = 1) -> list[dict[str, Any]]:
        return poll(lambda: self.scheduled_runs(deployment),
                    until=lambda runs: len(runs) >= at_least, timeout=timeout)


@contextlib.contextmanager
def running_server(tmp_path: Path) -> Iterator[Server]:
    """``prefect server start`` on a free port; stopped (and reaped) on exit."""
    home, port = tmp_path / "prefect-home", free_port()
    home.mkdir()
    env = server_env(home, port)
    log = tmp_path / "server.log"
    server = Server(url=env["PREFECT_API_URL"], env=env, log=log)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port), "--no-ui"],
            cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        if not _wait_healthy(server, proc):
            reason = (f"no Prefect server could start here (exit {proc.poll()}): "
                      f"{server.log_tail(5)!r}")
            print(reason, file=sys.stderr)
            pytest.skip(reason)
        yield server
    finally:
        stop_process(proc, timeout=20)


def _wait_healthy(server: Server, proc: subprocess.Popen[bytes]) -> bool:
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False
