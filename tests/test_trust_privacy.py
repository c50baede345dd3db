"""Issue 10 (privacy leaks): regression tests for items 1, 2, 3, 12 and 13.

Each test names the item it covers; each fails on the code as it was at commit 613a631.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.domains.cathist import (
    ValueListUniverse,
    WordUniverse,
    cathist,
    cathist_threshold,
    outside_probability,
)

# --- item 2: CatHist samples the declared universe and drops active draws --------------------


def _released_share(counts: dict[str, int], universe: ValueListUniverse, label: str, *,
                    eps: float, reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        result = cathist(counts, universe=universe, tolerance=0.01, epsilon=eps, rng=rng,
                         ledger=PrivacyLedger(rho_budget=1.0))
        hits += label in result.categories
    return hits / reps


def test_cathist_release_odds_match_laplace_on_every_bin() -> None:
    """Item 2: an absent value is released with probability p (it is drawn from the declared
    universe), a value held by one row only through its noisy count (a draw that hits it is
    dropped), so the odds ratio is P(Lap >= tau - 1) / p <= e^eps, not ~(1 + e^eps).

    With exact discrete Laplace noise (issue 41.2), P(Z >= j) = r^j / (1 + r) for j >= 0,
    r = e^(-eps), and a count passes tau when it reaches k = ceil(tau): p = P(Z >= k) and
    the one-row value's P(Z >= k - 1), odds r^-1 = e^eps exactly."""
    universe = ValueListUniverse(tuple(f"v{i:02d}" for i in range(20)))
    eps, reps = 1.0, 4000
    tau = cathist_threshold(epsilon=eps, domain_size=20, tolerance=0.01)
    r, k = math.exp(-eps), max(0, math.ceil(tau))

    def at_least(j: int) -> float:  # P(Z >= j) of the discrete Laplace
        return r**j / (1 + r) if j >= 0 else 1 - r ** (1 - j) / (1 + r)

    p, present = at_least(k), at_least(k - 1)
    assert p == pytest.approx(outside_probability(domain_size=20, tolerance=0.01), rel=0.6)
    absent_share = _released_share({}, universe, "v07", eps=eps, reps=reps, seed=1)
    present_share = _released_share({"v07": 1}, universe, "v07", eps=eps, reps=reps, seed=2)
    for share, expected in ((absent_share, p), (present_share, present)):
        assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / reps)
    assert present / p <= math.exp(eps) * (1 + 1e-12)


def test_cathist_never_releases_values_outside_the_declared_universe() -> None:
    """Item 2: outside draws come from the universe, and data values outside it are not
    counted (nothing else could release them, so releasing them would identify the row)."""
    universe = WordUniverse(alphabet="abc", max_length=2)  # 12 words
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    for _ in range(200):
        result = cathist({"Zed": 10_000, "ab": 10_000}, universe=universe, tolerance=0.05,
                         epsilon=1.0, rng=rng, ledger=PrivacyLedger(rho_budget=1.0))
        seen |= set(result.categories)
        assert result.as_dict()["ab"] > 9_000
    assert "Zed" not in seen
    assert seen <= {universe.label(i) for i in range(universe.size)}
    assert len(seen) > 6  # outside draws do happen (p = 0.22 per value)


def test_contract_declaring_only_a_size_is_refused_at_preflight(tmp_path) -> None:
    """Item 2: the contract must say how to draw from the universe, not only its size."""
    from privfair.contracts.datasets import contract_path
    from privfair.core.errors import ContractError
    from privfair.release.tabular import plan

    text = contract_path("example_open_domain").read_text().replace(
        '      universe:\n        words: {alphabet: "abcdefghijklmnopqrstuvwxyz-", max_length: 12}\n',
        "      size: 171000\n")
    assert "size: 171000" in text
    contract = tmp_path / "sized.yaml"
    contract.write_text(text)
    data = tmp_path / "d.csv"
    data.write_text("gender,age,degree,hired\nfemale,30,none,no\n")
    with pytest.raises(ContractError, match="open_domain.universe"):
        plan.check({"contract": str(contract), "data": str(data),
                        "out": str(tmp_path / "r"), "work_dir": str(tmp_path / "w")})
    mismatch = text.replace("      size: 171000\n", "      size: 5\n      universe: "
                                                    "{values: [a, b]}\n")
    contract.write_text(mismatch)
    with pytest.raises(ContractError, match="does not match the declared universe"):
        plan.check({"contract": str(contract), "data": str(data),
                        "out": str(tmp_path / "r"), "work_dir": str(tmp_path / "w")})


