"""The ``privfair-discover`` Prefect flow: publish a DP causal graph as a graph release.

Typed parameters mirror ``privfair discover``; there is no seed parameter (Prefect stores flow
parameters, and whoever knows a seed can remove the noise). The in-process equivalent, without
Prefect, is :func:`privfair.release.graph.discover.run_discover`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

# Prefect loads entrypoints by file path; make the repository root importable for `tasks`.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from prefect import flow, get_run_logger  # noqa: E402
from prefect.artifacts import create_markdown_artifact  # noqa: E402

from privfair.release.graph.discover import DiscoverParams  # noqa: E402
from tasks import discover as tasks  # noqa: E402


@flow(name="privfair-discover", persist_result=False)
def discover_graph(
    epsilon: Annotated[float, Field(gt=0)] = 1.0,
    delta: Annotated[float, Field(gt=0, lt=1)] = 1e-6,
    method: Literal["privpc", "lapmech"] = "privpc",
    contract: str | None = None,
    data: str | None = None,
    coarsen: str | None = None,
    max_order: Annotated[int, Field(ge=0, le=6)] = 2,
    out: str = "releases",
) -> str:
    """Search and publish; returns the release folder."""
    params = DiscoverParams(epsilon=epsilon, delta=delta, method=method, contract=contract,
                            data=data, coarsen=coarsen, max_order=max_order, out=out)
    log = get_run_logger()
    summary = tasks.preflight(params)
    log.info("graph release of %s: %s over %d attributes at epsilon=%g", summary["dataset"],
             method, summary["attributes"], epsilon)
    folder = tasks.discover_and_publish(params)
    create_markdown_artifact(markdown=tasks.audit_markdown(folder), key="causal-graph",
                             description="Released causal graph and its roles audit")
    log.info("published %s", folder)
    return folder
