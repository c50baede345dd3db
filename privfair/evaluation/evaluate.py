"""Evaluate a synthetic table against real data: utility, data fairness, downstream fairness.

Evaluation reads real data by design, so its outputs are **not privacy-protected** and must be
kept apart from releases. :func:`evaluate_synthetic` returns one flat record per synthetic
table so that grids of (method, ε, seed) stack into a results table.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from privfair.core.domain import Domain, Roles
from privfair.core.errors import DomainError
from privfair.evaluation.classifiers import score_predictions, train_and_predict
from privfair.evaluation.fairness_metrics import classifier_fairness, data_fairness
from privfair.evaluation.per_group import per_group_figures, per_group_svg
from privfair.evaluation.utility import average_correlation_difference, marginal_tvd
from privfair.generative import GAN_METHODS
from privfair.reporting.charts import legend_svg, line_panel_svg

NOT_PRIVATE = (
    "Evaluation results are computed from the real data and are NOT privacy-protected. "
    "Keep them inside the data owner's perimeter; never publish them with a release."
)

CLASSIFIER_KEYS = ("DP", "TPRB", "TNRB", "CDP", "CTPRB", "CTNRB", "SPD", "AOD",
                   "FNR_balance", "FPR_balance")


class _FairnessArgs(TypedDict):
    """The roles both fairness measures (of the data, of a classifier) are given."""

    protected: list[str]
    outcome: str
    admissible: list[str]
    privileged: Mapping[str, int | Sequence[int]] | None


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
    max_train_rows: int | None = None,
    tvd_orders: Sequence[int] = (1, 2, 3),
    classifier_options: Mapping[str, Mapping[str, Any]] | None = None,
    per_group: bool = False,
    labels: Mapping[str, Sequence[str]] | None = None,
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
        :func:`privfair.evaluation.fairness_metrics.group_indicator`).
    classifiers : sequence of {"logistic", "random_forest", "mlp"}
        Downstream models, trained on ``synthetic``.
    max_train_rows : int, optional
        Train the models on a seeded sample of at most this many synthetic rows (utility and
        data fairness still use every row); ``None`` trains on all of them.
    tvd_orders : sequence of int
        Marginal orders ``k`` of the ``tvd<k>`` utilities (3-way marginals of a wide table
        are many: 10,660 for 41 columns).
    classifier_options : mapping of str to mapping, optional
        Hyper-parameters per classifier kind (``{"mlp": {"epochs": 2}}``), as
        :func:`privfair.evaluation.classifiers.fit_predict` takes them; defaults otherwise.
    per_group : bool
        Add ``per_group``: :func:`privfair.evaluation.per_group.per_group_figures` of the
        first classifier (its synthetic-trained predictions reused, the same model trained on
        ``real_train`` beside it), as a JSON string so the record stays flat.
    labels : mapping of str to sequence of str, optional
        The contract's labels, to name the groups of ``per_group``.

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
        f"tvd{k}": marginal_tvd(real_train, synthetic, domain, k) for k in tvd_orders
    }
    record["acd"] = average_correlation_difference(real_train, synthetic, domain)
    fairness_args: _FairnessArgs = {
        "protected": list(roles.protected), "outcome": outcome,
        "admissible": list(roles.admissible), "privileged": privileged}
    for group, values in data_fairness(synthetic, domain, **fairness_args).items():
        for key, value in values.items():
            record[f"data_{group}_{key}"] = value
    first_predictions = None
    train = synthetic
    if max_train_rows is not None and len(synthetic) > max_train_rows:
        train = synthetic.sample(n=max_train_rows, random_state=seed).reset_index(drop=True)
    for kind in classifiers:
        y_pred, y_score = train_and_predict(kind, train, real_test, domain,
                                            outcome=outcome, seed=seed,
                                            options=(classifier_options or {}).get(kind))
        metrics = score_predictions(train, real_test, domain, outcome=outcome,
                                    y_pred=y_pred, y_score=y_score)
        first_predictions = y_pred if first_predictions is None else first_predictions
        for key, value in metrics.items():
            record[f"{kind}_{key}"] = value
        for group, values in classifier_fairness(real_test, y_pred, domain,
                                                 **fairness_args).items():
            for key in CLASSIFIER_KEYS:
                record[f"{kind}_{group}_{key}"] = values[key]
    if per_group and classifiers:
        figures = per_group_figures(
            synthetic, real_train=real_train, real_test=real_test, domain=domain, roles=roles,
            labels=labels, classifier=classifiers[0], seed=seed, max_train_rows=max_train_rows,
            classifier_options=(classifier_options or {}).get(classifiers[0]),
            synthetic_predictions=first_predictions)
        record["per_group"] = json.dumps(figures)
    return record


# --- grids: methods × ε × seeds (× TOT η) on a fixed split ---------------------------------

#: Privileged groups by label, for the embedded datasets (COMPAS follows AIF360).
PRIVILEGED_LABELS = {
    "adult": {"sex": "Male", "race": "White", "native-country": "United-States"},
    "adult_safes": {"race": "White", "sex": "Male"},
    "compas": {"race": "Caucasian", "sex": "Female"},
}
#: TOT set-ups (SAFES §5.2) for the embedded datasets that have a registered distortion.
TOT_SETUPS = {
    "adult_safes": {"d_cols": ["race", "sex"], "x_cols": ["age", "education"],
                    "y_col": "income", "distortion": "safes-adult"},
    "compas": {"d_cols": ["race", "sex"],
               "x_cols": ["age_cat", "priors_count", "c_charge_degree"],
               "y_col": "two_year_recid", "distortion": "safes-compas"},
}


@dataclass(frozen=True)
class EvaluationData:
    """A real table split once into a private train part and a held-out test part."""

    name: str
    train: pd.DataFrame
    test: pd.DataFrame
    domain: Domain
    roles: Roles
    privileged: dict[str, int]
    #: TOT setting from the contract's ``tot`` block (own data); None: :data:`TOT_SETUPS`.
    tot: Any = None
    #: The contract's causal_graph (CFGAN), as a mapping; None when it declares none.
    causal_graph: dict[str, Any] | None = None
    #: The contract's labels of the protected columns (names the groups of ``per_group``).
    labels: dict[str, list[str]] | None = None


#: What :func:`load_embedded` tests on: ``"held-out"`` (default) splits the table 80/20 and
#: tests on the 20 % no synthesizer saw; ``"all"`` is PreFair's protocol (Pujol et al. 2023,
#: §5.1: each model "was tested against the underlying true data"): the synthesizer fits the
#: whole table and every classifier is tested on the whole table.
TEST_ROWS = ("held-out", "all")


def load_embedded(name: str, *, split_seed: int = 2023,
                  test_rows: str = "held-out") -> EvaluationData:
    """An embedded dataset, discretised by its contract.

    Parameters
    ----------
    name : str
        The packaged contract's name (``"adult"``, ``"compas"``, ...).
    split_seed : int
        Seed of the 80/20 split (``test_rows="held-out"``).
    test_rows : {"held-out", "all"}
        ``"held-out"``: ``train`` is a seeded 80 % and ``test`` the other 20 %. ``"all"``:
        ``train`` and ``test`` are both the whole table (PreFair's protocol, see
        :data:`TEST_ROWS`); scores are then in-sample for the synthesizer.
    """
    from privfair.contracts.datasets import load_codes

    if test_rows not in TEST_ROWS:
        raise ValueError(f"test_rows: expected one of {TEST_ROWS}, got {test_rows!r}")
    codes, contract = load_codes(name)
    if test_rows == "all":
        train = test = codes.reset_index(drop=True)
    else:
        train, test = train_test_split(codes, rng=np.random.default_rng(split_seed))
    labels = PRIVILEGED_LABELS.get(name, {})
    privileged = {a: contract.labels(a).index(label) for a, label in labels.items()}
    graph = contract.causal_graph.as_mapping() if contract.causal_graph else None
    return EvaluationData(name, train, test, contract.domain(), contract.roles(), privileged,
                          causal_graph=graph, labels=protected_labels(contract))


def protected_labels(contract: Any) -> dict[str, list[str]]:
    """The contract's labels of each protected column (public: the contract declares them)."""
    return {c: list(contract.labels(c)) for c in contract.roles().protected}