# --- item 1: DP quantiles record a data-independent query count ------------------------------


@pytest.mark.parametrize("rows", [2345, 10])
def test_dp_bins_ledger_does_not_record_the_row_count(rows: int) -> None:
    """Item 1: the quantile mechanism has n + 1 candidates; the ledger (and so the manifest,
    report and Prefect artifact) must not record n + 1 as its query count."""
    from privfair.domains.quantiles import dp_quantile_edges

    ledger = PrivacyLedger(rho_budget=1.0)
    values = np.random.default_rng(rows).uniform(0, 100, size=rows)
    dp_quantile_edges(values, bins=4, lower=0.0, upper=100.0, integer=False, rho=0.3,
                      rng=np.random.default_rng(0), ledger=ledger, name="DP bins of x")
    assert [e.queries for e in ledger.entries] == [1, 1, 1]


# --- item 13: discrete Gaussian noise from a cryptographically secure source -----------------


def test_discrete_gaussian_draws_every_bit_from_the_passed_generator() -> None:
    """Item 13, as issue 41.2 made exact noise the default: the exact sampler's uniform
    integers are words of the passed Generator itself (OS-seeded in production), never a
    Mersenne Twister reseeded from a few bits of it: equal Generators give equal noise (a
    test seed reproduces a release), Generators that differ in their state give different
    noise, and a test or an audit may still pass a seeded ``random.Random``."""
    import random

    from privfair.core.mechanisms import gaussian_mechanism, sample_discrete_gaussian

    def noisy(seed: int, **kw) -> np.ndarray:
        return gaussian_mechanism(np.zeros(64, dtype=np.int64), sigma=5.0, sensitivity=1.0,
                                  rng=np.random.default_rng(seed), ledger=PrivacyLedger(
                                      rho_budget=1.0), name="d", **kw)

    np.testing.assert_array_equal(noisy(7), noisy(7))
    assert not np.array_equal(noisy(7), noisy(8))  # P(equal) < 1e-60
    # the Generator's words, not its 63-bit seed: one advanced by a draw gives other noise
    advanced = np.random.default_rng(7)
    advanced.integers(2)
    moved = gaussian_mechanism(np.zeros(64, dtype=np.int64), sigma=5.0, sensitivity=1.0,
                               rng=advanced, ledger=PrivacyLedger(rho_budget=1.0), name="d")
    assert not np.array_equal(moved, noisy(7))
    np.testing.assert_array_equal(noisy(1, discrete_source=random.Random(1)),
                                  noisy(2, discrete_source=random.Random(1)))
    draws = sample_discrete_gaussian(64, sigma=5.0, rng=np.random.default_rng(3))
    assert draws.dtype == np.int64 and np.all(np.abs(draws) < 60)
    with pytest.raises(TypeError, match="rng"):
        sample_discrete_gaussian(4, sigma=5.0)


# --- item 3: a fixed seed is an explicit, recorded test mode ----------------------------------


