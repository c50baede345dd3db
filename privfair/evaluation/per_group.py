"""Utility per protected group: does the synthetic table serve small groups as well as large?

DP noise is the same size for every cell, so it hurts the groups with few rows most (Ganev
et al. 2022). For each group of each protected column this module measures, on the **real**
data (so the figures are **not privacy-protected**):

* marginal error: the mean 1-way and 2-way TVD between the synthetic and the real training
  rows *restricted to that group* (the group's own column, constant there, left out);
* downstream accuracy, TPR and FPR on the group's real held-out rows of one classifier trained
  on the synthetic table, beside the same classifier trained on the real training rows.

Group sizes are given as a bucket (:func:`size_bucket`), so a small group is shown as small
rather than hidden.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from privfair.core.domain import Domain, Roles
from privfair.evaluation.classifiers import train_and_predict
from privfair.evaluation.fairness_metrics import outcome_indicator
from privfair.evaluation.utility import marginal_tvd
from privfair.reporting.charts import shorten, svg, text

__all__ = ["SIZE_BUCKETS", "per_group_figures", "per_group_svg", "size_bucket"]

#: Upper bounds (exclusive) of the group-size buckets and their labels.
SIZE_BUCKETS = ((50, "< 50 rows"), (200, "50-199 rows"), (1000, "200-999 rows"),
                (10_000, "1,000-9,999 rows"), (None, ">= 10,000 rows"))


def size_bucket(rows: int) -> str:
    """The bucket label of a group of ``rows`` rows (see :data:`SIZE_BUCKETS`)."""
    for bound, label in SIZE_BUCKETS:
        if bound is None or rows < bound:
            return label
    raise AssertionError("unreachable: the last bucket is open")


def _rates(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float | None]:
    """Accuracy, TPR and FPR; None where the group has no rows (or no positives/negatives)."""
    pos, neg = y_true == 1, y_true == 0
    return {"accuracy": float(np.mean(y_true == y_pred)) if y_true.size else None,
            "tpr": float(np.mean(y_pred[pos] == 1)) if pos.any() else None,
            "fpr": float(np.mean(y_pred[neg] == 1)) if neg.any() else None}


def _tvd(real: pd.DataFrame, synthetic: pd.DataFrame, domain: Domain,
         attributes: Sequence[str], k: int) -> float | None:
    if len(real) == 0 or len(synthetic) == 0 or len(attributes) < k:
        return None  # undefined: say so rather than guess
    return marginal_tvd(real, synthetic, domain, k, attributes=list(attributes))


def per_group_figures(
    synthetic: pd.DataFrame, *, real_train: pd.DataFrame, real_test: pd.DataFrame,
    domain: Domain, roles: Roles, labels: Mapping[str, Sequence[str]] | None = None,
    classifier: str = "logistic", seed: int = 0, max_train_rows: int | None = None,
    classifier_options: Mapping[str, Any] | None = None,
    synthetic_predictions: np.ndarray | None = None,
) -> dict[str, Any]:
    """Marginal error and downstream accuracy/TPR/FPR for every protected group.

    Parameters
    ----------
    synthetic : DataFrame
        Synthetic codes over ``domain``.
    real_train, real_test : DataFrame
        The real rows the synthetic table was made from, and held-out real rows.
    domain, roles : Domain, Roles
        Declared domain and roles (every ``roles.protected`` column is broken down).
    labels : mapping of str to sequence of str, optional
        The contract's labels per column, to name the groups; codes otherwise.
    classifier : {"logistic", "random_forest", "mlp"}
        The one downstream model, trained once on ``synthetic`` and once on ``real_train``.
    seed : int
        Model seed (and the seed of the ``max_train_rows`` sample).
    max_train_rows : int, optional
        Train on a seeded sample of at most this many rows of each training table.
    synthetic_predictions : ndarray, optional
        Predictions on ``real_test`` of ``classifier`` already trained on ``synthetic`` (the
        evaluation's own), so it is not trained twice; only the real-trained one is fitted.

    Returns
    -------
    dict
        ``{"not_privacy_protected": True, "classifier": ..., "outcome": ...,
        "attributes": {column: [one record per group]}}``; a group's record holds ``group``
        (label), ``code``, ``train_rows`` and ``test_rows`` (size buckets),
        ``synthetic_share`` and ``real_share`` (fractions of rows), ``tvd1``, ``tvd2`` and,
        under ``synthetic`` and ``real``, ``accuracy``, ``tpr`` and ``fpr``.
    """
    outcome = roles.outcome[0]

    def capped(frame: pd.DataFrame) -> pd.DataFrame:
        if max_train_rows is None or len(frame) <= max_train_rows:
            return frame
        return frame.sample(n=max_train_rows, random_state=seed).reset_index(drop=True)

    y_test = outcome_indicator(real_test, domain, outcome, name="test").astype(np.int64)
    predictions = {
        source: train_and_predict(classifier, capped(train), real_test, domain,
                                  outcome=outcome, seed=seed, options=classifier_options)[0]
        if source == "real" or synthetic_predictions is None else synthetic_predictions
        for source, train in (("synthetic", synthetic), ("real", real_train))}
    attributes: dict[str, list[dict[str, Any]]] = {}
    for column in roles.protected:
        others = [a for a in domain if a != column]
        names = list(labels[column]) if labels and column in labels else None
        rows = []
        for code in range(domain.size(column)):
            in_train = real_train[column].to_numpy() == code
            in_syn = synthetic[column].to_numpy() == code
            in_test = real_test[column].to_numpy() == code
            record: dict[str, Any] = {
                "group": names[code] if names else str(code), "code": code,
                "train_rows": size_bucket(int(in_train.sum())),
                "test_rows": size_bucket(int(in_test.sum())),
                "real_share": float(in_train.mean()) if len(real_train) else None,
                "synthetic_share": float(in_syn.mean()) if len(synthetic) else None,
            }
            for k in (1, 2):
                record[f"tvd{k}"] = _tvd(real_train[in_train], synthetic[in_syn], domain,
                                         others, k)
            for source, y_pred in predictions.items():
                record[source] = _rates(y_test[in_test], np.asarray(y_pred)[in_test])
            rows.append(record)
        attributes[column] = rows
    return {"not_privacy_protected": True, "classifier": classifier, "outcome": outcome,
            "attributes": attributes}


# --- the report's panel ----------------------------------------------------------------------

_BAR = 14
_GAP = 6
_LEFT = 190
_PANEL = 150
_COLOURS = {"synthetic": "#1f77b4", "real": "#bbbbbb"}


def per_group_svg(section: Mapping[str, Any]) -> str:
    """An inline SVG of :func:`per_group_figures`: one row per group, with panels for the
    2-way TVD (synthetic vs real rows of the group) and the downstream accuracy, TPR and FPR
    of the classifier trained on synthetic rows (blue) beside the one trained on real rows
    (grey). Group labels carry the size bucket."""
    metrics = (("tvd2", "2-way TVD (lower is better)"), ("accuracy", "accuracy"),
               ("tpr", "TPR"), ("fpr", "FPR"))
    body: list[str] = []
    y = 18.0
    body.append(text(4, y, "Per protected group (NOT privacy-protected: computed on real "
                     "rows)", size=12, extra=" font-weight='bold'"))
    y += 10
    for column, groups in section.get("attributes", {}).items():
        y += 18
        body.append(text(4, y, str(column), size=12, extra=" font-weight='bold'"))
        for m, (_, title) in enumerate(metrics):
            body.append(text(_LEFT + m * (_PANEL + 20), y, title, size=10))
        y += 6
        for group in groups:
            label = f"{shorten(group['group'], 16)} ({group['train_rows']})"
            body.append(text(4, y + _BAR, label, size=10, full=str(group["group"])))
            for m, (key, _) in enumerate(metrics):
                x0 = _LEFT + m * (_PANEL + 20)
                sources = ("synthetic",) if key == "tvd2" else ("synthetic", "real")
                for s, source in enumerate(sources):
                    value = group[key] if key == "tvd2" else group[source][key]
                    top = y + 2 + s * (_BAR / len(sources))
                    height = _BAR / len(sources) - 1
                    if value is None:
                        body.append(text(x0, top + height, "n/a", size=9))
                        continue
                    width = max(float(value), 0.0) * _PANEL
                    body.append(f"<rect x='{x0}' y='{top:.1f}' width='{width:.1f}' "
                                f"height='{height:.1f}' fill='{_COLOURS[source]}'>"
                                f"<title>{html.escape(str(group['group']))} {source} "
                                f"{key} = {value:.3f}</title></rect>")
                    body.append(text(x0 + width + 3, top + height, f"{value:.2f}", size=8))
            y += _BAR + _GAP
    width = _LEFT + len(metrics) * (_PANEL + 20) + 30
    return svg(width, y + 10, body, label="utility per protected group")
