import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain, Roles
from privfair.synth.aim import (
    all_two_way_workload,
    candidate_cliques,
    downward_closure,
    junction_tree_size_mb,
    run_aim,
)
from privfair.synth.measure import count_marginals
from privfair.synth.structure import check_fairness


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 2, n)
    a = (p + rng.integers(0, 2, n)) % 3
    f = (a + p + rng.integers(0, 2, n)) % 3
    o = ((a + rng.integers(0, 2, n)) > 1).astype(np.int64)
    g = rng.integers(0, 4, n)
    domain = Domain(("p", "a", "f", "o", "g"), (2, 3, 3, 2, 4))
    return domain, {"p": p, "a": a, "f": f, "o": o, "g": g}


def test_workload_closure_and_weights_are_those_of_aim():
    domain = Domain(("x", "y", "z"), (2, 2, 2))
    workload = all_two_way_workload(domain)
    assert workload == [("x", "y"), ("x", "z"), ("y", "z")]
    closure = downward_closure(workload)
    assert closure[:3] == [("x",), ("y",), ("z",)] and len(closure) == 6
    assert candidate_cliques(domain) == closure


def test_junction_tree_size_counts_maximal_cliques_not_measured_ones():
    domain = Domain(("a", "b", "c"), (10, 10, 10))
    # A triangle of pairs triangulates to one 1000-cell clique, not 3 x 100 cells.
    size = junction_tree_size_mb(domain, [("a", "b"), ("b", "c"), ("a", "c")])
    assert size == pytest.approx(1000 * 8 / 2**20)


@pytest.mark.parametrize("fair", [False, True])
def test_aim_spends_exactly_its_budget_and_fair_aim_builds_a_fair_model(fair):
    domain, data = _data()
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    ledger = PrivacyLedger(rho_budget=1.0)
    result = run_aim(tables, domain, rho=0.2, rng=np.random.default_rng(1), ledger=ledger,
                     roles=roles, fair=fair, max_iters=100, final_max_iters=500)
    assert ledger.spent == pytest.approx(0.2, rel=1e-9)
    # The initial one-way marginals are charged as the d queries they are.
    first = ledger.entries[0]
    assert first.queries == sum(domain.sizes) and first.sensitivity == pytest.approx(5 ** 0.5)
    rounds = [e for e in ledger.entries[1:] if e.mechanism == "gaussian"]
    assert len(rounds) == len(result.rounds) >= 1
    assert result.n_initial == len(domain)
    check = check_fairness(domain.attributes, list(result.model.potentials), roles)
    if fair:
        assert check.passed
    # σ only ever halves (annealing) except for the last round, which takes what is left.
    sigmas = [r.sigma for r in result.rounds[:-1]]
    assert all(b in (a, a / 2) for a, b in zip(sigmas, sigmas[1:], strict=False))


def test_aim_respects_the_model_size_cap():
    domain, data = _data()
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    cap = 200 * 8 / 2**20  # room for cliques of at most 200 cells
    result = run_aim(tables, domain, rho=1.0, rng=np.random.default_rng(2),
                     ledger=PrivacyLedger(rho_budget=1.0), max_model_size_mb=cap,
                     max_iters=100, final_max_iters=300)
    assert junction_tree_size_mb(domain, list(result.model.potentials)) <= cap + 1e-12


def test_fair_aim_needs_roles():
    domain, data = _data(n=100)
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    with pytest.raises(ValueError, match="roles"):
        run_aim(tables, domain, rho=0.1, rng=np.random.default_rng(0),
                ledger=PrivacyLedger(rho_budget=1.0), fair=True)
