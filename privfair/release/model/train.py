"""The ``model`` release kind: a DP (and fair) classifier trained on a contract's private data.

This module is long on purpose: a model release end to end (plan, private training, model
card, publication, predict) mirrors the table pipeline's stage modules in one place.

``privfair train`` runs :func:`run_train`; ``privfair predict`` runs :func:`predict`. A model
release lives in ``<store>/<dataset>/vN/`` beside the table releases of the same dataset and
shares their lifetime ledger. It holds ``weights.npz`` (numpy arrays, no pickle),
``manifest.json``, ``model_card.md`` and ``contract.yaml`` (the public declaration ``predict``
encodes new rows with).

Privacy. Every noisy release is charged to the run's :class:`PrivacyLedger` (Rényi accounting)
before it is drawn, with an ε budget of ``epsilon`` at ``delta``:

* ``pflr``, ``pflr-star``, ``privlr``: the functional mechanism (pure ε-DP), ``learn.functional``.
* ``dpsgd``, ``dpsgd-f``, ``naive``: a Laplace count of the training rows (``ROW_COUNT_SHARE`` of
  ε) fixes the Poisson rate ``q = batch_size/ñ`` and ``T = epochs/q`` steps without using the raw
  row count; the noise multiplier is then the smallest that keeps the whole run within
  ``(epsilon, delta)`` (bisection on the RDP accountant).

Lifetime budget. Table releases compose in zCDP (their ρ); a model release's cost is an RDP
curve, which zCDP cannot express. Here the lifetime is composed as Rényi curves (a table
release of ρ is the curve ρα), and the model release is recorded with its curve *and* a ρ
reservation: the ρ that leaves exactly as much room to later zCDP table releases as the
composed curves do (``rho_reservation``). The table pipeline's ρ check therefore stays sound
without knowing about curves. Preflight refuses a release whose ε does not fit what the
lifetime has left; publication re-checks the exact composition under the dataset lock.

Not privacy-protected: the per-group metrics of the model card are computed on a held-out split
of the private rows (``holdout`` share, never used in training), as the issue asks; the
manifest marks them so. Set ``holdout=0`` to publish none.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field

from privfair.contracts.model_features import FeatureEncoding
from privfair.contracts.schema import Contract, load_contract
from privfair.core.accounting import (
    RDP_ORDERS,
    LedgerEntry,
    PrivacyLedger,
    laplace_rho,
    rdp_epsilon,
    zcdp_rdp,
)
from privfair.core.errors import BudgetExceededError, DomainError, PrivfairError
from privfair.release.seeds import SeedOptions, check_seed_policy
from privfair.release.table.plan import (
    DATASET_NAME,
    ReleaseInputError,
    check_store_writable,
    resolve_contract,
    resolve_data,
)
from privfair.store.artefacts import json_bytes, new_run_id, sha256_file, utc_now
from privfair.store.registry import (
    LifetimeLedger,
    code_version,
    dataset_id,
    locked,
    mark_noise_drawn,
    next_version,
    read_lifetime_ledger,
    release_unspent,
    reserve_run,
)

log = logging.getLogger(__name__)

ModelKind = Literal["pflr", "pflr-star", "privlr", "dpsgd", "dpsgd-f", "naive"]
FUNCTIONAL_MODELS = ("pflr", "pflr-star", "privlr")
SGD_MODELS = ("dpsgd", "dpsgd-f", "naive")
MODELS = FUNCTIONAL_MODELS + SGD_MODELS
FORMAT = "privfair-model-release/1"
#: Share of ε spent on the DP count of training rows that sets DP-SGD's sampling rate.
ROW_COUNT_SHARE = 0.01
#: |RD| at or below this on the held-out split counts as fair (Xu 2021's threshold).
FAIR_THRESHOLD = 0.05


class TrainParams(SeedOptions):
    """Everything a model release needs (the Prefect form of ``privfair-train``)."""

    model_config = ConfigDict(extra="forbid")

    contract: str | None = Field(None, description="Data contract YAML. Empty: embedded Adult.")
    data: str | None = Field(None, description="Private table (CSV/Parquet). Empty: embedded.")
    model: ModelKind = Field("dpsgd-f", description="Which DP classifier to train.")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False, description="ε of this release.")
    delta: float = Field(1e-6, gt=0, lt=1, description="δ of this release.")
    group: str | None = Field(None, description="Protected column defining the groups. "
                                                "Empty: the contract's first protected column.")
    positive: str | None = Field(None, description="Outcome label coded 1. Empty: the last "
                                                   "declared label.")
    holdout: float = Field(0.2, ge=0, lt=1, description="Share of rows held out for the "
                                                        "(non-private) model card metrics.")
    epochs: int = Field(20, ge=1, le=1000, description="DP-SGD epochs.")
    batch_size: int = Field(256, ge=1, description="DP-SGD expected batch size.")
    clip: float = Field(0.5, gt=0, description="DP-SGD base clipping bound C0.")
    learning_rate: float | None = Field(None, gt=0, description="DP-SGD step. Empty: 1/√T.")
    hidden: list[int] = Field(default_factory=list, description="DP-SGD hidden widths; empty "
                                                                "is logistic regression.")
    alpha: float = Field(0.3, ge=0, description="PFLR/PFLR* fairness weight.")
    fairness_share: float = Field(0.5, gt=0, lt=1, description="PFLR*: ε_g/ε.")
    out: str = Field("releases", description="Release store folder.")


class ModelReleaseError(PrivfairError, ValueError):
    """A model release cannot go ahead as asked."""


@dataclass(frozen=True)
class TrainPlan:
    """The checked, public settings of one model release (never the seed)."""

    params: TrainParams
    contract: Contract
    contract_path: Path
    data_path: Path
    data_source: str
    store: Path
    encoding: FeatureEncoding
    started_at: str


# --- lifetime composition -------------------------------------------------------------------


def _release_curve(release: Mapping[str, Any]) -> np.ndarray:
    if release.get("rdp") is not None:
        curve = np.asarray(release["rdp"], dtype=float)
        if curve.size != len(RDP_ORDERS):
            raise ModelReleaseError("a lifetime ledger entry has an RDP curve on another grid")
        return curve
    return zcdp_rdp(rho=float(release["rho"]))


def lifetime_curve(lifetime: LifetimeLedger) -> np.ndarray:
    """Composed RDP curve of every release (and pending reservation) in ``lifetime``."""
    total = np.zeros(len(RDP_ORDERS))
    # Reservations of runs that have not published count as spent, like releases.
    for release in [*lifetime.releases, *lifetime.pending]:
        total += _release_curve(release)
    return total


def lifetime_epsilon(lifetime: LifetimeLedger, extra: np.ndarray | None = None) -> float:
    curve = lifetime_curve(lifetime) + (0 if extra is None else extra)
    return rdp_epsilon(rdp=curve, delta=lifetime.delta_budget)[0]


def rho_reservation(lifetime: LifetimeLedger, curve: np.ndarray) -> float:
    """ρ to record for a release of RDP ``curve`` so the zCDP check of later table releases
    stays sound: ``ρ_budget − (table ρ so far) − ρ'``, with ρ' the most zCDP that still fits
    next to every curve."""
    base = lifetime_curve(lifetime) + curve
    orders = np.asarray(RDP_ORDERS)
    lo, hi = 0.0, lifetime.rho_budget
    for _ in range(60):
        mid = (lo + hi) / 2
        fits = rdp_epsilon(rdp=base + mid * orders,
                           delta=lifetime.delta_budget)[0] <= lifetime.epsilon_budget
        lo, hi = (mid, hi) if fits else (lo, mid)
    return max(0.0, lifetime.rho_budget - lifetime.rho_spent - lo)


# --- preflight ------------------------------------------------------------------------------


def preflight_train(params: TrainParams | Mapping[str, Any]) -> TrainPlan:
    """Check everything that needs no private read; refuse with one line."""
    params = params if isinstance(params, TrainParams) else TrainParams.model_validate(params)
    check_seed_policy(params.seed, params.insecure_seed, error=ModelReleaseError)
    contract_path = resolve_contract(params)
    contract = load_contract(contract_path)
    if not DATASET_NAME.fullmatch(contract.name):
        raise ModelReleaseError(f"contract {contract_path}: name {contract.name!r} cannot name "
                                "a release folder")
    if params.group is not None and params.group not in contract.column_names:
        raise DomainError(f"group: column {params.group!r} is not in contract "
                          f"{contract.name!r}; expected one of {list(contract.column_names)}")
    encoding = FeatureEncoding.from_contract(contract, group=params.group,
                                             positive=params.positive)
    if params.model in FUNCTIONAL_MODELS and params.model != "privlr" \
            and len(encoding.group_labels) != 2:
        raise ModelReleaseError(f"model {params.model}: group column {encoding.group!r} has "
                                f"{len(encoding.group_labels)} labels; PFLR needs two")
    data_path, source = resolve_data(params, contract)
    store = Path(params.out).expanduser().resolve()
    check_store_writable(store)
    lifetime = read_lifetime_ledger(store, contract)
    spent = lifetime_epsilon(lifetime)
    if spent + params.epsilon > lifetime.epsilon_budget * (1 + 1e-9):
        raise BudgetExceededError(
            f"lifetime budget of dataset {contract.name!r} exceeded: this model release asks "
            f"epsilon={params.epsilon:g} but {spent:.4g} of {lifetime.epsilon_budget:g} "
            f"(delta={lifetime.delta_budget:g}) is spent")
    return TrainPlan(params, contract, contract_path, data_path, source, store, encoding,
                     utc_now())


# --- private side ---------------------------------------------------------------------------


def read_private(plan: TrainPlan) -> pd.DataFrame:
    """The private rows, as the contract declares them (refuses bad columns with one line)."""
    path = plan.data_path
    frame = pd.read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else \
        pd.read_csv(path)
    if frame.empty:
        raise ReleaseInputError(f"data file {path} has no rows (empty input)")
    return frame


def _split(n: int, holdout: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    cut = n - int(round(holdout * n))
    return np.sort(order[:cut]), np.sort(order[cut:])


def _torch_generator(seed: int | None) -> Any:
    import torch

    generator = torch.Generator()
    if seed is None:
        generator.manual_seed(int.from_bytes(os.urandom(8), "little") & (2**63 - 1))
    else:
        generator.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
    return generator


def seeded_rng(seed: int | None, key: int) -> np.random.Generator:
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(key,)))


def _dp_row_count(n: int, *, epsilon: float, ledger: PrivacyLedger,
                  rng: np.random.Generator) -> float:
    ledger.spend(LedgerEntry(name="training row count", mechanism="laplace", sensitivity=1.0,
                             rho=laplace_rho(epsilon=epsilon), epsilon=epsilon))
    return max(1.0, n + float(rng.laplace(0.0, 1 / epsilon)))


def calibrate_noise_multiplier(*, method: str, sample_rate: float, steps: int,
                               ledger: PrivacyLedger, groups: int, clip: float,
                               expected_batch_size: float) -> float:
    """Smallest σ (to 0.5%) whose run fits what ``ledger`` has left (σ1 = 10σ for the counts)."""
    from privfair.learn.dpsgd import SGDSettings

    def fits(sigma: float) -> bool:
        settings = SGDSettings(method=method, sample_rate=sample_rate, steps=steps,
                               expected_batch_size=expected_batch_size, noise_multiplier=sigma,
                               clip=clip)
        try:
            ledger.check_entries(*settings.ledger_entries(groups=groups))
        except BudgetExceededError:
            return False
        return True

    lo, hi = 0.1, 1.0
    while not fits(hi):
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise ModelReleaseError("epsilon is too small for DP-SGD at these epochs and "
                                    "batch size (noise multiplier above 1e4)")
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def _train_functional(plan: TrainPlan, x: np.ndarray, y: np.ndarray, groups: np.ndarray,
                      ledger: PrivacyLedger) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    from privfair.learn.functional import FunctionalLogisticRegression

    p = plan.params
    model = FunctionalLogisticRegression(
        epsilon=p.epsilon, variant=p.model, row_l1_bound=plan.encoding.row_l1_bound,
        rng=seeded_rng(p.seed, 1), alpha=p.alpha, fairness_share=p.fairness_share)
    model.fit(x, y, groups.astype(float), ledger=ledger)
    hyper = model.hyper_parameters() | {"trimmed_directions": model.trimmed_,
                                        "fairness_centre": model.centre_}
    return {"coef": model.coef_.astype(np.float64)}, hyper


def _train_sgd(plan: TrainPlan, x: np.ndarray, y: np.ndarray, groups: np.ndarray,
               ledger: PrivacyLedger, progress: Callable[[float], None]
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    from privfair.learn.dpsgd import SGDSettings, train

    p = plan.params
    n_groups = len(plan.encoding.group_labels)
    # The row count is the only thing about n the run uses, and it is a DP count.
    count_entry = LedgerEntry(name="training row count", mechanism="laplace", sensitivity=1.0,
                              rho=laplace_rho(epsilon=ROW_COUNT_SHARE * p.epsilon),
                              epsilon=ROW_COUNT_SHARE * p.epsilon)
    ledger.check_entries(count_entry)
    n_noisy = _dp_row_count(len(x), epsilon=ROW_COUNT_SHARE * p.epsilon, ledger=ledger,
                            rng=seeded_rng(p.seed, 2))
    sample_rate = min(1.0, p.batch_size / n_noisy)
    steps = max(1, int(p.epochs / sample_rate))
    batch = sample_rate * n_noisy
    sigma = calibrate_noise_multiplier(method=p.model, sample_rate=sample_rate, steps=steps,
                                       ledger=ledger, groups=n_groups, clip=p.clip,
                                       expected_batch_size=batch)
    settings = SGDSettings(method=p.model, sample_rate=sample_rate, steps=steps,
                           expected_batch_size=batch, noise_multiplier=sigma, clip=p.clip,
                           learning_rate=p.learning_rate, hidden=tuple(p.hidden))
    net = train(x, y, groups, settings=settings, n_groups=n_groups, ledger=ledger,
                generator=_torch_generator(p.seed), progress=progress)
    hyper = settings.to_dict() | {"epochs": p.epochs, "noisy_row_count": round(n_noisy, 1),
                                  "group_clip_bounds_last_epoch": (
                                      net.group_clip_trace[-1] if net.group_clip_trace
                                      else None)}
    return net.weights, hyper


def decision_function(weights: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Logits of a released model (numpy only)."""
    if "coef" in weights:
        return np.asarray(x, dtype=float) @ weights["coef"]
    from privfair.learn.dpsgd import forward

    return forward(dict(weights), np.asarray(x, dtype=np.float32)).astype(float)


