"""The ``embedding`` release kind: edge-level DP node embeddings (``privfair embed``).

The private data is an edge list declared by a contract with exactly two categorical columns,
source and target, over one public node set (the same categories in both, so the node count
is public); each row is an edge. The rows are read as a simple undirected graph (self-loops
dropped, an edge listed twice counted once) and DPNE (:func:`privfair.embedding.dpne.dpne`,
Xu 2021 ch. 5 as repaired there) releases one row of embeddings per declared node.

Issue 21.2: after the reservation nothing stops or speaks on a private value. The file's
schema is checked before it (:func:`~privfair.contracts.encoding.check_source_schema`); an
edge whose endpoint is not a declared node, or null, gets the contract's policy (dropped, or
mapped to a declared node), and the edges each policy touched are published only as noisy
counts (:func:`~privfair.release.policy_counts.measure_policy_counts`). They are counted over
distinct edges (an unordered pair of endpoint labels, listed once or many times), so one edge
added or removed moves each column's count by at most 1 (L2 sensitivity √2).

Privacy. Neighbouring graphs differ by one edge. The touched-edge counts take
ρ_pol = :data:`~privfair.release.policy_counts.POLICY_SHARE` × ρ; DPNE is pure ε′-DP, charged
ρ = ε′²/2, and runs at ε′ = min(ε, √(2(ρ − ρ_pol))) with ρ the zCDP budget of the declared
(ε, δ), so the run spends at most ρ: (ε, δ)-DP, and never more than the ρ the protocol
reserved in the dataset's lifetime ledger. Files: ``embeddings.parquet``
(``node, e0 .. e{dim-1}``), ``report.html`` (the guarantee and a 2-D PCA of the embeddings),
``contract.yaml`` and the protocol's ``manifest.json``.
"""

from __future__ import annotations

import html
import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from privfair.contracts.encoding import (
    PolicyTally,
    as_text,
    discretize,
    normalize_text,
)
from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import ContractError
from privfair.release.checks import (
    PlanTooLargeError,
    memory_limit,
)
from privfair.release.manifest import accounting_fields
from privfair.release.manifest import manifest as common_manifest
from privfair.release.options import ReleaseOptions
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

FORMAT = "privfair-embedding-release/1"
FILES = ("embeddings.parquet", "report.html", "contract.yaml")
#: Dense n × n float64 matrices DPNE holds at once (adjacency, P, P², M, a working copy).
DENSE_MATRICES = 5


class EmbedParams(ReleaseOptions):
    """Everything an embedding release needs (the shared fields come from ReleaseOptions)."""

    dim: int = Field(16, ge=1, le=1024, description="Embedding size (columns e0..e{dim-1}).")
    regularization: float = Field(
        1e-3, gt=0, le=1e6, allow_inf_nan=False,
        description="λ of DPNE's ridge term λ Σ ‖w_i‖² (a public setting).")


@dataclass(frozen=True, kw_only=True)
class EmbedPlan(RequestPlan):
    """The checked, public settings of one embedding release (never the seed)."""

    #: DPNE's pure ε′ = min(ε, √(2(ρ − ρ_pol))).
    dpne_epsilon: float
    dim: int
    regularization: float
    source: str
    target: str
    nodes: tuple[str, ...]

    @property
    def policy_rho(self) -> float:
        """ρ of the noisy counts of edges the contract's policies touched."""
        return POLICY_SHARE * self.rho


def check_edge_contract(contract: Contract) -> tuple[str, str, tuple[str, ...]]:
    """``(source, target, nodes)`` of an edge-list contract; one line naming the column
    otherwise."""
    columns = list(contract.columns)
    if len(columns) != 2:
        raise ContractError(f"contract {contract.name!r}: an edge list has exactly two columns "
                            f"(source, target), got {len(columns)}: "
                            f"{[c.name for c in columns]}")
    for spec in columns:
        if spec.type != "categorical":
            raise ContractError(f"contract {contract.name!r}: column {spec.name!r} is "
                                f"{spec.type}; an edge list's columns are categorical over the "
                                "declared node set")
    source, target = columns
    if tuple(source.categories or ()) != tuple(target.categories or ()):
        raise ContractError(f"contract {contract.name!r}: column {target.name!r} declares other "
                            f"categories than {source.name!r}; both name the same public node "
                            "set, in the same order")
    nodes = tuple(source.categories or ())
    if len(nodes) < 2:
        raise ContractError(f"contract {contract.name!r}: column {source.name!r} declares "
                            f"{len(nodes)} node(s); expected at least 2")
    return source.name, target.name, nodes


