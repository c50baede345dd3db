"""Synthetic ground truth for structure discovery: random DAGs, categorical CPTs, linear SEMs.

The dissertation generated its categorical data with TETRAD (§4.6.1); these generators follow
the same recipe (random DAG with sparseness s = |E| / C(p, 2), 2–5 categories per node, random
CPTs, or a linear-Gaussian SEM) so benchmarks and tests need no download.

The linear-Gaussian SEM has two named weight settings (:data:`LINEAR_GAUSSIAN_GENERATORS`):
``"default"`` draws signed weights ±U(0.5, 1.5) (TETRAD's default coefficient range), a harder
test with cancelling paths; ``"xu2021"`` draws positive weights U(0.1, 1), the defaults of
pcalg's ``randomDAG``/``rmvDAG`` on which §4.6.2 was run. Non-private PC on ``"xu2021"``
reproduces Tables 4.8–4.11's non-private rows (read as printed, see
:func:`privfair.causal.graph.skeleton_scores_as_printed_xu2021`); on ``"default"`` its TPR at
p = 20, s = 0.4 is 0.31 ± 0.02 against the tables' 0.39 (10 graphs each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfair.causal.graph import CausalGraph
from privfair.core.domain import Domain


@dataclass(frozen=True)
class RandomDag:
    """A DAG over ``x0 .. x{p-1}``; ``parents[k]`` lists k's parents (all earlier in order)."""

    nodes: tuple[str, ...]
    parents: tuple[tuple[int, ...], ...]

    @property
    def graph(self) -> CausalGraph:
        return CausalGraph(self.nodes, tuple((self.nodes[a], self.nodes[b])
                                             for b, ps in enumerate(self.parents) for a in ps))


def random_dag(p: int, sparseness: float, *, rng: np.random.Generator) -> RandomDag:
    """A DAG with round(s · C(p, 2)) edges drawn uniformly, in a random topological order."""
    if p < 2 or not 0 <= sparseness <= 1:
        raise ValueError("random_dag: expected p >= 2 and sparseness in [0, 1]")
    order = rng.permutation(p)
    pairs = [(a, b) for a in range(p) for b in range(a + 1, p)]
    chosen = rng.choice(len(pairs), size=round(sparseness * len(pairs)), replace=False)
    parents: list[list[int]] = [[] for _ in range(p)]
    for k in chosen:
        a, b = pairs[k]
        parents[int(order[b])].append(int(order[a]))
    topo = [int(v) for v in order]
    # Relabel so that node k comes k-th in topological order: parents always precede.
    rank = {v: r for r, v in enumerate(topo)}
    relabelled = [tuple(sorted(rank[u] for u in parents[v])) for v in topo]
    return RandomDag(tuple(f"x{k}" for k in range(p)), tuple(relabelled))


def sample_categorical(dag: RandomDag, n: int, *, rng: np.random.Generator,
                       min_levels: int = 2, max_levels: int = 5,
                       concentration: float = 0.5) -> tuple[np.ndarray, Domain]:
    """n rows of codes from random CPTs (Dirichlet(concentration) per parent configuration)."""
    p = len(dag.nodes)
    sizes = rng.integers(min_levels, max_levels + 1, size=p)
    codes = np.zeros((n, p), dtype=np.int64)
    for k, ps in enumerate(dag.parents):
        configs = math.prod(int(sizes[u]) for u in ps)
        cpt = rng.dirichlet(np.full(int(sizes[k]), concentration), size=configs)
        index = np.zeros(n, dtype=np.int64)
        for u in ps:
            index = index * int(sizes[u]) + codes[:, u]
        cumulative = np.cumsum(cpt, axis=1)[index]
        draws = rng.random(n)[:, None]
        codes[:, k] = np.minimum((draws > cumulative).sum(axis=1), int(sizes[k]) - 1)
    return codes, Domain(dag.nodes, tuple(int(s) for s in sizes))


#: Weight settings of :func:`sample_linear_gaussian`: signed ±U(0.5, 1.5), or Xu 2021's
#: (pcalg's) positive U(0.1, 1).
LINEAR_GAUSSIAN_GENERATORS = ("default", "xu2021")


def sample_linear_gaussian(dag: RandomDag, n: int, *, rng: np.random.Generator,
                           generator: str = "default") -> tuple[np.ndarray, np.ndarray]:
    """n rows of a linear-Gaussian SEM with unit noise, and the true standard deviations.

    Parameters
    ----------
    dag : RandomDag
        The structure; node k's value is Σ_u w_uk x_u + N(0, 1) over its parents u.
    n : int
        Number of rows.
    rng : numpy.random.Generator
        Source of randomness (weights, then noise).
    generator : {"default", "xu2021"}
        ``"default"``: weights ±U(0.5, 1.5) with a random sign. ``"xu2021"``: weights
        U(0.1, 1), all positive, as pcalg's ``randomDAG`` (lB = 0.1, uB = 1) draws them for
        ``rmvDAG``, the setting of the dissertation's numerical experiments.

    Returns
    -------
    values : ndarray, shape (n, p)
    stds : ndarray, shape (p,)
        The true standard deviations: the simulator's public knowledge, usable as the public
        scale that PrivPC* standardises with.
    """
    if generator not in LINEAR_GAUSSIAN_GENERATORS:
        raise ValueError(f"generator: expected one of {list(LINEAR_GAUSSIAN_GENERATORS)}, "
                         f"got {generator!r}")
    p = len(dag.nodes)
    weights = np.zeros((p, p))
    for k, ps in enumerate(dag.parents):
        for u in ps:
            if generator == "xu2021":
                weights[u, k] = rng.uniform(0.1, 1.0)
            else:
                weights[u, k] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5)
    values = np.zeros((n, p))
    for k in range(p):
        values[:, k] = values @ weights[:, k] + rng.normal(size=n)
    mixing = np.linalg.inv(np.eye(p) - weights)
    stds = np.sqrt(np.diag(mixing.T @ mixing))
    return values, stds