def test_fixed_seed_needs_the_insecure_flag_and_is_fingerprinted(tmp_path) -> None:
    """Item 3: a seed without insecure_seed is refused before any read; with it, the plan
    records the test mode and a fingerprint keyed by the dataset's secret in the registry
    (equal for equal seeds of one dataset, whatever the work folder; never the seed)."""
    from privfair.core.errors import ReleaseInputError
    from privfair.release.protocol import plan_release
    from privfair.release.registry import KINDS
    from privfair.release.seeds import seed_fingerprint

    table = KINDS[0]
    base = {"out": str(tmp_path / "r"), "work_dir": str(tmp_path / "w"), "seed": 12345,
            "delta": 1e-9}
    with pytest.raises(ReleaseInputError, match="insecure_seed"):
        plan_release(table, base)
    assert not (tmp_path / "w").exists()
    run = plan_release(table, {**base, "insecure_seed": True}).plan
    assert run.seeded and run.seed_policy.startswith("INSECURE test mode")
    assert run.seed_fingerprint == seed_fingerprint(12345, dataset="adult")
    assert run.seed_fingerprint != seed_fingerprint(12346, dataset="adult")
    assert "12345" not in run.seed_fingerprint
    elsewhere = plan_release(table, {**base, "insecure_seed": True,
                                     "work_dir": str(tmp_path / "other")}).plan
    assert elsewhere.seed_fingerprint == run.seed_fingerprint  # the key is not in work_dir
    # another dataset (another key) fingerprints the same seed differently
    assert seed_fingerprint(12345, dataset="compas") != run.seed_fingerprint
    production = plan_release(table, {"out": str(tmp_path / "r"), "delta": 1e-9,
                                      "work_dir": str(tmp_path / "w")}).plan
    assert not production.seeded and production.seed_fingerprint is None


# --- item 12: a fair method's structure is checked, and refused if it fails -----------------


def test_fair_method_with_an_unfair_built_structure_is_refused(tmp_path, toy_contract,
                                                               toy_parquet, monkeypatch) -> None:
    """Item 12: the pipeline refused nothing when a fair method's graph failed the check
    (it only recorded it). A selector that returns a protected-outcome edge is refused."""
    from privfair.core.errors import FairnessViolationError
    from privfair.release.run import release_table as run_release
    from privfair.synth import synthesizer
    from privfair.synth.structure import SelectedStructure, check_fairness

    def unfair_select(tables, model, roles, *, method, **_):
        edges = (("sex", "income"),)
        return SelectedStructure(method, edges, check_fairness(
            ["age", "sex", "race", "edu", "hours", "income"], edges, roles))

    monkeypatch.setattr(synthesizer, "select", unfair_select)
    with pytest.raises(FairnessViolationError, match="'sex' reaches 'income'"):
        run_release({"contract": str(toy_contract), "data": str(toy_parquet),
                     "method": "prefair-greedy", "epsilon": 3.0, "delta": 1e-6,
                     "out": str(tmp_path / "releases"), "work_dir": str(tmp_path / "work"),
                     "max_iters": 50})  # enough ρ for a tree on 1,500 rows (no fallback)
    assert not list((tmp_path / "releases").glob("toy/v*"))


def test_tot_discrimination_is_rechecked_against_eta() -> None:
    """Item 12: with --fairness tot the manifest describes the transform's own check (its
    achieved discrimination against eta) beside the model graph's; a miss is refused."""
    from privfair.core.errors import FairnessViolationError
    from privfair.release.tabular.post_noise import check_tot_discrimination

    record = {"parameters": {"discrimination": "additive", "eta": 0.05},
              "achieved_discrimination": {"max_additive_gap": 0.049, "max_ratio_gap": 0.2,
                                          "input_max_additive_gap": 0.3,
                                          "input_max_ratio_gap": 1.5}}
    check = check_tot_discrimination(record)
    assert check["passed"] and check["achieved"] == 0.049 and check["before_transform"] == 0.3
    from privfair.release.tabular.manifest import _transform_line

    line = _transform_line({"name": "tot", "applied": True, "fairness_check": check, **record})
    assert "checked: discrimination 0.049 ≤ η (passed)" in line
    record["parameters"]["discrimination"] = "ratio"
    with pytest.raises(FairnessViolationError, match="ratio discrimination 0.2 exceeds"):
        check_tot_discrimination(record)
