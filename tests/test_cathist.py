"""CatHist (Rodriguez & Howe 2018, Algorithm 1): threshold, accounting, statistics, fidelity."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytest

from privfair.contracts.datasets import load_dataset
from privfair.core.accounting import PrivacyLedger
from privfair.core.errors import BudgetExceededError
from privfair.domains.cathist import (
    CatHistResult,
    WordUniverse,
    cathist,
    cathist_threshold,
    f_fidelity,
    outside_probability,
)

ADULT_TRAIN_ROWS = 32_561  # adult.data; the embedded file appends adult.test after it
ENGLISH_WORDS = 171_000  # the paper's domain for sex (1.71e5)
WORD_PAIRS = 29_400_000_000  # ... and for workclass, marital-status (2.94e10)


@dataclass(frozen=True)
class _Fillers:
    """The counted labels plus "~i" fillers up to n values, so tests tell drawn labels apart."""

    known: tuple[str, ...]
    size: int

    def __contains__(self, label: object) -> bool:
        return label in self.known or (isinstance(label, str) and label.startswith("~"))

    def label(self, index: int) -> str:
        return self.known[index] if index < len(self.known) else f"~{index}"


def _universe(counts: Mapping[str, int], n: int) -> _Fillers:
    return _Fillers(tuple(counts), int(n))


def _run(counts: Mapping[str, int], *, n: int, rho: float, eps: float,
         rng: np.random.Generator) -> CatHistResult:
    ledger = PrivacyLedger(rho_budget=eps**2)
    return cathist(counts, universe=_universe(counts, n), tolerance=rho, epsilon=eps, rng=rng,
                   ledger=ledger)


# --- threshold ---------------------------------------------------------------------------


def test_threshold_against_hand_computed_values() -> None:
    # n = 1.71e5, rho = 0.5, eps = 1: 1 - 0.5**(1/n) = 4.05348e-6, so
    # tau = -ln(8.10697e-6) = 11.72279 (50-digit decimal arithmetic gives 11.7227866022...).
    assert cathist_threshold(epsilon=1.0, domain_size=171_000, tolerance=0.5) == pytest.approx(
        11.722786602252, rel=1e-12)
    # n = 2.94e10, rho = 0.9, eps = 0.01: p = 3.58369e-12, tau = 2566.148 (same arithmetic).
    # The naive rho**(1/n) loses ~5 digits here; the implementation uses expm1.
    assert cathist_threshold(epsilon=0.01, domain_size=WORD_PAIRS, tolerance=0.9) == (
        pytest.approx(2566.1480658045, rel=1e-11))
    naive = -math.log(2 * (1 - 0.01 ** (1 / 1000))) / 2.0
    assert cathist_threshold(epsilon=2.0, domain_size=1000, tolerance=0.01) == pytest.approx(
        naive, rel=1e-12)
    assert outside_probability(domain_size=1000, tolerance=0.01) == pytest.approx(
        0.0045945826484730, rel=1e-12)


def test_threshold_rises_with_tolerance_and_falls_with_epsilon() -> None:
    taus = [cathist_threshold(epsilon=1.0, domain_size=ENGLISH_WORDS, tolerance=r)
            for r in (0.1, 0.5, 0.9, 0.99)]
    assert taus == sorted(taus)
    assert cathist_threshold(epsilon=2.0, domain_size=ENGLISH_WORDS, tolerance=0.5) == (
        pytest.approx(taus[1] / 2))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"epsilon": 0.0, "domain_size": 10, "tolerance": 0.5}, "epsilon"),
        ({"epsilon": 1.0, "domain_size": 0, "tolerance": 0.5}, "domain_size"),
        ({"epsilon": 1.0, "domain_size": 10.5, "tolerance": 0.5}, "domain_size"),
        ({"epsilon": 1.0, "domain_size": 10, "tolerance": 1.0}, "tolerance"),
        # rho**(1/n) < 1/2 would need a negative threshold
        ({"epsilon": 1.0, "domain_size": 1, "tolerance": 0.1}, "negative threshold"),
    ],
)
def test_threshold_refuses_bad_parameters(kwargs: dict[str, float], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        cathist_threshold(**kwargs)


# --- mechanism ---------------------------------------------------------------------------


def test_ledger_charged_eps_squared_over_two_before_noise() -> None:
    ledger = PrivacyLedger(rho_budget=1.0)
    rng = np.random.default_rng(1)
    words = _universe({"a": 10, "b": 3}, ENGLISH_WORDS)
    cathist({"a": 10, "b": 3}, universe=words, tolerance=0.9, epsilon=0.5, rng=rng,
            ledger=ledger, name="gender")
    assert ledger.spent == 0.125  # 0.5**2 / 2, exactly
    (entry,) = ledger.entries
    assert (entry.name, entry.mechanism, entry.sensitivity, entry.epsilon) == (
        "gender", "laplace", 1.0, 0.5)
    assert entry.queries == ENGLISH_WORDS  # not the (private) active-domain size

    # A step past the budget is refused before any randomness is consumed.
    state = rng.bit_generator.state
    small = PrivacyLedger(rho_budget=0.1)
    with pytest.raises(BudgetExceededError):
        cathist({"a": 10}, universe=words, tolerance=0.9, epsilon=0.5, rng=rng,
                ledger=small)
    assert rng.bit_generator.state == state
    assert small.spent == 0.0


def test_result_is_sorted_readonly_and_reproducible() -> None:
    counts = {"zeta": 5_000, "alpha": 4_000, "mid": 3_000}
    first = _run(counts, n=1000, rho=0.01, eps=1.0, rng=np.random.default_rng(7))
    again = _run(counts, n=1000, rho=0.01, eps=1.0, rng=np.random.default_rng(7))
    assert first.categories == again.categories
    np.testing.assert_array_equal(first.noisy_counts, again.noisy_counts)
    # Sorted, so position does not tell a drawn label from a real one.
    assert list(first.categories) == sorted(first.categories)
    assert not first.noisy_counts.flags.writeable
    assert set(counts) <= set(first.categories)  # large counts always clear tau
    assert np.all(first.noisy_counts >= first.tau)
    real = np.array([first.as_dict()[c] for c in ("zeta", "alpha", "mid")])
    assert np.all(np.abs(real - [5_000, 4_000, 3_000]) < 30)  # Laplace(1): |noise| < 30 w.p. ~1
    assert first.n_outside == sum(c.startswith("~") for c in first.categories)


def test_counts_below_threshold_are_removed() -> None:
    # tau = 4.69 at eps=1; a count of 0 clears it only with probability p = 0.0046.
    result = _run({"rare": 0, "common": 1_000}, n=1000, rho=0.01, eps=1.0,
                  rng=np.random.default_rng(3))
    assert "rare" not in result.categories and "common" in result.categories


def test_outside_categories_follow_binomial_and_shifted_exponential() -> None:
    n, rho, eps, reps = 1000, 0.01, 1.0, 2000
    p = outside_probability(domain_size=n, tolerance=rho)
    tau = cathist_threshold(epsilon=eps, domain_size=n, tolerance=rho)
    rng = np.random.default_rng(20180611)
    outside_counts = np.empty(reps)
    weights: list[float] = []
    for i in range(reps):
        result = _run({"a": 500, "b": 200}, n=n, rho=rho, eps=eps, rng=rng)
        outside_counts[i] = result.n_outside
        weights += [w for c, w in result.as_dict().items() if c.startswith("~")]
    # Exact noise (issue 41.2): an empty bin's discrete Laplace noise reaches k = ⌈τ⌉ with
    # probability r^k/(1 + r), r = e^(−ε), rather than the continuous noise's p = ½e^(−ετ)
    # (so P(no outside category) is (1 − p_exact)^n, near the tolerance rho = 0.01).
    k = math.ceil(tau)
    r = math.exp(-eps)
    p_exact = r**k / (1 + r)
    assert p_exact == pytest.approx(p, rel=0.6)
    mean, var = n * p_exact, n * p_exact * (1 - p_exact)
    assert abs(outside_counts.mean() - mean) < 4 * math.sqrt(var / reps)
    assert outside_counts.var() == pytest.approx(var, rel=0.15)
    none = (1 - p_exact) ** n
    assert np.mean(outside_counts == 0) == pytest.approx(none, abs=4 * math.sqrt(none / reps))
    w = np.asarray(weights)
    assert w.min() >= k and np.all(w == np.round(w))  # integers: exact noise
    excess_mean = (w - k).mean()  # Z | Z ≥ 0: geometric, mean r/(1 − r)
    assert abs(excess_mean - r / (1 - r)) < 4 * math.sqrt(r) / ((1 - r) * math.sqrt(w.size))


def test_word_universe_enumerates_shortlex_and_tests_membership() -> None:
    words = WordUniverse(alphabet="ab", max_length=3)
    assert words.size == 2 + 4 + 8
    assert [words.label(i) for i in range(words.size)] == [
        "a", "b", "aa", "ab", "ba", "bb", "aaa", "aab", "aba", "abb", "baa", "bab", "bba", "bbb"]
    assert "abb" in words and "abba" not in words and "ac" not in words
    with pytest.raises(ValueError, match="larger than"):
        WordUniverse(alphabet="abcdefghijklmnopqrstuvwxyz", max_length=14)


# --- F fidelity --------------------------------------------------------------------------


def _released(mass: dict[str, float]) -> CatHistResult:
    return CatHistResult(categories=tuple(mass), noisy_counts=np.array(list(mass.values())),
                         tau=0.0, n_outside=0)


def test_f_fidelity_boundary_cases_and_hand_value() -> None:
    truth = {"a": 3, "b": 1}
    assert f_fidelity(truth, _released({"a": 10.0, "b": 90.0})) == 1.0  # same sets
    assert f_fidelity(truth, _released({"x": 5.0})) == 0.0  # disjoint
    assert f_fidelity(truth, _released({})) == 0.0
    # I = {a}: P_true(I) = 3/4, P_released(I) = 2/4.
    assert f_fidelity(truth, _released({"a": 2.0, "z": 2.0})) == pytest.approx(0.375)
    # A category with true count 0 is not in the active domain.
    assert f_fidelity({"a": 3, "b": 0}, _released({"a": 1.0, "b": 1.0})) == pytest.approx(0.5)


# --- the paper's experiment (Fig. 6 of Rodriguez & Howe 2018) -----------------------------


@pytest.fixture(scope="module")
def adult_train_counts() -> dict[str, dict[str, int]]:
    raw = load_dataset("adult").iloc[:ADULT_TRAIN_ROWS]
    return {c: {str(k): int(v) for k, v in raw[c].value_counts().items()}
            for c in ("sex", "workclass", "marital-status")}


DOMAIN = {"sex": ENGLISH_WORDS, "workclass": WORD_PAIRS, "marital-status": WORD_PAIRS}


def _mean_f(counts: Mapping[str, int], *, n: int, rho: float, eps: float, seed: int,
            reps: int = 400) -> tuple[float, float]:
    rng = np.random.default_rng([seed, int(rho * 1000), int(eps * 1000)])
    scores = np.array([f_fidelity(counts, _run(counts, n=n, rho=rho, eps=eps, rng=rng))
                       for _ in range(reps)])
    return float(scores.mean()), float(scores.std(ddof=1) / math.sqrt(reps))


def _clearly_greater(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Mean a exceeds mean b by more than 3 standard errors of the difference."""
    return a[0] - b[0] > 3 * math.hypot(a[1], b[1])


