"""``privfair release ...`` in this process with wall-clock marks (``cold_path.py --profile``).

Marks (seconds since this interpreter started running this script): privfair imported, each
flow module imported, the wait for the temporary Prefect server, each pipeline stage as it
starts (the CLI's progress callback, fed by the flow or the in-process runner), the command's
end and the end of the ``atexit`` handlers (Prefect's log/event flush, the server's stop).
Written as JSON to ``$PRIVFAIR_TIMELINE``. Not a test: no assertion, only the record.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time

T0 = time.perf_counter()
MARKS: list[tuple[str, float]] = []


def mark(what: str) -> None:
    MARKS.append((what, round(time.perf_counter() - T0, 3)))


def _dump() -> None:
    mark("exit (after every atexit handler)")
    with open(os.environ["PRIVFAIR_TIMELINE"], "w") as out:
        json.dump(MARKS, out)


atexit.register(_dump)  # registered first, so it runs after every other handler

import privfair.cli as cli  # noqa: E402

mark("privfair.cli imported")


class _Bar:
    """Stands in for the CLI's progress bar: marks each stage as it starts."""

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        mark("command's work done")

    def add_task(self, description: str, **kw: object) -> int:
        self.last = description
        mark(f"stage {description}")
        return 0

    def update(self, task: int, *, description: str, completed: float) -> None:
        if description != self.last:
            self.last = description
            mark(f"stage {description}")


_start = cli._start_temporary_server


def _timed_start() -> object:
    from flows import temporary_server

    mark("imported flows.temporary_server")
    wait = temporary_server.TemporaryServer.wait

    def timed_wait(self: object, **kw: object) -> None:
        mark("wait for the temporary server: start")
        wait(self, **kw)
        mark("wait for the temporary server: done")

    temporary_server.TemporaryServer.wait = timed_wait
    return _start()


cli._progress = _Bar
cli._start_temporary_server = _timed_start
code = cli.main(sys.argv[1:])
mark("command returned")
sys.exit(code)
