"""Private-PGM-style estimation: the graphical model that best explains noisy marginals.

This module is long on purpose: one algorithm (mirror descent with junction-tree belief
propagation), read top to bottom.

Given noisy measurements ``y_m ≈ μ_m + N(0, σ_m²)`` of marginals ``μ_m``, find the
distribution in the marginal polytope minimising ``Σ_m ½‖(μ_m − y_m)/σ_m‖²`` (McKenna,
Sheldon and Miklau 2019). The search is entropic mirror descent on the log-potentials θ of a
Markov random field over the measured cliques; μ(θ) comes from exact sum-product belief
propagation on a junction tree, so the estimate is always a consistent distribution.

Everything here is post-processing of noisy measurements: the total is estimated from them
(inverse-variance weighted), never taken from the private data.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import clarabel
import numpy as np

from privfair.core.domain import Clique, Domain
from privfair.core.graphs import bfs_edges, maximum_spanning_forest
from privfair.synth.measure import Measurement


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques of a triangulation, joined into a tree.

    ``order`` lists cliques root first so that every clique's ``parent`` comes before it;
    separators of cliques from different components are empty.
    """

    cliques: tuple[Clique, ...]
    parent: tuple[int, ...]
    order: tuple[int, ...]

    def separator(self, i: int) -> Clique:
        p = self.parent[i]
        if p < 0:
            return ()
        return tuple(a for a in self.cliques[i] if a in self.cliques[p])


def build_junction_tree(domain: Domain, cliques: Iterable[Iterable[str]]) -> JunctionTree:
    """Triangulate the graph of ``cliques`` (greedy min-fill) and join its maximal cliques.

    Attributes in no clique become singleton cliques, so the tree covers the whole domain.
    The tree depends only on the graph (the cliques' edges), so recent ones are cached: AIM
    builds the same tree for its size check, its fit and its round log.
    """
    edges = frozenset(frozenset(pair) for c in cliques
                      for pair in itertools.combinations(sorted(set(c)), 2))
    return _junction_tree(domain, edges)


@functools.lru_cache(maxsize=64)
def _junction_tree(domain: Domain, edges: frozenset[frozenset[str]]) -> JunctionTree:
    adjacency: dict[str, set[str]] = {a: set() for a in domain}
    for a, b in edges:
        adjacency[a].add(b)
        adjacency[b].add(a)

    remaining = {a: set(n) for a, n in adjacency.items()}
    elimination_cliques: list[frozenset[str]] = []
    while remaining:
        def fill_cost(v: str) -> tuple[int, int, int]:
            nbrs = list(remaining[v])
            fill = sum(1 for i, a in enumerate(nbrs) for b in nbrs[i + 1:]
                       if b not in remaining[a])
            return fill, domain.cells([v, *nbrs]), domain.position(v)

        v = min(remaining, key=fill_cost)
        nbrs = remaining.pop(v)
        for a in nbrs:
            remaining[a].discard(v)
            remaining[a].update(b for b in nbrs if b != a)
        elimination_cliques.append(frozenset({v, *nbrs}))

    maximal = [c for c in elimination_cliques
               if not any(c < other for other in elimination_cliques)]
    maximal = list(dict.fromkeys(maximal))
    ordered = [domain.canonical(c) for c in maximal]

    # +1 keeps disconnected components joined by empty separators, so the forest is a tree.
    pairs = [(i, j, len(set(ordered[i]) & set(ordered[j])) + 1)
             for i in range(len(ordered)) for j in range(i + 1, len(ordered))]
    tree = maximum_spanning_forest(len(ordered), pairs)
    parent = [-1] * len(ordered)
    order = [0]
    for up, down in bfs_edges(len(ordered), tree, source=0):
        parent[down] = up
        order.append(down)
    return JunctionTree(tuple(ordered), tuple(parent), tuple(order))


def _axes(domain: Domain, clique: Sequence[str]) -> list[int]:
    return [domain.position(a) for a in clique]


def _broadcast(domain: Domain, table: np.ndarray, src: Clique, dst: Clique) -> np.ndarray:
    """View ``table`` over ``src`` with singleton axes so it broadcasts over ``dst``."""
    shape = [domain.size(a) if a in src else 1 for a in dst]
    return table.reshape(shape)


@dataclass
class FitReport:
    """How the estimation ended."""

    iterations: int
    loss: float
    converged: bool
    losses: list[float] = field(default_factory=list)
    #: What ended the fit: "tolerance", "exact solution", "time budget" or "iteration cap".
    stopped_by: str | None = None
    #: Whether the model is ``estimate(fallback=...)``'s, the fit having ended unconverged
    #: at a higher loss.
    kept_fallback: bool = False