# --- metrics (held-out, NOT privacy-protected) ----------------------------------------------


def holdout_metrics(y: np.ndarray, pred: np.ndarray, groups: np.ndarray,
                    labels: tuple[str, ...]) -> dict[str, Any]:
    """Accuracy, positive-prediction rate and TPR per group, the majority baseline and RD."""
    y = np.asarray(y).astype(int)
    pred = np.asarray(pred).astype(int)
    per_group = {}
    for k, label in enumerate(labels):
        mask = groups == k
        if not mask.any():
            per_group[label] = None
            continue
        positives = mask & (y == 1)
        per_group[label] = {
            "accuracy": float(np.mean(pred[mask] == y[mask])),
            "positive_prediction_rate": float(np.mean(pred[mask])),
            "true_positive_rate": float(np.mean(pred[positives])) if positives.any() else None,
        }
    rates = [g["positive_prediction_rate"] for g in per_group.values() if g]
    tprs = [g["true_positive_rate"] for g in per_group.values() if g and g["true_positive_rate"]
            is not None]
    majority = float(max(np.mean(y), 1 - np.mean(y)))
    rd = float(max(rates) - min(rates)) if rates else None
    return {
        "privacy": "NOT privacy-protected: computed on held-out private rows, never used in "
                   "training",
        "accuracy": float(np.mean(pred == y)),
        "majority_baseline_accuracy": majority,
        "positive_prediction_rate": float(np.mean(pred)),
        "risk_difference": rd,
        "true_positive_rate_gap": float(max(tprs) - min(tprs)) if tprs else None,
        "per_group": per_group,
        "fair": None if rd is None else rd <= FAIR_THRESHOLD,
        "fair_threshold": FAIR_THRESHOLD,
    }


