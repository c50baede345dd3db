"""The ``model`` release kind: a DP (and fair) classifier trained on a contract's private data.

This module is long on purpose: it is the kind's whole declaration (parameters, data-free
checks, the read, train and evaluate stages, what is written); the declared cost lives in
``budget.py``, the noisy held-out figures in ``evaluation.py``, scoring in ``predict.py``.

``privfair train`` runs :data:`MODEL` through the release protocol
(:func:`privfair.release.protocol.run_release`); ``privfair predict`` runs
:func:`privfair.release.kinds.model.predict.predict`. A model release lives in
``<store>/<dataset>/vN/`` beside the table releases of the same dataset and shares their
lifetime ledger. It holds ``weights.npz`` (numpy arrays, no pickle), ``manifest.json``,
``model_card.md`` and ``contract.yaml`` (the public declaration ``predict`` encodes new rows
with).

Stages: ``read`` (private, no noise: reads the rows, encodes them from the contract alone and
splits them, each row held out independently with probability ``holdout``) → ``train``
(private, draws noise: first the noisy counts of the rows the contract's policies touched,
then the model) → ``evaluate`` (private, draws noise; only when ``holdout > 0``). Private
arrays and the exact tally of touched rows travel between stages as 0600 files in the run's
staging folder, the ledger as a post-noise artefact.

Issue 21.2: after the reservation nothing stops or speaks on a private value. The file's
schema (the columns the model reads, their Parquet types) is checked before it
(:func:`~privfair.contracts.encoding.check_source_schema`); values outside the declared
domain and nulls get the contract's policy in the encoding (a dropped row leaves features,
label and group together), and the rows each policy touched are published only as noisy
counts (:func:`~privfair.release.policy_counts.measure_policy_counts`), whose cost is part
of the declared curve.

Privacy. The declared cost (:mod:`privfair.release.kinds.model.budget`) is a Rényi curve fixed from
public inputs before anything is read, reserved in the lifetime ledger, and never exceeded:
the functional models' curve is known from ε; DP-SGD's assumes the public lower bound
``min_rows`` on the training rows and is re-calibrated after the DP row count so that the
run's curve stays below the declared one at every order. No statistic of real rows is
published: held-out figures come from DP confusion counts
(:mod:`privfair.release.kinds.model.evaluation`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from privfair.contracts.csv_source import (
    UNPARSED_CELL,
    is_csv,
    read_csv_text,
    valid_text_columns,
)
from privfair.contracts.encoding import (
    PolicyTally,
    policy_cells,
    policy_sensitivity,
)
from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger, rdp_epsilon
from privfair.core.errors import DomainError
from privfair.core.mechanisms import laplace_mechanism
from privfair.release.ingest import read_policy_tally, stage_policy_tally
from privfair.release.kinds.model.budget import (  # noqa: F401  (re-exported)
    FUNCTIONAL_MODELS,
    MODELS,
    ROW_COUNT_SHARE,
    SGD_MODELS,
    ModelBudget,
    ModelReleaseError,
    calibrate_noise_multiplier,
    calibrate_to_curve,
    is_functional,
    is_sgd,
    plan_budget,
    planned,
    rate_and_steps,
    row_count_entry,
    sgd_settings,
)
from privfair.release.kinds.model.evaluation import (
    confusion_counts,
    noisy_metrics,
    release_confusion,
)
from privfair.release.kinds.model.predict import (  # noqa: F401  (re-exported)
    constant_prediction,
    decision_function,
    predict,
    probe_prediction,
)
from privfair.release.kinds.model.resources import check_model_resources
from privfair.release.manifest import charged_guarantee, data_source
from privfair.release.manifest import manifest as common_manifest
from privfair.release.options import ReleaseOptions
from privfair.release.policy_counts import measure_policy_counts
from privfair.release.protocol import (
    Cost,
    ReleaseKind,
    RequestPlan,
    RunContext,
    Stage,
    State,
    Written,
)
from privfair.release.request import check_request, read_contract
from privfair.reporting.model_card import model_card  # noqa: F401  (re-exported)
from privfair.store.artefacts import load_ledger, save_ledger
from privfair.store.files import FileRef, save_private_array
from privfair.store.ledger import charge_epsilon

log = logging.getLogger(__name__)

ModelName = Literal["pflr", "pflr-star", "privlr", "dpsgd", "dpsgd-f", "naive"]
FORMAT = "privfair-model-release/2"


#: Bounds of ``--hidden``: public limits a DP-SGD network is checked against before its
#: memory estimate (:mod:`privfair.release.kinds.model.resources`).
MAX_LAYERS, MAX_WIDTH = 64, 10**6


class TrainParams(ReleaseOptions):
    """Everything a model release needs (the CLI's ``privfair train`` options and the Prefect
    form of ``privfair-train``)."""

    model: ModelName = Field("dpsgd-f", json_schema_extra={"cli_required": True},
                             description="Which DP classifier to train.")
    group: str | None = Field(None, description="Protected column defining the groups. "
                                                "Empty: the contract's first protected column.")
    positive: str | None = Field(None, description="Outcome label coded 1. Empty: the last "
                                                   "declared label.")
    holdout: float = Field(0.2, ge=0, lt=1, description=(
        "Probability that a row is held out (independently per row) for the model card's "
        "DP metrics. 0: train on every row, publish no metrics."))
    evaluation_share: float = Field(0.1, gt=0, lt=1, description=(
        "Share of the release's rho spent on the DP held-out confusion counts (only when "
        "holdout > 0)."))
    epochs: int = Field(20, ge=1, le=1000, description="DP-SGD epochs.")
    batch_size: int = Field(256, ge=1, le=10**7, description="DP-SGD expected batch size.")
    min_rows: int = Field(1000, ge=1, le=10**10, description=(
        "DP-SGD: public lower bound on the training rows; the declared cost assumes it (fewer "
        "rows: more noise, never more cost)."))
    clip: float = Field(0.5, gt=0, le=1e6, allow_inf_nan=False,
                        description="DP-SGD base clipping bound C0.")
    learning_rate: float | None = Field(None, gt=0, le=1e3, allow_inf_nan=False,
                                        description="DP-SGD step. Empty: 1/√T.")
    hidden: list[int] = Field(default_factory=list, description="DP-SGD hidden widths (each "
                                                                ">= 1); empty is logistic "
                                                                "regression.")
    alpha: float = Field(1.0, ge=0, le=1e3, allow_inf_nan=False,
                         description="PFLR/PFLR* fairness weight (Xu 2021 Eq. 8.1: 1).")
    fairness_term: Literal["absolute", "signed"] = Field("absolute", description=(
        "PFLR/PFLR* fairness term: 'absolute' is Eq. 8.1's alpha*|cov| (reaches zero "
        "covariance when alpha is large enough, never past it); 'signed' the linear shift "
        "alpha*cov of Alg. 6."))
    fairness_share: float = Field(0.5, gt=0, lt=1, description="PFLR*: ε_g/ε.")

    def idle_fields(self) -> dict[str, str]:
        sgd = self.model in SGD_MODELS
        return {
            name: need for name, need, used in (
                *((name, f"a DP-SGD model ({', '.join(SGD_MODELS)})", sgd)
                  for name in ("epochs", "batch_size", "min_rows", "clip", "learning_rate",
                               "hidden")),
                *((name, f"a functional-mechanism model ({', '.join(FUNCTIONAL_MODELS)})",
                   not sgd) for name in ("alpha", "fairness_term")),
                ("fairness_share", "model pflr-star", self.model == "pflr-star"),
                ("evaluation_share", "holdout > 0", self.holdout > 0),
            ) if not used}

    @field_validator("hidden")
    @classmethod
    def _positive_widths(cls, value: list[int]) -> list[int]:
        if any(width < 1 for width in value):
            raise ValueError(f"{value} holds a width below 1; expected positive layer widths")
        if len(value) > MAX_LAYERS or any(width > MAX_WIDTH for width in value):
            raise ValueError(f"{value}: at most {MAX_LAYERS} layers of at most {MAX_WIDTH:,} "
                             "units each")
        return value


@dataclass(frozen=True, kw_only=True)
class ModelPlan(RequestPlan):
    """The checked, public settings of one model release (never the seed)."""

    params: TrainParams
    encoding: FeatureEncoding
    budget: ModelBudget


def needed_columns(encoding: FeatureEncoding) -> list[str]:
    return [*(name for name, _ in encoding.features), encoding.outcome, encoding.group]


def source_view(contract: Contract, encoding: FeatureEncoding) -> Contract:
    """The contract as the model reads a data file: the columns it encodes are required; the
    contract's other columns (and its ``drop`` columns) may be there or not."""
    used = encoding.used_contract(contract)
    read = set(used.column_names)
    return used.model_copy(update={"drop": tuple(
        [c for c in contract.column_names if c not in read] + list(contract.drop))})


