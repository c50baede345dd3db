"""Xu 2021 ch. 7, Tables 7.1 / 7.2: total effect (TE), indirect effect (IE), χ², and the
accuracy of SVM, DT, LR and RF trained on the generated rows.

On the packaged ``adult_pse_dr`` contract (PSE-DR's 11 binarised attributes, its DAG,
S = sex, Y = income, IE through marital-status), reusing ``benchmarks/cfgan_adult.py``'s
``effects``, ``chi2_joint`` and ``four_classifiers``. The paper's generators are not private:
every GAN here trains with ``fit_gan_non_private`` (exact counts, no clipping, no noise) under
the library's ``setting="xu2021"`` (λ = 1, the paper's J2 as the sum of the two
interventional streams' expectations, no anchors). CausalGAN, the paper's fairness-blind
baseline, is CFGAN's own DAG generator G¹ without D² (λ = 0: a causal generator that ignores
fairness, as CausalGAN [83] is); privfair's conditional ``dpgan`` and CFGAN(TE) at privfair's
default setting (λ = 16) run beside, not compared. Table 7.2's counterfactual effect CE(o) for
the four contexts o of O = {race, native-country} (both exogenous in the DAG, so CE(o) is the
total effect among the rows with O = o, by the same truncated-factorisation estimator) is
measured on every table; the paper does not say which context is o1..o4, so the rows compare
max_o |CE(o)|.
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
CONTEXT = ("race", "native-country")
REDLINING = ("marital-status",)
#: Each variant's GANConfig; ``setting`` is xu2021 unless it says otherwise.
SETTINGS: dict[str, dict[str, Any]] = {
    "causalgan": {"method": "cfgan", "effect": "te", "fairness_weight": 0.0},
    "fairgan": {"method": "fairgan"},
    "cfgan-te": {"method": "cfgan", "effect": "te"},
    "cfgan-se": {"method": "cfgan", "effect": "se", "redlining": REDLINING},
    "cfgan-ce": {"method": "cfgan", "effect": "ce", "context": CONTEXT},
    "dpgan privfair": {"method": "dpgan", "setting": "privfair"},
    "cfgan-te privfair": {"method": "cfgan", "effect": "te", "setting": "privfair"},
}
VARIANTS = tuple(SETTINGS)
#: The paper's row each variant is compared with (the transcription keys CausalGAN as dpgan);
#: the privfair-setting variants are shown beside it, never counted.
PAPER_ROW = {"causalgan": "dpgan", "dpgan privfair": "dpgan",
             "cfgan-te privfair": "cfgan-te"}
CLASSIFIERS = ("svm", "dt", "lr", "rf")


def cells(mode: str) -> list[dict[str, Any]]:
    seeds = 1 if mode == "quick" else 5
    epochs = 0  # the shipped default
    variants = ("causalgan", "cfgan-te") if mode == "quick" else VARIANTS
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


def gan_config(variant: str, epochs: int = 0):
    """The :class:`~privfair.generative.gan.GANConfig` of a variant (xu2021 by default)."""
    from privfair.generative.gan import GANConfig

    kw = {"setting": "xu2021", **SETTINGS[variant]}
    return GANConfig(**kw, **({"epochs": epochs} if epochs else {}))


def dag_resample(real: dict[str, np.ndarray], domain, dag,
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """As many rows drawn by ancestral sampling from the DAG with the real rows' own
    conditional frequencies: the best any generator wired by this DAG can do (χ² floor)."""
    n = len(real[dag.nodes[0]])
    out: dict[str, np.ndarray] = {}
    for v in dag.nodes:
        parents = list(dag.parents(v))
        size = domain.size(v)
        shape = tuple(domain.size(p) for p in parents)
        key_real = (np.ravel_multi_index(tuple(real[p] for p in parents), shape) if parents
                    else np.zeros(n, dtype=np.int64))
        key_new = (np.ravel_multi_index(tuple(out[p] for p in parents), shape) if parents
                   else np.zeros(n, dtype=np.int64))
        counts = np.zeros((math.prod(shape), size))
        np.add.at(counts, (key_real, real[v]), 1.0)
        counts += 1e-9
        cdf = np.cumsum(counts / counts.sum(1, keepdims=True), axis=1)[key_new]
        out[v] = np.minimum((rng.random(n)[:, None] > cdf).sum(1), size - 1)
    return out


def run(c: dict[str, Any]) -> dict[str, Any]:
    import torch
    from cfgan_adult import chi2_joint, effects, four_classifiers

    from privfair.generative.gan import fit_gan_non_private

    torch.set_num_threads(1)
    s = c["setting"]
    real, test, domain, graph, dag = _data()
    if s["variant"] == "real":
        table = real
    else:
        config = gan_config(s["variant"], s["epochs"])
        # the paper's GANs are not private: no clipping, no noise (like with like)
        fitted = fit_gan_non_private(real, domain, protected="sex", outcome="income",
                                     rng=np.random.default_rng(c["seed"]), config=config,
                                     dag=graph if config.method == "cfgan" else None)
        table = fitted.sample(len(real["sex"]), rng=np.random.default_rng(c["seed"] + 1))
    out = effects(table, domain, dag, c["seed"])
    out["ce"] = counterfactual_effects(table, domain, dag, c["seed"])
    out["ce_max_abs"] = max(abs(v) for v in out["ce"].values())
    out["chi2_joint"] = chi2_joint(real, table, domain)
    if s["variant"] == "real":
        rng = np.random.default_rng(c["seed"])
        # A perfect generator: as many rows drawn from the real training rows (χ² of sampling),
        # and the best generator wired by the DAG (its real conditional frequencies).
        rows = rng.integers(0, len(real["sex"]), len(real["sex"]))
        out["chi2_sampling_floor"] = chi2_joint(real, {k: v[rows] for k, v in real.items()},
                                                domain)
        out["chi2_dag_floor"] = chi2_joint(real, dag_resample(real, domain, dag, rng), domain)
    out.update(four_classifiers(table, test, domain, c["seed"]))
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
    """The measured context of a χ² gap: the sampling and DAG floors, and our χ² over our
    CausalGAN's (the paper's CFGAN: 1.01× its CausalGAN's)."""
    parts = ["binarisation thresholds are the contract's own (PSE-DR's are not published)"]
    real = ok_metrics(records, variant="real")
    if real and "chi2_sampling_floor" in real[0]:
        parts.append(f"a perfect generator (rows resampled from the real ones) scores χ² = "
                     f"{real[0]['chi2_sampling_floor']:,.0f}")
    if real and "chi2_dag_floor" in real[0]:
        parts.append(f"the DAG with the real rows' own conditional frequencies "
                     f"{real[0]['chi2_dag_floor']:,.0f}")
    base = ok_metrics(records, variant="causalgan")
    ours = ok_metrics(records, variant=variant)
    if base and ours and variant != "causalgan":
        ratio = np.mean([m["chi2_joint"] for m in ours]) / np.mean(
            [m["chi2_joint"] for m in base])
        parts.append(f"χ² {ratio:.2f}× our CausalGAN's (CFGAN's DAG generator at λ = 0; the "
                     "paper's CFGAN(TE): 1.01× its CausalGAN's)")
    return "; ".join(parts)


