"""Xu 2021 ch. 7, Table 7.1: total effect (TE), indirect effect (IE), χ², LR accuracy.

On the packaged ``adult_pse_dr`` contract (PSE-DR's 11 binarised attributes, its DAG,
S = sex, Y = income, IE through marital-status), reusing ``benchmarks/cfgan_adult.py``'s
``effects`` and ``chi2_joint``. The paper's generators are not private: ``epsilon = inf``
is that setting; ``dpgan`` stands in for CausalGAN. Table 7.2's counterfactual effect CE(o)
for the four contexts o of O = {race, native-country} (both exogenous in the DAG, so CE(o) is
the total effect among the rows with O = o, by the same truncated-factorisation estimator)
is measured on every table; the paper does not say which context is o1..o4, so the rows
compare max_o |CE(o)|. ``cfgan-te λ=1`` is CFGAN(TE) at the paper's λ = 1 instead of our 16
and ``cfgan λ=0`` the DAG generator with no fairness term, run in ``--full`` to measure where
χ² comes from.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_cfgan"
TITLE = "Xu 2021 Tables 7.1 / 7.2 (ch. 7): CFGAN total, indirect and counterfactual effects"
VARIANTS = ("dpgan", "fairgan", "cfgan-te", "cfgan-se", "cfgan-ce", "cfgan-te λ=1", "cfgan λ=0")
CONTEXT = ("race", "native-country")
#: Variants beyond ``benchmarks/cfgan_adult.py``'s: Table 7.2's CFGAN(CE) and the paper's λ.
EXTRA_SETTINGS = {"cfgan-ce": {"method": "cfgan", "effect": "ce", "context": CONTEXT},
                  "cfgan-te λ=1": {"method": "cfgan", "effect": "te", "fairness_weight": 1.0},
                  "cfgan λ=0": {"method": "cfgan", "effect": "te", "fairness_weight": 0.0}}


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 1 if mode == "quick" else 5
    epochs = 0  # the shipped default
    variants = ("cfgan-te",) if mode == "quick" else VARIANTS
    return [cell(NAME, {"variant": v, "epsilon": "inf", "epochs": epochs}, s)
            for v in ("real", *variants) for s in range(seeds if v != "real" else 1)]


@functools.lru_cache(maxsize=1)
def _data():
    from privfair.contracts.datasets import load_codes
    from privfair.evaluation.evaluate import train_test_split
    from privfair.generative.dag import parse_dag

    frame, contract = load_codes("adult_pse_dr")
    domain = contract.domain()
    graph = contract.causal_graph.as_mapping()
    dag = parse_dag(graph, domain, protected=("sex",), outcome=("income",))
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    return ({a: train[a].to_numpy() for a in domain}, {a: test[a].to_numpy() for a in domain},
            domain, graph, dag)


def run(c: dict[str, Any]) -> dict[str, Any]:
    import torch
    from _gan_metrics import classifier_scores
    from cfgan_adult import VARIANTS as SETTINGS
    from cfgan_adult import chi2_joint, effects

    from privfair.core.accounting import PrivacyLedger
    from privfair.generative.gan import GANConfig, fit_gan

    torch.set_num_threads(1)
    s = c["setting"]
    real, test, domain, graph, dag = _data()
    if s["variant"] == "real":
        table = real
    else:
        eps = math.inf if s["epsilon"] == "inf" else float(s["epsilon"])
        ledger = PrivacyLedger(epsilon_budget=1e6 if math.isinf(eps) else eps, delta=1e-9)
        config = GANConfig(**{**SETTINGS, **EXTRA_SETTINGS}[s["variant"]],
                           **({"epochs": s["epochs"]} if s["epochs"] else {}))
        fitted = fit_gan(real, domain, protected="sex", outcome="income", ledger=ledger,
                         rng=np.random.default_rng(c["seed"]), config=config,
                         dag=graph if config.method == "cfgan" else None)
        table = fitted.sample(len(real["sex"]), rng=np.random.default_rng(c["seed"] + 1))
    out = effects(table, domain, dag, c["seed"])
    out["ce"] = counterfactual_effects(table, domain, dag, c["seed"])
    out["ce_max_abs"] = max(abs(v) for v in out["ce"].values())
    out["chi2_joint"] = chi2_joint(real, table, domain)
    if s["variant"] == "real":
        # A perfect generator: as many rows drawn from the real training rows (χ² of sampling).
        rows = np.random.default_rng(c["seed"]).integers(0, len(real["sex"]), len(real["sex"]))
        out["chi2_sampling_floor"] = chi2_joint(real, {k: v[rows] for k, v in real.items()},
                                                domain)
    out["lr"] = classifier_scores(table, test, domain, protected="sex",
                                  outcome="income")["accuracy"]
    return out


def counterfactual_effects(table: dict[str, np.ndarray], domain, dag,
                           seed: int) -> dict[str, float]:
    """Table 7.2's CE(o) for each context o of :data:`CONTEXT` (exogenous attributes).

    With O exogenous, P(v | pa(v)) is the same among the rows with O = o for every other v
    (O are ancestors, hence non-descendants), so CE(o) is the total effect estimated on
    those rows alone.
    """
    from privfair.generative.effects import causal_effect

    out = {}
    for a in range(domain.size(CONTEXT[0])):
        for b in range(domain.size(CONTEXT[1])):
            rows = (table[CONTEXT[0]] == a) & (table[CONTEXT[1]] == b)
            subset = {k: v[rows] for k, v in table.items()}
            out[f"{CONTEXT[0]}={a},{CONTEXT[1]}={b}"] = causal_effect(
                subset, domain, dag, protected="sex", outcome="income",
                rng=np.random.default_rng(seed))
    return out


def chi2_why(records: list[dict[str, Any]], variant: str) -> str:
    """The measured reasons for a χ² gap: the sampling floor and the paper's λ."""
    parts = ["binarisation thresholds are the contract's own (PSE-DR's are not published)"]
    real = ok_metrics(records, variant="real")
    if real and "chi2_sampling_floor" in real[0]:
        parts.append(f"a perfect generator (rows resampled from the real ones) scores χ² = "
                     f"{real[0]['chi2_sampling_floor']:,.0f}")
    base = ok_metrics(records, variant="dpgan")
    ours = ok_metrics(records, variant=variant)
    if base and ours:
        ratio = np.mean([m["chi2_joint"] for m in ours]) / np.mean(
            [m["chi2_joint"] for m in base])
        parts.append(f"χ² {ratio:.2f}× our fairness-blind dpgan's (the paper's CFGAN: 1.01× "
                     "CausalGAN's)")
    if variant == "cfgan-te":
        paper_lambda = ok_metrics(records, variant="cfgan-te λ=1")
        if paper_lambda:
            parts.append(
                f"at the paper's λ = 1 our χ² is "
                f"{np.mean([m['chi2_joint'] for m in paper_lambda]):,.0f} with TE "
                f"{np.mean([m['te'] for m in paper_lambda]):.3f} (ours λ = 16)")
        else:
            parts.append("ours trains at λ = 16 (the paper λ = 1; the λ = 1 run is in --full)")
    structure = ok_metrics(records, variant="cfgan λ=0")
    if structure and variant.startswith("cfgan"):
        parts.append(f"with no fairness term (λ = 0) our per-node DAG generator alone scores "
                     f"χ² = {np.mean([m['chi2_joint'] for m in structure]):,.0f}")
    return "; ".join(parts)


