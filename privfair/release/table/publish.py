"""Publication of a table release (and a GAN release's classifier) into the store.

:func:`publish` writes the release folder (synthetic table, manifest, report) and commits it
with the store's publication protocol (:mod:`privfair.store.publication`).
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.core.errors import BudgetExceededError
from privfair.release.table.manifest import build_manifest
from privfair.release.table.plan import ReleasePlan
from privfair.release.table.post_noise import decode_codes, read_codes
from privfair.store import publication
from privfair.store.artefacts import (
    FileRef,
    json_bytes,
    load_ledger,
    load_one_way,
    load_structure,
    model_meta,
    sha256_file,
)
from privfair.store.publication import commit_publication, recover_store, write_intent
from privfair.store.registry import (
    check_seed_unused,
    dataset_id,
    locked,
    next_version,
    read_lifetime_ledger,
)

log = logging.getLogger(__name__)


def lifetime_charge(lifetime: Any, curve: Any, *, run_id: str | None) -> dict[str, Any]:
    """The lifetime record of a release known by its Rényi ``curve``: the curve itself, and
    the ρ that leaves later zCDP table releases exactly the room the curve leaves them."""
    from privfair.release.model.train import rho_reservation

    others = copy.copy(lifetime)
    others.pending = [r for r in lifetime.pending if r.get("run_id") != run_id]
    return {"rdp": [float(v) for v in curve], "rho": rho_reservation(others, curve)}


def publish(plan: ReleasePlan, *, ledger: FileRef, one_way: FileRef | None,
            structure: FileRef | None, model: FileRef | None, synthetic: FileRef,
            input_validation: Mapping[str, Any], output_validation: Mapping[str, Any],
            fairness_transform: Mapping[str, Any] | None = None,
            orchestrator: Mapping[str, Any] | None = None,
            generative: Mapping[str, Any] | None = None) -> Path:
    """Publish the release by the protocol above; returns the release folder.

    The run's reservation (:func:`privfair.store.registry.reserve_run`) becomes its
    ``publish`` entry; a run driven without one is checked against the budget here.
    ``orchestrator`` (public: e.g. the Prefect flow run id and UI link) goes into the manifest
    and the catalog. A GAN release passes ``generative`` (its post-noise record, see
    :func:`privfair.release.gan.stages.sample_gan`) instead of one_way, structure and model.
    """
    from privfair.reporting.report import build_report

    contract = plan.contract
    book = load_ledger(ledger)
    # An RDP ledger (DP-SGD) is checked in ε: its ρ is the unamplified bound of its steps.
    over = (book.epsilon_spent() > book.epsilon_budget * (1 + 1e-9) if book.uses_rdp
            else book.spent > plan.rho * (1 + 1e-9))
    if over:  # pragma: no cover - the ledger refuses this itself
        raise BudgetExceededError("the release ledger spent more than the release's budget")
    if generative is None:
        one_way_model, tree, meta = (load_one_way(one_way), load_structure(structure),
                                     model_meta(model))
        fairness_passed = bool(tree.fairness.passed)
    else:
        one_way_model = tree = meta = None
        fairness_passed = bool(generative["fairness_check"]["passed"])
        classifier = generative.get("classifier")
        generative = {k: v for k, v in generative.items() if k != "classifier"}
    labelled = decode_codes(read_codes(synthetic), contract)

    store = Path(plan.store)
    folder = store / plan.dataset
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        recover_store(store, plan.dataset, locked_already=True)
        lifetime = read_lifetime_ledger(store, contract)
        check_seed_unused(lifetime, getattr(plan, "seed_fingerprint", None), plan.run_id)
        if lifetime.run_state(plan.run_id) is None:  # driven without a reservation
            lifetime.check(rho=plan.rho)
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        intent = write_intent(folder, version, run_id=plan.run_id, staged=tmp)
        try:
            publication._reached("files")
            tmp.mkdir(mode=0o700)
            # Columns carry their released names (`rename:`); the manifest maps them back.
            labelled.rename(columns=contract.released_names()).to_parquet(
                tmp / "synthetic.parquet", index=False)
            manifest = build_manifest(
                plan, version=version, ledger=book, one_way=one_way_model, structure=tree,
                model=meta, contract=contract, n_rows=len(labelled),
                input_validation=input_validation, output_validation=output_validation,
                lifetime=lifetime, fairness_transform=fairness_transform,
                orchestrator=orchestrator, generative=generative)
            labels = {c: contract.labels(c) for c in contract.column_names}
            (tmp / "report.html").write_text(build_report(manifest, labelled, labels=labels),
                                             encoding="utf-8")
            names = ["synthetic.parquet", "report.html"]
            if generative is not None and classifier is not None:
                names += write_classifier_release(tmp / "classifier", classifier,
                                                  manifest=manifest, plan=plan)
            manifest["files"] = {name: sha256_file(tmp / name) for name in names}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            intent.unlink(missing_ok=True)
            raise
        release = {"version": version, "published_at": manifest["published_at"],
                   "run_id": plan.run_id, "epsilon": plan.epsilon, "delta": plan.delta,
                   "rho": plan.rho, "method": plan.method,
                   "contract_fingerprint": plan.contract_fingerprint}
        if book.uses_rdp:  # DP-SGD: compose its Rényi curve, not a ρ it does not have
            release.update(lifetime_charge(lifetime, book.rdp(), run_id=plan.run_id))
        if getattr(plan, "seed_fingerprint", None):
            release["seed_fingerprint"] = plan.seed_fingerprint
        row = [plan.dataset, version, str(final.relative_to(store)), manifest["published_at"],
               plan.epsilon, plan.delta, plan.rho, plan.method, len(labelled),
               plan.contract_fingerprint, fairness_passed,
               json.dumps(dict(orchestrator)) if orchestrator else None]
        commit_publication(store=store, contract_budget=(contract.budget.epsilon,
                                                         contract.budget.delta),
                           ident=dataset_id(contract), dataset=plan.dataset, version=version,
                           staged=tmp, final=final, intent=intent, release=release,
                           catalog_row=row)
    log.info("published %s", final)
    return final


def write_classifier_release(folder: Path, classifier: Mapping[str, Any], *,
                             manifest: dict[str, Any], plan: ReleasePlan) -> list[str]:
    """FairGAN+'s η as a model release inside the table release (``classifier/``).

    Same files and manifest kind as ``privfair train`` (``privfair predict`` reads it); its
    privacy is the table release's, since η saw generated rows only. Returns the written
    files relative to the release folder. Adds ``manifest["classifier"]``.
    """
    import numpy as np

    from privfair.release.model.train import model_card

    folder.mkdir(mode=0o700)
    np.savez(folder / "weights.npz", coef=np.asarray(classifier["coef"], dtype=float))
    shutil.copyfile(plan.contract_path, folder / "contract.yaml")
    guarantee = manifest["guarantee"]
    model_manifest = {
        "format": manifest.get("format"), "kind": "model", "dataset": manifest["dataset"],
        "version": f"{manifest['version']}/classifier", "published_at": manifest["published_at"],
        "model": classifier["model"],
        "guarantee": {"epsilon": guarantee["epsilon"], "delta": guarantee["delta"],
                      "spent": guarantee["spent"], "epsilon_curve": []},
        "privacy": "post-processing of the table release it sits in (η was trained on "
                   "generated rows only); no budget of its own",
        "ledger": manifest["ledger"], "hyper_parameters": {
            "classifier_fairness": classifier["classifier_fairness"]},
        "features": classifier["features"], "metrics": None,
        "contract": manifest["contract"],
    }
    (folder / "model_card.md").write_text(model_card(model_manifest), encoding="utf-8")
    files = ("weights.npz", "contract.yaml", "model_card.md")
    model_manifest["files"] = {name: sha256_file(folder / name) for name in files}
    (folder / "manifest.json").write_bytes(json_bytes(model_manifest))
    manifest["classifier"] = {"folder": "classifier", "model": classifier["model"],
                              "inputs": len(classifier["features"]["names"])}
    return [f"classifier/{name}" for name in (*files, "manifest.json")]