def check(params: TrainParams | Mapping[str, Any]) -> ModelPlan:
    """Check everything that needs no private read; refuse with one line."""
    p = params if isinstance(params, TrainParams) else TrainParams.model_validate(params)
    contract_path, contract = read_contract(p)
    if p.group is not None and p.group not in contract.column_names:
        raise DomainError(f"group: column {p.group!r} is not in contract "
                          f"{contract.name!r}; expected one of {list(contract.column_names)}")
    encoding = FeatureEncoding.from_contract(contract, group=p.group, positive=p.positive)
    check_model_resources(model=p.model, dimension=encoding.dimension,
                          hidden=p.hidden if p.model in SGD_MODELS else [],
                          batch_size=p.batch_size,
                          flag=("--hidden" if p.hidden and p.model in SGD_MODELS else
                                "--batch-size" if p.model in SGD_MODELS else "--contract"))
    used = encoding.used_contract(contract)
    groups = len(encoding.group_labels)
    if groups < 2:
        raise ModelReleaseError(f"model {p.model}: group column {encoding.group!r} has "
                                f"{groups} label; a fair model needs at least two groups")
    if p.model in FUNCTIONAL_MODELS and groups != 2:  # PrivLR too (issue 32 finding 6)
        raise ModelReleaseError(f"model {p.model}: group column {encoding.group!r} has "
                                f"{groups} labels; the functional mechanism's models "
                                f"({', '.join(FUNCTIONAL_MODELS)}) need two: choose --group or "
                                "a contract that maps the column onto two labels")
    # The file's schema alone (names, Parquet types) of the columns the model reads.
    request = check_request(p, contract_path, contract,
                            schema=source_view(contract, encoding))
    budget = plan_budget(model=p.model, epsilon=p.epsilon, delta=p.delta, holdout=p.holdout,
                         evaluation_share=p.evaluation_share, groups=groups,
                         fairness_share=p.fairness_share, min_rows=p.min_rows,
                         batch_size=p.batch_size, epochs=p.epochs, clip=p.clip,
                         policy_sensitivity=policy_sensitivity(used),
                         policy_cells=len(policy_cells(used)))
    return ModelPlan(**request.plan_fields(method=f"model:{p.model}"), params=p,
                     encoding=encoding, budget=budget)


