"""The ``graph`` release kind: a DP causal graph (PrivPC or LapMech) of a contract's data.

``privfair discover`` runs :func:`run_discover`. A graph release lives in
``<store>/<dataset>/vN/`` beside the table and model releases of the same dataset and shares
their lifetime ledger. It holds ``graph.json`` (``{"nodes", "edges", "undirected"}``, the
``causal_graph`` shape CFGAN reads), ``report.html`` (a drawing, the roles audit, the ledger),
``manifest.json``, ``ledger.json`` and ``contract.yaml``.

Privacy. The release's (ε, δ) is turned into a zCDP budget ρ before any private read and the
lifetime ledger is checked for it; the whole ρ is recorded in the lifetime ledger whatever the
search actually spent, because how much PrivPC spends depends (through released outputs) on
the data and the reservation should not. The codes are read once, discretised by the
contract (and optionally coarsened by a public grouping), and only the search's mechanisms see
them. Nothing about the data but the mechanisms' outputs reaches the release folder: no row
count, no test statistic, no count of tests.
"""

from __future__ import annotations

import html
import json
import logging
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import ConfigDict, Field

from privfair.causal.coarsen import ADULT_CH4, Groups, coarsen
from privfair.causal.graph import CausalGraph, unblocked_paths
from privfair.causal.privpc import DiscoveryResult, lap_mech, max_rounds, priv_pc
from privfair.contracts.schema import Contract, load_contract
from privfair.core.accounting import PrivacyLedger, zcdp_rho
from privfair.core.domain import Domain
from privfair.core.errors import ContractError, PrivfairError
from privfair.release.model.train import read_private, seeded_rng
from privfair.release.seeds import SeedOptions, check_seed_policy
from privfair.release.table.plan import (
    DATASET_NAME,
    check_store_writable,
    resolve_contract,
    resolve_data,
)
from privfair.reporting.report import CSS, ROLE_COLOURS, kv_table, ledger_chart, png
from privfair.store.artefacts import json_bytes, new_run_id, sha256_file, utc_now
from privfair.store.publication import commit_release
from privfair.store.registry import (
    code_version,
    locked,
    mark_noise_drawn,
    next_version,
    read_lifetime_ledger,
    release_unspent,
    reserve_run,
)

log = logging.getLogger(__name__)

FORMAT = "privfair-graph-release/1"
METHODS = ("privpc", "lapmech")
#: Built-in public groupings, by name (``--coarsen``); anything else is a YAML/JSON file.
COARSENINGS: dict[str, Groups] = {"adult-ch4": ADULT_CH4}


class DiscoverParams(SeedOptions):
    """Everything a graph release needs."""

    model_config = ConfigDict(extra="forbid")

    contract: str | None = Field(None, description="Data contract YAML. Empty: embedded Adult.")
    data: str | None = Field(None, description="Private table (CSV/Parquet). Empty: embedded.")
    method: Literal["privpc", "lapmech"] = Field("privpc", description="Search method.")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="ε of this release.")
    delta: float = Field(1e-6, gt=0, lt=1, description="δ of this release.")
    alpha: float = Field(0.01, gt=0, lt=1, description="Significance level of the G² tests.")
    max_order: int = Field(2, ge=0, le=6, description="Largest conditioning-set size.")
    max_rows: int = Field(10**6, ge=1, description="Public bound on the number of rows.")
    coarsen: str | None = Field(None, description="Public grouping: a built-in name "
                                                  "(adult-ch4) or a YAML/JSON file.")
    out: str = Field("releases", description="Release store folder.")


class GraphReleaseError(PrivfairError, ValueError):
    """A graph release cannot go ahead as asked."""


@dataclass(frozen=True)
class DiscoverPlan:
    """The checked, public settings of one graph release (never the seed)."""

    params: DiscoverParams
    contract: Contract
    contract_path: Path
    data_path: Path
    data_source: str
    store: Path
    domain: Domain
    groups: Groups
    rho: float
    started_at: str


