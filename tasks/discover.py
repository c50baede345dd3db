"""Thin Prefect tasks of the ``privfair-discover`` flow (the library does the work).

The private task receives paths and public settings and returns the release folder's path;
it persists no result, so nothing derived from the private rows reaches Prefect's storage.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from privfair.release.graph.discover import DiscoverParams, preflight_discover, run_discover
from tasks._common import report, retry_on_io_error


@task(name="preflight-discover", persist_result=False)
def preflight(params: DiscoverParams) -> dict[str, Any]:
    """Refuse bad input and an exhausted lifetime budget before any private read."""
    plan = preflight_discover(params)
    return {"dataset": plan.contract.name, "attributes": len(plan.domain), "rho": plan.rho}


@task(name="discover-and-publish", persist_result=False, cache_policy=None, retries=1,
      retry_condition_fn=retry_on_io_error)
def discover_and_publish(params: DiscoverParams) -> str:
    """Read, search (every selection charged first) and publish; returns the folder."""
    return str(run_discover(params, progress=report))


@task(name="roles-audit", persist_result=False)
def audit_markdown(folder: str) -> str:
    """The published graph's edges and roles audit (public), for a Prefect artifact."""
    import json
    from pathlib import Path

    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    graph, paths = manifest["graph"], manifest["roles_audit"]["unblocked_paths"]
    lines = [f"# Causal graph {manifest['dataset']} {manifest['version']}", "",
             f"{len(graph['edges'])} directed, {len(graph['undirected'])} undirected edges.", ""]
    lines += ([f"- protected→outcome path avoiding the admissible attributes: "
               f"{' → '.join(p)}" for p in paths] or ["Every protected→outcome path passes "
                                                       "through an admissible attribute."])
    return "\n".join(lines)
