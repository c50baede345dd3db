"""The Dask counting engine's connection rules (issue 21.6).

Per-partition counts are exact (private) until the driver adds noise, so they may only travel
to a remote scheduler encrypted: a non-loopback ``dask_address`` must be ``tls://`` with
certificates from Dask's config (``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``,
``…__TLS__CLIENT__CERT``, ``…__TLS__CLIENT__KEY``). The address is checked (scheme, TLS
config, a 2-s connect) before the reservation, and the LocalCluster's scratch folder is a
0700 folder inside the private work folder, not a world-readable ``dask-scratch-space``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from privfair.core.errors import ReleaseInputError

CONNECT_TIMEOUT_S = 2.0
TLS_KEYS = ("ca-file", "client.cert", "client.key")

#: glibc malloc settings for the workers of privfair's LocalCluster (and advice for a
#: publisher's own workers). Dask's default ``MALLOC_TRIM_THRESHOLD_`` of 64 KiB also turns
#: off glibc's adaptive mmap threshold, so every array above 128 KiB is a fresh mapping
#: whose pages fault in on first touch: counting a 1.56M-row part took 0.31 s instead of
#: 0.17 s, encoding it 0.55 s instead of 0.43 s. Arrays below 32 MiB come from the heap,
#: and free memory beyond 64 MiB at its top goes back to the system: a bound per worker
#: that does not grow with the rows.
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 32 * 2**20, "MALLOC_TRIM_THRESHOLD_": 64 * 2**20}


def worker_environ() -> dict[str, Any]:
    """Dask's environment for spawned workers (``distributed.nanny.pre-spawn-environ``)
    with :data:`WORKER_MALLOC`: set it as that key when starting a cluster."""
    import dask

    return {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC}


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def _tls_config() -> dict[str, Any]:
    import dask

    return {key: dask.config.get(f"distributed.comm.tls.{key}", None) for key in TLS_KEYS}


def parse_address(address: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a scheduler address; a bare ``host:port`` is ``tcp``."""
    text = address if "://" in address else f"tcp://{address}"
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if parts.scheme not in ("tcp", "tls") or not host or not port:
        raise ReleaseInputError(f"dask_address {address!r}: expected tls://host:port "
                                "(or tcp:// to this machine)")
    return parts.scheme, host, port


def check_dask_address(address: str | None) -> None:
    """Refuse, in one line and before anything is charged, an address that would send exact
    counts unencrypted off this machine, lacks TLS certificates, or does not answer."""
    if not address or address.startswith("inproc://"):  # this process: nothing travels
        return
    scheme, host, port = parse_address(address)
    if scheme == "tcp" and not _is_loopback(host):
        raise ReleaseInputError(f"dask_address {address!r}: exact counts may not travel over "
                                "plain TCP to another machine; use tls:// with certificates "
                                "in DASK_DISTRIBUTED__COMM__TLS__*")
    if scheme == "tls":
        missing = [k for k, v in _tls_config().items() if not v]
        if missing:
            env = ", ".join("DASK_DISTRIBUTED__COMM__TLS__"
                            + k.upper().replace("-", "_").replace(".", "__") for k in missing)
            raise ReleaseInputError(f"dask_address {address!r}: tls:// needs {env}")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ReleaseInputError(f"dask_address {address!r}: no scheduler answers at "
                                f"{host}:{port} ({exc.strerror or type(exc).__name__})"
                                ) from None


def security(address: str) -> Any:
    """distributed's ``Security`` for ``address``: TLS from Dask's config for ``tls://``."""
    from distributed.security import Security

    if address.startswith("inproc://") or parse_address(address)[0] != "tls":
        return Security()
    tls = _tls_config()
    return Security(tls_ca_file=tls["ca-file"], tls_client_cert=tls["client.cert"],
                    tls_client_key=tls["client.key"], require_encryption=True)


def scratch_dir(work_dir: str | Path) -> Path:
    """The LocalCluster's scratch folder: ``<work_dir>/dask-scratch``, created 0700."""
    from privfair.store.files import private_dir

    folder = Path(work_dir) / "dask-scratch"
    private_dir(folder)
    return folder


def _private_worker_dirs(dask_worker: Any = None) -> None:
    """Make a worker's scratch folder (where it spills results under memory pressure) and its
    ``dask-scratch-space`` parent 0700 (runs on the worker)."""
    if dask_worker is None:  # pragma: no cover - called by the plugin or client.run
        return
    folder = Path(dask_worker.local_directory)
    paths = [folder, folder.parent] if folder.parent.name == "dask-scratch-space" else [folder]
    for path in paths:
        with contextlib.suppress(OSError):  # a shared parent not ours: the worker's is
            os.chmod(path, 0o700)


def keep_scratch_private(client: Any) -> None:
    """Every worker of ``client``'s cluster, present and future, keeps its scratch folder
    0700: exact per-part tables never spill to a folder others can read."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class PrivateScratch(WorkerPlugin):
        name = "privfair-private-scratch"

        def setup(self, worker: Any) -> None:
            _private_worker_dirs(worker)

    client.register_plugin(PrivateScratch(), name=PrivateScratch.name)
