"""The Prefect driver of the release protocol: each declared stage runs as a task.

:class:`PrefectDriver` is what :func:`privfair.release.protocol.run_release` calls inside a
flow run (``flows/kinds.py``). It adds what an operator needs around the same stage list that
``--no-prefect`` runs in-process: the dataset's one-slot concurrency limit (waiting is
logged), stage logs in public terms, a progress artifact, the run record (flow run id and UI
link) in the manifest, and the release's artifacts. Stages that read private data or draw
noise are never retried and persist no result; a retry of those would be a new, charged run.

Given a Dask scheduler address (``engine="dask"``, ``dask_address``), the driver submits the
same stage tasks through prefect-dask's ``DaskTaskRunner`` connected to that scheduler (TLS
from Dask's config for ``tls://``, checked as before the reservation); a stage's own
per-partition tasks then run on the same cluster from the worker that runs the stage
(:func:`privfair.release.tabular.private.dask_client`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privfair.core.errors import ReleaseInputError
from privfair.release.protocol import ReleaseKind, RunContext, Stage, State, Written
from privfair.release.tabular.dask_engine import check_dask_address, security
from tasks import ops
from tasks._common import report


def _stage_task(stage: Stage) -> Any:
    # No retries and no persisted result for any stage: private ones would read or draw
    # again, and post-noise ones are cheap next to a run (their inputs are file references
    # in the run's 0700 work area, never private rows).
    def body(context: RunContext, state: State) -> Mapping[str, Any]:
        return stage.run(context, state)

    return task(name=stage.name.replace(" ", "-"), retries=0, cache_policy=NO_CACHE,
                persist_result=False, log_prints=False)(body)


class PrefectDriver:
    """Runs a release's stages as Prefect tasks of the current flow run."""

    def __init__(self, *, dask_address: str | None = None) -> None:
        self.orchestrator = ops.orchestrator_record()
        self._progress_id: Any = None
        self.dask_address = dask_address
        self._runner: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Stages running on Dask workers carry the driver (progress, logs), not its client.
        return {**self.__dict__, "_runner": None}

    @contextlib.contextmanager
    def task_runner(self) -> Iterator[None]:
        """With a Dask address, stages run through a ``DaskTaskRunner`` on that cluster."""
        if not self.dask_address:
            yield
            return
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:

            raise ReleaseInputError("a Prefect release on a Dask cluster needs prefect-dask: "
                                    "pip install 'privfair[dask]'") from None

        check_dask_address(self.dask_address)
        runner = DaskTaskRunner(address=self.dask_address,
                                client_kwargs={"security": security(self.dask_address)})
        with runner:
            self._runner = runner
            try:
                yield
            finally:
                self._runner = None

    @contextlib.contextmanager
    def slot(self, dataset: str) -> Iterator[None]:
        # a wait for the slot, and a dead holder's slot freed, reach the terminal too (the
        # command's console shows WARNING and above): no run waits without saying so
        with ops.dataset_slot(dataset, log=get_run_logger().warning):
            yield

    def run_stage(self, stage: Stage, context: RunContext, state: State) -> Mapping[str, Any]:
        self.say(f"stage {stage.name}" + (" (private: reads the data)" if stage.private
                                         else "") + (", draws noise" if stage.noise else ""))
        if self._runner is None:
            out = _stage_task(stage)(context, state)
        else:
            out = self._runner.submit(_stage_task(stage), parameters={
                "context": context, "state": state}).result()
        ledger = out.get("ledger")
        if ledger is not None:
            for line in ops.ledger_lines_of(ledger, seen=state.get("ledger")):
                self.say(line)
        return out

    def say(self, line: str) -> None:
        get_run_logger().info(line)

    def progress(self, stage: str, fraction: float) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        report(stage, fraction)
        if self._progress_id is None:
            self._progress_id = create_progress_artifact(
                progress=0.0, description="release progress (all stages)")
        update_progress_artifact(artifact_id=self._progress_id,
                                 progress=round(100 * min(max(fraction, 0.0), 1.0), 1))

    def published(self, kind: ReleaseKind, folder: Path, written: Written) -> None:
        ops.post_release_artifacts(folder, written.manifest,
                                   markdown=kind.markdown(folder, written.manifest),
                                   ledger=kind.ledger_table(written.manifest))
        self.say(f"published {folder}")
