"""The ``graph`` release kind: a DP causal graph of a contract's data (``privfair discover``).

This module is long on purpose: it is the kind's whole declaration (parameters, data-free
checks, the read and search stages for three methods, what is written), which a reader
checks against the protocol in one place; the drawing lives in ``report.py``.

A declaration on the release protocol (:mod:`privfair.release.protocol`), which reserves the
run's ρ, fingerprints a test seed, cancels or keeps the charge and publishes. A graph release
lives in ``<store>/<dataset>/vN/`` beside the table and model releases of the same dataset and
shares their lifetime ledger: ``graph.json`` (``{"nodes", "edges", "undirected"}``, the
``causal_graph`` shape CFGAN reads), ``report.html`` (a drawing, the roles audit, the ledger),
``ledger.json``, ``contract.yaml`` and the protocol's ``manifest.json``.

Methods: PrivPC and LapMech (Xu 2021, ch. 4) on the contract's codes, optionally coarsened by
a public grouping; PrivPC* (§4.4.3) on the contract's numeric columns, clamped to their
declared ``[lower, upper]``.

Issue 21.2: after the reservation nothing stops or speaks on a private value. The file's
schema is checked before it (:func:`~privfair.contracts.encoding.check_source_schema`).
PrivPC and LapMech read the contract's codes, values outside the domain and nulls getting the
contract's policies; PrivPC* clamps each numeric value to its declared bounds and drops a row
holding a null or a value that is not a finite number. The rows those policies touched are
published only as noisy counts (:func:`~privfair.release.policy_counts.measure_policy_counts`,
:data:`~privfair.release.policy_counts.POLICY_SHARE` of ρ, taken from the search's ρ).

Privacy. The whole ρ of (ε, δ) is reserved (and charged once noise is drawn) whatever the
search spends, because how much PrivPC spends depends on released outputs. PrivPC's scores
are scaled for tables of at most ``max_rows`` rows; a larger table is never refused (a refusal
on n would reveal n by bisection): the search reads a uniform random subset of ``max_rows``
rows drawn without replacement, and its scores are scaled for one *replaced* record (twice
the add/remove scale), since two add/remove neighbours' subsets differ by a replacement. The
guarantee is then the declared (ε, δ) whether or not the table was subsampled, and nothing
in the release says which. Nothing about the data but the mechanisms' outputs reaches the
release folder: no row count, no test statistic, no count of tests.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, field_validator

from privfair.causal.coarsen import ADULT_CH4, Groups, coarsen
from privfair.causal.graph import unblocked_paths
from privfair.causal.privpc import DiscoveryResult, max_rounds
from privfair.contracts.encoding import PolicyTally
from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain, Roles
from privfair.core.errors import ContractError, PrivfairError
from privfair.release.checks import (
    PlanTooLargeError,
    memory_limit,
)
from privfair.release.manifest import accounting_fields
from privfair.release.manifest import manifest as common_manifest
from privfair.release.options import ODD_PATH, ReleaseOptions
from privfair.release.policy_counts import POLICY_SHARE, measure_policy_counts
from privfair.release.protocol import (
    ReleaseKind,
    RequestPlan,
    RunContext,
    Stage,
    State,
    Written,
)
from privfair.release.request import check_request, read_contract
from privfair.store.artefacts import load_ledger, save_ledger
from privfair.store.files import save_private_array

FORMAT = "privfair-graph-release/1"
METHODS = ("privpc", "lapmech", "privpc-star")
#: Built-in public groupings, by name (``--coarsen``); anything else is a YAML/JSON file.
COARSENINGS: dict[str, Groups] = {"adult-ch4": ADULT_CH4}
#: Bytes per cell of a contingency table the search builds (int64 counts, float64 copy).
BYTES_PER_TABLE_CELL = 16
#: Bytes per row the search holds (the row codes, the flat cell index, a working copy).
BYTES_PER_ROW = 24
#: PrivPC* standardises each numeric column to [−1, 1] by its declared bounds.
STAR_CLIP = 1.0
FILES = ("graph.json", "ledger.json", "contract.yaml", "report.html")


class GraphReleaseError(PrivfairError, ValueError):
    """A graph release cannot go ahead as asked."""


class DiscoverParams(ReleaseOptions):
    """Everything a graph release needs (the shared fields come from ReleaseOptions)."""

    method: Literal["privpc", "lapmech", "privpc-star"] = Field(
        "privpc", description="Search method: PrivPC or LapMech on the contract's codes, "
                              "PrivPC* on its numeric columns.")
    alpha: float = Field(0.01, gt=0, lt=1, allow_inf_nan=False,
                         description="Significance level of the CI tests.")
    max_order: int = Field(2, ge=0, le=6, description="Largest conditioning-set size.")
    max_rows: int = Field(
        10**6, ge=2, le=10**12,
        description="PrivPC: public number of rows the search reads; a larger table is "
                    "subsampled to it (never refused).")
    coarsen: str | None = Field(
        None, description="Public grouping of categories: a built-in name (adult-ch4) or a "
                          "YAML/JSON file {column: [[labels], ...]}.")

    @field_validator("coarsen")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or ODD_PATH.search(value)):
            raise ValueError(f"{value!r}: expected a grouping name or a literal file path")
        return value


@dataclass(frozen=True, kw_only=True)
class DiscoverPlan(RequestPlan):
    """The checked, public settings of one graph release (never the seed)."""

    search: str
    alpha: float
    max_order: int
    max_rows: int
    coarsen: str | None
    #: The search's nodes, in order.
    nodes: tuple[str, ...]
    #: PrivPC/LapMech: the (coarsened) domain of the codes; PrivPC*: None.
    domain: Domain | None = None
    groups: Groups = field(default_factory=dict)
    #: PrivPC*: the declared [lower, upper] of each node.
    bounds: tuple[tuple[float, float], ...] = ()

    @property
    def policy_rho(self) -> float:
        """ρ of the noisy counts of rows the policies touched (taken from the search's)."""
        return POLICY_SHARE * self.rho

    @property
    def search_rho(self) -> float:
        return self.rho - self.policy_rho

    @property
    def policy_contract(self) -> Contract:
        """The policies the read stage applies: the contract's (PrivPC, LapMech), or PrivPC*'s
        on its numeric nodes (clamp to the declared bounds; drop nulls and non-numbers)."""
        if self.search != "privpc-star":
            return self.contract
        return self.contract.model_copy(update={"drop": (), "columns": tuple(
            self.contract.column(a).model_copy(update={"out_of_domain": "clamp",
                                                       "nulls": "drop"})
            for a in self.nodes)})

    @property
    def roles(self) -> Roles:
        """The contract's roles, restricted to the search's nodes."""
        roles = self.contract.roles()
        keep = set(self.nodes)
        return Roles(*(tuple(a for a in getattr(roles, r) if a in keep)
                       for r in ("protected", "admissible", "outcome")))


# --- data-free checks -------------------------------------------------------------------------


def read_groups(spec: str | None, contract: Contract) -> Groups:
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


def check_search_memory(domain: Domain, *, search: str, max_order: int, max_rows: int,
                        limit: int | None = None) -> None:
    """Refuse a search whose largest contingency table (``max_order + 2`` attributes: the
    pair and its largest conditioning set; LapMech: the full table) or whose rows cannot fit
    in ``limit`` bytes, from the declared domain alone."""
    limit = memory_limit() if limit is None else limit
    sizes = sorted(((int(domain.size(a)), a) for a in domain), reverse=True)
    widest = sizes if search == "lapmech" else sizes[:max_order + 2]
    cells = math.prod(s for s, _ in widest)
    if cells * BYTES_PER_TABLE_CELL > limit:
        names = ", ".join(a for _, a in widest[:6]) + (", ..." if len(widest) > 6 else "")
        what = "max_order" if search == "privpc" else "method"
        raise PlanTooLargeError(
            f"{what}: the search's largest contingency table ({names}) has {cells:.3g} cells, "
            f"about {cells * BYTES_PER_TABLE_CELL / 2**30:.3g} GiB, over the "
            f"{limit / 2**30:.3g} GiB limit (PRIVFAIR_MEMORY_GB); lower --max-order or "
            "--coarsen the domain")
    if search == "privpc" and max_rows * len(sizes) * BYTES_PER_ROW > limit:
        raise PlanTooLargeError(
            f"max_rows: {max_rows:g} rows of {len(sizes)} columns need about "
            f"{max_rows * len(sizes) * BYTES_PER_ROW / 2**30:.3g} GiB, over the "
            f"{limit / 2**30:.3g} GiB limit (PRIVFAIR_MEMORY_GB); lower --max-rows")


def check(params: DiscoverParams) -> DiscoverPlan:
    """Every data-free refusal of a graph release; the plan of one that can go ahead."""
    contract_path, contract = read_contract(params)
    search = params.method
    domain: Domain | None = None
    groups: Groups = {}
    bounds: tuple[tuple[float, float], ...] = ()
    if search == "privpc-star":
        nodes = tuple(c.name for c in contract.columns if c.type == "numeric")
        if len(nodes) < 2:
            raise ContractError(f"method privpc-star: contract {contract.name!r} declares "
                                f"{len(nodes)} numeric column(s); expected at least 2")
        if params.coarsen is not None:
            raise GraphReleaseError("coarsen: groups categories, but privpc-star reads numeric "
                                    "columns; leave coarsen empty")
        bounds = tuple((float(lo), float(hi))
                       for lo, hi in (contract.column(a).bounds for a in nodes))
        for a, (lo, hi) in zip(nodes, bounds, strict=True):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ContractError(f"method privpc-star: column {a!r} needs finite declared "
                                    f"lower < upper, got [{lo:g}, {hi:g}]")
    else:
        unresolved = contract.unresolved_columns
        if unresolved:
            raise ContractError(f"contract {contract.name!r}: columns {unresolved} have no "
                                f"declared discretisation; {search} needs declared bins or "
                                "categories")
        groups = read_groups(params.coarsen, contract)
        full = contract.domain()
        domain = coarsen(np.zeros((1, len(full)), dtype=np.int64), full, contract.labels,
                         groups)[1]
        nodes = tuple(domain.attributes)
        if search == "lapmech" and np.prod(domain.sizes, dtype=float) > 2**24:
            raise GraphReleaseError(f"method lapmech: the full table has "
                                    f"{np.prod(domain.sizes, dtype=float):.3g} cells (> 2^24); "
                                    "coarsen the domain or use privpc")
        check_search_memory(domain, search=search, max_order=params.max_order,
                            max_rows=params.max_rows)
        contract.roles().check(domain, fair=False)
    request = check_request(params, contract_path, contract)
    return DiscoverPlan(
        **request.plan_fields(method=f"graph:{search}"), search=search, alpha=params.alpha,
        max_order=params.max_order, max_rows=params.max_rows, coarsen=params.coarsen,
        nodes=nodes, domain=domain, groups=groups, bounds=bounds)


# --- stages -------------------------------------------------------------------------------------


def clamp_numeric(frame: pd.DataFrame, nodes: tuple[str, ...],
                  bounds: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, PolicyTally]:
    """PrivPC*'s rows: each value clamped to its column's declared bounds; a row holding a
    null or a value that is not a finite number (text, an infinity) dropped. Never raises on
    a value; returns the rows kept and the (private) tally of touched rows per column."""
    tally = PolicyTally()
    columns, keep = [], np.ones(len(frame), dtype=bool)
    for a, (lo, hi) in zip(nodes, bounds, strict=True):
        raw = frame[a]
        values = pd.to_numeric(raw.astype(object), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan)
        dropped = ~np.isfinite(values)  # nulls, text that is not a number, ±inf
        with np.errstate(invalid="ignore"):
            clamped = ~dropped & ((values < lo) | (values > hi))
        tally.add(a, "dropped", int(dropped.sum()))
        tally.add(a, "clamped", int(clamped.sum()))
        keep &= ~dropped
        columns.append(np.clip(values, lo, hi))
    rows = np.stack(columns, axis=1) if columns else np.zeros((len(frame), 0))
    return rows[keep], tally


def read_stage(context: RunContext, state: State) -> dict[str, Any]:
    """Read, discretise and coarsen (or, for PrivPC*, clamp) the private rows; for PrivPC,
    subsample a table of more than ``max_rows`` rows (private; no noise). Values get the
    policies (:attr:`DiscoverPlan.policy_contract`); their exact tally is staged."""
    import pyarrow.parquet as pq

    from privfair.release.ingest import (
        add_unparsed_records,
        discretize_counted,
        load,
        stage_policy_tally,
    )

    plan: DiscoverPlan = context.plan
    staging = context.workspace.staging
    staged = load(plan.data_path, plan.contract, staging)
    if plan.search == "privpc-star":
        frame = pq.read_table(staged.open_checked(), columns=list(plan.nodes)).to_pandas()
        rows, exact = clamp_numeric(frame, plan.nodes, plan.bounds)
        del frame
        tally = stage_policy_tally(add_unparsed_records(staged, exact), staging)
    else:
        codes, tally = discretize_counted(staged, plan.contract, staging)
        table = pq.read_table(codes.open_checked())  # narrow codes: n × p bytes or so
        if plan.search == "privpc" and table.num_rows > plan.max_rows:
            keep = context.rng("subsample").choice(table.num_rows, size=plan.max_rows,
                                                   replace=False)
            table = table.take(np.sort(keep))
        full = plan.contract.domain()
        matrix = np.stack([table.column(a).to_numpy().astype(np.int64)
                           for a in full.attributes], axis=1)
        del table
        rows = coarsen(matrix, full, plan.contract.labels, plan.groups)[0]
    ledger = save_ledger(PrivacyLedger(rho_budget=plan.rho, delta=plan.delta),
                         context.workspace.artefacts)
    return {"rows": save_private_array(rows, folder=staging, name="graph-rows.npy"), "policy_tally": tally,
            "ledger": ledger}


class SearchArgs(TypedDict):
    """The keyword arguments every graph search takes, from the plan and the run."""

    rho: float
    ledger: PrivacyLedger
    rng: np.random.Generator
    alpha: float
    max_order: int
    roles: Roles | None


def search_stage(context: RunContext, state: State) -> dict[str, Any]:
    """The noisy counts of rows the policies touched, then the DP search on the rest of ρ;
    every mechanism charged to the run's ledger (private; draws noise)."""
    from privfair.causal import privpc
    from privfair.release.ingest import read_policy_tally

    plan: DiscoverPlan = context.plan
    ledger = load_ledger(state["ledger"])
    record = measure_policy_counts(read_policy_tally(state["policy_tally"]),
                                   plan.policy_contract, ledger, rho=plan.policy_rho,
                                   rng=context.rng("policies"))
    rows = np.load(state["rows"].open_checked(), allow_pickle=False)
    rng = context.rng("search")
    common = SearchArgs(rho=plan.search_rho, ledger=ledger, rng=rng, alpha=plan.alpha,
                        max_order=plan.max_order, roles=plan.roles)
    if plan.search == "privpc-star":
        low, high = (np.array(b, dtype=np.float64) for b in zip(*plan.bounds, strict=True))
        result = privpc.priv_pc_star(rows, plan.nodes, center=((low + high) / 2).tolist(),
                                     scale=((high - low) / 2).tolist(), clip=STAR_CLIP,
                                     **common)
    else:
        # check() sets the (coarsened) domain for every search but privpc-star.
        assert plan.domain is not None
        if plan.search == "lapmech":
            result = privpc.lap_mech(rows, plan.domain, **common)
        else:
            result = privpc.priv_pc(rows, plan.domain, max_rows=plan.max_rows,
                                    replace_one=True, **common)
    del rows
    return {"result": result, "input_validation": record,
            "ledger": save_ledger(ledger, context.workspace.artefacts)}


# --- the release files ------------------------------------------------------------------------


def _search_facts(plan: DiscoverPlan) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "alpha": plan.alpha, "max_order": plan.max_order,
        "orientation": "v-structures from released separating sets, then the roles "
                       "(protected exogenous, outcomes sinks), then Meek R1-R3",
        "neighbours": "add/remove one row",
    }
    if plan.search == "privpc":
        facts.update({
            "max_rounds": max_rounds(len(plan.nodes), plan.max_order),
            "max_rows": plan.max_rows,
            "rows": "the search reads at most max_rows rows: a uniform random subset of "
                    "max_rows rows, drawn without replacement, when the table has more. Its "
                    "scores are scaled for one replaced row (twice the add/remove scale), so "
                    "the guarantee holds either way; the release does not say which happened",
        })
    elif plan.search == "lapmech":
        facts["rows"] = "every row (Laplace noise on the full contingency table)"
    else:
        facts.update({
            "rows": "every row holding a finite number in each column (a null or a value that "
                    "is not a number drops its row); each numeric column clamped to its "
                    "declared [lower, upper], standardised to [-1, 1] by those bounds",
            "clip": STAR_CLIP,
            "tests": "Fisher z on the noisy correlation matrix and the noisy count",
        })
    return facts