# --- the run --------------------------------------------------------------------------------


def run_train(params: TrainParams | Mapping[str, Any], *,
              progress: Callable[[str, float], None] | None = None) -> Path:
    """Train, charge and publish a model release; returns its folder."""
    report = progress or (lambda stage, fraction: None)
    report("preflight", 0.0)
    plan = preflight_train(params)
    p = plan.params
    ledger = PrivacyLedger(epsilon_budget=p.epsilon, delta=p.delta, accounting="rdp")
    run = reserve_model_run(plan)
    try:
        final = _train_and_publish(plan, run, ledger, report)
    except BaseException:
        release_unspent(run)  # only a run that drew no noise gets its reservation back
        raise
    report("done", 1.0)
    return final


def reserve_model_run(plan: TrainPlan) -> SimpleNamespace:
    """Reserve the lifetime's whole remaining ρ before the first private read (rule 5).

    A model's Rényi curve is known only after its DP row count, so no smaller reservation is
    sound in advance. While the model trains, the dataset's budget is held; a run that drew
    noise and fails stays charged the reservation (conservative), and publication replaces it
    by the exact ρ of :func:`rho_reservation`.
    """
    p = plan.params
    remaining = read_lifetime_ledger(plan.store, plan.contract).rho_remaining
    if not remaining > 0:
        raise BudgetExceededError(f"lifetime budget of dataset {plan.contract.name!r} is spent")
    run = SimpleNamespace(run_id=new_run_id(), rho=remaining, epsilon=p.epsilon, delta=p.delta,
                          method=f"model:{p.model}", store=plan.store, contract=plan.contract,
                          dataset=plan.contract.name,
                          contract_fingerprint=plan.contract.fingerprint())
    reserve_run(run)
    return run