def privileged_codes(contract: Any, privileged: Mapping[str, str] | None) -> dict[str, int]:
    """``{column: label}`` -> ``{column: code}``, naming a bad column or label."""
    codes = {}
    for column, label in (privileged or {}).items():
        if column not in contract.role_spec.protected:
            raise ValueError(f"--privileged {column}={label}: {column!r} is not a protected "
                             f"column; expected one of {list(contract.role_spec.protected)}")
        labels = contract.labels(column)
        if label not in labels:
            raise ValueError(f"--privileged {column}={label}: {label!r} is not a label of "
                             f"{column!r}; expected one of {labels}")
        codes[column] = labels.index(label)
    missing = [c for c in contract.role_spec.protected
               if c not in codes and len(contract.labels(c)) != 2]
    if missing:
        raise ValueError(f"protected column(s) {missing} are not binary: name the privileged "
                         f"group, e.g. --privileged {missing[0]}={contract.labels(missing[0])[0]}")
    return codes


def load_own(contract_path: str | Path, data_path: str | Path, *,
             split_seed: int = 2023, privileged: Mapping[str, str] | None = None,
             test_fraction: float = 0.2) -> EvaluationData:
    """A publisher's own table, discretised by their contract and split (80/20 by default).

    Read with the release's rules (literal file, hidden pandas index ignored, ``normalize``).
    Needs declared domains: text (CatHist) and ``dp_bins`` columns get theirs only from a
    release, so they are refused here (score a release with ``--release`` instead).
    """
    from privfair.contracts.encoding import PolicyTally, iter_discretized_batches
    from privfair.contracts.schema import load_contract
    from privfair.contracts.tot_settings import tot_setting

    contract = load_contract(contract_path)
    if contract.unresolved_columns:
        raise ValueError(f"contract {contract.name!r}: columns {contract.unresolved_columns} "
                         "get their domain from a release (text/dp_bins); evaluate a "
                         "published release with --release DIR --data FILE instead")
    roles = contract.roles()
    if not roles.protected or len(roles.outcome) != 1:
        raise ValueError(f"contract {contract.name!r}: evaluation needs protected columns and "
                         "one outcome under roles")
    privileged_codes(contract, privileged)  # before reading the data
    from privfair.contracts.encoding import check_source_schema

    check_source_schema(data_path, contract)  # the file's schema: one line naming the file
    tally = PolicyTally()
    batches = list(iter_discretized_batches(data_path, contract, tally=tally))
    # The owner's local evaluation (no release, no budget): rows a policy would drop are
    # reported, not silently left out (a release drops them, issue 21.2).
    dropped = sorted({column for column, action in tally.counts if action == "dropped"})
    if dropped:
        raise DomainError(f"data breaks contract {contract.name!r}: column(s) {dropped} hold "
                          "nulls or values outside the declared domain that their policy "
                          "drops; see `privfair contract check --data`")
    if not sum(len(b[contract.column_names[0]]) for b in batches):  # local, not a release
        raise DomainError(f"data {data_path} has no rows; the evaluation splits rows into "
                          "train and test")
    codes = pd.DataFrame({c: np.concatenate([b[c] for b in batches]) for c in
                          contract.column_names})
    train, test = train_test_split(codes, test_fraction=test_fraction,
                                   rng=np.random.default_rng(split_seed))
    tot = tot_setting(contract) if contract.tot is not None else None
    return EvaluationData(contract.name, train, test, contract.domain(), roles,
                          privileged_codes(contract, privileged), tot,
                          contract.causal_graph.as_mapping() if contract.causal_graph else None,
                          protected_labels(contract))