def build_manifest(plan: DiscoverPlan, *, version: str, ledger: PrivacyLedger,
                   result: DiscoveryResult, lifetime: Any,
                   input_validation: dict[str, Any] | None = None,
                   orchestrator: Mapping[str, Any] | None = None) -> dict[str, Any]:
    roles = plan.roles
    return common_manifest(plan, kind="graph", fmt=FORMAT, version=version,
                           orchestrator=orchestrator, body={
        **accounting_fields(plan, ledger=ledger, lifetime=lifetime),
        "method": plan.search,
        "guarantee": {"epsilon": plan.epsilon, "delta": plan.delta, "rho_reserved": plan.rho,
                      "spent": ledger.guarantee(), "search_rho": plan.search_rho,
                      "policy_counts_rho": plan.policy_rho},
        "search": _search_facts(plan),
        "validation": {"input": input_validation},
        "domain": (dict(plan.domain.items()) if plan.domain is not None else
                   {a: {"lower": lo, "upper": hi}
                    for a, (lo, hi) in zip(plan.nodes, plan.bounds, strict=True)}),
        "coarsening": {c: [list(g) for g in gs] for c, gs in plan.groups.items()},
        "roles": roles.to_dict(),
        "roles_audit": {
            "unblocked_paths": unblocked_paths(result.graph, roles),
            "meaning": "possibly causal protected -> outcome paths that pass through no "
                       "admissible attribute; empty means the graph agrees with the roles",
        },
        "graph": result.graph.to_dict(),
        "parameters": {"method": plan.search, "epsilon": plan.epsilon, "delta": plan.delta,
                       "alpha": plan.alpha, "max_order": plan.max_order,
                       "max_rows": plan.max_rows, "coarsen": plan.coarsen},
    })