def _read_groups(spec: str | None, contract: Contract) -> Groups:
    if spec is None:
        return {}
    if spec in COARSENINGS:
        return COARSENINGS[spec]
    path = Path(spec).expanduser()
    if not path.is_file():
        raise GraphReleaseError(f"coarsen: {spec!r} is neither a built-in grouping "
                                f"{sorted(COARSENINGS)} nor a file")
    groups = yaml.safe_load(path.read_text())
    if not isinstance(groups, dict) or not all(
            isinstance(g, list) and all(isinstance(m, list) for m in g) for g in groups.values()):
        raise GraphReleaseError(f"coarsen: {path} must map each column to a list of label lists")
    unknown = sorted(set(groups) - set(contract.column_names))
    if unknown:
        raise GraphReleaseError(f"coarsen: columns {unknown} are not in contract "
                                f"{contract.name!r}")
    return groups


def preflight_discover(params: DiscoverParams | Mapping[str, Any]) -> DiscoverPlan:
    """Check everything that needs no private read; refuse with one line."""
    params = params if isinstance(params, DiscoverParams) else \
        DiscoverParams.model_validate(params)
    check_seed_policy(params.seed, params.insecure_seed, error=GraphReleaseError)
    contract_path = resolve_contract(params)  # type: ignore[arg-type]
    contract = load_contract(contract_path)
    if not DATASET_NAME.fullmatch(contract.name):
        raise GraphReleaseError(f"contract {contract_path}: name {contract.name!r} cannot name "
                                "a release folder")
    unresolved = contract.unresolved_columns
    if unresolved:
        raise ContractError(f"contract {contract.name!r}: columns {unresolved} have no declared "
                            "discretisation; PrivPC needs declared bins or categories")
    groups = _read_groups(params.coarsen, contract)
    domain = contract.domain()
    coarse = coarsen(np.zeros((1, len(domain)), dtype=np.int64), domain, contract.labels,
                     groups)[1]
    roles = contract.roles()
    roles.check(coarse, fair=False)
    if params.method == "lapmech" and np.prod(coarse.sizes, dtype=float) > 2**24:
        raise GraphReleaseError(f"method lapmech: the full table has "
                                f"{np.prod(coarse.sizes, dtype=float):.3g} cells (> 2^24); "
                                "coarsen the domain or use privpc")
    data_path, source = resolve_data(params, contract)  # type: ignore[arg-type]
    store = Path(params.out).expanduser().resolve()
    check_store_writable(store)
    rho = zcdp_rho(epsilon=params.epsilon, delta=params.delta)
    read_lifetime_ledger(store, contract).check(rho=rho)
    return DiscoverPlan(params, contract, contract_path, data_path, source, store, coarse,
                        groups, rho, utc_now())


def _read_codes(plan: DiscoverPlan) -> np.ndarray:
    """The private rows as (coarsened) integer codes; refuses bad columns with one line."""
    from privfair.contracts.encoding import discretize

    frame = read_private(plan)  # type: ignore[arg-type]
    codes = discretize(frame, plan.contract)
    del frame
    domain = plan.contract.domain()
    matrix = np.stack([codes[a] for a in domain.attributes], axis=1)
    return coarsen(matrix, domain, plan.contract.labels, plan.groups)[0]


def run_discover(params: DiscoverParams | Mapping[str, Any], *,
                 progress: Callable[[str, float], None] | None = None) -> Path:
    """Search, charge and publish a graph release; returns its folder."""
    report = progress or (lambda stage, fraction: None)
    report("preflight", 0.0)
    plan = preflight_discover(params)
    p = plan.params
    ledger = PrivacyLedger(rho_budget=plan.rho, delta=p.delta)
    # The search's ρ is fixed in advance, so the whole of it is reserved in the lifetime
    # ledger before the first private read, and stays charged once noise is drawn.
    run = SimpleNamespace(run_id=new_run_id(), rho=plan.rho, epsilon=p.epsilon, delta=p.delta,
                          method=f"graph:{p.method}", store=plan.store, contract=plan.contract,
                          dataset=plan.contract.name,
                          contract_fingerprint=plan.contract.fingerprint())
    reserve_run(run)
    try:
        report("read data", 0.05)
        codes = _read_codes(plan)
        report(f"search ({p.method})", 0.2)
        search = priv_pc if p.method == "privpc" else lap_mech
        extra: dict[str, Any] = {"max_rows": p.max_rows} if p.method == "privpc" else {}
        mark_noise_drawn(run)
        result = search(codes, plan.domain, rho=plan.rho, ledger=ledger,
                        rng=seeded_rng(p.seed, 9), alpha=p.alpha, max_order=p.max_order,
                        roles=plan.contract.roles(), **extra)
        del codes
        report("publish", 0.9)
        final = publish_graph(plan, ledger=ledger, result=result, run_id=run.run_id)
    except BaseException:
        release_unspent(run)  # only a run that drew no noise gets its reservation back
        raise
    report("done", 1.0)
    return final


