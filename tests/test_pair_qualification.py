"""Structure at small n, per pair (issue 34).

A pair's 2-way marginal is measured only if it can carry signal at the noisy total and ρ; the
structure is a forest over the pairs that qualify; the ρ of the edges a forest lacks goes to
the one-way marginals, so the ledger still adds up to the declared cost; the decision reads
no private value but the noisy total. And a fit that a time budget stopped says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privfair.core.accounting import PrivacyLedger, zcdp_rho
from privfair.core.domain import Domain, Roles
from privfair.synth.estimation import GraphicalModel, estimate
from privfair.synth.measure import Measurement, all_pairs, count_marginals
from privfair.synth.structure import (
    TREE_NOISE_TVD_LIMIT,
    check_fairness,
    forest_size,
    pair_noise_l1,
    pair_noise_tvd,
    qualify_pairs,
    select_structure,
    selection_rho,
    tree_pair_sigma,
)
from privfair.synth.synthesizer import (
    FOREST_STEP,
    SELECTION_STEP,
    UNCHOSEN_STEP,
    UNSELECTED_STEP,
    FairSynthesizer,
)


def test_a_huge_pair_at_tiny_rho_is_dropped_and_a_small_one_kept():
    domain = Domain(("a", "b", "c", "d"), (2, 2, 200, 200))
    pairs = list(all_pairs(domain))
    q = qualify_pairs(domain, pairs, total=1000.0, rho_tree=0.01)
    assert ("a", "b") in q.kept and ("c", "d") not in q.kept
    assert ("a", "c") not in q.kept  # 400 cells: noise alone would be most of the mass
    # the rule is the noise TVD at a full tree's σ against the limit, pair by pair
    sigma = tree_pair_sigma(4, rho_tree=0.01)
    assert q.pair_sigma == pytest.approx(sigma)
    for a, b in pairs:
        tvd = pair_noise_tvd(domain.size(a) * domain.size(b), sigma=sigma, total=1000.0)
        assert ((a, b) in q.kept) == (tvd <= q.limit)
    assert q.forest_edges == 1 and q.share == pytest.approx(1 / 3) and not q.fallback
    # more rows or more ρ let more through; none at all is the independence fallback
    assert len(qualify_pairs(domain, pairs, total=1e7, rho_tree=0.01).kept) == 6
    none = qualify_pairs(domain, pairs, total=10.0, rho_tree=0.01)
    assert none.kept == () and none.fallback and none.share == 0.0


def test_the_size_cap_comes_from_the_noisy_total_not_the_data():
    domain = Domain(("a", "b"), (2, 500))
    # 500 declared categories, but 1,000 rows at one-way σ = 10 keep at most 34 of them
    q = qualify_pairs(domain, [("a", "b")], total=1000.0, rho_tree=1.0, one_way_sigma=10.0)
    assert q.size_cap == 1000 // 30 + 1 and q.kept == (("a", "b"),)
    assert qualify_pairs(domain, [("a", "b")], total=1000.0, rho_tree=1.0).kept == ()


def _tables(n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    domain = Domain(("p", "x", "a", "o", "y"), (2, 3, 2, 2, 4))
    data = {k: rng.integers(0, s, n) for k, s in zip(domain.attributes, domain.sizes,
                                                     strict=True)}
    data["o"] = np.where(rng.random(n) < 0.8, data["x"] % 2, data["o"])
    tables = count_marginals(domain, list(all_pairs(domain)), [data])
    one_way = {a: np.full(domain.size(a), 1 / domain.size(a)) for a in domain}
    return domain, tables, one_way


@pytest.mark.parametrize("method", ["mst", "prefair-greedy", "prefair-exact"])
def test_the_forest_spans_only_the_qualifying_pairs(method):
    domain, tables, one_way = _tables()
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    qualified = [("p", "a"), ("a", "o"), ("x", "y")]
    ledger = PrivacyLedger(rho_budget=1.0)
    out = select_structure(domain, roles, method=method, pair_tables=tables, one_way=one_way,
                           total=2000.0, rho=0.5, rng=np.random.default_rng(0),
                           ledger=ledger, qualified=qualified)
    assert {frozenset(e) for e in out.edges} == {frozenset(e) for e in qualified}
    assert forest_size(domain.attributes, out.edges) == 3
    assert ledger.spent == pytest.approx(0.5)
    if method != "prefair-exact":  # one selection round per forest edge, ρ/3 each
        assert [e.name for e in ledger.entries] == [f"select edge {r}/3" for r in (1, 2, 3)]


def test_prefair_exact_drops_an_unfair_path_of_qualifying_pairs():
    domain, tables, one_way = _tables()
    roles = Roles(protected=("p",), admissible=("a",), outcome=("o",))
    # p - x - o is an unfair path; a spanning forest of these pairs must lose one of them
    out = select_structure(domain, roles, method="prefair-exact", pair_tables=tables,
                           one_way=one_way, total=2000.0, rho=0.5,
                           rng=np.random.default_rng(0), ledger=PrivacyLedger(rho_budget=1.0),
                           qualified=[("p", "x"), ("x", "o")])
    assert out.fairness.passed and len(out.edges) == 1
    assert check_fairness(domain.attributes, out.edges, roles).passed


def _credit(n: int = 1000, seed: int = 1) -> tuple[pd.DataFrame, Domain, Roles]:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    frame = pd.DataFrame({
        "checking": rng.integers(0, 4, n), "purpose": rng.integers(0, 5, n),
        "amount": rng.integers(0, 5, n), "age": rng.integers(0, 5, n),
        "duration": rng.integers(0, 5, n), "job": rng.integers(0, 5, n), "sex": sex,
        "credit_risk": (rng.random(n) < np.where(sex == 1, 0.8, 0.55)).astype(np.int64)})
    return (frame, Domain(tuple(frame.columns), (4, 5, 5, 5, 5, 5, 2, 2)),
            Roles(protected=("sex",), admissible=("checking", "amount"),
                  outcome=("credit_risk",)))


@pytest.mark.parametrize("method", ["mst", "prefair-exact", "aim"])
def test_a_forest_respends_the_budget_of_the_dropped_edges(method):
    # ε = 1: at a tree's limit 0.15 on 500 rows, or AIM's 0.07 (its limit at ε = 1) on
    # 1,000, only the pairs of 8 cells or fewer qualify, a forest of fewer edges than 7
    frame, domain, roles = _credit(n=1000 if method == "aim" else 500)
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                            method=method, require_fair=False, max_iters=300, max_time_s=20)
    synth.fit(frame, rng=np.random.default_rng(0))
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    small_n = synth.manifest()["method"]["small_n"]
    assert 0 < small_n["forest_edges"] < len(domain) - 1, small_n
    # the ledger adds up to the declared cost: the dropped edges' ρ went to one-way marginals
    assert synth.ledger_.spent == pytest.approx(rho, rel=1e-9)
    names = [e.name for e in synth.ledger_.entries]
    extra = [e for e in synth.ledger_.entries if "too noisy" in e.name]
    assert len(extra) == 1, names
    if method == "aim":
        # at small n AIM's one-way marginals get at least MST's third of ρ, and its rounds
        # are sized to the forest (2 per edge), not 16·d
        one_way = sum(e.rho for e in synth.ledger_.entries if "one-way" in e.name)
        assert rho / 3 - 1e-12 <= one_way < rho
        assert 0 < len(synth.aim_rounds_) <= 2 * small_n["forest_edges"] + 1
    else:
        assert extra[0].name == FOREST_STEP
        share = small_n["forest_edges"] / (len(domain) - 1)
        assert extra[0].rho == pytest.approx(2 * rho / 3 * (1 - share))
        assert sum(vars(synth.split_).values()) == pytest.approx(rho)
        assert len(synth.structure_.edges) <= small_n["forest_edges"]


def test_the_decision_reads_no_private_value_but_the_noisy_total():
    frame, domain, roles = _credit(n=1500)
    # Same one-way counts (so the same noisy total under the same seed), different pairs.
    shuffled = frame.copy()
    rng = np.random.default_rng(9)
    for column in shuffled.columns:
        shuffled[column] = rng.permutation(shuffled[column].to_numpy())
    decisions = []
    for table in (frame, shuffled):
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                                method="mst", require_fair=False, max_iters=200)
        synth.fit(table, rng=np.random.default_rng(3))
        decisions.append(synth.qualification_)
    assert decisions[0].total == decisions[1].total
    assert decisions[0].kept == decisions[1].kept
    # and it is exactly the public rule evaluated on that noisy total
    sigma = synth.one_way_measurements_[0].stddev  # combined; the first measurement's is
    first = [e for e in synth.ledger_.entries if e.name == "one-way marginals"][0]
    again = qualify_pairs(domain, list(all_pairs(domain)), total=decisions[0].total,
                          rho_tree=2 * zcdp_rho(epsilon=1.0, delta=1e-6) / 3,
                          one_way_sigma=first.sigma, limit=TREE_NOISE_TVD_LIMIT)
    assert again.kept == decisions[0].kept and np.all(sigma <= first.sigma)


def test_a_time_budget_stop_is_reported_as_not_converged_and_why():
    from privfair.release.kinds.table.kind import fit_stop

    rng = np.random.default_rng(0)
    domain = Domain(("a", "b", "c"), (3, 3, 3))
    # a cycle of pairs: not decomposable, so mirror descent runs (and the clock stops it)
    measurements = [Measurement(c, rng.random((3, 3)) * 100, np.ones((3, 3)))
                    for c in [("a", "b"), ("b", "c"), ("a", "c")]]
    model = estimate(domain, measurements, max_iters=10_000, tol=0.0, max_time_s=0.0)
    assert not model.report.converged and model.report.stopped_by == "time budget"
    capped = estimate(domain, measurements, max_iters=5, tol=0.0)
    assert capped.report.stopped_by == "iteration cap"
    # the saved model carries it into the release manifest's estimation record
    import io

    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    assert GraphicalModel.read_meta(buffer)["report"]["stopped_by"] == "time budget"
    line = fit_stop({"estimation": {"converged": False, "stopped_by": "time budget",
                                    "iterations": 57, "max_iters": 10_000},
                     "time_budget_s": 240})
    assert line.startswith("converged: no (stopped by the 240 s time budget, 57 iterations")
    assert fit_stop({"estimation": {"converged": True, "stopped_by": "tolerance"}}) is None


def test_aim_past_its_time_budget_logs_an_alarm_and_publishes_the_same(caplog):
    """Issue 41.5: a zero time budget used to end AIM's rounds early; now it only logs an
    operator warning and the manifest is the one without a budget."""
    import logging

    frame, domain, roles = _credit(n=3000)

    def run(budget):
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=8.0, delta=1e-6,
                                method="aim", require_fair=False, max_iters=200,
                                max_time_s=budget)
        synth.fit(frame, rng=np.random.default_rng(0))
        assert synth.ledger_.spent == pytest.approx(zcdp_rho(epsilon=8.0, delta=1e-6))
        return [(e.name, e.rho) for e in synth.ledger_.entries], synth.manifest()["method"]

    with caplog.at_level(logging.WARNING, logger="privfair.synth.synthesizer"):
        alarmed = run(1e-9)
    assert "past the 1e-09 s time budget" in caplog.text
    assert "aim_rounds_stopped_by_time" not in alarmed[1]["estimation"]
    assert alarmed == run(None)

def test_the_dry_run_states_the_rule_and_what_expected_rows_lets_through(
        toy_contract, toy_parquet, tmp_path, capsys):
    from privfair.cli import main

    text = toy_contract.read_text()
    declared = tmp_path / "declared.yaml"
    declared.write_text(text + "expected_rows: 500\n")
    argv = ["release", "--contract", str(declared), "--data", str(toy_parquet), "--epsilon",
            "1", "--delta", "1e-6", "--method", "mst", "--out", str(tmp_path / "out"),
            "--work-dir", str(tmp_path / "work"), "--no-prefect", "--dry-run"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    line = next(x for x in (captured.out + captured.err).splitlines()
                if x.startswith("small-n rule:"))
    assert f"expected TVD <= {TREE_NOISE_TVD_LIMIT:g}" in line
    assert "a pair qualifies from about" in line
    # 6 attributes, 15 pairs; the count is the public rule at 500 rows (no data read)
    from privfair.contracts.schema import load_contract
    from privfair.core.accounting import zcdp_rho
    from privfair.release.policy_counts import POLICY_SHARE
    from privfair.synth.synthesizer import pair_qualification

    contract = load_contract(declared)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6) * (1 - POLICY_SHARE)
    at = pair_qualification(500.0, contract.domain(), contract.roles(), method="mst",
                            rho=rho)
    assert f"at expected_rows = 500: {len(at.kept)} of 15 candidate pairs qualify" in line
    assert 0 < len(at.kept) < 15
    # expected_rows leaves a contract's fingerprint alone when absent
    assert load_contract(toy_contract).fingerprint() != contract.fingerprint()
    assert "expected_rows" not in text


def test_a_release_records_the_decision_and_its_last_line_says_it(toy_contract, toy_parquet,
                                                                   tmp_path):
    import json

    from privfair.release.kinds.table.kind import TABLE
    from privfair.release.run import release_table

    folder = release_table({"contract": str(toy_contract), "data": str(toy_parquet),
                            "epsilon": 1.0, "delta": 1e-9, "method": "mst",
                            "out": str(tmp_path / "releases"),
                            "work_dir": str(tmp_path / "work"), "max_iters": 50})
    manifest = json.loads((folder / "manifest.json").read_text())
    small_n = manifest["structure"]["small_n"]
    assert small_n["candidate_pairs"] == 15 and small_n["limit"] == TREE_NOISE_TVD_LIMIT
    assert len(manifest["structure"]["edges"]) <= small_n["forest_edges"]
    assert (f"small-n rule: {small_n['qualifying_pairs']} of 15 pairs qualify"
            in TABLE.outcome(manifest))
    assert sum(row["rho"] for row in manifest["ledger"]) == pytest.approx(
        manifest["guarantee"]["rho"], rel=1e-9)


@pytest.mark.parametrize("method,check", [("mst", "edge-rule"), ("prefair-greedy", "edge-rule"),
                                          ("prefair-greedy", "privci"),
                                          ("prefair-exact", "edge-rule")])
def test_a_selection_that_stops_early_respends_its_rounds(method, check):
    # Independent but for sex -> credit_risk: the selection, scoring each pair net of its
    # measurement noise, stops before the forest is complete on some seeds. Each chosen edge
    # is measured at the ρ it has in the full forest; the ρ of the edges not chosen and of
    # the rounds not run goes to the one-way marginals (issue 34.1), so the ledger still adds
    # up to the declared cost.
    frame, domain, roles = _credit(n=1000)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    stopped = partial = 0
    for seed in range(4):
        synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                                method=method, require_fair=False, max_iters=300,
                                greedy_check=check)
        synth.fit(frame, rng=np.random.default_rng(seed))
        assert synth.ledger_.spent == pytest.approx(rho, rel=1e-9)
        assert sum(vars(synth.split_).values()) == pytest.approx(rho, rel=1e-9)
        assert synth.structure_.fairness.passed or method == "mst"
        names = [e.name for e in synth.ledger_.entries]
        forest = synth.qualification_.forest_edges
        if len(synth.structure_.edges) < forest:
            stopped += 1
            if not synth.structure_.edges:
                assert UNSELECTED_STEP in names and "selected 2-way marginals" not in names
            else:
                partial += 1
                measured = [e for e in synth.ledger_.entries
                            if e.name == "selected 2-way marginals"]
                assert measured[0].rho == pytest.approx(synth.split_.measure)
                # the full forest's σ per edge: ρ_measure·k/R over k edges
                sigma = (forest / (2 * synth.split_.measure
                                   * forest / len(synth.structure_.edges))) ** 0.5
                assert all(np.allclose(m.stddev[m.stddev > 0].min(), sigma)
                           for m in synth.selected_)
                unchosen = [e for e in synth.ledger_.entries if e.name == UNCHOSEN_STEP]
                selection = synth.manifest()["method"]["small_n"]["selection"]
                assert unchosen[0].rho == pytest.approx(selection["rho_unchosen_to_one_way"])
                assert selection["edges_chosen"] == len(synth.structure_.edges)
    assert stopped >= 1 and partial >= 1


@pytest.mark.parametrize("method", ["mst", "prefair-exact"])
def test_the_selection_gets_the_rho_that_resolves_the_smallest_pairs_noise(method):
    # Kruskal's resolution √(R / 2ρ) and the exact search's σ √(r / 2ρ) equal the smallest
    # candidate's noise penalty √(2/π)·cells·√(R / (2·ρ_measure)); public inputs only.
    domain = Domain(("a", "b", "c", "d"), (2, 3, 4, 5))
    candidates = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("b", "d")]
    rho_measure, rounds = 0.01, forest_size(domain.attributes, candidates)
    need = selection_rho(domain, candidates, method=method, rho_measure=rho_measure)
    queries = len(candidates) if method == "prefair-exact" else rounds
    resolution = (queries / (2 * need)) ** 0.5
    penalty = pair_noise_l1(6, sigma=(rounds / (2 * rho_measure)) ** 0.5)
    assert resolution == pytest.approx(penalty)
    assert selection_rho(domain, [], method=method, rho_measure=rho_measure) == 0.0


def test_a_tree_selects_with_only_the_rho_it_needs():
    frame, domain, roles = _credit(n=1000)
    rho = zcdp_rho(epsilon=1.0, delta=1e-6)
    synth = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                            method="mst", require_fair=False, max_iters=300)
    synth.fit(frame, rng=np.random.default_rng(0))
    selection = synth.manifest()["method"]["small_n"]["selection"]
    moved = [e for e in synth.ledger_.entries if e.name == SELECTION_STEP]
    assert moved[0].rho == pytest.approx(selection["rho_select_to_one_way"]) and moved[0].rho > 0
    rounds = [e for e in synth.ledger_.entries if e.name.startswith("select edge")]
    assert sum(e.rho for e in rounds) <= selection["rho_select"] * (1 + 1e-9)
    assert synth.ledger_.spent == pytest.approx(rho, rel=1e-9)
    # without the small-n rule the selection keeps MST's third
    plain = FairSynthesizer(domain=domain, roles=roles, epsilon=1.0, delta=1e-6,
                            method="mst", require_fair=False, max_iters=300,
                            small_n_fallback=False)
    plain.fit(frame, rng=np.random.default_rng(0))
    assert not any(e.name == SELECTION_STEP for e in plain.ledger_.entries)
    assert sum(e.rho for e in plain.ledger_.entries
               if e.name.startswith("select edge")) == pytest.approx(rho / 3)


def test_aims_limit_grows_with_rho_from_the_calibrated_to_the_trees():
    from privfair.synth.structure import NOISE_TVD_LIMIT, qualification_limit

    limits = [qualification_limit("aim", rho=zcdp_rho(epsilon=eps, delta=1e-6))
              for eps in (0.5, 1.0, 2.0, 4.0, 8.0)]
    # ε ≤ 1: the calibrated 0.07 (issue 23.3); ε = 2: between; ε ≥ 4: the trees' 0.15
    assert limits[0] == limits[1] == pytest.approx(NOISE_TVD_LIMIT, rel=1e-4)
    assert NOISE_TVD_LIMIT < limits[2] < TREE_NOISE_TVD_LIMIT
    assert limits[3] == limits[4] == TREE_NOISE_TVD_LIMIT
    assert qualification_limit("mst") == TREE_NOISE_TVD_LIMIT
    with pytest.raises(ValueError, match="rho"):
        qualification_limit("aim-fair")


@pytest.mark.parametrize(("rows", "independence"), [(20, True), (500, False)])
def test_the_dry_run_says_in_words_when_the_release_will_be_independence(
        toy_contract, toy_parquet, tmp_path, capsys, rows, independence):
    """Issue 42.3: at ε = 1 every table method on the credit table was independence and the
    dry-run did not say so plainly."""
    from privfair.cli import main

    declared = tmp_path / "declared.yaml"
    declared.write_text(toy_contract.read_text() + f"expected_rows: {rows}\n")
    argv = ["release", "--contract", str(declared), "--data", str(toy_parquet), "--epsilon",
            "1", "--delta", "1e-6", "--method", "mst", "--out", str(tmp_path / "out"),
            "--work-dir", str(tmp_path / "work"), "--no-prefect", "--dry-run"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    said = "this release will be the independence model" in captured.out + captured.err
    assert said is independence


def test_the_dry_run_asks_for_expected_rows_when_the_contract_has_none(
        toy_contract, toy_parquet, tmp_path, capsys):
    from privfair.cli import main

    argv = ["release", "--contract", str(toy_contract), "--data", str(toy_parquet),
            "--epsilon", "1", "--delta", "1e-6", "--method", "mst", "--out",
            str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"), "--no-prefect",
            "--dry-run"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "declare expected_rows" in captured.out + captured.err