def check(params: EmbedParams) -> EmbedPlan:
    """Every data-free refusal of an embedding release; the plan of one that can go ahead."""
    contract_path, contract = read_contract(params)
    source, target, nodes = check_edge_contract(contract)
    need = DENSE_MATRICES * 8 * len(nodes) ** 2
    if need > memory_limit():
        raise PlanTooLargeError(
            f"column {source!r}: {len(nodes)} declared nodes need about {need / 2**30:.3g} GiB "
            f"of dense matrices, over the {memory_limit() / 2**30:.3g} GiB limit "
            "(PRIVFAIR_MEMORY_GB)")
    fields = check_request(params, contract_path, contract).plan_fields(
        method="embedding:dpne")
    rho = fields["rho"]
    return EmbedPlan(
        **fields, dpne_epsilon=min(params.epsilon, math.sqrt(2 * (rho - POLICY_SHARE * rho))),
        dim=params.dim, regularization=params.regularization, source=source, target=target,
        nodes=nodes)


# --- stages -------------------------------------------------------------------------------------


def distinct_edges(frame: Any, contract: Contract, source: str, target: str) -> np.ndarray:
    """Which rows are the first listing of their edge: an unordered pair of endpoint labels
    (as the encoder matches them; a null is a label of its own), however often listed."""
    import pandas as pd

    text = [normalize_text(as_text(frame[c]), contract.normalization(c))
            for c in (source, target)]
    ids, _ = pd.factorize(pd.Series(np.concatenate(text), dtype=object),
                          use_na_sentinel=False)
    a, b = ids[:len(frame)].astype(np.int64), ids[len(frame):].astype(np.int64)
    low, high = np.minimum(a, b), np.maximum(a, b)
    return ~pd.Series(low * (int(ids.max(initial=0)) + 1) + high).duplicated().to_numpy()


def read_stage(context: RunContext, state: State) -> dict[str, Any]:
    """The edge list as node codes, as a simple undirected graph (private; no noise).

    Edges get the contract's policies (an endpoint that is not a declared node, or null);
    the exact tally of touched edges, counted once per distinct edge, is staged."""
    import pyarrow.parquet as pq

    from privfair.release.ingest import add_unparsed_records, load, stage_policy_tally

    plan: EmbedPlan = context.plan
    staging = context.workspace.staging
    staged = load(plan.data_path, plan.contract, staging)
    frame = pq.read_table(staged.open_checked(),
                          columns=[plan.source, plan.target]).to_pandas()
    frame = frame[distinct_edges(frame, plan.contract, plan.source, plan.target)]
    tally = add_unparsed_records(staged, PolicyTally())
    codes = discretize(frame, plan.contract, tally=tally)
    del frame
    edges = np.stack([codes[plan.source].astype(np.int64),
                      codes[plan.target].astype(np.int64)], axis=1)
    del codes
    edges = np.unique(np.sort(edges[edges[:, 0] != edges[:, 1]], axis=1), axis=0)
    ledger = save_ledger(PrivacyLedger(rho_budget=plan.rho, delta=plan.delta),
                         context.workspace.artefacts)
    return {"edges": save_private_array(edges.reshape(-1, 2), folder=staging, name="edges.npy"),
            "policy_tally": stage_policy_tally(tally, staging), "ledger": ledger}


def embed_stage(context: RunContext, state: State) -> dict[str, Any]:
    """The noisy counts of touched edges, then DPNE, each charged to the run's ledger
    before its noise is drawn (private; noise)."""
    from privfair.embedding.dpne import EdgeList, dpne
    from privfair.release.ingest import read_policy_tally

    plan: EmbedPlan = context.plan
    ledger = load_ledger(state["ledger"])
    record = measure_policy_counts(read_policy_tally(state["policy_tally"]), plan.contract,
                                   ledger, rho=plan.policy_rho, rng=context.rng("policies"))
    graph = EdgeList(len(plan.nodes), np.load(state["edges"].open_checked(),
                                              allow_pickle=False))
    embeddings = dpne(graph, dim=plan.dim, epsilon=plan.dpne_epsilon, ledger=ledger,
                      rng=context.rng("embed"), regularization=plan.regularization)
    del graph
    return {"embeddings": embeddings, "input_validation": record,
            "ledger": save_ledger(ledger, context.workspace.artefacts)}


# --- the release files ------------------------------------------------------------------------