# --- private stages ---------------------------------------------------------------------------


def read_private(plan: Any) -> tuple[pd.DataFrame, PolicyTally]:
    """The private rows of ``plan.data_path`` (an empty file is read as no rows, never
    refused: issue 21.2), and a tally holding the CSV records that do not parse (dropped:
    :mod:`privfair.contracts.csv_source`). Text that is not UTF-8 reads as one value out of
    the domain, never an error."""
    import pyarrow.parquet as pq

    path = Path(plan.data_path)
    tally = PolicyTally()
    columns = list(dict.fromkeys(plan.encoding.columns))
    if not is_csv(path):
        return valid_text_columns(pq.read_table(path, columns=columns)).to_pandas(), tally
    frame, unparsed = read_csv_text(path, columns, plan.contract.csv_dialect)
    tally.add(*UNPARSED_CELL, unparsed)
    return frame, tally


def holdout_mask(rng: np.random.Generator, n: int, holdout: float) -> np.ndarray:
    """Which rows are held out: each independently with probability ``holdout`` (adding a
    person never moves another one between training and held-out rows); none at 0."""
    if holdout <= 0:
        return np.zeros(n, dtype=bool)
    return rng.random(n) < holdout


def _load_private(ref: FileRef) -> np.ndarray:
    array: np.ndarray = np.load(ref.open_checked(), allow_pickle=False)
    return array


def read_stage(context: RunContext, state: State) -> dict[str, Any]:
    """Read, encode under the contract's policies (no value raises; the exact tally of the
    rows they touched is staged for the noisy counts) and split the rows."""
    plan: ModelPlan = context.plan
    frame, tally = read_private(plan)
    x = plan.encoding.transform(frame, plan.contract, tally=tally)
    y, groups = plan.encoding.labels_and_groups(frame, plan.contract)
    del frame
    if not len(x) == len(y) == len(groups):  # encoding must keep or drop whole rows
        raise ModelReleaseError("the encoded features, labels and groups have different "
                                "numbers of rows; nothing was drawn")
    held = holdout_mask(context.rng("split"), len(x), plan.params.holdout)
    staging = context.workspace.staging
    rows = {}
    for part, mask in (("train", ~held), ("test", held)):
        for name, array in (("x", x), ("y", y), ("groups", groups)):
            rows[f"{name}_{part}"] = save_private_array(array[mask], folder=staging,
                                                           name=f"{name}_{part}.npy")
    ledger = PrivacyLedger(epsilon_budget=plan.epsilon, delta=plan.delta, accounting="rdp")
    return {"rows": rows, "policy_tally": stage_policy_tally(tally, staging),
            "ledger": save_ledger(ledger, context.workspace.artefacts)}