def test_fidelity_trends_match_the_paper(adult_train_counts: dict[str, dict[str, int]]) -> None:
    # Adult train (32,561 rows), 400 runs per point (the paper averages 100).
    f = {
        (col, eps, rho): _mean_f(adult_train_counts[col], n=DOMAIN[col], rho=rho, eps=eps,
                                 seed=i)
        for i, col in enumerate(DOMAIN)
        for eps, rho in ((0.01, 0.5), (0.01, 0.99), (0.1, 0.5), (0.1, 0.99))
        if col == "workclass" or eps == 0.01
    }
    # "increasing rho increases the fidelity of the result" ...
    for col in ("sex", "marital-status"):
        assert _clearly_greater(f[col, 0.01, 0.99], f[col, 0.01, 0.5]), col
    # ... "except for the workclass attribute when eps = 0.01": its long tail (Without-pay,
    # Never-worked, and at rho=0.99 even Self-emp-not-inc) falls below the high threshold.
    assert _clearly_greater(f["workclass", 0.01, 0.5], f["workclass", 0.01, 0.99])
    # "For higher eps values ... eliminating the behavior."
    assert _clearly_greater(f["workclass", 0.1, 0.99], f["workclass", 0.1, 0.5])
    # "the fidelity for sex is consistently higher than that of the other two attributes"
    for rho in (0.5, 0.99):
        for col in ("workclass", "marital-status"):
            assert _clearly_greater(f["sex", 0.01, rho], f[col, 0.01, rho]), (col, rho)


