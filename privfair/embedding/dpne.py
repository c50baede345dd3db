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
  ‖M − M'‖₁ ≤ 3 (:func:`deepwalk_sensitivity`), so Δ = 6 replaces Lemma 1's √2, which
  ignored the degree normalisation and that P² spreads a change to the neighbours. Theorem
  7's step "‖M − M'‖ ≤ Δ and ‖h_j‖ ≤ 1, so ‖N − N'‖ ≤ 2Δ" holds for the *entrywise L1*
  norm of M − M' (Σ_i ‖Σ_j Δm_ij h_j‖ ≤ Σ_ij |Δm_ij|), not for Lemma 1's L2 norm; with
  Δ = 3, the L1 bound, Theorem 7's density exp(−ε‖η_i‖/(2Δ)) is exactly ours. The paper's
  mechanism, implemented as its theorem states (public H, linear term, exact minimiser), is
  this default: the noise is 6 / (2√2) = 2.1× the paper's Lemma-1 noise, not more.
* (e) The norm is L2 per row and the composition over rows is L1: the density
  ∝ Π_i exp(−ε ‖η_i‖₂ / Δ) gives ε-DP, sampled as ‖η_i‖ ~ Gamma(k, Δ/ε) with a uniform
  direction.

The paper's own setting
-----------------------
``accounting="paper"`` runs DPNE as the dissertation analyses it (Theorem 7, Lemma 1): H
learnt from the *private* graph (:func:`private_factor`, the non-private factorisation's
context factor) and η_i of density ∝ exp(−ε ‖η_i‖ / (2Δ)) with Δ = √2, i.e. a row sensitivity
of 2√2 (:data:`PAPER_SENSITIVITY`). It exists for reproduction counter-runs: the ε it reports
is the paper's claim, not a guarantee (pitfalls (a) and (d)), and no release uses it.

``noise_term="absolute"`` (with ``accounting="paper"`` only) is the dissertation's
*implementation*: "we use the absolute noise term [|Σ_i w_i η_iᵀ|] to get a better
performance on the optimization" (§5.4.1). Its exact minimiser (:func:`absolute_minimiser`)
is W(c) = (M H − c N/2) A⁻¹, A = HᵀH + λI, with the scalar c = a/b clipped to [−1, 1],
a = ⟨W*, N⟩, b = ⟨N A⁻¹, N⟩/2 and W* = M H A⁻¹ the non-private minimiser. Scaling N by any
s > 0 scales a by s and b by s², so c N is unchanged while |a| ≤ b: **the released W does
not depend on ε** below the ε at which |c| reaches 1 (c ∝ ε; on the Cora stand-in at
k = 100, c ≈ 4·10⁻⁶ at ε = 1, so up to ε ≈ 2·10⁵). The noise moves W off W* only along one direction chosen to meet one scalar
constraint ⟨W, N⟩ = 0, by ‖W − W*‖ = |a| ‖N A⁻¹‖ / (2b), about ‖W*‖/√(n k) for a random
direction. The first-order-condition argument of Theorem 7 then fails (c η_i − η'_i, not
η_i − η'_i, is what the graph fixes, and c depends on the graph), and a neighbour is told
apart by W's distance to W*(G) versus W*(G'): not ε-DP for any finite ε. It exists to show,
measured, where the paper's numbers at ε ≥ 1 come from: the reproduction
(``benchmarks/reproduce/xu_dpne.py``) judges Tables 5.1 / 5.3 on it as the paper's setting,
with the ε-DP default beside it. Neither ``accounting="paper"`` setting is a guarantee: with
Lemma 1's Δ the realised privacy loss on the worst neighbours reaches 1.77 ε even with a
public H (tests/test_embedding_dpne.py).

Why the paper's ε = 1 is out of reach of the linear term (proof, not tuning): the release is
the affine image W = (M H − N/2) A⁻¹ of the noisy row vectors M_i H − η_i/2. Rows of M are
non-negative and sum to 1 (0 for isolated nodes) and ‖h_j‖ ≤ 1, so ‖M_i H‖₂ ≤ 1, while
E‖η_i‖ = k · Δ_row / ε: 283 at k = 100, ε = 1 for the paper's own Δ_row = 2√2 (600 for the
proven 6). Any linear classifier reads a projection of the rows; along any unit direction the
signal moves by at most 2 between classes while the noise has standard deviation
Δ_row √(k + 1) / (2ε) ≈ 14 (paper) or 30 (proven): a separation d′ ≤ 0.14, chance. Summing
or averaging the loss over the |Ω| pairs does not change this: it scales the data term and
the gradient sensitivity that calibrates η by the same factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import DomainError
from privfair.core.mechanisms import laplace_mechanism, row_laplace_mechanism

