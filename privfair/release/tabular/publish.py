"""Publication of a table release (and a GAN release's classifier) into the store.

:func:`write_table_release` writes the release folder (synthetic table, manifest, report,
contract); the protocol (:func:`privfair.release.protocol.publish`) commits it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfair.core.errors import BudgetExceededError
from privfair.release.manifest import charged_guarantee
from privfair.release.protocol import Written
from privfair.release.tabular.manifest import build_manifest
from privfair.release.tabular.plan import ReleasePlan
from privfair.release.tabular.post_noise import decoded_synthetic
from privfair.store.artefacts import load_ledger, load_one_way, load_structure, model_meta
from privfair.store.files import json_bytes, sha256_file
from privfair.synth.structure import SelectedStructure
from privfair.synth.synthesizer import FAIR_METHODS, OneWayModel

log = logging.getLogger(__name__)


#: GAN methods that promise statistical parity of the released table (its check is a claim).
PARITY_METHODS = ("fairgan", "fairgan-plus")


def write_table_release(folder: Path, plan: ReleasePlan, state: Mapping[str, Any], *,
                        version: str, lifetime: Any,
                        orchestrator: Mapping[str, Any] | None = None,
                        kind: str = "table",
                        charged_rdp: Sequence[float] | None = None) -> Written:
    """Write a table (or GAN) release into the staged ``folder``: the synthetic table with
    its released column names, the manifest and the HTML report (and, for FairGAN+ with
    ``release_classifier``, the classifier as a model release in ``classifier/``).

    ``state`` holds the run's post-noise artefacts (see :mod:`privfair.release.tabular.stages`).
    ``charged_rdp``: the declared Rényi curve the lifetime was charged (a GAN); the
    manifest's ``guarantee.spent`` states it (:func:`~privfair.release.manifest.
    charged_guarantee`).
    ``orchestrator`` (public: e.g. the Prefect flow run id and UI link) goes into the manifest.
    """
    from privfair.reporting.report import build_report

    contract = plan.contract
    book = load_ledger(state["ledger"])
    # An RDP ledger (DP-SGD) is checked in ε: its ρ is the unamplified bound of its steps.
    if book.uses_rdp:
        # an RDP release ledger is opened with its budget in ε (a GAN's DP-SGD)
        assert book.epsilon_budget is not None
        over = book.epsilon_spent() > book.epsilon_budget * (1 + 1e-9)
    else:
        over = book.spent > plan.rho * (1 + 1e-9)
    if over:  # pragma: no cover - the ledger refuses this itself
        raise BudgetExceededError("the release ledger spent more than the release's budget")
    generative = state.get("generative")
    classifier = None
    one_way_model: OneWayModel | None
    tree: SelectedStructure | None
    meta: dict[str, Any] | None
    if generative is None:
        one_way_model, tree, meta = (load_one_way(state["one_way"]),
                                     load_structure(state["structure"]),
                                     model_meta(state["model"]))
        fairness_passed = bool(tree.fairness.passed)
        fairness_claimed = plan.method in FAIR_METHODS
        transform = state.get("fairness_transform") or {}
        if transform.get("applied") and transform.get("fairness_check"):
            # TOT's bound on the discrimination is the release's claim (issue 35.2)
            fairness_passed = bool(transform["fairness_check"].get("passed"))
            fairness_claimed = True
    else:
        one_way_model = tree = meta = None
        fairness_passed = bool(generative["fairness_check"]["passed"])
        fairness_claimed = plan.method in PARITY_METHODS
        classifier = generative.get("classifier")
        generative = {k: v for k, v in generative.items() if k != "classifier"}
    digests: dict[str, str] = {}
    if isinstance(state["synthetic"], list):  # output "partitioned": synthetic/part-*.parquet
        from privfair.release.tabular.partitioned import manifest_record, part_client, write_parts

        with part_client(plan) as client:
            digests, n_rows, labelled = write_parts(state["synthetic"], contract, folder,
                                                    client=client)
        tables = list(digests)
    else:
        labelled = decoded_synthetic(state["synthetic"], contract)
        # Columns carry their released names (`rename:`); the manifest maps them back.
        # no min/max statistics: on sampled rows (and a single row group up to 1M rows)
        # they prune nothing for a reader, and they cost a quarter of the write
        labelled.rename(columns=contract.released_names()).to_parquet(
            folder / "synthetic.parquet", index=False, write_statistics=False)
        tables, n_rows = ["synthetic.parquet"], len(labelled)
    # DP-SGD (a GAN): the lifetime is charged the run's own Rényi curve (at or below the
    # declared one it reserved; the protocol checks it), not a ρ it does not have.
    # (a GAN whose small-n rule measured one-way marginals instead of DP-SGD has Gaussian
    # entries only: its curve is still checked against the declared one)
    charge = ({"rdp": [float(v) for v in book.rdp()]}
              if book.uses_rdp or generative is not None else {})
    manifest = build_manifest(
        plan, version=version, ledger=book, one_way=one_way_model, structure=tree,
        model=meta, contract=contract, n_rows=n_rows,
        input_validation=state["input_validation"],
        output_validation=state["output_validation"], lifetime=lifetime,
        fairness_transform=state.get("fairness_transform"), orchestrator=orchestrator,
        generative=generative, kind=kind)
    if charged_rdp is not None:  # a GAN, whether DP-SGD ran or its small-n rule did
        manifest["guarantee"]["spent"] = charged_guarantee(book, rdp=charged_rdp,
                                                           delta=plan.delta)
    if tables != ["synthetic.parquet"]:
        manifest["sampling"].update(manifest_record(tables, plan.part_rows),
                                    report_rows=len(labelled))
    # whether the method promises the checked criterion: the report and the catalog say
    # "not claimed" rather than a bare FAIL or yes (issue 35.2)
    manifest["fairness_claimed"] = bool(fairness_claimed)
    if generative is not None and generative.get("versus_independence"):
        # which table was published: the GAN's or independence of its noisy marginals
        manifest["versus_independence"] = generative["versus_independence"]
    labels = {c: contract.labels(c) for c in contract.column_names}
    (folder / "report.html").write_text(build_report(manifest, labelled, labels=labels),
                                        encoding="utf-8")
    shutil.copyfile(plan.contract_path, folder / "contract.yaml")
    names = [*tables, "report.html", "contract.yaml"]
    if classifier is not None:
        names += write_classifier_release(folder / "classifier", classifier,
                                          manifest=manifest, plan=plan)
    return Written(manifest=manifest, files=names, n_rows=n_rows,
                   fairness_passed=fairness_passed, ledger_fields=charge, digests=digests,
                   fairness_claimed=fairness_claimed)


def write_classifier_release(folder: Path, classifier: Mapping[str, Any], *,
                             manifest: dict[str, Any], plan: ReleasePlan) -> list[str]:
    """FairGAN+'s η as a model release inside the table release (``classifier/``).

    Same files and manifest kind as ``privfair train`` (``privfair predict`` reads it); its
    privacy is the table release's, since η saw generated rows only. Returns the written
    files relative to the release folder. Adds ``manifest["classifier"]``.
    """
    import numpy as np

    from privfair.reporting.model_card import model_card

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