def evaluate_cell(
    data: EvaluationData, *, method: str, epsilon: float, seed: int,
    eta: float | None = None, delta: float = 1e-9, classifiers: Sequence[str] = ("mlp",),
    sample_mode: str = "iid",
) -> dict[str, Any]:
    """Synthesise from ``data.train`` once, optionally apply TOT, and evaluate.

    GAN methods (``dpgan``, ``fairgan``, ``fairgan-plus``, ``cfgan``) train on the same
    split with the same (ε, δ), S = the first protected column and Y = the outcome; CFGAN uses
    the contract's ``causal_graph``.
    """
    fit_rng, sample_rng, tot_rng = np.random.default_rng([seed, 7]).spawn(3)
    start = time.perf_counter()
    record: dict[str, Any] = {"dataset": data.name, "method": method, "epsilon": epsilon,
                              "seed": seed, "eta": eta}
    if method in GAN_METHODS:
        synthetic = _gan_synthetic(data, method=method, epsilon=epsilon, delta=delta,
                                   fit_rng=fit_rng, sample_rng=sample_rng)
        record["fair_structure"] = None
    else:
        from privfair.synth.synthesizer import FairSynthesizer

        synth = FairSynthesizer(domain=data.domain, roles=data.roles, epsilon=epsilon,
                                delta=delta, method=method).fit(data.train, rng=fit_rng)
        synthetic = synth.sample(len(data.train), rng=sample_rng, mode=sample_mode)
        record["fair_structure"] = synth.structure_.fairness.passed
    record["fit_s"] = time.perf_counter() - start
    if eta is not None:
        from privfair.fair.tot import TOTransform

        setup = TOT_SETUPS.get(data.name) if data.tot is None else {
            "d_cols": list(data.tot.protected), "x_cols": list(data.tot.features),
            "y_col": data.tot.outcome, "distortion": data.tot.distortion,
            "clist": data.tot.clist, "dlist": data.tot.dlist,
            "discrimination": data.tot.discrimination, "max_variables": data.tot.max_variables,
            "distortion_scope": data.tot.distortion_scope}
        if setup is None:
            raise ValueError(f"eta: no TOT set-up is declared for dataset {data.name!r}; "
                             f"expected one of {sorted(TOT_SETUPS)} or a contract with a "
                             "'tot:' block")
        tot = TOTransform(domain=data.domain, eta=eta, **setup)
        synthetic = tot.fit(synthetic).transform(synthetic, rng=tot_rng)
        record["tot_objective"] = tot.objective_
    record.update(evaluate_synthetic(synthetic, real_train=data.train, real_test=data.test,
                                     domain=data.domain, roles=data.roles,
                                     privileged=data.privileged, classifiers=classifiers,
                                     seed=seed, per_group=True, labels=data.labels))
    return record


