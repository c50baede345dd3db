"""The ``privfair-train`` Prefect flow: publish a DP (and fair) classifier as a model release.

Typed parameters mirror ``privfair train``; there is no seed parameter (Prefect stores flow
parameters, and whoever knows a seed can remove the noise). The in-process equivalent, without
Prefect, is :func:`privfair.release.model.train.run_train`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field

# Prefect loads entrypoints by file path; make the repository root importable for `tasks`.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from prefect import flow, get_run_logger  # noqa: E402
from prefect.artifacts import create_markdown_artifact  # noqa: E402

from privfair.release.model.train import ModelKind, TrainParams  # noqa: E402
from tasks import train as tasks  # noqa: E402


@flow(name="privfair-train", persist_result=False)
def train_model(
    model: ModelKind = "dpsgd-f",
    epsilon: Annotated[float, Field(gt=0)] = 1.0,
    delta: Annotated[float, Field(gt=0, lt=1)] = 1e-6,
    contract: str | None = None,
    data: str | None = None,
    group: str | None = None,
    epochs: Annotated[int, Field(ge=1, le=1000)] = 20,
    holdout: Annotated[float, Field(ge=0, lt=1)] = 0.2,
    out: str = "releases",
) -> str:
    """Train and publish; returns the release folder."""
    params = TrainParams(model=model, epsilon=epsilon, delta=delta, contract=contract,
                         data=data, group=group, epochs=epochs, holdout=holdout, out=out)
    log = get_run_logger()
    summary = tasks.preflight(params)
    log.info("model release of %s: %s at epsilon=%g, groups from %r", summary["dataset"],
             model, epsilon, summary["group"])
    folder = tasks.train_and_publish(params)
    create_markdown_artifact(markdown=tasks.card_markdown(folder), key="model-card",
                             description="Model card (held-out metrics are NOT private)")
    log.info("published %s", folder)
    return folder