def _train_and_publish(plan: TrainPlan, run: SimpleNamespace, ledger: PrivacyLedger,
                       report: Callable[[str, float], None]) -> Path:
    p = plan.params
    report("read data", 0.05)
    frame = read_private(plan)
    mark_noise_drawn(run)
    x = plan.encoding.transform(frame, plan.contract)
    y, groups = plan.encoding.labels_and_groups(frame, plan.contract)
    del frame
    train_rows, test_rows = _split(len(x), p.holdout, seeded_rng(p.seed, 3))
    report("train", 0.1)
    if p.model in FUNCTIONAL_MODELS:
        weights, hyper = _train_functional(plan, x[train_rows], y[train_rows],
                                           groups[train_rows], ledger)
    else:
        weights, hyper = _train_sgd(plan, x[train_rows], y[train_rows], groups[train_rows],
                                    ledger, lambda f: report("train", 0.1 + 0.8 * f))
    metrics = None
    if test_rows.size:
        pred = (decision_function(weights, x[test_rows]) > 0).astype(int)
        metrics = holdout_metrics(y[test_rows], pred, groups[test_rows],
                                  plan.encoding.group_labels)
    del x, y, groups
    report("publish", 0.95)
    return publish_model(plan, ledger=ledger, weights=weights, hyper=hyper, metrics=metrics,
                         run_id=run.run_id)


