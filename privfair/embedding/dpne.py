"""DPNE: edge-level DP node embeddings by objective perturbation (Xu 2021, ch. 5), repaired.

The base model is DeepWalk as matrix factorisation, M ≈ W Hᵀ with M = (P + P²)/2 and P the
random-walk transition matrix (the experiments' t = 2, no log; spec §4.2). DPNE perturbs the
objective in W with a random linear term and releases its exact minimiser.

What is repaired (spec §4.4)
-----------------------------
* (a) H is *public*: passed in (learnt from public data) or, by default, a data-independent
  random matrix with unit rows. The dissertation learns H from the private graph without
  privacy and then treats it as fixed, which leaves W depending on the graph through H.
* (b) The minimiser is exact: with H fixed and λ > 0 the objective is a strongly convex
  quadratic in each row, solved in closed form, ``w_i = (M_i H − η_i / 2)(HᵀH + λI)⁻¹``.
  SGD (as in the dissertation) gives no guarantee.
* (c) The noise term is the linear ``Σ_i w_i η_iᵀ`` (no absolute value), so the first-order
  condition η_i = 2 (M_i H − w_i (HᵀH + λI)) maps W to η one-to-one with a Jacobian that does
  not depend on the graph.
* (d) The sensitivity is proven for any graph: for neighbours (one edge added or removed),
  Σ_i ‖η_i − η'_i‖₂ = 2 Σ_i ‖(M_i − M'_i) H‖₂ ≤ 2 ‖M − M'‖₁ (entrywise, as ‖h_j‖ ≤ 1), and
  ‖M − M'‖₁ < 4 (:func:`deepwalk_sensitivity`), so Δ = 8 replaces Lemma 1's √2, which
  ignored the degree normalisation and that P² spreads a change to the neighbours.
* (e) The norm is L2 per row and the composition over rows is L1: the density
  ∝ Π_i exp(−ε ‖η_i‖₂ / Δ) gives ε-DP, sampled as ‖η_i‖ ~ Gamma(k, Δ/ε) with a uniform
  direction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import DomainError
from privfair.core.mechanisms import row_laplace_mechanism

#: Bound on Σ_i ‖η_i − η'_i‖₂ between edge-neighbouring graphs (2 · 4, see the module notes).
SENSITIVITY = 8.0


@dataclass(frozen=True)
class EdgeList:
    """An undirected simple graph on the public node-id domain ``0 .. n_nodes − 1``."""

    n_nodes: int
    edges: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "edges", check_edges(self.edges, self.n_nodes))


def check_edges(edges: np.ndarray, n_nodes: int) -> np.ndarray:
    """Refuse edges naming unknown nodes, self-loops and repeated edges; one line each."""
    if not (isinstance(n_nodes, int | np.integer) and n_nodes >= 1):
        raise DomainError(f"n_nodes: expected a public node count >= 1, got {n_nodes!r}")
    edges = np.asarray(edges)
    if edges.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise DomainError("edges: expected an (m, 2) array of integer node ids")
    if np.any(edges < 0) or np.any(edges >= n_nodes):
        raise DomainError(f"edges: a node id is outside the declared domain 0..{n_nodes - 1}")
    if np.any(edges[:, 0] == edges[:, 1]):
        raise DomainError("edges: self-loops are not allowed (simple undirected graph)")
    pairs = np.sort(edges, axis=1).astype(np.int64)
    if len(np.unique(pairs, axis=0)) != len(pairs):
        raise DomainError("edges: an edge is listed twice (in either direction)")
    return pairs


def deepwalk_matrix(graph: EdgeList) -> np.ndarray:
    """M = (P + P²)/2 with P = D⁻¹A (rows of isolated nodes are 0)."""
    n = graph.n_nodes
    adjacency = np.zeros((n, n))
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    adjacency[u, v] = 1.0
    adjacency[v, u] = 1.0
    degree = adjacency.sum(axis=1)
    transition = np.divide(adjacency, degree[:, None], out=np.zeros_like(adjacency),
                           where=degree[:, None] > 0)
    return (transition + transition @ transition) / 2


def deepwalk_sensitivity() -> float:
    """Bound on ‖M − M'‖₁ (entrywise) when one edge (u, v) is added: 4.

    ΔP touches rows u and v, each by ‖ΔP_u‖₁ = 2/(d_u + 1) ≤ 1 (or 1 from an empty row),
    so ‖ΔP‖₁ ≤ 2. Δ(P²) = ΔP · P' + P · ΔP: the first term is ≤ ‖ΔP‖₁ (rows of P' sum to
    ≤ 1); the second is Σ_{k∈{u,v}} (Σ_i P_ik) ‖ΔP_k‖₁ ≤ Σ_k d_k · 2/(d_k + 1) < 4. Hence
    ‖ΔM‖₁ ≤ (2 + 2 + 4)/2 = 4. Removing an edge is adding it read backwards.
    """
    return 4.0


def public_factor(n_nodes: int, dim: int, *, rng: np.random.Generator) -> np.ndarray:
    """A data-independent H: Gaussian rows scaled to unit norm (so ‖h_j‖ ≤ 1 holds)."""
    h = rng.normal(size=(n_nodes, dim))
    return h / np.linalg.norm(h, axis=1, keepdims=True)


def dpne(graph: EdgeList, *, dim: int, epsilon: float, ledger: PrivacyLedger,
         rng: np.random.Generator, factor: np.ndarray | None = None,
         regularization: float = 1e-3) -> np.ndarray:
    """ε-edge-DP embeddings W (n_nodes × dim), the exact minimiser of the perturbed objective.

    Parameters
    ----------
    graph : EdgeList
        The private graph on a public node domain.
    dim : int
        Embedding size k.
    epsilon : float
        Pure ε of the release, charged as ρ = ε²/2 before noise is drawn.
    ledger : PrivacyLedger
        The run's ledger.
    rng : numpy.random.Generator
        Source of randomness (noise, and the default public H).
    factor : ndarray, optional
        Public H (n_nodes × dim) with rows of norm ≤ 1; by default :func:`public_factor`.
    regularization : float
        λ > 0 of ``λ Σ ‖w_i‖²``.
    """
    if not (isinstance(dim, int) and dim >= 1):
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not regularization > 0:
        raise ValueError(f"regularization must be > 0, got {regularization!r}")
    n = graph.n_nodes
    h = public_factor(n, dim, rng=rng) if factor is None else np.asarray(factor, dtype=float)
    if h.shape != (n, dim):
        raise ValueError(f"factor: expected shape {(n, dim)}, got {h.shape}")
    if np.any(np.linalg.norm(h, axis=1) > 1 + 1e-9):
        raise ValueError("factor: every row of H must have L2 norm <= 1")
    # The objective's linear coefficient in W, −2 M H (row i: −2 M_i H), gets the noise η:
    # the layer releases −2 M H + η (Σ_i ‖Δ row_i‖₂ ≤ SENSITIVITY, rows of density
    # ∝ exp(−ε ‖η_i‖₂ / Δ)), charged ε before the draw, and W is the exact minimiser of the
    # perturbed objective, w_i = −(−2 M_i H + η_i)/2 · (HᵀH + λI)⁻¹ = (M_i H − η_i/2)(…)⁻¹.
    linear = row_laplace_mechanism(-2.0 * (deepwalk_matrix(graph) @ h), epsilon=epsilon,
                                   sensitivity=SENSITIVITY, rng=rng, ledger=ledger,
                                   name="DPNE objective perturbation")
    gram = h.T @ h + regularization * np.eye(dim)
    return np.linalg.solve(gram, (-linear / 2).T).T


def spectral_embedding(graph: EdgeList, dim: int) -> np.ndarray:
    """Non-private reference: rank-``dim`` factor U_k S_k^{1/2} of M (truncated SVD)."""
    u, s, _ = np.linalg.svd(deepwalk_matrix(graph))
    return u[:, :dim] * np.sqrt(s[:dim])