#: Bound on Σ_i ‖η_i − η'_i‖₂ between edge-neighbouring graphs (2 · 3, see the module notes).
SENSITIVITY = 6.0
#: The dissertation's row sensitivity: Theorem 7's density exp(−ε‖η‖/(2Δ)) with Lemma 1's
#: Δ = √2 (unproven; ``accounting="paper"`` only).
PAPER_SENSITIVITY = 2 * math.sqrt(2)
#: dpM's per-entry Laplace: the entrywise L1 sensitivity of M (:func:`deepwalk_sensitivity`).
DPM_SENSITIVITY = 3.0
#: The dissertation's dpM: Lap(√2/ε) per entry, Lemma 1's L2 bound used as an L1
#: sensitivity (spec §4.4 (e); ``accounting="paper"`` only, no guarantee).
PAPER_DPM_SENSITIVITY = math.sqrt(2)
#: How DPNE is accounted: ``"proven"`` (public H, :data:`SENSITIVITY`) or ``"paper"``.
Accounting = Literal["proven", "paper"]
#: The noise term of the perturbed objective: ``"linear"`` Σ_i w_i η_iᵀ (Theorem 7) or
#: ``"absolute"`` |Σ_i w_i η_iᵀ| (the dissertation's implementation; not DP, paper only).
NoiseTerm = Literal["linear", "absolute"]


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


def deepwalk_operator(graph: EdgeList) -> sp.csr_array:
    """M = (P + P²)/2 with P = D⁻¹A (rows of isolated nodes are 0), sparse.

    Sparse because real graphs are: P² has about Σ_i d_i² entries, so M @ H costs that
    rather than n² (the dense product alone took seconds on a Cora-sized graph).
    """
    n = graph.n_nodes
    u, v = graph.edges[:, 0], graph.edges[:, 1]
    adjacency = sp.csr_array((np.ones(2 * len(u)), (np.concatenate([u, v]),
                                                    np.concatenate([v, u]))), shape=(n, n))
    degree: np.ndarray = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros(n), where=degree > 0)
    transition = sp.csr_array(sp.diags_array(inverse) @ adjacency)
    return sp.csr_array((transition + transition @ transition) / 2)


def deepwalk_matrix(graph: EdgeList) -> np.ndarray:
    """M = (P + P²)/2 with P = D⁻¹A (rows of isolated nodes are 0), dense."""
    return deepwalk_operator(graph).toarray()


def deepwalk_sensitivity() -> float:
    """Bound on ‖M − M'‖₁ (entrywise) when one edge (u, v) is added: 3.

    Only rows u and v of P change; endpoint k of degree d (before) moves its row by
    ‖ΔP_k‖₁ = 2/(d + 1) for d ≥ 1 and 1 for d = 0, so ‖ΔP_k‖₁ ≤ 1 with equality only at
    d ≤ 1. Δ(P²) = ΔP · P' + P · ΔP. Rows of P' sum to ≤ 1, so ‖ΔP_k P'‖₁ ≤ ‖ΔP_k‖₁; row k
    of ΔP enters P · ΔP with weight Σ_i P_ik = Σ_{i ~ k} 1/d_i ≤ d. Per endpoint
    ‖ΔP_k‖₁ (1 + 1 + d) ≤ c(d) with c(0) = 2, c(1) = 3 and c(d) = 2(d + 2)/(d + 1) < 3 for
    d ≥ 2, hence ‖ΔM‖₁ ≤ (3 + 3)/2 = 3. Removing an edge is adding it read backwards.
    (Every graph on up to 6 nodes reaches at most 2.5: two isolated edges joined.)
    """
    return 3.0


def public_factor(n_nodes: int, dim: int, *, rng: np.random.Generator) -> np.ndarray:
    """A data-independent H: Gaussian rows scaled to unit norm (so ‖h_j‖ ≤ 1 holds)."""
    h = rng.normal(size=(n_nodes, dim))
    return h / np.linalg.norm(h, axis=1, keepdims=True)


def private_factor(graph: EdgeList, dim: int) -> np.ndarray:
    """The dissertation's H: the context factor of the non-private factorisation of the
    *private* graph's M (V_k S_k^{1/2}), scaled so its largest row has norm 1. Not DP: for
    ``accounting="paper"`` counter-runs only."""
    _, s, vt = truncated_svd(deepwalk_operator(graph), dim)
    h = vt.T * np.sqrt(s)
    largest = float(np.linalg.norm(h, axis=1).max())
    return h / largest if largest > 0 else h


