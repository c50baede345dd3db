"""The ``gan`` release kind: a DP synthetic table from a GAN trained with DP-SGD
(``privfair release --method dpgan|fairgan|fairgan-plus|cfgan``).

Reading, post-processing and publication are the synthetic-table pipeline it shares with the
table kind (:mod:`privfair.release.tabular.stages`); this module adds the GAN's own
data-free checks (:meth:`GanKind.method_check`), its declared Rényi curve and its stages:
train on DP-SGD, sample the generator, check the fairness it promises
(:mod:`privfair.release.kinds.gan.stages`). The stage functions are called by the names
imported here, so a test injects a fault into one stage by patching this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privfair.contracts.schema import Contract
from privfair.core.domain import Domain
from privfair.core.errors import FairnessViolationError
from privfair.generative import GAN_METHODS
from privfair.release.kinds.gan.resources import check_gan_resources
from privfair.release.kinds.gan.stages import (
    check_gan_request,
    curve_limit,
    declared_curve,
    load_causal_graph,
    sample_gan,
    train_gan,
)
from privfair.release.protocol import Cost, RunContext, Stage, State
from privfair.release.tabular.plan import ReleaseParams, ReleasePlan
from privfair.release.tabular.publish import PARITY_METHODS
from privfair.release.tabular.stages import (
    SyntheticTableKind,
    current_plan,
    fairness_stage,
    validate_stage,
)


def train_gan_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    # The lifetime holds the run's declared Rényi curve, its charge: σ keeps the run's curve
    # at or below it at every order, whatever the noisy count (the proof: stages' docstring).
    charge = context.charge
    limit = curve_limit(charge.rdp) if charge.rdp is not None else None
    generator, ledger = train_gan(
        state["codes"], plan.contract, state["ledger"], context.workspace.artefacts,
        method=plan.method, causal_graph=plan.causal_graph, epochs=plan.gan_epochs,
        group_clipping=plan.group_clipping, seed=context.seed, batch_size=plan.batch_size,
        discrete=plan.discrete_noise, limit=limit,
        progress=lambda epoch, epochs: context.progress("train GAN (DP-SGD)",
                                                        0.2 + 0.6 * epoch / epochs))
    return {"generator": generator, "ledger": ledger}


def sample_gan_stage(context: RunContext, state: State) -> dict[str, Any]:
    plan = current_plan(context, state)
    synthetic, generative = sample_gan(
        state["generator"], plan.contract, context.workspace.artefacts, n_rows=plan.n_rows,
        delta=plan.delta, seed=context.seed, release_classifier=plan.release_classifier)
    return {"synthetic": synthetic, "generative": generative}


def gan_fairness_stage(context: RunContext, state: State) -> dict[str, Any]:
    """A fair GAN's guarantee is checked on the table it generated, never assumed."""
    plan = current_plan(context, state)
    check = state["generative"]["fairness_check"]
    if plan.method in PARITY_METHODS and not check["passed"] and not plan.allow_unfair:
        fairness = check["data_fairness"]
        gaps = [f"{abs(float(fairness.get('rd'))):.3f} for {check.get('protected')}"] + [
            f"{abs(float(p['rd'])):.3f} for {a}" for a, p in
            (fairness.get("per_protected") or {}).items()
            if a != check.get("protected") and p.get("constrained")]
        raise FairnessViolationError(
            f"method {plan.method!r} generated a table that fails its own fairness check "
            f"(|RD(D)| = {', '.join(gaps)}; {check['criterion']}); nothing is published "
            "(--allow-unfair publishes it, recorded in the manifest)")
    return {}


class GanKind(SyntheticTableKind):
    """A DP synthetic table from a GAN trained with DP-SGD (``--method dpgan|fairgan|...``)."""

    name = "gan"
    methods = GAN_METHODS
    description = "publish a DP synthetic table from a GAN (dpgan, FairGAN, FairGAN+, CFGAN)"

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        check = manifest["fairness_check"]
        rd = check["data_fairness"]["rd"]  # every GAN manifest records its table's RD
        rows = (manifest.get("sampling") or {}).get("n_rows")
        claim = ("" if manifest["method"]["name"] in PARITY_METHODS
                 else " (not claimed by this method)")
        unfair = "; --allow-unfair" if manifest["parameters"].get("allow_unfair") else ""
        return (f"built {manifest['method']['name']}: {rows} rows; statistical parity "
                f"|RD(D)| = {abs(float(rd)):.3f} {'PASS' if check['passed'] else 'FAIL'}"
                f"{claim}{unfair}")

    def cost(self, plan: ReleasePlan) -> Cost:
        """The GAN's declared Rényi curve
        (:func:`~privfair.release.kinds.gan.stages.declared_curve`)."""
        return Cost(epsilon=plan.epsilon, delta=plan.delta, rdp=declared_curve(plan))

    def stages(self, plan: ReleasePlan) -> list[Stage]:
        return [*self.reading_stages(plan),
                Stage("train GAN (DP-SGD)", train_gan_stage, private=True, noise=True, at=0.2),
                Stage("sample", sample_gan_stage, at=0.8),
                Stage("fairness check", gan_fairness_stage, at=0.81),
                Stage("fairness transform", fairness_stage, at=0.82),
                Stage("validate output", validate_stage, at=0.85)]

    def method_check(self, params: ReleaseParams, contract: Contract,
                     domain: Domain) -> Mapping[str, Any]:
        """Roles, the FairGAN+ classifier's encoding and the CFGAN causal graph (from a
        publisher's file or the contract), checked against the contract before any read."""
        # what the fit and its sampling need of this machine, before anything is reserved
        roles = [*contract.roles().protected, *contract.roles().outcome]
        check_gan_resources(sizes={a: domain.size(a) for a in domain}, method=params.method,
                            heads=max((domain.size(a) for a in roles if a in domain),
                                      default=None))
        declared = (load_causal_graph(params.causal_graph) if params.causal_graph
                    else contract.causal_graph.as_mapping() if contract.causal_graph
                    else None)
        causal_graph = check_gan_request(contract, domain, params.method, declared,
                                         release_classifier=params.release_classifier)
        if causal_graph is not None:
            causal_graph["source"] = (f"file {params.causal_graph} (--causal-graph)"
                                      if params.causal_graph else "the contract's causal_graph")
        return {"causal_graph": causal_graph}


GAN = GanKind()
