"""Causal effects of S on Y in a table of codes, on a known DAG (no torch).

One estimator for real and synthetic tables alike (spec §6.4): conditional probability tables
P(v | pa(v)) are counted from the table (add-α smoothing; a parent configuration the table never
shows falls back to P(v)), then ancestral sampling with common random numbers runs the
truncated factorisation under do(S = s⁺) and do(S = s⁻):

* total effect TE = P(Y_{s⁺} = y⁺) − P(Y_{s⁻} = y⁺);
* path-specific effect SE_π: the reference stream has S = s⁻; a node's parent value is taken
  from the interventional stream (S = s⁺) along edges in π and from the reference stream
  otherwise (π_d = {S → Y} gives direct, paths through a redlining set indirect
  discrimination).

On the synthetic table this is post-processing; on the real table it reads private data, so
only benchmarks (marked not privacy-protected) call it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from privfair.core.domain import Domain
from privfair.generative.dag import CausalDAG

__all__ = ["causal_effect"]


class _Table:
    """P(v | parents) counted from codes, sampled by inverse CDF."""

    def __init__(self, codes: Mapping[str, np.ndarray], domain: Domain, node: str,
                 parents: tuple[str, ...], alpha: float) -> None:
        self.parents, self.sizes = parents, domain.shape(parents)
        size = domain.size(node)
        values = np.asarray(codes[node])
        marginal = np.bincount(values, minlength=size) + alpha
        self.marginal = np.cumsum(marginal / marginal.sum())
        if parents:
            keys = self._keys([np.asarray(codes[p]) for p in parents])
            self.keys, inverse = np.unique(keys, return_inverse=True)
            counts = np.zeros((len(self.keys), size))
            np.add.at(counts, (inverse, values), 1.0)
            counts += alpha
            self.cdf = np.cumsum(counts / counts.sum(1, keepdims=True), axis=1)

    def _keys(self, columns: list[np.ndarray]) -> np.ndarray:
        return np.ravel_multi_index(tuple(columns), self.sizes)

    def sample(self, parent_values: list[np.ndarray], u: np.ndarray) -> np.ndarray:
        if not self.parents:
            return np.minimum(np.searchsorted(self.marginal, u), len(self.marginal) - 1)
        keys = self._keys(parent_values)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        seen = self.keys[at] == keys
        cdf = np.where(seen[:, None], self.cdf[at], self.marginal[None, :])
        return np.minimum((cdf < u[:, None]).sum(1), cdf.shape[1] - 1)


def causal_effect(codes: Mapping[str, np.ndarray], domain: Domain, dag: CausalDAG, *,
                  protected: str, outcome: str, rng: np.random.Generator,
                  paths: Iterable[tuple[str, str]] | None = None, n_samples: int = 50_000,
                  alpha: float = 0.5) -> float:
    """TE (``paths=None``) or SE_π of S on Y = its last code, for binary S (s⁺ = 1, s⁻ = 0)."""
    if domain.size(protected) != 2:
        raise ValueError(f"protected attribute {protected!r} must be binary for causal effects")
    tables = {v: _Table(codes, domain, v, dag.parents(v), alpha) for v in dag.nodes}
    noise = {v: rng.random(n_samples) for v in dag.nodes}
    along = None if paths is None else set(paths)

    def run(s: int, reference: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        values: dict[str, np.ndarray] = {}
        for v in dag.nodes:
            if v == protected:
                values[v] = np.full(n_samples, s, dtype=np.int64)
                continue
            # a reference run is given only with paths (``along``)
            parents = [values[p] if reference is None or along is None or (p, v) in along
                       else reference[p] for p in dag.parents(v)]
            values[v] = tables[v].sample(parents, noise[v])
        return values

    positive = domain.size(outcome) - 1
    minus = run(0, None)
    plus = run(1, None if along is None else minus)
    return float(np.mean(plus[outcome] == positive) - np.mean(minus[outcome] == positive))