def dpne(graph: EdgeList, *, dim: int, epsilon: float, ledger: PrivacyLedger,
         rng: np.random.Generator, factor: np.ndarray | None = None,
         regularization: float = 1e-3, accounting: Accounting = "proven",
         noise_term: NoiseTerm = "linear") -> np.ndarray:
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
        Public H (n_nodes × dim) with rows of norm ≤ 1; by default :func:`public_factor`
        (``accounting="paper"``: :func:`private_factor`).
    regularization : float
        λ > 0 of ``λ Σ ‖w_i‖²``.
    accounting : {"proven", "paper"}
        ``"proven"``: noise for :data:`SENSITIVITY` (ε-edge-DP). ``"paper"``: the
        dissertation's setting (private H by default, :data:`PAPER_SENSITIVITY`), for
        reproduction counter-runs; its ε is the paper's claim, not a guarantee.
    noise_term : {"linear", "absolute"}
        ``"linear"``: Theorem 7's Σ_i w_i η_iᵀ. ``"absolute"``: the dissertation's
        implementation |Σ_i w_i η_iᵀ| (:func:`absolute_minimiser`), whose release does not
        depend on ε and is not DP; refused unless ``accounting="paper"``.
    """
    if not (isinstance(dim, int) and dim >= 1):
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not regularization > 0:
        raise ValueError(f"regularization must be > 0, got {regularization!r}")
    if accounting not in ("proven", "paper"):
        raise ValueError(f"accounting must be 'proven' or 'paper', got {accounting!r}")
    if noise_term not in ("linear", "absolute"):
        raise ValueError(f"noise_term must be 'linear' or 'absolute', got {noise_term!r}")
    if noise_term == "absolute" and accounting != "paper":
        raise ValueError("noise_term='absolute' is the dissertation's implementation and is "
                         "not DP: it needs accounting='paper'")
    n = graph.n_nodes
    if factor is not None:
        h = np.asarray(factor, dtype=float)
    elif accounting == "paper":
        h = private_factor(graph, dim)
    else:
        h = public_factor(n, dim, rng=rng)
    if h.shape != (n, dim):
        raise ValueError(f"factor: expected shape {(n, dim)}, got {h.shape}")
    if np.any(np.linalg.norm(h, axis=1) > 1 + 1e-9):
        raise ValueError("factor: every row of H must have L2 norm <= 1")
    # The objective's linear coefficient in W, −2 M H (row i: −2 M_i H), gets the noise η:
    # the layer releases −2 M H + η (Σ_i ‖Δ row_i‖₂ ≤ SENSITIVITY, rows of density
    # ∝ exp(−ε ‖η_i‖₂ / Δ)), charged ε before the draw, and W is the exact minimiser of the
    # perturbed objective, w_i = −(−2 M_i H + η_i)/2 · (HᵀH + λI)⁻¹ = (M_i H − η_i/2)(…)⁻¹.
    paper = accounting == "paper"
    exact = -2.0 * (deepwalk_operator(graph) @ h)
    linear = row_laplace_mechanism(
        exact, epsilon=epsilon,
        sensitivity=PAPER_SENSITIVITY if paper else SENSITIVITY, rng=rng, ledger=ledger,
        name="DPNE objective perturbation" + (" (paper accounting, no guarantee)" if paper
                                              else ""))
    gram = h.T @ h + regularization * np.eye(dim)
    if noise_term == "absolute":
        # Not DP (module notes): the paper-only path reads the exact data term again.
        return absolute_minimiser(-exact / 2, linear - exact, gram)
    return np.linalg.solve(gram, (-linear / 2).T).T


def absolute_minimiser(data: np.ndarray, noise: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """Exact minimiser over W of ``Σ_i (w_i A w_iᵀ − 2 w_i d_iᵀ) + |Σ_i w_i η_iᵀ|``.

    ``data`` is D = M H, ``noise`` is N (rows η_i), ``gram`` is A = HᵀH + λI (positive
    definite). The objective is strictly convex; its subgradient condition is
    2 (W A − D) + c N = 0 with c = sign⟨W, N⟩, or c ∈ [−1, 1] where ⟨W, N⟩ = 0. So
    W = W* − c N A⁻¹/2 with W* = D A⁻¹, ⟨W, N⟩ = a − c b (a = ⟨W*, N⟩, b = ⟨N A⁻¹, N⟩/2 > 0):
    c = a/b when |a| ≤ b (W on the hyperplane), else c = sign(a). Scaling N by s > 0 leaves
    c N unchanged while |a| ≤ b, so the result does not depend on the noise's scale (on ε)
    until the noise is small enough that |c| = 1.
    """
    best = np.linalg.solve(gram, data.T).T
    shift = np.linalg.solve(gram, noise.T).T
    a = float(np.sum(best * noise))
    b = float(np.sum(shift * noise)) / 2
    if b <= 0:
        return best
    c = a / b if abs(a) <= b else math.copysign(1.0, a)
    return best - c * shift / 2


def dpm(graph: EdgeList, *, dim: int, epsilon: float, ledger: PrivacyLedger,
        rng: np.random.Generator, accounting: Accounting = "proven") -> np.ndarray:
    """The dissertation's naive baseline dpM (§5.4.2): M + Laplace noise in every entry, then
    the rank-``dim`` factorisation of the noisy M (:func:`spectral_embedding`'s U_k S_k^{1/2}).

    Proof (``accounting="proven"``): adding or removing one edge moves M by at most 3 in the
    entrywise L1 norm (:func:`deepwalk_sensitivity`), so i.i.d. Lap(3/ε) on the n² entries
    is ε-edge-DP, and the factorisation is post-processing. ``accounting="paper"``:
    Lap(√2/ε), the dissertation's scale (Lemma 1's L2 bound where the Laplace mechanism needs
    an L1 one; the L1 change reaches 2.5 on five nodes), for reproduction counter-runs only.

    Parameters
    ----------
    graph : EdgeList
        The private graph on a public node domain.
    dim : int
        Embedding size k (< n_nodes).
    epsilon : float
        Pure ε of the release, charged before the draw.
    ledger : PrivacyLedger
        The run's ledger.
    rng : numpy.random.Generator
        Source of the noise.
    accounting : {"proven", "paper"}
        ``"proven"``: :data:`DPM_SENSITIVITY`; ``"paper"``: :data:`PAPER_DPM_SENSITIVITY`.
    """
    if not (isinstance(dim, int) and 1 <= dim < graph.n_nodes):
        raise ValueError(f"dim must be an integer in 1..n_nodes - 1, got {dim!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if accounting not in ("proven", "paper"):
        raise ValueError(f"accounting must be 'proven' or 'paper', got {accounting!r}")
    paper = accounting == "paper"
    noisy = laplace_mechanism(
        deepwalk_matrix(graph), epsilon=epsilon,
        sensitivity=PAPER_DPM_SENSITIVITY if paper else DPM_SENSITIVITY, rng=rng,
        ledger=ledger,
        name="dpM: Laplace on M" + (" (paper accounting, no guarantee)" if paper else ""))
    u, s = subspace_svd(noisy, dim)
    return u * np.sqrt(s)


def subspace_svd(matrix: np.ndarray, dim: int, *, iterations: int = 12
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Approximate ``dim`` largest singular pairs (U, s) of a dense square matrix by block
    subspace iteration from a fixed cosine basis (deterministic, data-free).

    ARPACK on a dense noisy n × n M took 100 s per call on a Cora-sized graph (its spectrum is
    flat); ``iterations`` rounds of two n × n × dim products and a QR take seconds.
    """
    n = matrix.shape[0]
    block = min(n, dim + 10)
    grid = np.arange(n)[:, None] + 0.5
    q, _ = np.linalg.qr(np.cos(np.pi * grid * np.arange(block)[None, :] / n))
    for _ in range(iterations):
        q, _ = np.linalg.qr(matrix @ (matrix.T @ q))
    u, s, _ = np.linalg.svd(q.T @ matrix, full_matrices=False)
    return (q @ u)[:, :dim], s[:dim]


def truncated_svd(matrix: sp.csr_array | np.ndarray, dim: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``dim`` largest singular triplets (U, s, Vᵀ), largest first, deterministic.

    ARPACK on the sparse M when ``dim`` is well below n (a dense SVD of a Cora-sized M took
    minutes), the dense SVD otherwise; the start vector is fixed so reruns agree.
    """
    n = min(matrix.shape)
    if dim >= n - 1:
        dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
        u, s, vt = np.linalg.svd(dense)
        return u[:, :dim], s[:dim], vt[:dim]
    u, s, vt = svds(matrix, k=dim, v0=np.full(min(matrix.shape), 1 / math.sqrt(n)))
    order = np.argsort(s)[::-1]
    return u[:, order], s[order], vt[order]


def spectral_embedding(graph: EdgeList, dim: int) -> np.ndarray:
    """Non-private reference: rank-``dim`` factor U_k S_k^{1/2} of M (truncated SVD)."""
    u, s, _ = truncated_svd(deepwalk_operator(graph), dim)
    return u * np.sqrt(s)
