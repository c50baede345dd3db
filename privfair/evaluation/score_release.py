"""Score one published release against the real table: utility, fairness, TSTR.

``privfair evaluate --release DIR --data FILE``. The release folder is public; the real table
is not, so the scores are **not privacy-protected**: they are written to their own folder
(never inside a release store) with the not-private marker, and nothing is added to the
release, the ledger or the catalog.

The synthetic table was made from the whole real table, so the classifiers are trained on the
synthetic rows and tested on every real row (train on synthetic, test on real), and utility
compares the synthetic marginals with the real table's.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.evaluation.evaluate import NOT_PRIVATE, evaluate_synthetic, privileged_codes
from privfair.evaluation.grid import MARKER, check_out, new_run_folder, timestamp
from privfair.evaluation.per_group import per_group_figures, per_group_svg

__all__ = ["release_contract", "score_release", "write_release_score"]


def release_contract(manifest: dict[str, Any], contract_path: str | Path | None, *,
                     folder: str | Path | None = None) -> Any:
    """The contract a release was made with, bound to its released (DP) domains.

    ``contract_path`` defaults to the ``contract.yaml`` the release folder carries, else to
    the packaged contract of the release's dataset. Its fingerprint must match the
    manifest's, so the real table is encoded exactly as the release declared.
    """
    from privfair.contracts.datasets import contract_path as packaged
    from privfair.contracts.schema import load_contract

    name = manifest["contract"]["name"]
    if contract_path is None and folder is not None and (Path(folder) / "contract.yaml").is_file():
        contract_path = Path(folder) / "contract.yaml"
    if contract_path is None:
        try:
            contract_path = packaged(name)
        except Exception:
            raise ValueError(f"release of {name!r}: pass --contract, the contract it was "
                             "made with") from None
    contract = load_contract(contract_path)
    if contract.fingerprint() != manifest["contract"]["fingerprint"]:
        raise ValueError(f"contract {contract_path} is not the one release "
                         f"{manifest['dataset']} {manifest['version']} was made with "
                         "(fingerprints differ)")
    labels = manifest["domain"]["labels"]
    released = {}
    for spec in contract.columns:
        if spec.dp_bins is not None:
            raise ValueError(f"column {spec.name!r}: dp_bins edges are not in the manifest; "
                             "scoring such a release is not supported yet")
        if spec.type == "text":
            bucket = spec.open_bucket()
            released[spec.name] = [v for v in labels[spec.name] if v != bucket]
    return contract.with_released_categories(released) if released else contract


def score_release(release_dir: str | Path, data_path: str | Path, *,
                  contract_path: str | Path | None = None,
                  classifiers: Sequence[str] = ("logistic",), seed: int = 0,
                  privileged: Mapping[str, str] | None = None,
                  max_train_rows: int | None = 50_000) -> dict[str, Any]:
    """Utility and fairness of a published release measured on the real table (one record).

    The classifiers train on at most ``max_train_rows`` synthetic rows (a seeded sample; a
    census-sized release otherwise spends minutes in one logistic fit) and are tested on
    every real row. ``tvd3`` is left out for more than 16 columns (C(41, 3) = 10,660
    three-way marginals take minutes).
    """
    from privfair.contracts.encoding import iter_discretized_batches

    folder = Path(release_dir)
    manifest_file = folder / "manifest.json"
    # One file, or a partitioned output's synthetic/part-*.parquet (issue 23.1).
    table = folder / "synthetic.parquet"
    if not table.is_file() and (folder / "synthetic").is_dir():
        table = folder / "synthetic"
    if manifest_file.is_file() and json.loads(manifest_file.read_text()).get("kind") == "model":
        return score_model_release(folder, data_path)
    if not manifest_file.is_file() or not table.exists():
        raise ValueError(f"--release {folder}: expected a release folder: a table release "
                         "(manifest.json and synthetic.parquet) or a model release")
    manifest = json.loads(manifest_file.read_text())
    contract = release_contract(manifest, contract_path, folder=folder)
    roles = contract.roles()
    if not roles.protected or len(roles.outcome) != 1:
        raise ValueError(f"contract {contract.name!r}: scoring needs protected columns and one "
                         "outcome under roles")
    groups = privileged_codes(contract, privileged)
    names = {c["released_as"]: c["name"] for c in manifest.get("columns", [])}
    synthetic = pd.read_parquet(table).rename(columns=names)
    synth_codes = pd.DataFrame({
        c: pd.Categorical(synthetic[c].astype(str), categories=contract.labels(c)).codes
        .astype(np.int64) for c in contract.column_names})
    if (synth_codes < 0).any().any():
        raise ValueError(f"--release {folder}: the synthetic table holds labels outside the "
                         "contract's domain")
    batches = list(iter_discretized_batches(data_path, contract))
    real = pd.DataFrame({c: np.concatenate([b[c] for b in batches])
                         for c in contract.column_names})
    record = evaluate_synthetic(synth_codes, real_train=real, real_test=real,
                                domain=contract.domain(), roles=roles, privileged=groups,
                                classifiers=classifiers, seed=seed,
                                max_train_rows=max_train_rows,
                                tvd_orders=(1, 2, 3) if len(contract.column_names) <= 16
                                else (1, 2))
    # Utility per protected group (issue 34.3): small groups are where DP noise hurts most.
    record["per_group"] = per_group_figures(
        synth_codes, real_train=real, real_test=real, domain=contract.domain(), roles=roles,
        labels={c: contract.labels(c) for c in roles.protected},
        classifier=classifiers[0] if classifiers else "logistic", seed=seed,
        max_train_rows=max_train_rows)
    # The release was made from the whole table, so no real row is held out: the real-trained
    # reference is scored in-sample (an optimistic reference), and says so.
    record["per_group"]["real_model"] = "trained and tested on the whole real table (in-sample)"
    return {"dataset": manifest["dataset"], "version": manifest["version"],
            "epsilon": manifest["guarantee"]["epsilon"], "method": manifest["method"]["name"],
            "fairness_transform": manifest.get("fairness_transform", {}).get("name"),
            "synthetic_rows": len(synth_codes), "classifier_train_rows": (
                len(synth_codes) if max_train_rows is None
                else min(len(synth_codes), max_train_rows)), **record}


def score_model_release(folder: Path, data_path: str | Path) -> dict[str, Any]:
    """A model release scored on the real table (issue 42.7): its predictions' accuracy
    against always predicting the real majority class, whether it predicts one class only,
    and each protected attribute's largest gap in the positive-prediction rate over its
    groups, beside what its card claims (the DP held-out figures)."""
    from privfair.contracts.schema import load_contract
    from privfair.release.kinds.model.predict import predict

    manifest = json.loads((folder / "manifest.json").read_text())
    contract = load_contract(folder / "contract.yaml")
    path = str(data_path)
    real = (pd.read_parquet(data_path) if path.lower().endswith((".parquet", ".pq")) or
            Path(path).is_dir() else pd.read_csv(data_path))
    scored = predict(folder, real)
    features = manifest["features"]
    positive = str(features["positive"])
    truth = (real[features["outcome"]].astype(str) == positive).to_numpy()
    predicted = (scored["prediction"].astype(str) == positive).to_numpy()
    accuracy = float((truth == predicted).mean())
    majority = float(max(truth.mean(), 1 - truth.mean()))
    record: dict[str, Any] = {
        "dataset": manifest["dataset"], "version": manifest["version"],
        "epsilon": manifest["guarantee"]["epsilon"], "method": f"model {manifest['model']}",
        "kind": "model", "real_rows": len(real),
        "model_n_train": "the release's own DP training",
        "model_accuracy": accuracy, "model_baseline_accuracy": majority,
        "model_positive_rate": float(predicted.mean()),
        "model_predicts_one_class": bool(predicted.all() or not predicted.any())}
    for attribute in contract.roles().protected:
        groups = real[attribute].astype(str).to_numpy()
        rates = [float(predicted[groups == g].mean()) for g in np.unique(groups)]
        record[f"model_rd_{attribute}"] = max(rates) - min(rates) if len(rates) > 1 else 0.0
    metrics = manifest.get("metrics") or {}
    record.update({"card_accuracy": metrics.get("accuracy"),
                   "card_beats_majority_beyond_noise": metrics.get("beats_majority_beyond_noise"),
                   "card_fair": metrics.get("fair"), "card_trivial": manifest.get("trivial")})
    return record


def write_release_score(record: dict[str, Any], out: str | Path) -> Path:
    """``<out>/<stamp>-<dataset>-<version>/``: score.json, report.html (the same scores, for a
    person), results.parquet and the marker."""
    stamp = f"{timestamp()}-{record['dataset']}-{record['version']}"
    folder = new_run_folder(check_out(out), stamp)
    (folder / MARKER).write_text(NOT_PRIVATE + "\n")
    (folder / "score.json").write_text(json.dumps(
        {"not_privacy_protected": NOT_PRIVATE, **record}, indent=2, default=float) + "\n")
    flat = {k: v for k, v in record.items() if k != "per_group"}  # nested: score.json only
    pd.DataFrame([flat]).to_parquet(folder / "results.parquet", index=False)
    (folder / "report.html").write_text(score_report(record), encoding="utf-8")
    return folder


#: Groups of a score record's keys, in the order the report shows them (issue 35.6).
_SCORE_GROUPS = (
    ("Utility of the synthetic table against the real one", ("tvd1", "tvd2", "tvd3", "acd")),
    ("Fairness of the synthetic table itself", ("data_",)),
    ("Classifiers trained on synthetic rows, tested on real rows", ()),
)


def score_report(record: Mapping[str, Any]) -> str:
    """``report.html`` beside ``score.json``: the release's scores as tables, utility, the
    data's fairness and each classifier (accuracy against the majority baseline and its
    fairness metrics), with the not-private warning at the top."""
    from privfair.reporting.report import CSS, kv_table

    def fmt(v: Any) -> Any:
        return round(float(v), 4) if isinstance(v, float) else v

    about = {k: record.get(k) for k in ("dataset", "version", "method", "epsilon",
                                          "fairness_transform", "synthetic_rows",
                                          "classifier_train_rows")}
    utility = {k: fmt(record[k]) for k in _SCORE_GROUPS[0][1] if k in record}
    data = {k.removeprefix("data_"): fmt(v) for k, v in record.items()
            if k.startswith("data_")}
    classifiers = sorted({k.removesuffix("_n_train") for k in record
                          if k.endswith("_n_train")})
    parts = [f"<h1>Score of release {html.escape(str(record.get('dataset')))} "
             f"{html.escape(str(record.get('version')))}</h1>",
             f"<p class='warn'><b>Not privacy-protected.</b> {html.escape(NOT_PRIVATE)}</p>",
             kv_table(about), f"<h2>{_SCORE_GROUPS[0][0]}</h2>",
             "<p class='note'>Total variation distance between the synthetic and the real "
             "k-way marginals, averaged over column sets (0 = identical; lower is better).</p>",
             kv_table(utility or {"tvd": None})]
    if data:
        parts += [f"<h2>{_SCORE_GROUPS[1][0]}</h2>", kv_table(data)]
    parts.append(f"<h2>{_SCORE_GROUPS[2][0]}</h2>")
    for name in classifiers:
        rows = {k.removeprefix(f"{name}_"): fmt(v) for k, v in record.items()
                if k.startswith(f"{name}_")}
        verdict = ""
        if record.get(f"{name}_accuracy") is not None and \
                record.get(f"{name}_baseline_accuracy") is not None:
            above = record[f"{name}_accuracy"] > record[f"{name}_baseline_accuracy"]
            verdict = ("<p class='note'>" + ("Accuracy above" if above else
                                               "Accuracy NOT above")
                       + " the majority-class baseline on the real rows.</p>")
        parts += [f"<h3>{html.escape(name)}</h3>", verdict, kv_table(rows)]
    if record.get("per_group"):
        parts += ["<h2>Utility per protected group</h2>",
                  "<p class='note'>Marginal error of the group's synthetic rows against its "
                  "real rows, and the classifier trained on synthetic rows against the same "
                  "classifier trained on real rows, on the group's real rows. Group sizes are "
                  "buckets; small groups are shown, not hidden.</p>",
                  per_group_svg(record["per_group"])]
    title = f"privfair score {record.get('dataset')} {record.get('version')}"
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>"
            f"{html.escape(title)}</title><style>{CSS}.warn{{background:#fff3cd;"
            f"padding:.5rem}}</style></head><body>{''.join(parts)}</body></html>")