def _epsilon_curve(ledger: PrivacyLedger) -> list[dict[str, float]]:
    return [{"delta": d, "epsilon": ledger.epsilon_spent(d)}
            for d in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)]


def build_model_manifest(plan: TrainPlan, *, version: str, ledger: PrivacyLedger,
                         hyper: Mapping[str, Any], metrics: Mapping[str, Any] | None,
                         lifetime: LifetimeLedger, reservation: float) -> dict[str, Any]:
    p = plan.params
    return {
        "format": FORMAT,
        "kind": "model",
        "dataset": plan.contract.name,
        "version": version,
        "started_at": plan.started_at,
        "published_at": utc_now(),
        "model": p.model,
        "guarantee": {"epsilon": p.epsilon, "delta": p.delta, "spent": ledger.guarantee(),
                      "epsilon_curve": _epsilon_curve(ledger)},
        "ledger": [{k: v for k, v in e.__dict__.items() if k != "rdp"} for e in ledger.entries],
        "lifetime": {"epsilon_budget": lifetime.epsilon_budget,
                     "delta_budget": lifetime.delta_budget,
                     "epsilon_spent_after": lifetime_epsilon(lifetime, ledger.rdp()),
                     "rho_reserved": reservation,
                     "accounting": "Renyi curves of all releases (a table release of rho is "
                                   "rho*alpha); rho_reserved keeps the zCDP check of table "
                                   "releases sound"},
        "hyper_parameters": dict(hyper),
        "features": plan.encoding.to_dict() | {"names": list(plan.encoding.feature_names)},
        "metrics": dict(metrics) if metrics is not None else None,
        "parameters": {
            "model": p.model, "epsilon": p.epsilon, "delta": p.delta, "holdout": p.holdout,
            "data_source": ("embedded default dataset" if plan.data_source == "embedded"
                            else "operator-supplied file (path and hash not recorded)"),
        },
        "seed_policy": ("INSECURE test mode: operator-supplied seed (not recorded)"
                        if p.seed is not None
                        else "fresh OS entropy for every noise draw; no seed exists"),
        "contract": {"name": plan.contract.name, "version": plan.contract.version,
                     "fingerprint": plan.contract.fingerprint()},
        "code_version": code_version(),
    }


