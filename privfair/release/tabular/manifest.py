"""The release manifest and its summaries (markdown for Prefect artifacts, ledger rows).

Only public settings and post-DP quantities go in; the seed never does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from privfair.contracts.schema import Contract
from privfair.core.accounting import PrivacyLedger
from privfair.release.manifest import data_source, spent_after
from privfair.release.manifest import manifest as common_manifest
from privfair.release.tabular.plan import ReleasePlan
from privfair.reporting.report import public_description
from privfair.store.ledger import LifetimeLedger
from privfair.synth.structure import SelectedStructure
from privfair.synth.synthesizer import (
    AIM_METHODS,
    OneWayModel,
)

log = logging.getLogger(__name__)

FORMAT = "privfair-release/1"


def build_manifest(plan: ReleasePlan, *, version: str, ledger: PrivacyLedger,
                   one_way: OneWayModel | None, structure: SelectedStructure | None,
                   model: Mapping[str, Any] | None, contract: Contract, n_rows: int,
                   input_validation: Mapping[str, Any], output_validation: Mapping[str, Any],
                   lifetime: LifetimeLedger, fairness_transform: Mapping[str, Any] | None = None,
                   orchestrator: Mapping[str, Any] | None = None,
                   generative: Mapping[str, Any] | None = None,
                   charged_rho: float | None = None, kind: str = "table") -> dict[str, Any]:
    """The release manifest: only public settings and post-DP quantities.

    ``charged_rho``: what the lifetime ledger records for a run accounted by its Rényi
    curve (a GAN's DP-SGD); its ledger rows are then shown in that unit (see
    :func:`ledger_in_one_unit`), so they add up to the release's charge.

    A GAN release (``generative``) records its DP-SGD parameters, the accountant's ε, the
    causal graph (CFGAN) and the data-fairness measures of the released table instead of a
    graphical model's structure and estimation.
    """
    if generative is None:
        if one_way is None or structure is None or model is None:
            raise ValueError("a graphical-model release's manifest needs one_way, structure "
                             "and model")
        report = model.get("report") or {}
        method = {
            "compress": plan.method not in AIM_METHODS,
            "compression": one_way.compression.to_dict(),
            "estimation": {"max_iters": plan.max_iters, **report},
            "estimated_total": float(model["total"]),
        }
        if plan.method in AIM_METHODS:  # stated up front, in the plan and here
            method["time_budget_s"] = plan.max_time_s
        structure_record, fairness = structure.to_dict(), structure.fairness.to_dict()
    else:
        method = dict(generative["method"])
        structure_record = dict(generative["structure"])
        fairness = dict(generative["fairness_check"])
    rho_after, epsilon_after = spent_after(plan, lifetime)
    body = {
        "guarantee": {
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "rho": plan.rho,
            "spent": ledger.guarantee(),
        },
        "ledger": ledger_in_one_unit([asdict(e) for e in ledger.entries], charged_rho),
        "lifetime": {
            "epsilon_budget": lifetime.epsilon_budget,
            "delta_budget": lifetime.delta_budget,
            "rho_budget": lifetime.rho_budget,
            "rho_spent_after": rho_after,
            "epsilon_spent_after": epsilon_after,
        },
        "method": {
            "name": plan.method,
            "budget_split": dict(plan.split),
            "discrete_noise": plan.discrete_noise,
            **method,
        },
        "parameters": {
            "epsilon": plan.epsilon, "delta": plan.delta, "method": plan.method,
            "n_rows": plan.n_rows, "sample_mode": plan.sample_mode,
            "discrete_noise": plan.discrete_noise,
            "fairness_transform": plan.fairness_transform,
            "allow_unfair": plan.allow_unfair,
            "data_source": data_source(plan),
        },
        "structure": structure_record,
        "fairness_check": fairness,
        # Both fairness claims, each checked on what was built: the model graph, and the
        # post-processing transform (its re-checked discrimination bound) when one ran.
        "fairness": {"model_graph": fairness,
                     "transform": (fairness_transform or {}).get("fairness_check")},
        "fairness_transform": dict(fairness_transform or {"name": "none", "applied": False}),
        "sampling": {"mode": plan.sample_mode, "n_rows": n_rows},
        # Test mode only: a keyed fingerprint (never the seed) so reuse can be refused.
        "insecure_seed": {"used": plan.seeded, "fingerprint": plan.seed_fingerprint},
        "validation": {"input": dict(input_validation), "output": dict(output_validation)},
        "contract": {"name": contract.name, "version": contract.version,
                     "fingerprint": plan.declared_contract_fingerprint,
                     # differs when the release published DP domains (see the ledger)
                     "resolved_fingerprint": plan.contract_fingerprint,
                     # a draft's review note is for the publisher, not the readers
                     "description": public_description(contract.description) or None},
        # raw name, released name (rename:), label and description of each column
        "columns": contract.column_notes(),
        "domain": {"attributes": list(contract.column_names),
                   "sizes": contract.domain().to_dict(),
                   "labels": {c: contract.labels(c) for c in contract.column_names}},
        "roles": contract.roles().to_dict(),
    }
    return common_manifest(plan, kind=kind, fmt=FORMAT, version=version,
                           orchestrator=orchestrator, body=body)


# --- summaries for the orchestrator (Prefect artifacts) and the CLI -----------------------


def ledger_in_one_unit(entries: list[dict[str, Any]],
                       charged_rho: float | None) -> list[dict[str, Any]]:
    """Ledger rows in the lifetime ledger's unit (issue 25.1).

    A subsampled-Gaussian (DP-SGD) entry's ``rho`` is the bound of its steps without
    subsampling's amplification, far above what the run is charged. When the run is charged
    ``charged_rho`` by its Rényi curve, such a row shows the rest of that charge after the
    zCDP rows (and keeps the unamplified bound as ``rho_unamplified_bound``), so the rows add
    up to the release's charge.
    """
    rdp = [e for e in entries if e.get("mechanism") == "subsampled-gaussian"]
    if not rdp:
        return entries
    if charged_rho is None:
        # Charged by its own Rényi curve (the lifetime composes curves): a subsampled step has
        # no ρ of its own, and its unamplified bound is far above what it costs.
        return [e if e not in rdp else {**e, "rho": None,
                                        "rho_unamplified_bound": float(e["rho"])}
                for e in entries]
    fixed = sum(float(e["rho"]) for e in entries if e not in rdp)
    share = max(float(charged_rho) - fixed, 0.0) / len(rdp)
    return [e if e not in rdp else {**e, "rho": share,
                                    "rho_unamplified_bound": float(e["rho"])}
            for e in entries]


def read_manifest(release_dir: str | Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((Path(release_dir) / "manifest.json").read_text())
    return manifest


def _sig4(x: float | None) -> str:
    return "" if x is None else f"{float(x):.4g}"


def ledger_rows(manifest: Mapping[str, Any]) -> list[dict[str, str]]:
    """The release's ledger as table rows, with a total row (post-DP accounting only).

    Numbers are strings to 4 significant digits so the UI's table keeps every column in view.
    """
    rows = [{"step": e["name"], "mechanism": e["mechanism"], "rho": _sig4(e["rho"]),
             "sigma": _sig4(e.get("sigma")), "epsilon": _sig4(e.get("epsilon")),
             "queries": str(int(e["queries"]))}
            for e in manifest["ledger"]]
    spent = manifest["guarantee"]["spent"]
    rows.append({"step": "total", "mechanism": "zCDP composition", "rho": _sig4(spent["rho"]),
                 "sigma": "", "epsilon": _sig4(spent.get("epsilon")), "queries": str(sum(
                     int(e["queries"]) for e in manifest["ledger"]))})
    return rows


def summary_markdown(manifest: Mapping[str, Any], release_dir: str | Path) -> str:
    """Markdown summary of a release: guarantee, method, structure, fairness, validation."""
    g, m = manifest["guarantee"], manifest["method"]
    fairness, validation = manifest["fairness_check"], manifest["validation"]
    edges = ", ".join(f"`{a}`–`{b}`" for a, b in manifest["structure"]["edges"]) or "none"
    life = manifest["lifetime"]
    verdict = "passed" if fairness["passed"] else "FAILED"
    lines = [
        f"# privfair release `{manifest['dataset']}` {manifest['version']}",
        "",
        f"Folder: `{release_dir}`",
        "",
        "| Item | Value |",
        "|---|---|",
        f"| Guarantee | ({g['epsilon']:g}, {g['delta']:.3g})-DP, ρ = {g['rho']:.4g} zCDP "
        f"(add/remove one row) |",
        # An RDP ledger (DP-SGD) has no ρ; its ε at δ is the spent budget.
        (f"| ρ spent | {g['spent']['rho']:.4g} |" if g["spent"].get("rho") is not None
         else f"| ε spent | {g['spent']['epsilon']:.4g} at δ = {g['delta']:.3g} (RDP) |"),
        (f"| Lifetime ε after this release | {life['epsilon_spent_after']:.4g} of "
         f"{life['epsilon_budget']:g} at δ = {life['delta_budget']:g} (every charge composed) |"
         if "epsilon_spent_after" in life else
         f"| Lifetime ρ after this release | {life['rho_spent_after']:.4g} of "
         f"{life['rho_budget']:.4g} (ε = {life['epsilon_budget']:g}, "
         f"δ = {life['delta_budget']:g}) |"),
        f"| Method | {m['name']} (discrete noise: {m['discrete_noise']}) |",
        f"| Structure | {edges} |",
        f"| Fairness check | {verdict}: {fairness['criterion']} |",
        f"| Fairness transform | {_transform_line(manifest['fairness_transform'])} |",
        f"| Input validation | {'passed' if validation['input'].get('passed') else 'FAILED'} |",
        f"| Output validation | {'passed' if validation['output'].get('passed') else 'FAILED'} |",
        f"| Rows | {manifest['sampling']['n_rows']} ({manifest['sampling']['mode']}) |",
        f"| Contract | {manifest['contract']['name']} {manifest['contract']['version']} "
        f"(`{manifest['contract']['fingerprint'][:16]}`) |",
        f"| Seed policy | {manifest['seed_policy']} |",
        *_run_line(manifest.get("orchestrator")),
        "",
        "Every value above is public accounting or post-DP output; no private count appears.",
    ]
    return "\n".join(lines)


# --- the stage runner (no Prefect) ----------------------------------------------------------


def _run_line(orchestrator: Mapping[str, Any] | None) -> list[str]:
    if not orchestrator:
        return []
    run = orchestrator.get("flow_run_name") or orchestrator.get("flow_run_id")
    link = f"[{run}]({orchestrator['ui_url']})" if orchestrator.get("ui_url") else f"`{run}`"
    return [f"| Flow run | {link} |"]


def _transform_line(record: Mapping[str, Any]) -> str:
    """TOT in one line: η, the discrimination before and after it (both on synthetic rows,
    the map's expected value after) and its cost in TVD of (features, outcome)."""
    if not record.get("applied"):
        return "none"
    parameters = record.get("parameters", {})
    check = record.get("fairness_check")
    checked = (f"; checked: discrimination {check['achieved']:.3g} ≤ η "
               f"({'passed' if check['passed'] else 'FAILED'})" if check else "")
    if check and check.get("before_transform") is not None:
        checked += f", {check['before_transform']:.3g} before; both on synthetic rows"
    cost = (f"; cost: TVD {record['objective_tv']:.3g} of (features, outcome)"
            if record.get("objective_tv") is not None else "")
    return (f"{record['name']} (η = {parameters.get('eta')}, "
            f"{parameters.get('discrimination')}; post-processing, no privacy cost"
            f"{checked}{cost})")