def _train_functional(context: RunContext, x: np.ndarray, y: np.ndarray, groups: np.ndarray,
                      ledger: PrivacyLedger) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    from privfair.learn.functional import FunctionalLogisticRegression

    plan: ModelPlan = context.plan
    p = plan.params
    if not is_functional(p.model):  # pragma: no cover - train_stage picks the trainer by model
        raise ModelReleaseError(f"model {p.model!r} is not a functional-mechanism model")
    model = FunctionalLogisticRegression(
        epsilon=float(planned(plan.budget.model_epsilon, "model_epsilon")), variant=p.model,
        row_l1_bound=plan.encoding.row_l1_bound, rng=context.rng("train"), alpha=p.alpha,
        fairness_term=p.fairness_term, fairness_share=p.fairness_share)
    model.fit(x, y, groups.astype(float), ledger=ledger)
    hyper = model.hyper_parameters() | {"trimmed_directions": model.trimmed_,
                                        "fairness_centre": model.centre_}
    return {"coef": model.coef_.astype(np.float64)}, hyper


def _train_sgd(context: RunContext, x: np.ndarray, y: np.ndarray, groups: np.ndarray,
               ledger: PrivacyLedger) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    import torch

    from privfair.learn.dpsgd import train

    plan: ModelPlan = context.plan
    p, budget = plan.params, plan.budget
    if not is_sgd(p.model):  # pragma: no cover - train_stage picks the trainer by model
        raise ModelReleaseError(f"model {p.model!r} is not a DP-SGD model")
    n_groups = len(plan.encoding.group_labels)
    # The row count is the only thing about n the run uses, and it is a DP count (the entry
    # the layer records is row_count_entry's, which the plan declared).
    count_epsilon = float(planned(budget.count_epsilon, "count_epsilon"))
    n_noisy = max(1.0, noisy_row_count(len(x), epsilon=count_epsilon,
                                       rng=context.rng("count"), ledger=ledger))
    rate, steps = rate_and_steps(batch_size=p.batch_size, rows=n_noisy, epochs=p.epochs)
    # The smallest σ whose curve stays under the declared one at every order.
    sigma = calibrate_to_curve(method=p.model, sample_rate=rate, steps=steps, groups=n_groups,
                               clip=p.clip, bound=planned(budget.sgd_curve, "sgd_curve"),
                               start=float(planned(budget.noise_multiplier,
                                                   "noise_multiplier")))
    settings = sgd_settings(method=p.model, sample_rate=rate, steps=steps,
                            expected_batch_size=rate * n_noisy, sigma=sigma, clip=p.clip,
                            learning_rate=p.learning_rate, hidden=p.hidden)
    generator = torch.Generator()
    generator.manual_seed(int(context.rng("train").integers(2**63 - 1)))
    net = train(x, y, groups, settings=settings, n_groups=n_groups, ledger=ledger,
                generator=generator,
                progress=lambda f: context.progress("train", 0.1 + 0.75 * f))
    hyper = settings.to_dict() | {
        "epochs": p.epochs, "noisy_row_count": round(n_noisy, 1), "min_rows": p.min_rows,
        "group_clip_bounds_last_epoch": (net.group_clip_trace[-1] if net.group_clip_trace
                                         else None)}
    return net.weights, hyper


def policy_counts(context: RunContext, state: State, ledger: PrivacyLedger) -> dict[str, Any]:
    """The rows each policy touched, as noisy counts at the declared ρ_pol (issue 21.2)."""
    plan: ModelPlan = context.plan
    return measure_policy_counts(read_policy_tally(state["policy_tally"]),
                                 plan.encoding.used_contract(plan.contract), ledger,
                                 rho=plan.budget.policy_rho, rng=context.rng("policies"))