def build_graph_manifest(plan: DiscoverPlan, *, version: str, ledger: PrivacyLedger,
                         result: DiscoveryResult, lifetime_after: float) -> dict[str, Any]:
    p = plan.params
    roles = plan.contract.roles()
    return {
        "format": FORMAT,
        "kind": "graph",
        "dataset": plan.contract.name,
        "version": version,
        "started_at": plan.started_at,
        "published_at": utc_now(),
        "method": p.method,
        "guarantee": {"epsilon": p.epsilon, "delta": p.delta, "rho_reserved": plan.rho,
                      "spent": ledger.guarantee()},
        "ledger": [dict(e.__dict__) for e in ledger.entries],
        "lifetime_rho_spent_after": lifetime_after,
        "search": {
            "alpha": p.alpha, "max_order": p.max_order,
            "max_rows": p.max_rows if p.method == "privpc" else None,
            "max_rounds": max_rounds(len(plan.domain), p.max_order)
            if p.method == "privpc" else None,
            "orientation": "v-structures from released separating sets, then the roles "
                           "(protected exogenous, outcomes sinks), then Meek R1-R3",
            "neighbours": "add/remove one row",
        },
        "domain": dict(plan.domain.items()),
        "coarsening": {c: [list(g) for g in gs] for c, gs in plan.groups.items()},
        "roles": roles.to_dict(),
        "roles_audit": {
            "unblocked_paths": unblocked_paths(result.graph, roles),
            "meaning": "possibly causal protected -> outcome paths that pass through no "
                       "admissible attribute; empty means the graph agrees with the roles",
        },
        "graph": result.graph.to_dict(),
        "parameters": {"method": p.method, "epsilon": p.epsilon, "delta": p.delta,
                       "coarsen": p.coarsen,
                       "data_source": ("embedded default dataset" if plan.data_source ==
                                       "embedded" else
                                       "operator-supplied file (path and hash not recorded)")},
        "seed_policy": ("INSECURE test mode: operator-supplied seed (not recorded)"
                        if p.seed is not None
                        else "fresh OS entropy for every noise draw; no seed exists"),
        "contract": {"name": plan.contract.name, "version": plan.contract.version,
                     "fingerprint": plan.contract.fingerprint()},
        "code_version": code_version(),
    }


def graph_chart(graph: CausalGraph, roles: Mapping[str, Any],
                flagged: list[list[str]]) -> str:
    """The CPDAG: arrows, plain lines for undirected edges, flagged paths in red (data URI)."""
    import networkx as nx
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Patch

    skeleton = nx.Graph()
    skeleton.add_nodes_from(graph.nodes)
    skeleton.add_edges_from(tuple(e) for e in graph.skeleton())
    pos = nx.kamada_kawai_layout(skeleton) if len(skeleton) > 2 else \
        nx.circular_layout(skeleton)
    role_of = dict.fromkeys(graph.nodes, "free")
    for role in ("protected", "admissible", "outcome"):
        for a in roles.get(role, ()):
            role_of[a] = role
    red = {frozenset(pair) for path in flagged for pair in zip(path, path[1:], strict=False)}
    fig = Figure(figsize=(8, 6))
    ax = fig.add_subplot()
    for u, v in (*graph.edges, *graph.undirected):
        directed = (u, v) in set(graph.edges)
        ax.add_patch(FancyArrowPatch(
            pos[u], pos[v], arrowstyle="-|>" if directed else "-", mutation_scale=14,
            shrinkA=14, shrinkB=14, zorder=1,
            color="#c62828" if frozenset((u, v)) in red else "#777",
            linewidth=2.0 if frozenset((u, v)) in red else 1.2))
    for a in graph.nodes:
        ax.scatter([pos[a][0]], [pos[a][1]], s=700, color=ROLE_COLOURS[role_of[a]], zorder=2,
                   edgecolors="white")
        ax.annotate(a, pos[a], ha="center", va="center", fontsize=7, zorder=3,
                    xytext=(0, -20), textcoords="offset points")
    ax.legend(handles=[Patch(color=c, label=r) for r, c in ROLE_COLOURS.items()],
              loc="upper left", fontsize=8, frameon=False)
    ax.set_axis_off()
    ax.margins(0.15)
    ax.set_title("Released causal graph (CPDAG); red: protected→outcome paths avoiding "
                 "every admissible attribute", fontsize=9)
    return png(fig)


