"""Small n, never worse than the baseline (issues 23.3, 34).

On a generated 1,000-row table at ε = 1 every tree method's 2-way TVD is at most
``--method independent``'s (plus seed noise): its wide pairs are dropped by the per-pair rule
and only a forest over its small pairs is measured; where the data has strong structure and
few cells the whole tree is kept and is better. AIM follows the same public rule after its
initial one-way measurement. Fixed seeds; the benchmark with real tables is
``benchmarks/small_n.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.exact_noise import credit_like as _credit_like
from privfair.core.accounting import zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.evaluation.utility import marginal_tvd
from privfair.synth.structure import METHODS as TREE_METHODS
from privfair.synth.synthesizer import AIM_METHODS, FALLBACK_METHOD, FairSynthesizer

SEEDS = range(3)
#: Seed noise of a 3-seed mean of the 2-way TVD on these tables is ≈ 0.003.
TOLERANCE = 0.004


def _chain(n: int = 1000, seed: int = 3) -> tuple[pd.DataFrame, Domain, Roles]:
    """Six binary/ternary columns, each a noisy copy of the previous (strong structure)."""
    rng = np.random.default_rng(seed)
    sizes = (2, 2, 3, 2, 3, 2)
    names = ("sex", "race", "age", "charge", "priors", "outcome")
    columns, previous = {}, rng.integers(0, 2, n)
    for name, size in zip(names, sizes, strict=True):
        keep = rng.random(n) < 0.85
        columns[name] = np.where(keep, previous % size, rng.integers(0, size, n))
        previous = columns[name]
    roles = Roles(protected=("sex",), admissible=("age", "charge", "priors"),
                  outcome=("outcome",))
    return pd.DataFrame(columns), Domain(names, sizes), roles


def _tvd2(frame: pd.DataFrame, domain: Domain, roles: Roles, method: str) -> tuple[float, list]:
    scores, structures = [], []
    for seed in SEEDS:
        fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                                method=method, require_fair=False, max_iters=2000)
        synth.fit(frame, rng=fit_rng)
        scores.append(marginal_tvd(frame, synth.sample(len(frame), rng=sample_rng), domain, 2))
        structures.append(synth.structure_)
    return float(np.mean(scores)), structures


@pytest.mark.parametrize("method", [*TREE_METHODS, *AIM_METHODS])
def test_no_method_is_worse_than_independent_at_small_n(method):
    frame, domain, roles = _credit_like()
    baseline, _ = _tvd2(frame, domain, roles, "independent")
    tvd, structures = _tvd2(frame, domain, roles, method)
    assert tvd <= baseline + TOLERANCE, (method, tvd, baseline)
    # The per-pair rule (issue 34) keeps only the method's allowed pairs with a binary
    # attribute (at most 10 cells; a tree's limit 0.15, AIM's 0.07 at ε = 1 keeps only
    # those of at most 8 cells); the selection, scoring each pair net of its measurement noise, builds
    # a forest over them. Since issue 34.1 a tree's selection has only the ρ that resolves
    # the smallest pair's noise, so its stop is less sure: one seed of three may still
    # choose a whole tree (mst here: 2, 1 and 6 edges), each edge measured at its full-forest
    # ρ and the unchosen edges' ρ on the one-way marginals; at most two thirds of the edges
    # of three full trees in all (12 of 18). Over 12 seeds (benchmarks/exact_noise.py,
    # results/exact_noise.json) the edges per seed are 2.1 ± 0.6 (prefair-greedy) and
    # 2.75 ± 0.4 (prefair-exact) of 6 with exact noise, 1.4 ± 0.3 and 2.6 ± 0.5 with the float
    # Gaussian: within the seed noise; these three seeds draw 12 and 10 (half was 9).
    sizes = dict(zip(domain.attributes, domain.sizes, strict=True))
    limit = 10 if method in TREE_METHODS else 8
    kept = {"mst": 11, "prefair-greedy": 7, "prefair-exact": 10, "aim": 3, "aim-fair": 3}
    for structure in structures:
        assert structure.small_n["qualifying_pairs"] == kept[method], structure.small_n
        assert structure.method == method
        assert all(sizes[a] * sizes[b] <= limit for a, b in structure.cliques)
    assert sum(len(s.cliques) for s in structures) <= len(structures) * (len(domain) - 1) * 2 / 3


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_a_strongly_structured_small_table_keeps_its_model_and_beats_independent(method):
    frame, domain, roles = _chain()
    baseline, _ = _tvd2(frame, domain, roles, "independent")
    tvd, structures = _tvd2(frame, domain, roles, method)
    assert {s.method for s in structures} == {method}
    assert tvd < 0.8 * baseline, (tvd, baseline)


def _wide(n: int = 1000, seed: int = 2) -> tuple[pd.DataFrame, Domain, Roles]:
    """Six 5-level columns: every pair has 25 cells, too many for 1,000 rows at ε = 1."""
    rng = np.random.default_rng(seed)
    names = ("sex", "a", "b", "c", "d", "outcome")
    frame = pd.DataFrame({c: rng.integers(0, 5, n) for c in names})
    roles = Roles(protected=("sex",), admissible=("a", "b"), outcome=("outcome",))
    return frame, Domain(names, (5,) * 6), roles


def test_aim_fallback_spends_the_whole_budget_on_one_way_marginals():
    frame, domain, roles = _wide()
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                            method="aim", require_fair=False, max_iters=500)
    synth.fit(frame, rng=np.random.default_rng(0))
    names = [e.name for e in synth.ledger_.entries]
    assert names == ["AIM initial one-way marginals",
                     "one-way marginals (small-n independence fallback)"]
    assert synth.ledger_.spent == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-6))
    small_n = synth.manifest()["method"]["small_n"]
    assert small_n["fallback"] is True and small_n["qualifying_pairs"] == 0
    assert synth.structure_.method == FALLBACK_METHOD
