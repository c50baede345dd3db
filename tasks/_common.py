"""Shared task settings: result storage, retry policy and the in-process progress hook."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from privfair.core.errors import PrivfairError

#: Default Prefect result storage; the flow re-points cached tasks at its work_dir.
RESULTS_DIR = Path(os.environ.get("PRIVFAIR_WORK_DIR", ".privfair")).resolve() / "prefect-results"

#: Callables ``(stage, fraction)`` told about progress in this process (the CLI's rich bar).
PROGRESS_LISTENERS: list[Callable[[str, float], None]] = []


def report(stage: str, fraction: float) -> None:
    for listener in list(PROGRESS_LISTENERS):
        listener(stage, fraction)


def retry_on_io_error(task: Any, task_run: Any, state: Any) -> bool:
    """Retry transient I/O failures only; bad input fails at once."""
    exc = state.data
    return isinstance(exc, OSError) and not isinstance(exc, PrivfairError)


class ProgressArtifact:
    """A Prefect progress artifact, updated at most every 2 % or every second.

    In-process listeners hear the same progress mapped onto ``span`` of the whole run.
    """

    def __init__(self, stage: str, *, total: int, description: str,
                 span: tuple[float, float] = (0.0, 1.0)) -> None:
        from prefect.artifacts import create_progress_artifact

        self.stage, self.total, self.span = stage, max(int(total), 1), span
        # Prefect's async_dispatch types both outcomes; from a sync task it returns the id.
        self.id = cast(UUID, create_progress_artifact(progress=0.0, description=description))
        self._last = (0.0, time.monotonic())

    def update(self, done: int) -> None:
        from prefect.artifacts import update_progress_artifact

        pct = 100.0 * min(done / self.total, 1.0)
        report(self.stage, self.span[0] + (self.span[1] - self.span[0]) * pct / 100)
        if pct - self._last[0] >= 2.0 or time.monotonic() - self._last[1] >= 1.0:
            update_progress_artifact(artifact_id=self.id, progress=pct)
            self._last = (pct, time.monotonic())

    def finish(self) -> None:
        from prefect.artifacts import update_progress_artifact

        update_progress_artifact(artifact_id=self.id, progress=100.0)
        report(self.stage, self.span[1])