def train_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan: ModelPlan = context.plan
    ledger = load_ledger(state["ledger"])
    record = policy_counts(context, state, ledger)
    rows = state["rows"]
    x, y, groups = (_load_private(rows[f"{n}_train"]) for n in ("x", "y", "groups"))
    fit = _train_functional if plan.params.model in FUNCTIONAL_MODELS else _train_sgd
    weights, hyper = fit(context, x, y, groups, ledger)
    return {"weights": {k: np.asarray(v) for k, v in weights.items()}, "hyper": hyper,
            "input_validation": record,
            "ledger": save_ledger(ledger, context.workspace.artefacts)}


def evaluate_stage(context: RunContext, state: State) -> dict[str, Any]:
    """The held-out confusion counts per group, through the Gaussian mechanism."""
    plan: ModelPlan = context.plan
    rows = state["rows"]
    x, y, groups = (_load_private(rows[f"{n}_test"]) for n in ("x", "y", "groups"))
    pred = (decision_function(state["weights"], x) > 0).astype(np.int64) if len(x) else \
        np.zeros(0, dtype=np.int64)
    counts = confusion_counts(y, pred, groups, len(plan.encoding.group_labels))
    ledger = load_ledger(state["ledger"])
    noisy = release_confusion(counts, sigma=float(planned(plan.budget.evaluation_sigma,
                                                          "evaluation_sigma")), ledger=ledger,
                              rng=context.rng("evaluation"))
    return {"confusion": noisy.tolist(),
            "ledger": save_ledger(ledger, context.workspace.artefacts)}


def noisy_row_count(rows: int, *, epsilon: float, rng: np.random.Generator,
                    ledger: PrivacyLedger) -> float:
    """DP-SGD's row count n̂: ``rows`` plus exact discrete Laplace noise of scale 1/ε (an
    integer: issue 41.2), charged as :func:`row_count_entry`."""
    count = row_count_entry(epsilon)
    (noisy,) = laplace_mechanism(np.array([rows], dtype=np.int64), epsilon=epsilon,
                                 sensitivity=count.sensitivity, rng=rng, ledger=ledger,
                                 name=count.name)
    return float(noisy)


# --- the kind -------------------------------------------------------------------------------


def _epsilon_curve(curve: Sequence[float]) -> list[dict[str, float]]:
    """ε of the charged curve at a few δ (the model card's table)."""
    return [{"delta": d, "epsilon": rdp_epsilon(rdp=list(curve), delta=d)[0]}
            for d in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)]