def graph_report(manifest: Mapping[str, Any]) -> str:
    """Self-contained HTML report of a graph release (post-DP content only)."""
    graph = CausalGraph.from_dict(manifest["graph"])
    flagged = manifest["roles_audit"]["unblocked_paths"]
    g = manifest["guarantee"]
    audit = ("<p class='pass'>Every protected→outcome path passes through an admissible "
             "attribute.</p>" if not flagged else
             "<p class='fail'>Paths from a protected attribute to an outcome that avoid every "
             "admissible attribute:</p><ul>" + "".join(
                 f"<li><code>{html.escape(' → '.join(path))}</code></li>" for path in flagged)
             + "</ul>")
    edge_rows = "".join(f"<tr><td>{html.escape(u)}</td><td>→</td><td>{html.escape(v)}</td></tr>"
                        for u, v in graph.edges) + "".join(
        f"<tr><td>{html.escape(u)}</td><td>–</td><td>{html.escape(v)}</td></tr>"
        for u, v in graph.undirected)
    drawing = graph_chart(graph, manifest["roles"], flagged)
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(manifest['dataset'])} {manifest['version']} causal graph</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Causal graph: {html.escape(manifest['dataset'])} {manifest['version']} "
        f"({manifest['method']})</h1>",
        f"<p>({g['epsilon']:g}, {g['delta']:g})-DP; ρ reserved {g['rho_reserved']:.6g}, "
        f"spent {g['spent']['rho']:.6g}. Neighbours: add/remove one row.</p>",
        "<h2>Graph</h2>", f"<img alt='causal graph' src='{drawing}'>",
        f"<table><tr><th>from</th><th></th><th>to</th></tr>{edge_rows}</table>",
        "<h2>Roles audit</h2>", audit,
        "<h2>Search</h2>", kv_table(manifest["search"]),
        "<h2>Privacy ledger</h2>", f"<img alt='ledger' src='{ledger_chart(manifest['ledger'])}'>",
        "</body></html>"])


def publish_graph(plan: DiscoverPlan, *, ledger: PrivacyLedger, result: DiscoveryResult,
                  run_id: str | None = None) -> Path:
    """Write the release folder atomically and record it in the lifetime ledger and catalog.

    ``run_id`` names the run's reservation, which the ``publish`` entry then replaces.
    """
    store = plan.store
    folder = store / plan.contract.name
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        lifetime = read_lifetime_ledger(store, plan.contract)
        # A reserved run is already counted in the ledger; only an unreserved one adds ρ.
        unreserved = run_id is None or lifetime.run_state(run_id) is None
        if unreserved:
            lifetime.check(rho=plan.rho)
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            manifest = build_graph_manifest(plan, version=version, ledger=ledger,
                                            result=result,
                                            lifetime_after=lifetime.rho_spent
                                            + (plan.rho if unreserved else 0.0))
            (tmp / "graph.json").write_text(result.graph.to_json(), encoding="utf-8")
            (tmp / "ledger.json").write_text(json.dumps(ledger.state_dict(), indent=2,
                                                        default=float), encoding="utf-8")
            shutil.copyfile(plan.contract_path, tmp / "contract.yaml")
            (tmp / "report.html").write_text(graph_report(manifest), encoding="utf-8")
            manifest["files"] = {name: sha256_file(tmp / name) for name in
                                 ("graph.json", "ledger.json", "contract.yaml", "report.html")}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        p = plan.params
        lifetime.releases.append({
            "version": version, "published_at": manifest["published_at"],
            "epsilon": p.epsilon, "delta": p.delta, "rho": plan.rho,
            "method": f"graph:{p.method}",
            "contract_fingerprint": plan.contract.fingerprint(), "run_id": run_id,
        })
        commit_release(
            store=store, dataset=plan.contract.name, version=version, staged=tmp, final=final,
            lifetime=lifetime.to_dict(),
            catalog_row=[plan.contract.name, version, str(final.relative_to(store)),
                         manifest["published_at"], p.epsilon, p.delta, plan.rho,
                         f"graph:{p.method}", 0, plan.contract.fingerprint(),
                         not manifest["roles_audit"]["unblocked_paths"], None])
    log.info("published graph release %s", final)
    return final