def model_card(manifest: Mapping[str, Any]) -> str:
    """Markdown model card: guarantee, ε curve, ledger, held-out metrics per group."""
    g = manifest["guarantee"]
    lines = [f"# Model card: {manifest['dataset']} {manifest['version']} ({manifest['model']})",
             "", f"Differential privacy: ({g['epsilon']:g}, {g['delta']:g})-DP; spent "
             f"epsilon = {g['spent']['epsilon']:.4g} at delta = {g['delta']:g} "
             f"({g['spent'].get('conversion', '')} conversion). Neighbours: "
             f"{g['spent']['neighbours']}.", "", "## Epsilon curve", "",
             "| delta | epsilon |", "|---|---|"]
    lines += [f"| {r['delta']:g} | {r['epsilon']:.4g} |" for r in g["epsilon_curve"]]
    lines += ["", "## Ledger", "", "| step | mechanism | epsilon | sigma | q | steps |",
              "|---|---|---|---|---|---|"]
    for e in manifest["ledger"]:
        lines.append(f"| {e['name']} | {e['mechanism']} | {e.get('epsilon') or ''} | "
                     f"{e.get('sigma') or ''} | {e.get('sample_rate') or ''} | "
                     f"{e.get('steps') or ''} |")
    m = manifest.get("metrics")
    lines += ["", "## Held-out metrics", ""]
    if m is None:
        lines.append("None published (holdout = 0).")
    else:
        lines += [f"**{m['privacy']}.**", "",
                  f"Accuracy {m['accuracy']:.4f}; majority-class baseline "
                  f"{m['majority_baseline_accuracy']:.4f}; positive-prediction rate "
                  f"{m['positive_prediction_rate']:.4f}; risk difference "
                  f"{m['risk_difference']:.4f} (fair if <= {m['fair_threshold']}).", "",
                  "| group | accuracy | positive-prediction rate | TPR |", "|---|---|---|---|"]
        for label, row in m["per_group"].items():
            if row is None:
                lines.append(f"| {label} | (no held-out rows) | | |")
                continue
            tpr = "" if row["true_positive_rate"] is None else f"{row['true_positive_rate']:.4f}"
            lines.append(f"| {label} | {row['accuracy']:.4f} | "
                         f"{row['positive_prediction_rate']:.4f} | {tpr} |")
    f = manifest["features"]
    lines += ["", "## Inputs", "", f"Outcome {f['outcome']!r} (1 = {f['positive']!r}); groups "
              f"from {f['group']!r} (not an input). Encoding: {f['encoding']}; "
              f"{len(f['names'])} inputs.", ""]
    return "\n".join(lines)