class ModelKind(ReleaseKind):
    """A DP (and fair) classifier (``privfair train``)."""

    name = "model"
    command = "train"
    params = TrainParams
    seed_stages = ("split", "count", "train", "evaluation", "policies")
    description = "publish a DP (and fair) classifier as a model release"

    def check(self, params: TrainParams) -> ModelPlan:
        return check(params)

    def cost(self, plan: ModelPlan) -> Cost:
        return Cost(epsilon=plan.epsilon, delta=plan.delta, rdp=plan.budget.curve)

    def summary(self, plan: ModelPlan) -> str:
        why = ("pure ε-DP functional mechanism (Laplace): it uses no δ, so it takes more "
               "of the lifetime than a Gaussian table release at the same (ε, δ)"
               if plan.params.model in FUNCTIONAL_MODELS else
               "DP-SGD: its Rényi curve of subsampled Gaussian steps is reserved as declared "
               "from min_rows")
        return (f"model release of {plan.dataset!r}: {plan.params.model}, "
                f"ε = {plan.epsilon:g}, δ = {plan.delta:g} ({why})")

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        """The model, and its held-out figures as released (DP), or why there are none."""
        what = f"built {manifest['model']}"
        if manifest.get("trivial"):
            return (f"{what}: TRIVIAL (predicts one class for every input the contract "
                    "allows); not called fair")
        metrics = manifest.get("metrics")
        if not metrics:
            return f"{what}: no held-out figures (holdout = 0)"
        rd = metrics.get("risk_difference")
        unseen = metrics.get("within_noise_of_zero") or []
        fair = (f"not called fair (the noisy counts cannot show the {' and '.join(unseen)} "
                "class predicted)" if unseen else
                f"{'PASS' if metrics.get('fair') else 'FAIL'} "
                f"(|RD| <= {metrics.get('fair_threshold')})")
        warning = ""
        if metrics.get("beats_majority_beyond_noise") is False:
            warning = (f"; WARNING: accuracy is within noise (+-"
                       f"{metrics.get('accuracy_noise_margin', 0):.3f}) of always predicting "
                       "the majority class: the held-out figures cannot show this model is "
                       "useful")
        return (f"{what}: DP held-out accuracy {metrics['accuracy']:.3f} (majority "
                f"{metrics['majority_baseline_accuracy']:.3f}); risk difference "
                f"{'-' if rd is None else f'{rd:.3f}'} {fair}{warning}")

    def stages(self, plan: ModelPlan) -> list[Stage]:
        stages = [Stage("read", read_stage, private=True, at=0.05),
                  Stage("train", train_stage, private=True, noise=True, at=0.1)]
        if plan.params.holdout > 0:
            stages.append(Stage("evaluate", evaluate_stage, private=True, noise=True,
                                at=0.9))
        return stages

    def write(self, folder: Path, context: RunContext, state: State, *, version: str,
              lifetime: Any) -> Written:
        plan: ModelPlan = context.plan
        p = plan.params
        weights: Mapping[str, np.ndarray] = state["weights"]
        # mypy matches a ** dict against savez's allow_pickle too; the names are the
        # model's parameters ("coef", layer names), never "allow_pickle"
        np.savez(folder / "weights.npz",
                 **{k: np.asarray(v) for k, v in weights.items()})  # type: ignore[arg-type]
        shutil.copyfile(plan.contract_path, folder / "contract.yaml")
        ledger = load_ledger(state["ledger"])
        probe = probe_prediction(weights, plan.encoding)
        constant = probe["constant"]
        metrics = None
        if state.get("confusion") is not None:
            metrics = noisy_metrics(state["confusion"], plan.encoding.group_labels,
                                    sigma=float(planned(plan.budget.evaluation_sigma,
                                                        "evaluation_sigma")),
                                    epsilon=plan.epsilon, delta=plan.delta, constant=constant)
        # decided from the model (weights or a public probe), never from noisy counts
        trivial = constant is not None
        # What the lifetime was charged: the declared curve (cost(), issue 41.3)
        charged = [float(v) for v in plan.budget.curve]
        manifest = common_manifest(plan, kind=self.name, fmt=FORMAT, version=version,
                                   orchestrator=context.orchestrator, body={
            "model": p.model,
            "guarantee": {
                "epsilon": plan.epsilon, "delta": plan.delta,
                "spent": charged_guarantee(ledger, rdp=charged, delta=plan.delta),
                "epsilon_curve": _epsilon_curve(charged),
                "rdp_spent": [float(v) for v in charged],
                "declared": plan.budget.to_dict(),
                "note": "the lifetime ledger holds the declared curve (reserved before any "
                        "read); the run's own curve is at or below it at every order"},
            "ledger": [{k: v for k, v in e.__dict__.items() if k != "rdp"}
                       for e in ledger.entries],
            "lifetime": {"epsilon_budget": lifetime.epsilon_budget,
                         "delta_budget": lifetime.delta_budget,
                         "epsilon_spent_after": lifetime.epsilon_spent(),
                         "charge_epsilon": charge_epsilon({"rdp": charged},
                                                          lifetime.delta_budget),
                         "accounting": "the lifetime is charged this release's declared "
                                       "Renyi curve (issue 41.3), composed with every other "
                                       "charge (a table release of rho as rho*alpha) and "
                                       "converted once at the lifetime delta"},
            "hyper_parameters": dict(state.get("hyper", {})),
            "validation": {"input": state["input_validation"]},
            "features": plan.encoding.to_dict() | {"names": list(plan.encoding.feature_names)},
            "trivial": trivial,
            "prediction_probe": probe | {"constant_class": (
                None if constant is None else
                plan.encoding.positive if constant == 1 else f"not {plan.encoding.positive}")},
            "metrics": metrics,
            "parameters": {
                "model": p.model, "epsilon": p.epsilon, "delta": p.delta, "holdout": p.holdout,
                "holdout_split": "each row held out independently with probability holdout",
                "evaluation_share": p.evaluation_share if p.holdout > 0 else None,
                "min_rows": p.min_rows if p.model in SGD_MODELS else None,
                "data_source": data_source(plan),
            },
        })
        (folder / "model_card.md").write_text(model_card(manifest), encoding="utf-8")
        return Written(manifest=manifest, files=("weights.npz", "contract.yaml",
                                                 "model_card.md"),
                       n_rows=0, fairness_passed=bool(metrics and metrics["fair"]),
                       # the lifetime is charged the run's own curve (at or below the
                       # declared one it reserved: the protocol checks it)
                       ledger_fields={"rdp": [float(v) for v in ledger.rdp()]},
                       # without held-out figures there is no verdict to claim
                       fairness_claimed=metrics is not None)


MODEL = ModelKind()
