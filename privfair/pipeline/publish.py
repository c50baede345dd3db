"""Publication of a release folder into the store: a small protocol that recovers from a kill.

Under the dataset's store lock:

1. **intent**: ``<store>/<dataset>/.intent-vN.json`` names the version, the run and the staged
   folder (and, once written, the ledger and catalog records);
2. **files**: everything is written into ``.tmp-vN-…`` (mode 0700);
3. **rename**: the staged folder becomes ``vN``;
4. **ledger**: a ``publish`` entry in the lifetime ledger: *the commit point*;
5. **catalog**: the catalog row, then the store's copy of the ledger;
6. the intent record is removed.

A failure before step 4 removes the folder and the intent (no write is needed, so a full disk
cannot block it); the run's noise stays charged by its reservation. A kill leaves the intent:
:func:`recover_store` (run at the next start, by ``privfair store check --repair`` and before
every publication) rolls it forward if the ledger has the ``publish`` entry and back otherwise.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.core.errors import BudgetExceededError
from privfair.pipeline.artefacts import (
    FileRef,
    atomic_write,
    json_bytes,
    load_ledger,
    load_one_way,
    load_structure,
    model_meta,
    sha256_file,
)
from privfair.pipeline.manifest import build_manifest
from privfair.pipeline.plan import ReleasePlan
from privfair.pipeline.post_noise import decode_codes, read_codes
from privfair.pipeline.store import (
    CATALOG_COLUMNS,
    LifetimeLedger,
    StoreError,
    _fold,
    _read_chain,
    catalog,
    check_seed_unused,
    dataset_id,
    locked,
    next_version,
    read_lifetime_ledger,
    record_published,
    registry_ledger_path,
    write_store_copy,
)

log = logging.getLogger(__name__)


def lifetime_charge(lifetime: Any, curve: Any, *, run_id: str | None) -> dict[str, Any]:
    """The lifetime record of a release known by its Rényi ``curve``: the curve itself, and
    the ρ that leaves later zCDP table releases exactly the room the curve leaves them."""
    from privfair.pipeline.train import rho_reservation

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

    The run's reservation (:func:`privfair.pipeline.store.reserve_run`) becomes its
    ``publish`` entry; a run driven without one is checked against the budget here.
    ``orchestrator`` (public: e.g. the Prefect flow run id and UI link) goes into the manifest
    and the catalog. A GAN release passes ``generative`` (its post-noise record, see
    :func:`privfair.pipeline.gan_stages.sample_gan`) instead of one_way, structure and model.
    """
    from privfair.pipeline.report import build_report

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
            _reached("files")
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

    from privfair.pipeline.train import model_card

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


# --- the protocol ------------------------------------------------------------------------------


def _reached(step: str) -> None:
    """A publication step is about to run (fault-injection tests raise or kill here)."""
    log.debug("publication step: %s", step)


def _intent_path(folder: Path, version: str) -> Path:
    return folder / f".intent-{version}.json"


def write_intent(folder: Path, version: str, **record: Any) -> Path:
    _reached("intent")
    path = _intent_path(folder, version)
    atomic_write(path, json_bytes({"version": version, **{k: str(v) if isinstance(v, Path)
                                                          else v for k, v in record.items()}}))
    return path


def commit_publication(*, store: Path, contract_budget: tuple[float, float], ident: str,
                       dataset: str, version: str, staged: Path, final: Path, intent: Path,
                       release: Mapping[str, Any], catalog_row: list[Any]) -> LifetimeLedger:
    """Steps 3–6 of the protocol, for a fully written ``staged`` folder (any release kind)."""
    write_intent(final.parent, version, run_id=release.get("run_id"), staged=staged,
                 ident=ident, release=dict(release), catalog_row=catalog_row)
    try:
        _reached("rename")
        os.chmod(staged, 0o755)
        os.rename(staged, final)
        _reached("ledger")
        book = record_published(ident=ident, name=dataset, budget=contract_budget,
                                store=store, releases=[dict(release)])
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        intent.unlink(missing_ok=True)
        raise
    # Committed: from here a failure leaves the intent for recovery to roll forward.
    try:
        _reached("catalog")
        _insert_row(store, catalog_row)
        write_store_copy(store, book)
        _reached("done")
    except Exception as exc:
        raise StoreError(f"{final} is published and charged, but the store could not be "
                         f"updated ({exc}); `privfair store check --out {store} --repair` "
                         "completes it") from exc
    intent.unlink(missing_ok=True)
    return book


def _insert_row(store: Path, row: list[Any]) -> None:
    with catalog(store) as con:
        con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?", [row[0], row[1]])
        con.execute(f"INSERT INTO releases ({', '.join(CATALOG_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(CATALOG_COLUMNS))})", row)


def _delete_row(store: Path, dataset: str, version: str) -> None:
    if (store / "catalog.duckdb").is_file():
        with catalog(store) as con:
            con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?",
                        [dataset, version])


def recover_store(store: Path, dataset: str, *, locked_already: bool = False) -> list[str]:
    """Finish or undo the publications a killed run left in ``store/dataset``; returns what
    was done. Staged folders without an intent record (older crashes) are removed."""
    folder = store / dataset
    if not folder.is_dir() or not any(p.name.startswith((".intent-", ".tmp-"))
                                      for p in folder.iterdir()):
        return []
    if not locked_already:
        with locked(folder):
            return recover_store(store, dataset, locked_already=True)
    done: list[str] = []
    for path in sorted(folder.glob(".intent-*.json")):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            record = {"version": path.name[len(".intent-"):-len(".json")]}
        version = str(record["version"])
        final = folder / version
        ident = record.get("ident")
        chain = _read_chain(registry_ledger_path(ident)) if ident else []
        book = _fold(chain, dataset, ident or dataset)
        here = str(store.resolve())
        committed = any(r.get("version") == version and r.get("store") == here
                        for r in book.releases)
        if committed and final.is_dir() and record.get("catalog_row"):
            _insert_row(store, record["catalog_row"])
            write_store_copy(store, book)
            done.append(f"completed the publication of {dataset} {version}")
        else:
            shutil.rmtree(final, ignore_errors=True)
            _delete_row(store, dataset, version)
            done.append(f"rolled back the unfinished publication of {dataset} {version}")
        if record.get("staged"):
            shutil.rmtree(record["staged"], ignore_errors=True)
        path.unlink(missing_ok=True)
    for tmp in sorted(folder.glob(".tmp-*")):
        shutil.rmtree(tmp, ignore_errors=True)
        done.append(f"removed the staged folder {tmp.name}")
    for line in done:
        log.warning("store recovery: %s", line)
    return done
