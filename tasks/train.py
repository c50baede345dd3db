"""Thin Prefect tasks of the ``privfair-train`` flow (the library does the work).

The private task receives paths and public settings and returns the release folder's path;
it persists no result, so nothing derived from the private rows reaches Prefect's storage.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from privfair.release.model.train import TrainParams, model_card, preflight_train, run_train
from tasks._common import report, retry_on_io_error


@task(name="preflight-train", persist_result=False)
def preflight(params: TrainParams) -> dict[str, Any]:
    """Refuse bad input and an exhausted lifetime budget before any private read."""
    plan = preflight_train(params)
    return {"dataset": plan.contract.name, "group": plan.encoding.group,
            "inputs": plan.encoding.dimension}


@task(name="train-and-publish", persist_result=False, cache_policy=None, retries=1,
      retry_condition_fn=retry_on_io_error)
def train_and_publish(params: TrainParams) -> str:
    """Read, train (every noisy release charged first) and publish; returns the folder."""
    return str(run_train(params, progress=report))


@task(name="model-card", persist_result=False)
def card_markdown(folder: str) -> str:
    """The published (public) model card, for a Prefect artifact."""
    import json
    from pathlib import Path

    return model_card(json.loads((Path(folder) / "manifest.json").read_text()))