def _gan_synthetic(data: EvaluationData, *, method: str, epsilon: float, delta: float,
                   fit_rng: np.random.Generator, sample_rng: np.random.Generator
                   ) -> pd.DataFrame:
    from privfair.core.accounting import PrivacyLedger
    from privfair.generative.gan import GANConfig, fit_gan

    if method == "cfgan" and data.causal_graph is None:
        raise ValueError(f"method 'cfgan': dataset {data.name!r} declares no causal_graph in "
                         "its contract")
    codes = {a: data.train[a].to_numpy() for a in data.domain}
    fitted = fit_gan(codes, data.domain, protected=data.roles.protected[0],
                     outcome=data.roles.outcome[0],
                     ledger=PrivacyLedger(epsilon_budget=epsilon, delta=delta), rng=fit_rng,
                     config=GANConfig(method=method),
                     dag=data.causal_graph if method == "cfgan" else None)
    return pd.DataFrame(fitted.sample(len(data.train), rng=sample_rng))


#: Why a panel of the trade-off report can be empty (every cell undefined), said on it.
EMPTY_REASONS = {
    "CDP": "CDP conditions on the admissible columns: it is undefined when the contract "
           "declares none, or when no stratum holds both groups",
    "DP": "DP needs both protected groups among the real test rows",
}


