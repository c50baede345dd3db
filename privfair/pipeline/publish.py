"""Atomic publication of a release folder into the store, charging the lifetime ledger.
"""

from __future__ import annotations

import contextlib
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
    catalog,
    ledger_path,
    locked,
    next_version,
    read_lifetime_ledger,
)

log = logging.getLogger(__name__)


def publish(plan: ReleasePlan, *, ledger: FileRef, one_way: FileRef | None,
            structure: FileRef | None, model: FileRef | None, synthetic: FileRef,
            input_validation: Mapping[str, Any], output_validation: Mapping[str, Any],
            fairness_transform: Mapping[str, Any] | None = None,
            orchestrator: Mapping[str, Any] | None = None,
            generative: Mapping[str, Any] | None = None) -> Path:
    """Write the release folder atomically and charge the lifetime ledger.

    Under a per-dataset lock: re-check the lifetime budget, build everything in a temporary
    folder next to the target, write the charged lifetime ledger, add the catalog row, then
    ``os.rename`` the folder into place. Any exception undoes the ledger and the catalog row
    and removes the temporary folder, so a failed publication leaves no trace. (A hard crash
    between the ledger write and the rename can only over-count the budget, never under-count.)
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
    labelled = decode_codes(read_codes(synthetic), contract)

    store = Path(plan.store)
    folder = store / plan.dataset
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):
        lifetime = read_lifetime_ledger(store, contract)
        lifetime.check(rho=plan.rho)
        version = next_version(folder, lifetime)
        final = folder / version
        tmp = folder / f".tmp-{version}-{uuid.uuid4().hex[:8]}"
        lifetime_file = ledger_path(store, plan.dataset)
        old_ledger = lifetime_file.read_bytes() if lifetime_file.is_file() else None
        catalog_added = False
        try:
            tmp.mkdir()
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
            manifest["files"] = {name: sha256_file(tmp / name)
                                 for name in ("synthetic.parquet", "report.html")}
            (tmp / "manifest.json").write_bytes(json_bytes(manifest))

            lifetime.releases.append({
                "version": version, "published_at": manifest["published_at"],
                "epsilon": plan.epsilon, "delta": plan.delta, "rho": plan.rho,
                "method": plan.method, "contract_fingerprint": plan.contract_fingerprint,
            })
            atomic_write(lifetime_file, json_bytes(lifetime.to_dict()))
            with catalog(store) as con:
                con.execute(
                    f"INSERT INTO releases ({', '.join(CATALOG_COLUMNS)}) VALUES "
                    f"({', '.join('?' * len(CATALOG_COLUMNS))})",
                    [plan.dataset, version, str(final.relative_to(store)),
                     manifest["published_at"], plan.epsilon, plan.delta, plan.rho,
                     plan.method, len(labelled), plan.contract_fingerprint,
                     fairness_passed,
                     json.dumps(dict(orchestrator)) if orchestrator else None])
            catalog_added = True
            os.rename(tmp, final)  # the commit point
        except BaseException:
            if catalog_added:
                with contextlib.suppress(Exception), catalog(store) as con:
                    con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?",
                                [plan.dataset, version])
            if old_ledger is None:
                with contextlib.suppress(FileNotFoundError):
                    lifetime_file.unlink()
            else:
                atomic_write(lifetime_file, old_ledger)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.info("published %s", final)
    return final