def paper_cell(variant: str, metric: str) -> str | None:
    """One key for the χ² and accuracy cells that Tables 7.1 and 7.2 both print (the same
    numbers, the same runs); None (the default key) for the rest."""
    if metric in ("chi2_joint", *CLASSIFIERS):
        return json.dumps(["xu ch. 7", PAPER_ROW.get(variant, variant), metric])
    return None


def _tolerance(metric: str) -> dict[str, float]:
    """χ² within 25 % of the paper's (its estimator is unstated); effects and accuracies
    within ±0.02 (dissertation-spec §11: GAN tables ±0.02)."""
    return {"rel_tol": 0.25 if metric == "chi2_joint" else 0.0, "abs_tol": 0.02}


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["variant"], r["metric"]): r for r in paper_table("xu_table7_1")}
    table_7_2 = {(r["variant"], r["metric"]): r for r in paper_table("xu_table7_2")}
    better = {"te": "abs_lower", "ie": "abs_lower", "chi2_joint": "lower",
              "ce_max_abs": "abs_lower", **dict.fromkeys(CLASSIFIERS, "higher")}
    rows = []
    for variant in ("real", *VARIANTS):
        runs = ok_metrics(records, variant=variant)
        if not runs:
            continue
        key = PAPER_ROW.get(variant, variant)
        compared = variant == "real" or "privfair" not in variant
        label = {"causalgan": "CausalGAN (CFGAN's DAG generator, λ = 0)"}.get(variant, variant)
        for metric in ("te", "ie", "chi2_joint", *CLASSIFIERS):
            cell_ = paper.get((key, metric)) or table_7_2.get((key, metric))
            row = compare_row(
                f"{label}, ε=∞", metric, [m.get(metric) for m in runs], cell_,
                better=None if variant == "real" else better[metric],
                paper_cell=paper_cell(variant, metric), at_paper_setting=compared,
                why=(chi2_why(records, variant) if metric == "chi2_joint" else
                     "binarisation thresholds are the contract's own (PSE-DR's are not "
                     "published)"), **_tolerance(metric))
            if not compared and cell_ is not None:
                row["why"] = (f"privfair's default setting, beside the paper's (xu2021) row, "
                              f"which is the one compared with the paper's {cell_['value']:g}")
            rows.append(row)
        if (key, "ce_max_abs") in table_7_2:
            cell_ = table_7_2[(key, "ce_max_abs")]
            runs_ce = [m for m in runs if "ce" in m]
            rows.append(compare_row(
                f"Table 7.2 {label}, ε=∞", "max_o |CE(o)|",
                [m.get("ce_max_abs") for m in runs_ce], cell_,
                better=None if variant == "real" else better["ce_max_abs"],
                at_paper_setting=compared, **_tolerance("ce_max_abs"),
                why="contexts o1..o4 are not named in the paper: ours are "
                    + ", ".join(f"{k} {np.mean([m['ce'][k] for m in runs_ce]):+.3f}"
                                for k in runs_ce[0]["ce"])))
    for r in paper_table("xu_table7_2"):
        if r["variant"] in ("a1", "a3"):
            row = compare_row(f"Table 7.2 {r['variant'].upper()} (Kusner et al.)", r["metric"],
                              [], r)
            row["why"] = "not comparable: A1 / A3 baselines are not implemented"
            rows.append(row)
    return {"name": NAME, "title": TITLE, "source": "Xu 2021, Tables 7.1 (p. 98), 7.2 (p. 99)",
            "rows": rows, "notes": [__doc__.split("\n\n")[1].replace("\n", " ")],
            "plots": [], "failed": failed_rows(records)}