def paper_cell(variant: str, metric: str) -> str | None:
    """One key for the χ² and LR cells that Tables 7.1 and 7.2 both print (the same
    numbers, the same runs); None (the default key) for the rest."""
    if metric in ("chi2_joint", "lr"):
        return json.dumps(["xu ch. 7", variant, metric])
    return None


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["variant"], r["metric"]): r for r in paper_table("xu_table7_1")}
    table_7_2 = {(r["variant"], r["metric"]): r for r in paper_table("xu_table7_2")}
    better = {"te": "abs_lower", "ie": "abs_lower", "chi2_joint": "lower", "lr": "higher",
              "ce_max_abs": "abs_lower"}
    rows = []
    for variant in ("real", *VARIANTS):
        runs = ok_metrics(records, variant=variant)
        if not runs:
            continue
        for metric in ("te", "ie", "chi2_joint", "lr"):
            rows.append(compare_row(
                f"{variant}, ε=∞", metric, [m.get(metric) for m in runs],
                paper.get((variant, metric)),
                better=None if variant == "real" else better[metric], rel_tol=0.25,
                abs_tol=0.02, paper_cell=paper_cell(variant, metric),
                why=(chi2_why(records, variant) if metric == "chi2_joint" else
                     "binarisation thresholds are the contract's own (PSE-DR's are not "
                     "published)")))
        runs_ce = [m for m in runs if "ce" in m]
        for metric in ("ce_max_abs", "chi2_joint", "lr"):
            if not runs_ce or (variant, metric) not in table_7_2:
                continue
            rows.append(compare_row(
                f"Table 7.2 {variant}, ε=∞", metric.replace("ce_max_abs", "max_o |CE(o)|"),
                [m.get(metric) for m in runs_ce], table_7_2[(variant, metric)],
                better=None if variant == "real" else better[metric], rel_tol=0.25,
                abs_tol=0.02, paper_cell=paper_cell(variant, metric),
                why=("contexts o1..o4 are not named in the paper: ours are "
                     + ", ".join(f"{k} {np.mean([m['ce'][k] for m in runs_ce]):+.3f}"
                                 for k in runs_ce[0]["ce"])
                     if metric == "ce_max_abs" else chi2_why(records, variant))))
    for r in paper_table("xu_table7_2"):
        if r["variant"] in ("a1", "a3"):
            row = compare_row(f"Table 7.2 {r['variant'].upper()} (Kusner et al.)", r["metric"],
                              [], r)
            row["why"] = "not comparable: A1 / A3 baselines are not implemented"
            rows.append(row)
    return {"name": NAME, "title": TITLE, "source": "Xu 2021, Tables 7.1 (p. 98), 7.2 (p. 99)",
            "rows": rows, "notes": [__doc__.split("\n\n")[1].replace("\n", " ")],
            "plots": [], "failed": failed_rows(records)}
