"""Held-out evaluation of a model release, released with differential privacy (issue 21.1).

No statistic of real rows is published as computed. When ``holdout > 0`` the run releases the
per-group confusion matrices of the held-out rows (group × true label × predicted label) with
the Gaussian mechanism: a held-out person is in exactly one cell, so the L2 sensitivity is 1
under add/remove-one-person. Its ρ is the public ``evaluation_share`` of the release's
zcdp_rho(ε, δ) and is part of the declared cost (:mod:`privfair.release.kinds.model.budget`).
Everything the model card shows (accuracy, positive-prediction rate and TPR per group, the
majority baseline, the risk difference and the fairness verdict) is post-processing of the
noisy counts, clipped at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privfair.core.accounting import PrivacyLedger, zcdp_epsilon
from privfair.core.mechanisms import gaussian_mechanism
from privfair.release.kinds.model.budget import EVALUATION_ENTRY

#: |RD| at or below this (on the noisy figures) counts as fair (Xu 2021's threshold).
FAIR_THRESHOLD = 0.05
#: A predicted class whose noisy count is within this many noise deviations of 0 is one the
#: noisy counts cannot show being predicted (the model itself decides triviality).
TRIVIAL_SIGMAS = 2.0
TRIVIAL = "trivial (predicts one class)"


def confusion_counts(y: np.ndarray, pred: np.ndarray, groups: np.ndarray,
                     n_groups: int) -> np.ndarray:
    """Exact counts (private): ``[group, true label, predicted label]``."""
    cells = (np.asarray(groups, dtype=np.int64) * 4 + np.asarray(y, dtype=np.int64) * 2
             + np.asarray(pred, dtype=np.int64))
    return np.bincount(cells, minlength=4 * n_groups).reshape(n_groups, 2, 2)


def release_confusion(counts: np.ndarray, *, sigma: float, ledger: PrivacyLedger,
                      rng: np.random.Generator) -> np.ndarray:
    """The counts through the Gaussian mechanism (charged to ``ledger`` first)."""
    return gaussian_mechanism(counts, sigma=sigma, sensitivity=1.0, rng=rng, ledger=ledger,
                              name=EVALUATION_ENTRY)


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def noisy_metrics(noisy: Sequence[Any], labels: Sequence[str], *, sigma: float,
                  epsilon: float, delta: float, constant: int | None = None
                  ) -> dict[str, Any]:
    """Figures derived from the noisy confusion matrices only (post-processing)."""
    c = np.maximum(np.asarray(noisy, dtype=float), 0.0)
    rho = 1 / (2 * sigma**2)
    per_group: dict[str, Any] = {}
    for k, label in enumerate(labels):
        cell = c[k]
        n = float(cell.sum())
        per_group[label] = {
            "noisy_rows": n,
            "accuracy": _ratio(cell[0, 0] + cell[1, 1], n),
            "positive_prediction_rate": _ratio(cell[0, 1] + cell[1, 1], n),
            "true_positive_rate": _ratio(cell[1, 1], cell[1, 0] + cell[1, 1]),
        }
    total = float(c.sum())
    rates = [g["positive_prediction_rate"] for g in per_group.values()
             if g["positive_prediction_rate"] is not None]
    tprs = [g["true_positive_rate"] for g in per_group.values()
            if g["true_positive_rate"] is not None]
    positives, negatives = float(c[:, 1, :].sum()), float(c[:, 0, :].sum())
    predicted = (float(c[:, :, 0].sum()), float(c[:, :, 1].sum()))
    # Whether the model predicts one class is decided from the model (``constant``, from
    # its weights or a public probe), never from these counts (issue 35.1). The counts can
    # only fail to show a class: its noisy total within the noise of 0.
    floor = TRIVIAL_SIGMAS * sigma * math.sqrt(2 * len(labels))
    unseen = [name for name, total in zip(("negative", "positive"), predicted, strict=True)
              if total <= floor]
    trivial = constant is not None
    rd = float(max(rates) - min(rates)) if len(rates) > 1 else None
    accuracy = _ratio(float(c[:, 0, 0].sum() + c[:, 1, 1].sum()), total)
    majority = _ratio(max(positives, negatives), total)
    # 2 sigma of (accuracy - majority baseline): its numerator sums or differences at most
    # every cell once (4 per group), each with noise sigma
    margin = (TRIVIAL_SIGMAS * sigma * math.sqrt(4 * len(labels)) / total if total > 0
              else math.inf)
    shown_better = (accuracy is not None and majority is not None
                    and accuracy - majority > margin)
    return {
        "privacy": (f"DP: derived from per-group confusion matrices of the held-out rows "
                    f"released with the Gaussian mechanism (sigma = {sigma:.4g}, rho = "
                    f"{rho:.4g}: ({zcdp_epsilon(rho=rho, delta=delta):.4g}, {delta:g})-DP on "
                    f"its own), part of this release's ({epsilon:g}, {delta:g})-DP guarantee; "
                    "counts clipped at 0"),
        "noisy_confusion": {label: np.asarray(noisy, dtype=float)[k].round(3).tolist()
                            for k, label in enumerate(labels)},
        "confusion_layout": "[true label][predicted label], 0 = negative, 1 = positive",
        "noise_sigma": float(sigma),
        "noisy_rows": total,
        "noisy_predicted": {"negative": predicted[0], "positive": predicted[1]},
        "accuracy": accuracy,
        "majority_baseline_accuracy": majority,
        # whether the noisy counts show the model beating the majority class: accuracy above
        # the baseline by more than 2 sigma of their difference
        "accuracy_noise_margin": float(margin),
        "beats_majority_beyond_noise": bool(shown_better),
        "positive_prediction_rate": _ratio(predicted[1], total),
        "risk_difference": rd,
        "true_positive_rate_gap": float(max(tprs) - min(tprs)) if len(tprs) > 1 else None,
        "per_group": per_group,
        "trivial": trivial,
        # predicted classes whose noisy count is within 2 sigma (of the summed cells) of 0
        "within_noise_of_zero": unseen,
        "within_noise_floor": float(floor),
        # not fair when the model predicts one class, or when the noisy counts cannot show
        # that it predicts both (the rates would then compare noise)
        "fair": False if trivial or unseen or rd is None else rd <= FAIR_THRESHOLD,
        "fair_threshold": FAIR_THRESHOLD,
    }
