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

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfair.evaluation.evaluate import NOT_PRIVATE, evaluate_synthetic, privileged_codes
from privfair.evaluation.grid import MARKER, check_out, new_run_folder, timestamp

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
    if not manifest_file.is_file() or not table.exists():
        raise ValueError(f"--release {folder}: expected a release folder with manifest.json "
                         "and synthetic.parquet")
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
    return {"dataset": manifest["dataset"], "version": manifest["version"],
            "epsilon": manifest["guarantee"]["epsilon"], "method": manifest["method"]["name"],
            "fairness_transform": manifest.get("fairness_transform", {}).get("name"),
            "synthetic_rows": len(synth_codes), "classifier_train_rows": (
                len(synth_codes) if max_train_rows is None
                else min(len(synth_codes), max_train_rows)), **record}


def write_release_score(record: dict[str, Any], out: str | Path) -> Path:
    """``<out>/<stamp>-<dataset>-<version>/``: score.json, results.parquet and the marker."""
    stamp = f"{timestamp()}-{record['dataset']}-{record['version']}"
    folder = new_run_folder(check_out(out), stamp)
    (folder / MARKER).write_text(NOT_PRIVATE + "\n")
    (folder / "score.json").write_text(json.dumps(
        {"not_privacy_protected": NOT_PRIVATE, **record}, indent=2, default=float) + "\n")
    pd.DataFrame([record]).to_parquet(folder / "results.parquet", index=False)
    return folder