class GraphKind(ReleaseKind):
    """A DP causal graph (``privfair discover --method privpc|lapmech|privpc-star``)."""

    name = "graph"
    command = "discover"
    params = DiscoverParams
    seed_stages = ("subsample", "search", "policies")
    description = "publish a DP causal graph (PrivPC, LapMech or PrivPC*) as a graph release"

    def check(self, params: DiscoverParams) -> DiscoverPlan:
        return check(params)


    def summary(self, plan: DiscoverPlan) -> str:
        return (f"graph release of {plan.dataset!r}: ε = {plan.epsilon:g}, δ = {plan.delta:g} "
                f"(ρ = {plan.rho:.4g}), method {plan.search}")

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        """The graph's size and the roles audit's result."""
        graph, flagged = manifest["graph"], manifest["roles_audit"]["unblocked_paths"]
        audit = ("roles audit PASS" if not flagged else
                 f"roles audit FAIL ({len(flagged)} protected->outcome path(s) avoid every "
                 "admissible attribute)")
        return (f"built {manifest['method']}: {len(graph['nodes'])} nodes, "
                f"{len(graph['edges'])} directed and {len(graph['undirected'])} undirected "
                f"edges; {audit}")

    def stages(self, plan: DiscoverPlan) -> list[Stage]:
        return [Stage("read", read_stage, private=True, at=0.05),
                Stage(f"search ({plan.search})", search_stage, private=True, noise=True,
                      at=0.2)]

    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        from privfair.release.kinds.causal_graph.report import graph_report

        plan: DiscoverPlan = context.plan
        ledger = load_ledger(state["ledger"])
        result: DiscoveryResult = state["result"]
        manifest = build_manifest(plan, version=version, ledger=ledger, result=result,
                                  lifetime=lifetime,
                                  input_validation=state.get("input_validation"),
                                  orchestrator=context.orchestrator)
        # public: each column's declared label, for the drawing (issue 35.6)
        manifest["columns"] = plan.contract.column_notes()
        (folder / "graph.json").write_text(result.graph.to_json(), encoding="utf-8")
        (folder / "ledger.json").write_text(json.dumps(ledger.state_dict(), indent=2,
                                                       default=float), encoding="utf-8")
        shutil.copyfile(plan.contract_path, folder / "contract.yaml")
        (folder / "report.html").write_text(graph_report(manifest), encoding="utf-8")
        return Written(manifest=manifest, files=FILES, n_rows=0,
                       fairness_passed=not manifest["roles_audit"]["unblocked_paths"])


GRAPH = GraphKind()