def test_fidelity_tends_to_one_for_large_epsilon(
        adult_train_counts: dict[str, dict[str, int]]) -> None:
    for i, col in enumerate(DOMAIN):
        mean, _ = _mean_f(adult_train_counts[col], n=DOMAIN[col], rho=0.5, eps=10.0,
                          seed=100 + i, reps=100)
        assert mean > 0.999, col


def test_release_serves_as_the_open_column_domain() -> None:
    import pandas as pd

    from privfair.contracts.datasets import contract_path
    from privfair.contracts.encoding import discretize
    from privfair.contracts.schema import load_contract

    contract = load_contract(contract_path("example_open_domain"))
    spec = contract.column("gender").open_domain
    answers = pd.Series(["woman"] * 400 + ["man"] * 350 + ["nonbinary"] * 2)
    assert spec is not None and spec.universe is not None
    result = cathist({str(k): int(v) for k, v in answers.value_counts().items()},
                     universe=spec.universe.build(), tolerance=spec.tolerance, epsilon=1.0,
                     rng=np.random.default_rng(5), ledger=PrivacyLedger(rho_budget=1.0))
    released = {"gender": result.categories}
    assert {"woman", "man"} <= set(result.categories)
    assert "nonbinary" not in result.categories  # count 2 is far below tau = 41.1
    domain = contract.domain(open_categories=released)
    assert domain.size("gender") == len(result.categories) + 1  # plus the "(other)" bucket
    frame = pd.DataFrame({"gender": answers, "age": 30, "degree": "none", "hired": "no"})
    codes = discretize(frame, contract, open_categories=released)
    other = contract.labels("gender", open_categories=released).index("(other)")
    assert int(np.sum(codes["gender"] == other)) == 2
