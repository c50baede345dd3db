"""Adult as the dissertation's ch. 8-9 use it (45,222 rows without '?'), for the learn benchmarks.

Features come from the packaged contract (one-hot of its categories and bins, 134 inputs plus
the intercept, ``||x||_1 = 12``), not the dissertation's 40 min-max-scaled features; S = sex
(1 = Male), Y = income > 50K. Reads the embedded private table directly: benchmark only.
"""

from __future__ import annotations

import numpy as np
from _common import ROOT  # noqa: F401  (puts the repository on sys.path)


def adult_model_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(X, y, s, row_l1_bound)`` of complete-case Adult."""
    from privfair.contracts.datasets import contract_path, load_dataset
    from privfair.contracts.model_features import FeatureEncoding
    from privfair.contracts.schema import load_contract

    contract = load_contract(contract_path("adult"))
    frame = load_dataset("adult")
    frame = frame[~(frame == "?").any(axis=1)].reset_index(drop=True)
    encoding = FeatureEncoding.from_contract(contract)
    x = encoding.transform(frame, contract)
    y, s = encoding.labels_and_groups(frame, contract)
    return x, y, s, encoding.row_l1_bound


def split(n: int, seed: int, test_share: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """The 80/20 split of ch. 8-9 (seeded)."""
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round((1 - test_share) * n))
    return order[:cut], order[cut:]


def group_scores(y: np.ndarray, pred: np.ndarray, s: np.ndarray) -> dict[str, float]:
    """Accuracy overall and per group (M = 1, F = 0), |RD| and the positive-prediction rate."""
    return {
        "accuracy": float(np.mean(pred == y)),
        "accuracy_male": float(np.mean(pred[s == 1] == y[s == 1])),
        "accuracy_female": float(np.mean(pred[s == 0] == y[s == 0])),
        "risk_difference": float(abs(pred[s == 1].mean() - pred[s == 0].mean())),
        "positive_prediction_rate": float(np.mean(pred)),
    }
