"""Evaluate a synthetic table against real data: utility, data fairness, downstream fairness.

Evaluation reads real data by design, so its outputs are **not privacy-protected** and must be
kept apart from releases. :func:`evaluate_synthetic` returns one flat record per synthetic
table so that grids of (method, ε, seed) stack into a results table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privfair.classifiers import score_predictions, train_and_predict
from privfair.domain import Domain, Roles
from privfair.fairness_metrics import classifier_fairness, data_fairness
from privfair.utility import average_correlation_difference, marginal_tvd

NOT_PRIVATE = (
    "Evaluation results are computed from the real data and are NOT privacy-protected. "
    "Keep them inside the data owner's perimeter; never publish them with a release."
)

CLASSIFIER_KEYS = ("DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB", "SPD", "AOD",
                   "FNR_balance", "FPR_balance")


def train_test_split(frame: pd.DataFrame, *, test_fraction: float = 0.2,
                     rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A seeded random split of the real table into a private train part and a test part."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    order = rng.permutation(len(frame))
    cut = int(round(len(frame) * (1 - test_fraction)))
    train, test = frame.iloc[order[:cut]], frame.iloc[order[cut:]]
    return train.reset_index(drop=True), test.reset_index(drop=True)


def evaluate_synthetic(
    synthetic: pd.DataFrame,
    *,
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    domain: Domain,
    roles: Roles,
    privileged: Mapping[str, int | Sequence[int]] | None = None,
    classifiers: Sequence[str] = ("mlp",),
    seed: int = 0,
) -> dict[str, Any]:
    """Utility and fairness of one synthetic table, as a flat record.

    Parameters
    ----------
    synthetic : DataFrame
        Synthetic codes over ``domain``.
    real_train : DataFrame
        The real rows the synthetic table was made from (utility is measured against them).
    real_test : DataFrame
        Held-out real rows the downstream classifiers are tested on.
    privileged : mapping, optional
        Privileged code(s) per protected attribute (see
        :func:`privfair.fairness_metrics.group_indicator`).
    classifiers : sequence of {"logistic", "random_forest", "mlp"}
        Downstream models, trained on ``synthetic``.

    Returns
    -------
    dict
        ``tvd1``, ``tvd2``, ``tvd3``, ``acd``; ``<clf>_accuracy`` etc. with
        ``<clf>_baseline_accuracy`` beside them; data fairness of the synthetic table
        (``data_<group>_COD`` …); and classifier fairness on the real test rows
        (``<clf>_<group>_DP`` …).
    """
    outcome = roles.outcome[0]
    record: dict[str, Any] = {
        f"tvd{k}": marginal_tvd(real_train, synthetic, domain, k) for k in (1, 2, 3)
    }
    record["acd"] = average_correlation_difference(real_train, synthetic, domain)
    fairness_args = {"protected": list(roles.protected), "outcome": outcome,
                     "admissible": list(roles.admissible), "privileged": privileged}
    for group, values in data_fairness(synthetic, domain, **fairness_args).items():
        for key, value in values.items():
            record[f"data_{group}_{key}"] = value
    for kind in classifiers:
        y_pred, y_score = train_and_predict(kind, synthetic, real_test, domain,
                                            outcome=outcome, seed=seed)
        metrics = score_predictions(synthetic, real_test, domain, outcome=outcome,
                                    y_pred=y_pred, y_score=y_score)
        for key, value in metrics.items():
            record[f"{kind}_{key}"] = value
        for group, values in classifier_fairness(real_test, y_pred, domain,
                                                 **fairness_args).items():
            for key in CLASSIFIER_KEYS:
                record[f"{kind}_{group}_{key}"] = values[key]
    return record