def publish_model(plan: TrainPlan, *, ledger: PrivacyLedger, weights: Mapping[str, np.ndarray],
                  hyper: Mapping[str, Any], metrics: Mapping[str, Any] | None,
                  run_id: str | None = None) -> Path:
    """Write the release folder and commit it with the store's publication protocol
    (intent, rename, ``publish`` entry in the registry's lifetime ledger, catalog).

    The ``publish`` entry replaces the run's reservation (``run_id``) by the exact ρ.
    """
    from privfair.store.publication import commit_publication, recover_store, write_intent

    store = plan.store
    contract = plan.contract
    folder = store / contract.name
    folder.mkdir(parents=True, exist_ok=True)
    curve = ledger.rdp()
    with locked(folder):
        recover_store(store, contract.name, locked_already=True)
        lifetime = read_lifetime_ledger(store, contract)
        # This run's own reservation is replaced, not added to.
        lifetime.pending = [r for r in lifetime.pending if r.get("run_id") != run_id]
        after = lifetime_epsilon(lifetime, curve)
        if after > lifetime.epsilon_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"lifetime budget of dataset {contract.name!r} exceeded: with this model "
                f"release it would reach epsilon={after:.4g} > {lifetime.epsilon_budget:g}")
        reservation = rho_reservation(lifetime, curve)
        lifetime.check(rho=reservation)
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        intent = write_intent(folder, version, run_id=run_id, staged=tmp)
        try:
            tmp.mkdir(mode=0o700)
            np.savez(tmp / "weights.npz", **{k: np.asarray(v) for k, v in weights.items()})
            shutil.copyfile(plan.contract_path, tmp / "contract.yaml")
            manifest = build_model_manifest(plan, version=version, ledger=ledger, hyper=hyper,
                                            metrics=metrics, lifetime=lifetime,
                                            reservation=reservation)
            (tmp / "model_card.md").write_text(model_card(manifest), encoding="utf-8")
            manifest["files"] = {name: sha256_file(tmp / name) for name in
                                 ("weights.npz", "contract.yaml", "model_card.md")}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            intent.unlink(missing_ok=True)
            raise
        p = plan.params
        method = f"model:{p.model}"
        release = {"version": version, "published_at": manifest["published_at"],
                   "epsilon": p.epsilon, "delta": p.delta, "rho": reservation,
                   "method": method, "kind": "model", "run_id": run_id,
                   "contract_fingerprint": contract.fingerprint(),
                   "rdp": [float(v) for v in curve]}
        row = [contract.name, version, str(final.relative_to(store)), manifest["published_at"],
               p.epsilon, p.delta, reservation, method, 0, contract.fingerprint(),
               bool(metrics and metrics["fair"]), None]
        commit_publication(store=store, contract_budget=(contract.budget.epsilon,
                                                         contract.budget.delta),
                           ident=dataset_id(contract), dataset=contract.name, version=version,
                           staged=tmp, final=final, intent=intent, release=release,
                           catalog_row=row)
    log.info("published model release %s", final)
    return final


# --- predict --------------------------------------------------------------------------------


def predict(release: str | Path, data: str | Path | pd.DataFrame) -> pd.DataFrame:
    """Scores and labels of a model release for new rows (public post-processing).

    Returns a frame with ``score`` (probability of the positive label) and ``prediction``
    (the outcome label).
    """
    folder = Path(release)
    manifest_file = folder / "manifest.json"
    if not manifest_file.is_file():
        raise ModelReleaseError(f"release {folder}: no manifest.json; expected a model release")
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("kind") != "model":
        raise ModelReleaseError(f"release {folder} is not a model release")
    for name, digest in manifest.get("files", {}).items():
        if sha256_file(folder / name) != digest:
            raise ModelReleaseError(f"release {folder}: {name} does not match its manifest hash")
    contract = load_contract(folder / "contract.yaml")
    encoding = FeatureEncoding.from_dict(manifest["features"])
    frame = data if isinstance(data, pd.DataFrame) else (
        pd.read_parquet(data) if str(data).lower().endswith((".parquet", ".pq"))
        else pd.read_csv(data))
    with np.load(folder / "weights.npz", allow_pickle=False) as npz:
        weights = {k: npz[k] for k in npz.files}
    logits = decision_function(weights, encoding.transform(frame, contract))
    labels = contract.labels(encoding.outcome)
    negative = next(lab for lab in labels if lab != encoding.positive)
    return pd.DataFrame({
        "score": 1 / (1 + np.exp(-np.clip(logits, -500, 500))),
        "prediction": np.where(logits > 0, encoding.positive, negative),
    }, index=frame.index)