@dataclass
class GraphicalModel:
    """A Markov random field on a junction tree, calibrated to a total.

    ``beliefs[i]`` is the normalised marginal distribution of ``tree.cliques[i]``.
    """

    domain: Domain
    tree: JunctionTree
    potentials: dict[Clique, np.ndarray]
    total: float
    beliefs: list[np.ndarray]
    report: FitReport | None = None

    def marginal(self, attributes: Iterable[str]) -> np.ndarray:
        """Expected counts (total · probability) of a marginal inside one maximal clique."""
        target = self.domain.canonical(attributes)
        for clique, belief in zip(self.tree.cliques, self.beliefs, strict=True):
            if set(target) <= set(clique):
                return self.total * _sum_to(self.domain, belief, clique, target)
        raise ValueError(
            f"marginal {list(target)} is not inside one clique of the model; "
            "sample the model and count instead"
        )

    def pair_marginals(self, attribute: str, others: Iterable[str] | None = None
                       ) -> dict[str, np.ndarray]:
        """Expected counts of (attribute, b) for every other attribute b, any distance apart.

        One pass over the calibrated tree from a clique holding ``attribute``: entering
        clique ``j`` through separator ``S``, ``P(attribute, C_j) = P(attribute, S) ·
        P(C_j) / P(S)`` (the junction tree's conditional independence), and each ``b`` is read
        off the first clique that holds it. No recalibration; each joint table is dropped as
        soon as its subtree is done, so memory stays at ``|attribute|`` times one clique.
        Given ``others``, only those b are returned, and subtrees holding none of them are
        not entered (AIM's scoring needs each pair once).
        """
        dom, tree = self.domain, self.tree
        cache = self.__dict__.get("_propagation")
        if cache is None:  # built once per model, shared by every attribute's pass
            cache = self.__dict__["_propagation"] = _Propagation.of(self)
        batch, k = len(dom), dom.size(attribute)
        start = cache.home[attribute]
        axes = cache.axes
        joint = np.einsum(self.beliefs[start], axes[start], np.eye(k),
                          [batch, dom.position(attribute)], [batch, *axes[start]])
        wanted = set(dom.attributes if others is None else others) - {attribute}
        out: dict[str, np.ndarray] = {}
        stack = [(start, -1, joint)]
        while stack:
            i, came_from, joint = stack.pop()
            for b in cache.homed[i]:
                if b in wanted:
                    out[b] = self.total * cache.sum_onto(dom, tree, k, i, (b,))(joint)
            for j in cache.neighbours[i]:
                if j == came_from or not wanted & cache.beyond(i, j):
                    continue
                separator = tuple(a for a in tree.cliques[j] if a in tree.cliques[i])
                if separator:
                    # P(attribute, S) broadcast over C_j times P(C_j | S): a broadcast product
                    # (a two-operand einsum here loops cell by cell, several times slower)
                    through = cache.sum_onto(dom, tree, k, i, separator)(joint)
                    view = [k, *(dom.size(a) if a in separator else 1 for a in tree.cliques[j])]
                    nxt = through.reshape(view) * cache.conditional(self, j, separator)
                else:  # another component: independent of the attribute
                    nxt = np.einsum(joint.reshape(k, -1).sum(axis=1), [batch],
                                    self.beliefs[j], axes[j], [batch, *axes[j]])
                stack.append((j, i, nxt))
        return {b: out[b] for b in dom if b in wanted}

    @classmethod
    def from_potentials(cls, domain: Domain, potentials: Mapping[Clique, np.ndarray],
                        total: float, report: FitReport | None = None) -> GraphicalModel:
        """Rebuild the junction tree and calibrated beliefs of saved log-potentials."""
        cliques = list(potentials)
        tree = build_junction_tree(domain, cliques)
        beliefs = BeliefPropagation(domain, tree, cliques).calibrate(potentials)
        return cls(domain, tree, dict(potentials), float(total), [b[0] for b in beliefs],
                   report)

    def save(self, file: Any) -> None:
        """Write the model as ``.npz`` (log-potentials + JSON metadata; never pickle)."""
        cliques = list(self.potentials)
        report = self.report
        meta = {
            "domain": {"attributes": list(self.domain.attributes),
                       "sizes": list(self.domain.sizes)},
            "cliques": [list(c) for c in cliques],
            "total": self.total,
            "report": None if report is None else {
                "iterations": report.iterations, "loss": report.loss,
                "converged": report.converged, "stopped_by": report.stopped_by},
        }
        arrays = {f"theta_{i}": np.asarray(self.potentials[c]) for i, c in enumerate(cliques)}
        # mypy matches **arrays against savez's `allow_pickle: bool`; the keys are theta_<i>
        np.savez(file, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]

    @staticmethod
    def read_meta(file: Any) -> dict:
        """The JSON metadata of a saved model (total, report, cliques, domain)."""
        with np.load(file, allow_pickle=False) as npz:
            return json.loads(str(npz["meta"]))

    @classmethod
    def load(cls, file: Any) -> GraphicalModel:
        """Read a model written by :meth:`save`."""
        with np.load(file, allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            cliques = [tuple(c) for c in meta["cliques"]]
            potentials = {c: np.asarray(npz[f"theta_{i}"]) for i, c in enumerate(cliques)}
        domain = Domain(tuple(meta["domain"]["attributes"]), tuple(meta["domain"]["sizes"]))
        raw = meta["report"]
        report = None if raw is None else FitReport(raw["iterations"], raw["loss"],
                                                    raw["converged"],
                                                    stopped_by=raw.get("stopped_by"))
        return cls.from_potentials(domain, potentials, meta["total"], report)


@dataclass
class _Propagation:
    """What :meth:`GraphicalModel.pair_marginals` reuses across attributes of one model."""

    axes: list[list[int]]
    neighbours: list[list[int]]
    home: dict[str, int]
    homed: list[list[str]]
    conditionals: dict[tuple[int, Clique], np.ndarray] = field(default_factory=dict)
    sums: dict[tuple[int, int, Clique], Callable[[np.ndarray], np.ndarray]] = field(
        default_factory=dict)

    beyond_edge: dict[tuple[int, int], frozenset[str]] = field(default_factory=dict)

    def beyond(self, i: int, j: int) -> frozenset[str]:
        """Attributes homed in clique ``j``'s side of the tree edge ``i``–``j``."""
        if (i, j) not in self.beyond_edge:
            homed, stack = set(), [(j, i)]
            while stack:
                node, came_from = stack.pop()
                homed.update(self.homed[node])
                stack.extend((n, node) for n in self.neighbours[node] if n != came_from)
            self.beyond_edge[i, j] = frozenset(homed)
        return self.beyond_edge[i, j]

    def sum_onto(self, domain: Domain, tree: JunctionTree, k: int, i: int, target: Clique
                 ) -> Callable[[np.ndarray], np.ndarray]:
        """The sum of a ``(k, *clique i)`` table onto ``(k, *target)`` (target in order)."""
        key = (k, i, target)
        if key not in self.sums:
            clique = tree.cliques[i]
            self.sums[key] = summation((k, *domain.shape(clique)),
                                       [0, *(1 + clique.index(a) for a in target)])
        return self.sums[key]

    @classmethod
    def of(cls, model: GraphicalModel) -> _Propagation:
        tree, dom = model.tree, model.domain
        neighbours: list[list[int]] = [[] for _ in tree.cliques]
        for i, p in enumerate(tree.parent):
            if p >= 0:
                neighbours[i].append(p)
                neighbours[p].append(i)
        home = {a: next(i for i, c in enumerate(tree.cliques) if a in c) for a in dom}
        homed: list[list[str]] = [[] for _ in tree.cliques]
        for a, i in home.items():
            homed[i].append(a)
        return cls([_axes(dom, c) for c in tree.cliques], neighbours, home, homed)

    def conditional(self, model: GraphicalModel, j: int, separator: Clique) -> np.ndarray:
        """``P(C_j | separator)`` from the calibrated belief (zero where P(separator) is)."""
        key = (j, separator)
        if key not in self.conditionals:
            clique, belief = model.tree.cliques[j], model.beliefs[j]
            free = tuple(k for k, a in enumerate(clique) if a not in separator)
            mass = belief.sum(axis=free, keepdims=True)
            self.conditionals[key] = np.divide(belief, mass, out=np.zeros_like(belief),
                                               where=mass > 0)
        return self.conditionals[key]


def _sum_to(domain: Domain, table: np.ndarray, src: Clique, dst: Clique) -> np.ndarray:
    return np.einsum(table, _axes(domain, src), _axes(domain, dst))


def summation(shape: Sequence[int], keep: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """A function summing a table of ``shape`` onto its axes ``keep`` (ascending, kept in order).

    Belief propagation and every marginal are such sums, thousands of times per fit. einsum
    sums a table with several summed axes cell by cell: on Adult's AIM cliques (up to 86,400
    cells) it took up to 14 ms per sum where a sum over merged blocks takes under 1. Here consecutive
    axes merge into blocks (a C-ordered table reshapes to them for free) and each summed
    block goes in one 3-d sum, the largest block first, as ``(A, F, B) -> (A, B)``.
    """
    if list(keep) != sorted(set(keep)) or any(not 0 <= k < len(shape) for k in keep):
        raise ValueError(f"keep must be ascending axes of a {len(shape)}-d table, got {keep}")
    out_shape = tuple(shape[k] for k in keep)
    kept_flags: list[bool] = []
    dims: list[int] = []
    for k, n in enumerate(shape):
        if n == 1:  # no cells to sum; dropping the axis changes nothing
            continue
        if kept_flags and kept_flags[-1] == (k in keep):
            dims[-1] *= n
        else:
            kept_flags.append(k in keep)
            dims.append(n)
    steps: list[tuple[int, int, int]] = []
    while False in kept_flags:
        p = max((i for i, kept in enumerate(kept_flags) if not kept), key=lambda i: dims[i])
        steps.append((math.prod(dims[:p]), dims[p], math.prod(dims[p + 1:])))
        del dims[p], kept_flags[p]

    def run(table: np.ndarray) -> np.ndarray:
        x = table
        for before, summed, after in steps:
            # einsum on the merged blocks, never a BLAS product: OpenBLAS threads even
            # these small products, and its waiting threads spin (Adult's AIM took 26
            # CPU-s against 9 on the same machine); numpy's reduce is slow over short rows.
            if after == 1:
                x = np.einsum("ij->i", x.reshape(before, summed))
            else:
                x = np.einsum("ijk->ik", x.reshape(before, summed, after))
        return x.reshape(out_shape)

    return run


class BeliefPropagation:
    """Sum-product on a fixed junction tree for given clique log-potentials.

    Every table carries a leading batch axis of size 1.
    """

    def __init__(self, domain: Domain, tree: JunctionTree, cliques: Sequence[Clique]) -> None:
        self.domain = domain
        self.tree = tree
        self.home = {}
        for c in [*cliques, *((a,) for a in domain)]:
            # the smallest maximal clique holding c: its marginal is then the cheapest sum
            self.home[c] = min((i for i, m in enumerate(tree.cliques) if set(c) <= set(m)),
                               key=lambda i: domain.cells(tree.cliques[i]))
        batch = len(domain)  # an axis label no attribute uses
        self.batch = batch
        self.axes = [[batch, *_axes(domain, c)] for c in tree.cliques]
        self.sep_axes = [[batch, *_axes(domain, tree.separator(i))]
                         for i in range(len(tree.cliques))]
        self.children: list[list[int]] = [[] for _ in tree.cliques]
        for i in tree.order[1:]:
            self.children[tree.parent[i]].append(i)
        self.shapes = [domain.shape(c) for c in tree.cliques]
        # Shapes that broadcast clique i's separator table over its parent (parent_views)
        # and over clique i itself (own_views); separators keep the domain's attribute order.
        separators = [set(tree.separator(i)) for i in range(len(tree.cliques))]
        self.parent_views = [[1, *(domain.size(a) if a in separators[i] else 1
                                   for a in tree.cliques[p])] if p >= 0 else None
                             for i, p in enumerate(tree.parent)]
        self.own_views = [[1, *(domain.size(a) if a in separators[i] else 1
                                for a in tree.cliques[i])]
                          for i in range(len(tree.cliques))]
        self._factor_plans: dict[tuple[Clique, ...], tuple[
            list[list[int]], list[tuple[int, int]], list[int | None]]] = {}
        self._marginal_plans: dict[Clique, tuple[int, Callable[[np.ndarray], np.ndarray]
                                                 | None]] = {}
        # Sums of clique i's table onto its separator (up) and of its parent's (down), the
        # batch axis kept.
        positions = [{a: k + 1 for k, a in enumerate(c)} for c in tree.cliques]
        self.sum_up = [summation((1, *self.shapes[i]),
                                 [0, *(positions[i][a] for a in tree.separator(i))])
                       for i in range(len(tree.cliques))]
        self.sum_down = [summation((1, *self.shapes[p]),
                                   [0, *(positions[p][a] for a in tree.separator(i))])
                         if p >= 0 else None for i, p in enumerate(tree.parent)]

    def calibrate(self, potentials: Mapping[Clique, np.ndarray]) -> list[np.ndarray]:
        """Normalised beliefs of every maximal clique, shaped ``(1, *clique)``."""
        tree = self.tree
        phi = self._factors(potentials)
        normalise = _normalise
        # Mirror descent calibrates thousands of times on small tables, so the loops below
        # only look up precomputed operand lists (numpy call overhead dominates).
        children, parent = self.children, tree.parent
        views, own_views = self.parent_views, self.own_views
        sum_up, sum_down = self.sum_up, self.sum_down
        # Each clique's factor times its children's messages, computed once: it gives the
        # message to the parent and, times the message from the parent, the belief. The
        # products are broadcast multiplications (a multi-operand einsum loops over every
        # cell without vectorising, ~3x slower on AIM's larger cliques).
        up: dict[int, np.ndarray] = {}  # message from i to its parent, over the separator
        raw_up: dict[int, np.ndarray] = {}  # the same before normalising
        product: list = [None] * len(phi)
        for i in reversed(tree.order):
            table = phi[i]  # a fresh array, multiplied in place
            for c in children[i]:
                table *= up[c].reshape(views[c])
            product[i] = table
            if parent[i] >= 0:
                raw_up[i] = sum_up[i](table)
                up[i] = normalise(raw_up[i])
        # Downward pass in Hugin form: the message to a child is the parent's belief summed
        # onto the separator divided by the child's own upward message (the Shafer-Shenoy
        # form multiplies the parent's factor by all its other messages again for every
        # child). Where the child's message is zero, so is the child's belief whatever the
        # downward message is, and 0 is used.
        beliefs: list = [None] * len(phi)
        for i in tree.order:
            p = parent[i]
            table = product[i]
            if p >= 0:
                through = sum_down[i](beliefs[p])  # type: ignore[misc]
                message = up[i]
                down = np.divide(through, message, out=np.zeros_like(through),
                                 where=message > 0)
                # The belief's total, Σ product·down, is Σ raw_up·down over the separator:
                # normalising the message instead of the table saves two passes over it.
                total = float(np.einsum("i,i->", down.ravel(), raw_up[i].ravel()))
                if total > 0:
                    down /= total
                table *= down.reshape(own_views[i])
            else:
                total = table.sum()
                if total > 0:
                    table /= total
            beliefs[i] = table
        return beliefs

    def _factors(self, potentials: Mapping[Clique, np.ndarray]) -> list[np.ndarray]:
        """exp of each maximal clique's summed log-potentials (max-shifted), batch axis 1."""
        keys = tuple(potentials)
        plan = self._factor_plans.get(keys)
        if plan is None:
            plan = self._factor_plans[keys] = self._factor_plan(keys)
        views, additions, roots = plan
        slots = [theta.reshape(view) for theta, view in zip(potentials.values(), views,
                                                            strict=True)]
        for into, other in additions:
            slots[into] = slots[into] + slots[other]
        phi = []
        for i, shape in enumerate(self.shapes):
            table = np.empty((1, *shape))
            root = roots[i]
            if root is None:
                table.fill(1.0)
            else:
                log_phi = slots[root]
                # one pass to shift (broadcasting a partial sum over the clique), one for exp
                np.subtract(log_phi, log_phi.max(), out=table[0])
                np.exp(table, out=table)
            phi.append(table)
        return phi

    def _factor_plan(self, keys: tuple[Clique, ...]
                     ) -> tuple[list[list[int]], list[tuple[int, int]], list[int | None]]:
        """How :meth:`_factors` sums the log-potentials ``keys`` into their home cliques.

        Each potential is viewed over its home clique (size-1 axes where it has no
        attribute), so a sum of two broadcasts over the union of their attributes. Summing
        a clique's potentials one after another into the full table costs a full pass per
        potential (AIM puts ten 2-way potentials in an 86,400-cell clique); summing the pair
        with the smallest union first builds most of the sum on small tables.
        """
        cliques, domain = self.tree.cliques, self.domain
        views = [[domain.size(a) if a in c else 1 for a in cliques[self.home[c]]]
                 for c in keys]
        additions: list[tuple[int, int]] = []
        roots: list[int | None] = [None] * len(cliques)
        for i in range(len(cliques)):
            live = {k: frozenset(c) for k, c in enumerate(keys) if self.home[c] == i}
            while len(live) > 1:
                into, other = min(itertools.combinations(sorted(live), 2),
                                  key=lambda pair: domain.cells(live[pair[0]] | live[pair[1]]))
                additions.append((into, other))
                live[into] = live[into] | live.pop(other)
            roots[i] = next(iter(live), None)
        return views, additions, roots

    def marginals(self, beliefs: Sequence[np.ndarray], cliques: Iterable[Clique]
                  ) -> dict[Clique, np.ndarray]:
        """Marginals of cliques inside one maximal clique, from unbatched beliefs."""
        out = {}
        plans = self._marginal_plans
        for c in cliques:
            plan = plans.get(c)
            if plan is None:  # (home, the sum onto c), built once per clique
                i = self.home[c]
                home = self.tree.cliques[i]
                plan = plans[c] = (i, None if c == home else summation(
                    self.shapes[i], sorted(home.index(a) for a in c)))
            i, sum_onto = plan
            out[c] = beliefs[i][0] if sum_onto is None else sum_onto(beliefs[i][0])
        return out


def _normalise(table: np.ndarray) -> np.ndarray:
    """``table`` (batch axis of size 1) divided by its sum; an all-zero table stays zero."""
    total = table.sum()
    return table / total if total > 0 else table


_LOG_FLOOR = 30.0
#: ``estimate(robust_descent=True)``'s floor on each clique's log-potentials, below the
#: clique's maximum. Far looser than :data:`_LOG_FLOOR`: potentials of overlapping cliques
#: compensate each other, so one clique's range is not its cells' mass, and at 30 the floor
#: bound at the optimum (Adult, AIM's 43 measurements at ε = 1: loss 996 against 990
#: unfloored). At 100 the fits reach the unfloored loss, and e^-100 is far from underflow.
_DESCENT_FLOOR = 100.0


def estimate_total(measurements: Sequence[Measurement]) -> float:
    """Minimum-variance unbiased estimate of the number of rows from noisy marginals."""
    sums = np.array([m.values.sum() for m in measurements])
    variances = np.array([np.sum(m.stddev**2) for m in measurements])
    weights = 1 / variances
    return max(1.0, float(np.sum(weights * sums) / np.sum(weights)))


def _combined_targets(domain: Domain, measurements: Sequence[Measurement]
                      ) -> tuple[list[tuple[Clique, np.ndarray, np.ndarray]], float]:
    """Per clique, the inverse-variance weighted target ``ȳ`` and its weight ``W``.

    Σ_m w_m (μ − y_m)² = W (μ − ȳ)² + const, so repeated measurements of a clique cost one
    term; returns ``[(clique, ȳ, W)]`` and the constant (½ Σ w y² − ½ Σ W ȳ²).
    """
    cliques = list(dict.fromkeys(domain.canonical(m.clique) for m in measurements))
    weight_sum = {c: np.zeros(domain.shape(c)) for c in cliques}
    weighted_y = {c: np.zeros(domain.shape(c)) for c in cliques}
    constant = 0.0
    for m in measurements:
        if m.values.shape != domain.shape(m.clique):
            raise ValueError(
                f"measurement on {list(m.clique)} has shape {m.values.shape}, "
                f"expected {domain.shape(m.clique)}"
            )
        c, w = domain.canonical(m.clique), 1 / m.stddev**2
        weight_sum[c] += w
        weighted_y[c] += w * m.values
        constant += 0.5 * float(np.sum(w * m.values**2))
    targets = [(c, weighted_y[c] / weight_sum[c], weight_sum[c]) for c in cliques]
    constant -= sum(0.5 * float(np.sum(w * y * y)) for _, y, w in targets)
    return targets, constant


def simplex_fit(y: np.ndarray, w: np.ndarray, total: float) -> np.ndarray:
    """Probabilities ``p`` minimising ``Σ w·(total·p − y)²`` over the probability simplex.

    The KKT conditions give ``total·p_i = max(0, y_i − τ/w_i)`` for the one ``τ`` that makes
    the counts sum to ``total``; the active set is a prefix of the cells sorted by ``y·w``
    (the value of τ at which a cell leaves it), so τ is found exactly by one sort.
    """
    y, w = np.ravel(y).astype(np.float64), np.ravel(w).astype(np.float64)
    order = np.argsort(-(y * w), kind="stable")
    inv = 1 / w[order]
    # τ if the first k cells (by breakpoint) are the active ones, for every k
    tau = (np.cumsum(y[order]) - total) / np.cumsum(inv)
    breakpoints = (y * w)[order]
    # the largest k whose τ keeps its k-th cell active (cells after it are then inactive)
    k = int(np.flatnonzero(tau < breakpoints)[-1]) if np.any(tau < breakpoints) else 0
    counts = np.maximum(y - tau[k] / w, 0.0)
    return counts / counts.sum() if counts.sum() > 0 else np.full(y.shape, 1 / y.size)


def fit_independent(domain: Domain, measurements: Sequence[Measurement], *,
                    total: float | None = None) -> tuple[dict[str, np.ndarray], float]:
    """The independence model's exact fit to noisy one-way marginals: (probabilities, total).

    With one-way cliques only, the marginal polytope is a product of simplices and
    :func:`estimate`'s loss separates by attribute, so its minimiser is one weighted simplex
    projection per attribute (:func:`simplex_fit`), with the same total. Attributes without
    a measurement stay uniform, as in :func:`estimate`.
    """
    if not measurements:
        raise ValueError("estimation needs at least one measurement")
    if any(len(m.clique) != 1 for m in measurements):
        raise ValueError("fit_independent takes one-way measurements only")
    targets, _ = _combined_targets(domain, measurements)
    total = estimate_total(measurements) if total is None else float(total)
    probabilities = {a: np.full(domain.size(a), 1 / domain.size(a)) for a in domain}
    for (a,), y, w in targets:
        probabilities[a] = simplex_fit(y, w, total)
    return probabilities, total


#: ``estimate(method=...)``: the exact fit where it applies, or mirror descent always.
ESTIMATION_METHODS = ("auto", "mirror-descent")
#: Largest exact fit (clique cells plus measured sub-clique cells) solved by the
#: interior-point method; larger models use mirror descent (the KKT system grows with it).
EXACT_MAX_VARIABLES = 200_000


@dataclass(frozen=True, eq=False)
class CscMatrix:
    """A sparse matrix in canonical compressed-sparse-column form, as Clarabel reads one.

    Clarabel's binding reads ``shape``, ``indptr``, ``indices``, ``data`` and
    ``has_canonical_format`` off the object it is given, so these arrays stand in for
    ``scipy.sparse.csc_matrix``, whose import (~0.1 s, numpy.f2py included) a table release
    would otherwise pay for two matrices. Canonical: each column's row indices sorted, no
    duplicates.
    """

    shape: tuple[int, int]
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    has_canonical_format: ClassVar[bool] = True

    @classmethod
    def from_coo(cls, data: np.ndarray, rows: np.ndarray, cols: np.ndarray, *,
                 shape: tuple[int, int]) -> CscMatrix:
        """The matrix with ``data[k]`` at ``(rows[k], cols[k])``, duplicates summed.

        Arrays equal to ``scipy.sparse.csc_matrix((data, (rows, cols)), shape=shape)``'s,
        explicit zeros (duplicates that cancel) included.
        """
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        data = np.asarray(data, dtype=np.float64)
        order = np.lexsort((rows, cols))
        rows, cols, data = rows[order], cols[order], data[order]
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        starts = np.flatnonzero(first)
        if data.size:
            data = np.add.reduceat(data, starts)
        indptr = np.zeros(shape[1] + 1, dtype=np.int64)
        np.cumsum(np.bincount(cols[starts], minlength=shape[1]), out=indptr[1:])
        return cls((int(shape[0]), int(shape[1])), indptr, rows[starts], data)

    @classmethod
    def diagonal(cls, values: np.ndarray) -> CscMatrix:
        """``diag(values)`` without its zero entries, as ``scipy.sparse.diags(values,
        format="csc")`` stores it (the solver's sparsity pattern, hence its pivots, follows)."""
        values = np.asarray(values, dtype=np.float64)
        kept = np.flatnonzero(values)
        indptr = np.zeros(values.size + 1, dtype=np.int64)
        np.cumsum(values != 0, out=indptr[1:])
        return cls((values.size, values.size), indptr, kept.astype(np.int64), values[kept])

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``self @ x``, summed column by column as SciPy's ``csc_matvec`` does, so the
        result is the same to the last bit."""
        cols = np.repeat(np.arange(self.shape[1]), np.diff(self.indptr))
        return np.bincount(self.indices, weights=self.data * np.asarray(x)[cols],
                           minlength=self.shape[0])

    def to_scipy(self) -> Any:
        """The same matrix as a ``scipy.sparse.csc_matrix`` (imports SciPy)."""
        import scipy.sparse as sparse

        return sparse.csc_matrix((self.data, self.indices, self.indptr), shape=self.shape)


@dataclass(frozen=True)
class ExactFit:
    """Log-potentials (one per maximal clique) of an exact fit, and solver iterations."""

    potentials: dict[Clique, np.ndarray]
    iterations: int


def fit_exact(domain: Domain, tree: JunctionTree,
              targets: Sequence[tuple[Clique, np.ndarray, np.ndarray]], *, total: float,
              max_variables: int = EXACT_MAX_VARIABLES) -> ExactFit | None:
    """The exact minimiser of :func:`estimate`'s loss for a decomposable measured model.

    On a junction tree the marginal polytope is the set of non-negative clique tables that
    agree on every separator and sum to the total, so with every maximal clique measured the
    loss ``Σ ½ W·(μ_c − ȳ_c)²`` (in counts) is a convex QP: variables are the maximal cliques'
    tables ``x`` and one table ``z_c`` per measured sub-clique, with ``z_c = A_c x`` (its
    marginal), separator agreement and ``Σ x_root = 1`` as equalities, ``x ≥ 0``, and a
    diagonal objective. Clarabel solves it to ~1e-8; the fit is then written as a Bayes
    network on the tree, ``log P(new | separator)`` per maximal clique.

    Returns ``None`` when a maximal clique with more than one attribute is not measured
    (triangulation fill-in), when the model exceeds ``max_variables``, or when the solver
    does not report success; :func:`estimate` then runs mirror descent. Post-processing of
    the measurements only.
    """
    measured = {c: (y, w) for c, y, w in targets}
    blocks = [c for c in tree.cliques if c in measured or len(c) > 1]
    if any(c not in measured for c in blocks):
        return None
    sub = [c for c in measured if c not in set(tree.cliques)]
    n_x = sum(domain.cells(c) for c in blocks)
    n_z = sum(domain.cells(c) for c in sub)
    if n_x + n_z > max_variables:
        return None

    offset, start = {}, 0
    for c in blocks:
        offset[c], start = start, start + domain.cells(c)
    for c in sub:
        offset[c], start = start, start + domain.cells(c)

    def marginal_rows(clique: Clique, onto: Clique) -> tuple[np.ndarray, np.ndarray]:
        """(row in ``onto``'s table, column of the variable) for each cell of ``clique``."""
        grids = np.indices(domain.shape(clique)).reshape(len(clique), -1)
        key = np.zeros(grids.shape[1], dtype=np.int64)
        for a in onto:
            key = key * domain.size(a) + grids[clique.index(a)]
        return key, offset[clique] + np.arange(grids.shape[1])

    n = start
    rows, cols, vals, rhs = [], [], [], []
    row = 0

    def add(r: np.ndarray, c: np.ndarray, v: float | np.ndarray) -> None:
        rows.append(row + r)
        cols.append(c)
        vals.append(np.broadcast_to(np.asarray(v, dtype=np.float64), r.shape))

    home = {c: next(b for b in blocks if set(c) <= set(b)) for c in sub}
    for c in sub:  # z_c − A_c x_home = 0
        r, col = marginal_rows(home[c], c)
        add(r, col, -1.0)
        add(np.arange(domain.cells(c)), offset[c] + np.arange(domain.cells(c)), 1.0)
        rhs.append(np.zeros(domain.cells(c)))
        row += domain.cells(c)
    index = {c: i for i, c in enumerate(tree.cliques)}
    for c in blocks:
        i = index[c]
        separator, parent = tree.separator(i), tree.parent[i]
        if parent >= 0 and separator:  # agreement with the parent on the separator
            r, col = marginal_rows(c, separator)
            add(r, col, 1.0)
            r, col = marginal_rows(tree.cliques[parent], separator)
            add(r, col, -1.0)
            rhs.append(np.zeros(domain.cells(separator)))
            row += domain.cells(separator)
        else:  # the root of a component sums to the total
            add(np.zeros(domain.cells(c), dtype=np.int64),
                offset[c] + np.arange(domain.cells(c)), 1.0)
            rhs.append(np.array([total]))
            row += 1
    n_eq = row
    # x ≥ 0 as −x ∈ R₊ (Clarabel's form: A·v + s = b, s in the cone)
    rows.append(n_eq + np.arange(n_x))
    cols.append(np.arange(n_x))
    vals.append(np.full(n_x, -1.0))
    constraint = CscMatrix.from_coo(np.concatenate(vals), np.concatenate(rows),
                                    np.concatenate(cols), shape=(n_eq + n_x, n))
    b = np.concatenate([*rhs, np.zeros(n_x)])
    weights, targets_flat = np.zeros(n), np.zeros(n)
    for c, (y, w) in measured.items():
        weights[offset[c]:offset[c] + y.size] = w.ravel()
        targets_flat[offset[c]:offset[c] + y.size] = y.ravel()
    # Solved for the residuals v = (x, z) − ȳ (in counts): the objective is then ½ Σ W·v²,
    # the χ² of the fit, O(cells) at the optimum whatever the noise scale, so the solver's
    # relative tolerances bound errors relative to σ (in the raw variables they would be
    # relative to the counts, i.e. far coarser than σ when the noise is small).
    b = b - constraint.matvec(targets_flat)
    b[n_eq:] = targets_flat[:n_x]  # x ≥ 0 is −v ≤ ȳ
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    objective = CscMatrix.diagonal(weights)
    cones = [clarabel.ZeroConeT(n_eq), clarabel.NonnegativeConeT(n_x)]
    try:
        solver = clarabel.DefaultSolver(objective, np.zeros(n), constraint, b, cones, settings)
    except (AttributeError, TypeError):
        # Clarabel 0.11 reads any object with a CSC matrix's attributes; should a later
        # release insist on SciPy's class, the same arrays as SciPy matrices make the fit pay
        # SciPy's import rather than fail (tests/test_exact_fit_csc.py flags the change).
        solver = clarabel.DefaultSolver(objective.to_scipy(), np.zeros(n),
                                        constraint.to_scipy(), b, cones, settings)
    solution = solver.solve()
    if str(solution.status) not in ("Solved", "AlmostSolved"):
        return None
    x = np.maximum(np.asarray(solution.x)[:n_x] + targets_flat[:n_x], 0.0)
    potentials = {}
    for c in blocks:
        table = x[offset[c]:offset[c] + domain.cells(c)].reshape(domain.shape(c))
        separator = tree.separator(index[c])
        free = tuple(k for k, a in enumerate(c) if a not in separator)
        mass = table.sum(axis=free, keepdims=True)
        # Cells of a separator value with no mass get a uniform conditional (they are never
        # reached); floors keep every log finite, within _LOG_FLOOR of the clique's maximum.
        conditional = np.where(mass > 0, table / np.where(mass > 0, mass, 1.0),
                               1.0 / max(1, int(np.prod([table.shape[k] for k in free]))))
        theta = np.log(np.maximum(conditional, np.exp(-_LOG_FLOOR)))
        potentials[c] = np.maximum(theta, theta.max() - _LOG_FLOOR)
    return ExactFit(potentials, int(solution.iterations))


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    total: float | None = None,
    tol: float = 1e-6,
    max_iters: int = 10_000,
    warm_start: Mapping[Clique, np.ndarray] | None = None,
    fallback: Mapping[Clique, np.ndarray] | None = None,
    callback: Callable[[int, float], None] | None = None,
    max_time_s: float | None = None,
    method: str = "auto",
    robust_descent: bool = True,
) -> GraphicalModel:
    """Fit a graphical model to noisy marginal measurements by mirror descent.

    Parameters
    ----------
    domain : Domain
        Domain of the measurements (the compressed one, if compression was used).
    measurements : sequence of Measurement
        Noisy marginals with their per-cell standard deviations.
    total : float, optional
        Number of rows; by default estimated from the measurements.
    tol : float
        Stop when the loss improves by less than ``tol`` (relative) over 20 iterations.
    max_iters : int
        Hard cap on iterations; reaching it is reported as not converged.
    warm_start : mapping, optional
        Initial log-potentials per clique, e.g. from an earlier fit.
    fallback : mapping, optional
        Log-potentials of an earlier fit (AIM's last round) returned instead of the fit's
        own best iterate when the fit ends unconverged (time budget or iteration cap) at a
        higher loss than theirs: a cut-short fit is then never worse than what it was given.
    callback : callable, optional
        Called as ``callback(iteration, loss)`` every 20 iterations (progress reporting).
    max_time_s : float, optional
        Wall-clock cap of mirror descent: it stops after the first iteration that ends past
        it (reported as not converged), with the model of the last accepted step. The exact
        fit is not capped (it takes well under a second where it applies).
    method : {"auto", "mirror-descent"}
        ``"auto"`` solves decomposable measured models exactly (see Notes) and runs mirror
        descent otherwise; ``"mirror-descent"`` always runs mirror descent.
    robust_descent : bool
        Mirror descent that cannot stall or end on a bad step (issue 23.5): the floor on
        log-potentials is :data:`_DESCENT_FLOOR` below each clique's maximum instead of
        :data:`_LOG_FLOOR`, a cell the floor overtakes keeps its value instead of being
        dragged up with it, and the fit returns its best iterate, converging when the best
        loss improves by less than ``tol`` over 20 iterations. Without it, a fit
        warm-started from AIM's rounds on Adult at ε = 1 stopped after 20 iterations at a
        loss of 1396 against an optimum of 990 (every clipped step was an ascent), and a fit
        may return an accelerated step that raised the loss. ``False`` gives the earlier
        descent (kept for comparisons; on tree models both reach the same fit).

    Notes
    -----
    When every maximal clique of the measured cliques' junction tree is itself measured (MST
    and PreFair trees, the independence model, many AIM models), the problem is a convex
    quadratic program over consistent clique tables, solved exactly by :func:`fit_exact`
    (an interior-point method); ``warm_start`` is then not needed. Otherwise, or if that
    solver does not succeed, mirror descent runs: step sizes follow an Armijo backtracking
    rule (a step is accepted when it decreases the loss by at least half the first-order
    prediction; accepted steps grow the step size by 10 %, rejected ones halve it), and steps
    are Nesterov-accelerated with adaptive restart.
    """
    if not measurements:
        raise ValueError("estimation needs at least one measurement")
    if method not in ESTIMATION_METHODS:
        raise ValueError(f"method must be one of {list(ESTIMATION_METHODS)}, got {method!r}")
    # Repeated measurements of a clique combine into one inverse-variance weighted target,
    # so each clique costs one term per iteration.
    targets, constant = _combined_targets(domain, measurements)
    cliques = [c for c, _, _ in targets]
    tree = build_junction_tree(domain, cliques)
    total = estimate_total(measurements) if total is None else float(total)
    started = time.monotonic()
    # Not time-capped: it is fast (a few dozen sparse factorisations), and cutting it short
    # would leave mirror descent, far slower, with even less time.
    exact = fit_exact(domain, tree, targets, total=total) if method == "auto" else None
    if exact is not None:
        solved_bp = BeliefPropagation(domain, tree, list(exact.potentials))
        beliefs = solved_bp.calibrate(exact.potentials)
        exact_mu = solved_bp.marginals(beliefs, cliques)
        loss = constant + sum(0.5 * float(np.sum(w * (total * exact_mu[c] - y) ** 2))
                              for c, y, w in targets)
        if callback is not None:
            callback(max_iters, loss)
        report = FitReport(iterations=exact.iterations, loss=loss, converged=True,
                           losses=[loss], stopped_by="exact solution")
        return GraphicalModel(domain, tree, exact.potentials, total, [b[0] for b in beliefs],
                              report)
    if max_time_s is not None:
        max_time_s = max(max_time_s - (time.monotonic() - started), 0.0)
    bp = BeliefPropagation(domain, tree, cliques)

    # The descent works on one flat vector of all cliques' cells, so its elementwise steps
    # are one numpy call each, whatever the number of cliques; only belief propagation
    # looks at cliques one by one.
    sizes = np.array([y.size for _, y, _ in targets])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    shapes = [domain.shape(c) for c in cliques]
    y_flat = np.concatenate([y.ravel() for _, y, _ in targets])
    w_flat = np.concatenate([w.ravel() for _, _, w in targets])

    def unflatten(flat: np.ndarray) -> dict[Clique, np.ndarray]:
        return {c: flat[o:o + n].reshape(shape)
                for c, o, n, shape in zip(cliques, offsets, sizes, shapes, strict=True)}

    def loss_and_grad(mu: np.ndarray) -> tuple[float, np.ndarray]:
        r = total * mu - y_flat
        wr = w_flat * r
        # gradient with respect to the probabilities; total folds into the step size
        return constant + 0.5 * float(np.dot(wr, r)), total * wr

    gap = _DESCENT_FLOOR if robust_descent else _LOG_FLOOR

    def clip(point: np.ndarray, start: np.ndarray) -> np.ndarray:
        # Cells pushed far below the clique's maximum carry no mass but, left to drift,
        # would underflow whole messages to zero in belief propagation. So a step never
        # takes a cell below the floor. With robust_descent, a cell the floor overtook (its
        # clique's maximum rose) keeps its value from ``start``: dragging it up with the
        # floor adds mass the gradient did not ask for, and where potentials compensate
        # each other that made every step an ascent, so warm-started fits stalled.
        floor = np.repeat(np.maximum.reduceat(point, offsets) - gap, sizes)
        return np.maximum(point, np.minimum(start, floor) if robust_descent else floor)

    def flatten(potentials: Mapping[Clique, np.ndarray] | None) -> np.ndarray:
        flat = np.zeros(int(sizes.sum()))
        views = unflatten(flat)
        for c, t in (potentials or {}).items():
            if c in views and np.shape(t) == views[c].shape:
                views[c][...] = t
        return flat

    theta = flatten(warm_start)
    max_weight = float(np.max(w_flat))
    alpha = 1.0 / (total**2 * max_weight)

    def evaluate(point: np.ndarray) -> tuple[list, np.ndarray, float, np.ndarray]:
        beliefs = bp.calibrate(unflatten(point))
        mu = bp.marginals(beliefs, cliques)
        mu_flat = np.concatenate([mu[c].ravel() for c in cliques])
        return beliefs, mu_flat, *loss_and_grad(mu_flat)

    # Nesterov-accelerated mirror descent (FISTA on the potentials) with adaptive restart:
    # momentum is dropped whenever the loss goes up. On Adult-sized trees this reaches a
    # given loss in ~10x fewer iterations than plain mirror descent.
    started = time.monotonic()
    point = theta
    beliefs, mu, point_loss, grad = evaluate(point)
    momentum = 1.0
    losses = [point_loss]
    # With robust_descent the fit returns its best iterate: an accelerated step may raise
    # the loss (the momentum then restarts), and the fit must not end on such a step.
    best_loss, best_theta, best_beliefs = point_loss, theta, beliefs
    best_before = best_loss  # the best loss at the previous convergence check
    converged, it, stopped_by = False, 0, "iteration cap"
    for it in range(1, max_iters + 1):
        while True:
            trial = clip(point - alpha * grad, point)
            trial_beliefs, trial_mu, trial_loss, trial_grad = evaluate(trial)
            predicted = float(np.dot(grad, mu - trial_mu))
            if point_loss - trial_loss >= 0.5 * predicted or alpha < 1e-300:
                break
            alpha *= 0.5
        alpha *= 1.1
        if trial_loss > losses[-1]:
            momentum, point = 1.0, trial
            mu, point_loss, grad = trial_mu, trial_loss, trial_grad
        else:
            next_momentum = (1 + math.sqrt(1 + 4 * momentum**2)) / 2
            step = (momentum - 1) / next_momentum
            point = clip(trial + step * (trial - theta), trial)
            momentum = next_momentum
            _, mu, point_loss, grad = evaluate(point)
        theta, beliefs, loss = trial, trial_beliefs, trial_loss
        losses.append(loss)
        if loss < best_loss:
            best_loss, best_theta, best_beliefs = loss, theta, beliefs
        if it % 20 == 0:
            if callback is not None:
                callback(it, loss)
            if robust_descent:  # the best loss improved by less than tol in 20 iterations
                previous, latest = best_before, best_loss
                best_before = best_loss
            else:
                previous, latest = min(losses[-21:-1]), loss
            if previous - latest <= tol * max(abs(previous), 1.0):
                converged, stopped_by = True, "tolerance"
                break
        if max_time_s is not None and time.monotonic() - started >= max_time_s:
            stopped_by = "time budget"
            break  # the time budget ends the fit; reported as not converged
    if robust_descent:
        theta, beliefs, loss = best_theta, best_beliefs, best_loss
    kept_fallback = False
    if fallback and not converged:
        kept = flatten(fallback)
        kept_beliefs, _, kept_loss, _ = evaluate(kept)
        if kept_loss < loss:
            theta, beliefs, loss, kept_fallback = kept, kept_beliefs, kept_loss, True
    report = FitReport(iterations=it, loss=loss, converged=converged, losses=losses,
                       stopped_by=stopped_by, kept_fallback=kept_fallback)
    potentials = {c: t.copy() for c, t in unflatten(theta).items()}
    return GraphicalModel(domain, tree, potentials, total, [b[0] for b in beliefs], report)