def pca_chart(embeddings: np.ndarray, nodes: tuple[str, ...]) -> str:
    """The embeddings' first two principal components, labelled by node (a data URI)."""
    from matplotlib.figure import Figure

    from privfair.reporting.report import png

    centred = embeddings - embeddings.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    xy = centred @ vt[:2].T if vt.shape[0] >= 2 else np.c_[centred @ vt[:1].T,
                                                            np.zeros(len(centred))]
    fig = Figure(figsize=(7, 5.5))
    ax = fig.add_subplot()
    ax.scatter(xy[:, 0], xy[:, 1], s=28, color="#3465a4")
    if len(nodes) <= 80:
        for (x, y), name in zip(xy, nodes, strict=True):
            ax.annotate(name, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title("DP node embeddings, first two principal components", fontsize=9)
    return png(fig)


def embedding_report(manifest: dict[str, Any], embeddings: np.ndarray,
                     nodes: tuple[str, ...]) -> str:
    """A short self-contained HTML page: the guarantee and the PCA scatter."""
    from privfair.reporting.report import CSS, kv_table, policy_counts_section

    g = manifest["guarantee"]
    title = f"{html.escape(manifest['dataset'])} {html.escape(manifest['version'])}"
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{title} node embeddings</title><style>{CSS}</style></head><body>",
        f"<h1>Node embeddings: {title} (DPNE)</h1>",
        f"<p>({g['epsilon']:g}, {g['delta']:g})-DP with respect to one edge added or removed: "
        f"DPNE is pure {g['dpne_epsilon']:.6g}-DP (objective perturbation); the run charged "
        f"ρ = {g['spent']['rho']:.6g} of the {g['rho_reserved']:.6g} reserved (noisy counts "
        "of the edges the contract's policies touched included).</p>",
        "<h2>Embeddings</h2>", f"<img alt='PCA of the embeddings' src='"
                               f"{pca_chart(embeddings, nodes)}'>",
        "<h2>Settings</h2>", kv_table(manifest["embedding"]),
        "<h2>Input</h2>",
        policy_counts_section((manifest.get("validation") or {}).get("input") or {}),
        "</body></html>"])


def build_manifest(plan: EmbedPlan, *, version: str, ledger: PrivacyLedger,
                   lifetime: Any, input_validation: dict[str, Any] | None = None,
                   orchestrator: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return common_manifest(plan, kind="embedding", fmt=FORMAT, version=version,
                           orchestrator=orchestrator, body={
        **accounting_fields(plan, ledger=ledger, lifetime=lifetime),
        "method": "dpne",
        "guarantee": {"epsilon": plan.epsilon, "delta": plan.delta, "rho_reserved": plan.rho,
                      "dpne_epsilon": plan.dpne_epsilon, "spent": ledger.guarantee(),
                      "policy_counts_rho": plan.policy_rho,
                      "neighbours": "one edge added or removed"},
        "validation": {"input": input_validation},
        "embedding": {
            "dim": plan.dim, "regularization": plan.regularization,
            "nodes": len(plan.nodes), "source": plan.source, "target": plan.target,
            "graph": "the rows as a simple undirected graph: self-loops dropped, an edge "
                     "listed twice counted once; an edge whose endpoint is not a declared "
                     "node, or null, gets the contract's policy",
            "model": "DeepWalk matrix M = (P + P^2)/2, W minimises ||M - W H^T||^2 + "
                     "lambda ||W||^2 + <W, eta> exactly, H public and data-independent",
        },
    })


class EmbeddingKind(ReleaseKind):
    """Edge-level DP node embeddings of a declared graph (``privfair embed``)."""

    name = "embedding"
    command = "embed"
    params = EmbedParams
    seed_stages = ("embed", "policies")
    description = "publish edge-level DP node embeddings (DPNE) of an edge-list dataset"

    def check(self, params: EmbedParams) -> EmbedPlan:
        return check(params)


    def summary(self, plan: EmbedPlan) -> str:
        return (f"embedding release of {plan.dataset!r}: ε = {plan.epsilon:g}, "
                f"δ = {plan.delta:g} (ρ = {plan.rho:.4g}), {len(plan.nodes)} nodes, "
                f"dim {plan.dim}")

    def stages(self, plan: EmbedPlan) -> list[Stage]:
        return [Stage("read", read_stage, private=True, at=0.05),
                Stage("embed (DPNE)", embed_stage, private=True, noise=True, at=0.3)]

    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        import pandas as pd

        plan: EmbedPlan = context.plan
        embeddings = np.asarray(state["embeddings"], dtype=np.float64)
        manifest = build_manifest(plan, version=version,
                                  ledger=load_ledger(state["ledger"]), lifetime=lifetime,
                                  input_validation=state.get("input_validation"),
                                  orchestrator=context.orchestrator)
        frame = pd.DataFrame(embeddings, columns=[f"e{k}" for k in range(plan.dim)])
        frame.insert(0, "node", list(plan.nodes))
        frame.to_parquet(folder / "embeddings.parquet", index=False)
        (folder / "report.html").write_text(embedding_report(manifest, embeddings, plan.nodes),
                                            encoding="utf-8")
        shutil.copyfile(plan.contract_path, folder / "contract.yaml")
        # no fairness criterion applies to node embeddings: nothing to fail
        return Written(manifest=manifest, files=FILES, n_rows=0, fairness_passed=True,
                       fairness_claimed=False)  # embeddings check no fairness criterion


EMBEDDING = EmbeddingKind()