def trade_off_report(results: pd.DataFrame, *, title: str = "privfair evaluation") -> str:
    """Self-contained HTML with privacy–fairness–utility trade-off curves.

    One section per dataset: 2-way TVD, downstream accuracy and |disparity| against ε, one
    line per method (and per η when a fairness transform was used), as in PreFair Fig. 7/8 and
    SAFES Fig. 3/4. Error bars are ±1 standard deviation over seeds.
    """

    from privfair.reporting.report import CSS

    results = results.copy()
    results["variant"] = results["method"] + results["eta"].map(
        lambda e: "" if e is None or (isinstance(e, float) and np.isnan(e)) else f" + TOT η={e}")
    sections = [f"<h1>{html.escape(title)}</h1>",
                f"<p class='warn'><b>Not privacy-protected.</b> {html.escape(NOT_PRIVATE)}</p>"]
    for dataset, part in results.groupby("dataset", sort=False):
        classifier = next((c.removesuffix("_accuracy") for c in part.columns
                           if c.endswith("_accuracy") and "baseline" not in c), None)
        panels = [("tvd2", "average 2-way TVD (lower is better)")]
        if classifier:
            panels.append((f"{classifier}_accuracy", f"{classifier} accuracy on real test rows"))
            for key in ("DP", "CDP"):
                columns = [c for c in part.columns
                           if c.startswith(f"{classifier}_") and c.endswith(f"_{key}")
                           and "+" not in c]
                if columns:
                    part = part.assign(**{key: part[columns].abs().mean(axis=1)})
                    panels.append((key, f"|{key}| of the classifier, mean over protected"))
        variants = list(dict.fromkeys(part["variant"]))
        drawn = []
        for column, label in panels:
            series = []
            for k, variant in enumerate(variants):
                rows = part[part["variant"] == variant]
                stats = rows.groupby("epsilon")[column].agg(["mean", "std"]).sort_index()
                series.append({"label": variant, "style": k, "x": list(stats.index),
                               "y": [None if pd.isna(v) else float(v) for v in stats["mean"]],
                               "err": [0.0 if pd.isna(v) else float(v)
                                       for v in stats["std"]]})
            drawn.append(line_panel_svg(series, title=label, x_label="ε (log scale)",
                                        log_x=True, empty_reason=EMPTY_REASONS.get(
                                            column, "the metric is undefined in every cell")))
        summary = part.groupby(["variant", "epsilon"])[[p for p, _ in panels]].mean()
        sections += [f"<h2>{html.escape(str(dataset))}</h2>",
                     legend_svg(variants),
                     "<div class='charts'>" + "".join(drawn) + "</div>",
                     "<p class='note'>Each point is the mean over seeds, its bar ±1 standard "
                     "deviation; every line has its own marker and dash pattern, so lines "
                     "drawn on top of each other stay apart.</p>",
                     summary.to_html(float_format=lambda v: f"{v:.4f}", na_rep="—"),
                     per_group_section(part)]
    style = CSS + ".warn{background:#fff3cd;padding:.5rem}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(sections)}</body></html>")


def per_group_section(part: pd.DataFrame) -> str:
    """Per-group plots of one dataset's cells: for each variant, its smallest ε (where DP
    noise hurts small groups most), first seed; empty when no cell has ``per_group``."""
    if "per_group" not in part:
        return ""
    panels = []
    for variant, rows in part.groupby("variant", sort=False):
        rows = rows[rows["per_group"].notna()].sort_values(["epsilon", "seed"])
        if rows.empty:
            continue
        first = rows.iloc[0]
        panels.append(f"<h3>{html.escape(str(variant))}, ε = {first['epsilon']:g}, seed "
                      f"{first['seed']}</h3>" + per_group_svg(json.loads(first["per_group"])))
    if not panels:
        return ""
    return ("<h3>Utility per protected group</h3><p class='note'>Marginal error of each "
            "group's synthetic rows against its real rows, and the first classifier trained "
            "on synthetic rows (blue) against the same classifier trained on the real "
            "training rows (grey), on the group's real test rows. Group sizes are buckets; "
            "small groups are shown, not hidden.</p>" + "".join(panels))
