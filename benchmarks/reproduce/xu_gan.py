"""Xu 2021 ch. 6, Tables 6.1 and 6.2: ACGAN, FairGAN and FairGAN+ on Adult (S = sex, Y = income).

The paper's GANs are not private. Its cells are compared with our runs at ``epsilon = inf``,
which train with ``fit_gan_non_private`` (exact counts, no clipping, no noise: like with like),
under the library's ``setting="xu2021"`` (λ = μ = 1, V2 and V3 as the paper's sums of one
expectation per group of S, no anchor marginals; FairGAN+'s η and D3 also learn from the real
rows, the paper's L and V3). privfair's default setting (λ = 16 for FairGAN, 4 for FairGAN+,
pooled adversary losses, anchors, D3 on generated rows only) runs beside it, not compared (one
row per paper cell).
``epsilon = 1`` rows are the DP versions (D1, and under xu2021 η and D3, by DP-SGD): the paper
has no DP number, so they are reported, never compared. ``acgan`` is the paper's fairness-blind
baseline (y and s drawn independently, D1 on (x, y, s) so that P_G(X|Y,S) = P_data(X|Y,S),
§6.4.1.1); its C2 and FairGAN+'s C5 are the GANs' own logistic regressions η, C3 an LR on η(X)
trained on FairGAN's rows (Xu §6.4.1.3). Table 6.2's DTPR and DFPR are read from the same
classifiers (C5's are NA in the paper).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .core import cell, compare_row, failed_rows, ok_metrics, paper_table

NAME = "xu_gan"
TITLE = "Xu 2021 Tables 6.1 / 6.2 (ch. 6): ACGAN, FairGAN, FairGAN+ (paper's and default settings)"
#: (method, setting): the paper's setting of each GAN, and privfair's default beside it
CONFIGS = (("acgan", "xu2021"), ("fairgan", "xu2021"), ("fairgan", "privfair"),
           ("fairgan-plus", "xu2021"), ("fairgan-plus", "privfair"))
#: Which of our scores is each Table 6.2 classifier: the GAN's own η (C2, C5), or an LR on
#: η(X) trained on the generated rows (C3)
CLASSIFIER = {"acgan": "_own", "fairgan": "_x", "fairgan-plus": "_own"}
METRICS = ("RD_D", "BER", "RD_eta", "DTPR", "DFPR", "accuracy")
#: Table 6.2's classifier metrics (read from the row's classifier, ``CLASSIFIER``)
CLASSIFIER_METRICS = ("RD_eta", "DTPR", "DFPR", "accuracy")


def cells(mode: str) -> list[dict[str, Any]]:
    """``quick``: the compared runs only (the paper's setting, non-private), one seed;
    ``full``: both settings, ε = ∞ and 1, five seeds."""
    quick = mode == "quick"
    seeds = 1 if quick else 5
    eps_list = ("inf",) if quick else ("inf", "1")
    return [cell(NAME, {"method": m, "setting": st, "epsilon": e, "epochs": 0}, s)
            for m, st in CONFIGS if not (quick and st != "xu2021")
            for e in eps_list for s in range(seeds)]  # epochs 0: the config's default


@functools.lru_cache(maxsize=1)
def _data():
    from privfair.contracts.datasets import load_codes
    from privfair.evaluation.evaluate import train_test_split

    frame, contract = load_codes("adult")
    domain = contract.domain()
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    return ({a: train[a].to_numpy() for a in domain}, {a: test[a].to_numpy() for a in domain},
            domain)


class _WithoutS:
    """``domain`` iterated without the protected attribute (sizes still known): the paper's
    classifiers are η(X) on the 12 unprotected attributes, not on S (Xu §6.4.1.3)."""

    def __init__(self, domain, protected: str) -> None:
        self.domain, self.protected = domain, protected

    def __iter__(self):
        return (a for a in self.domain if a != self.protected)

    def size(self, attribute: str) -> int:
        return self.domain.size(attribute)


def own_classifier_scores(state, test, domain, *, protected: str, outcome: str
                          ) -> dict[str, float]:
    """Accuracy and RD(η) on ``test`` of a GAN's own classifier η (Table 6.2's C2 for ACGAN,
    C5 for FairGAN+): linear on the one-hot blocks of every attribute but S and Y, positive
    logit (w₁ − w₀)·x + b₁ − b₀ (as ``privfair.release.kinds.gan.stages.classifier_record``
    releases it)."""
    from _gan_metrics import one_hot

    weight, bias = np.asarray(state["0.weight"]), np.asarray(state["0.bias"])
    x = one_hot(test, domain, [a for a in domain if a not in (protected, outcome)])
    pred = x @ (weight[1] - weight[0]) + (bias[1] - bias[0]) > 0
    y = np.asarray(test[outcome]) == domain.size(outcome) - 1
    s = np.asarray(test[protected]) == domain.size(protected) - 1
    return {"accuracy": float((pred == y).mean()),
            "rd_eta": float(pred[s].mean() - pred[~s].mean()),
            "dtpr": float(pred[s & y].mean() - pred[~s & y].mean()),
            "dfpr": float(pred[s & ~y].mean() - pred[~s & ~y].mean())}


@functools.lru_cache(maxsize=1)
def _real_scores() -> dict[str, float]:
    """Table 6.1/6.2's D1/C1-Real under our metrics: RD(D) and BER of the real training
    rows, and the LR trained on them (with S among its inputs, and on X alone)."""
    from _gan_metrics import classifier_scores

    from privfair.release.kinds.gan.stages import data_fairness

    train, test, domain = _data()
    roles = {"protected": "sex", "outcome": "income"}
    fair = data_fairness(train, domain, rng=np.random.default_rng(0), **roles)
    with_s = classifier_scores(train, test, domain, **roles)
    x_only = classifier_scores(train, test, _WithoutS(domain, "sex"), **roles)
    return {"RD_D": fair["rd"], "BER": fair["ber"], "RD_eta": with_s["rd_eta"],
            "accuracy": with_s["accuracy"], "RD_eta_x": x_only["rd_eta"],
            "accuracy_x": x_only["accuracy"]}


def run(c: dict[str, Any]) -> dict[str, Any]:
    import torch
    from _gan_metrics import classifier_scores

    from privfair.core.accounting import PrivacyLedger
    from privfair.generative.gan import GANConfig, fit_gan, fit_gan_non_private
    from privfair.release.kinds.gan.stages import data_fairness

    torch.set_num_threads(1)
    s = c["setting"]
    train, test, domain = _data()
    roles = {"protected": "sex", "outcome": "income"}
    config = GANConfig(method=s["method"], setting=s.get("setting", "privfair"),
                       **({"epochs": s["epochs"]} if s["epochs"] else {}))
    rng = np.random.default_rng(c["seed"])
    if s["epsilon"] == "inf":  # the paper's non-private GAN: no clipping, no noise
        fitted = fit_gan_non_private(train, domain, rng=rng, config=config, **roles)
    else:
        ledger = PrivacyLedger(epsilon_budget=float(s["epsilon"]), delta=1e-9)
        fitted = fit_gan(train, domain, ledger=ledger, rng=rng, config=config, **roles)
    synthetic = fitted.sample(len(train["sex"]), rng=np.random.default_rng(c["seed"] + 1))
    fair = data_fairness(synthetic, domain, rng=np.random.default_rng(c["seed"]), **roles)
    scores = classifier_scores(synthetic, test, domain, **roles)
    # The paper's classifiers are η(X), without S among the inputs (Xu §6.4.1.3).
    x_only = classifier_scores(synthetic, test, _WithoutS(domain, "sex"), **roles)
    y_test = test["income"] == domain.size("income") - 1
    majority = float(max(y_test.mean(), 1 - y_test.mean()))
    out = {"RD_D": fair["rd"], "BER": fair["ber"], "RD_eta": scores.get("rd_eta"),
           "accuracy": scores["accuracy"],
           "RD_eta_x": x_only.get("rd_eta"), "accuracy_x": x_only["accuracy"],
           "DTPR_x": x_only.get("dtpr"), "DFPR_x": x_only.get("dfpr"),
           "majority": majority, "non_private": fitted.non_private,
           "trained_on_real_rows": (fitted.privacy.get("dp_sgd")
                                    or fitted.privacy["training"])["trained_on_real_rows"],
           "real": _real_scores()}
    if fitted.classifier_state is not None:
        own = own_classifier_scores(fitted.classifier_state, test, domain, **roles)
        out.update(RD_eta_own=own["rd_eta"], accuracy_own=own["accuracy"],
                   DTPR_own=own["dtpr"], DFPR_own=own["dfpr"])
    return out


def _classifier_key(method: str, metric: str) -> str:
    return metric + CLASSIFIER[method] if metric in CLASSIFIER_METRICS else metric


def _trivial(m: dict[str, Any], method: str) -> bool:
    """The classifier the row reads predicts (almost) the majority class: uninformative."""
    accuracy = m.get(_classifier_key(method, "accuracy"))
    return accuracy is None or not accuracy > m.get("majority", 0.0) + 0.002


def _mean_se(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return float(np.mean(values)), sd / math.sqrt(len(values))


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    paper = {(r["dataset"], r["metric"]): r
             for name in ("xu_table6_1", "xu_table6_2") for r in paper_table(name)}
    better = {"RD_D": "abs_lower", "RD_eta": "abs_lower", "BER": "higher",
              "accuracy": "higher", "DTPR": "abs_lower", "DFPR": "abs_lower"}
    names = {"acgan": "ACGAN", "fairgan": "FairGAN", "fairgan-plus": "FairGAN+ (DP)"}
    rows = []
    for eps in sorted({r["setting"]["epsilon"] for r in records}):
        for method, setting in CONFIGS:
            runs = ok_metrics(records, method=method, setting=setting, epsilon=eps)
            if not runs:
                continue
            useful = [m for m in runs if not _trivial(m, method)]
            for metric in METRICS:
                table = "6.2" if metric in CLASSIFIER_METRICS else "6.1"
                key = _classifier_key(method, metric)
                # every run trivial: the fairness row has only trivial runs to show
                chosen = runs if metric == "accuracy" or not useful else useful
                values = [m.get(key) for m in chosen]
                compared = eps == "inf" and setting == "xu2021"
                cell_ = paper.get((method, metric))
                row = compare_row(
                    f"Table {table}, {names[method]}, {setting}, ε={eps}"
                    + (" (non-private)" if eps == "inf" else " (DP)"), metric, values,
                    cell_, better=better[metric], abs_tol=0.02,
                    rel_tol=0.0 if metric == "accuracy" else 0.1,
                    # the paper's GANs are not private: its setting is xu2021 at ε = ∞; the
                    # others are shown beside that row, never counted
                    at_paper_setting=compared,
                    trivial=[m.get("trivial") for m in chosen],
                    trivial_why="the classifier trained on the generated table predicts the "
                                "majority class")
                mean, se = _mean_se([v for v in values if v is not None])
                row.update(ours_se=se, reads=key)
                if not compared and cell_ is not None:
                    row["why"] = (
                        f"privfair's default setting, beside the paper's (xu2021) row, which is "
                        f"the one compared with the paper's {cell_['value']:.4f}"
                        if eps == "inf" else
                        f"a DP run (ε = {eps}); the paper's GANs are not private, so it has no "
                        f"number to compare (its non-private {cell_['value']:.4f} is compared "
                        f"at ε = inf)")
                if metric != "accuracy" and len(useful) < len(runs):
                    row["why"] += (f"; {len(runs) - len(useful)} of {len(runs)} runs' "
                                   "classifiers predict the majority class and are left out "
                                   "of the fairness means")
                    if not useful:
                        row["verdict"] = "not comparable"
                rows.append(row)
    real = next((r["metrics"]["real"] for r in records
                 if r["status"] == "ok" and "real" in r["metrics"]), None)
    notes = [__doc__.split("\n\n")[1].replace("\n", " "),
             "BER is 1 − balanced accuracy of a logistic regression predicting S from X "
             "(the paper uses a linear SVM). Each row's ``ours_se`` is the standard error of "
             "our mean over seeds."]
    if real is not None:
        notes.append("The same metrics on the real Adult rows (the paper's D1/C1-Real: RD(D) "
                     ".1989, BER .1538, RD(η) .1834, accuracy .8448): "
                     f"RD(D) {real['RD_D']:.4f}, BER {real['BER']:.4f}, LR on η(X) "
                     f"RD(η) {real['RD_eta_x']:.4f}, accuracy {real['accuracy_x']:.4f}.")
    return {"name": NAME, "title": TITLE, "source": "Xu 2021, Tables 6.1 (p. 83), 6.2 (p. 85)",
            "rows": rows, "notes": notes, "plots": [], "failed": failed_rows(records)}
