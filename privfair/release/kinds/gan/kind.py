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

import math
from collections.abc import Mapping
from typing import Any

from privfair.contracts.schema import Contract
from privfair.core.domain import Domain
from privfair.core.errors import FairnessViolationError
from privfair.generative import GAN_METHODS
from privfair.release.kinds.gan.resources import check_gan_resources
from privfair.release.kinds.gan.stages import (
    MIN_PARITY_ROWS,
    check_gan_request,
    curve_limit,
    declared_curve,
    independence_instead,
    load_causal_graph,
    parity_check,
    sample_gan,
    small_n_line,
    train_gan,
)
from privfair.release.protocol import Cost, RunContext, Stage, State
from privfair.release.seeds import stage_rng
from privfair.release.tabular.plan import ReleaseParams, ReleasePlan
from privfair.release.tabular.post_noise import read_codes
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
    """A fair GAN's guarantee is checked on the table it publishes, never assumed: after the
    fairness transform, so that TOT (or ``--resume RUN --fairness tot --eta ETA`` on a run
    this check stopped) can still remedy it (issue 42.2). The check measured at sampling is
    measured again on the transformed rows: the release has one verdict."""
    plan = current_plan(context, state)
    generative = dict(state["generative"])
    check = generative["fairness_check"]
    if (state.get("fairness_transform") or {}).get("applied"):
        codes = read_codes(state["synthetic"]).astype("int64")
        check = parity_check(
            {a: codes[a].to_numpy() for a in codes.columns}, plan.contract.domain(),
            protected=check["protected"], outcome=check["outcome"],
            checked=tuple(check["checked"]),
            reported=tuple(check["data_fairness"]["per_protected"]),
            constrained=tuple(check["constrained"]),
            rng=stage_rng(context.seed, "tot"),
            measured_on="the released rows, after the fairness transform (TOT)")
        before = generative["fairness_check"]
        check["before_transform"] = {"passed": before["passed"],
                                     "violations": before["violations"]}
        generative["fairness_check"] = check
    update: dict[str, Any] = {}
    if plan.method in PARITY_METHODS and not check["passed"] and not plan.allow_unfair:
        # the run publishes the independence model of its own noisy marginals, which meets
        # the parity the method promises, rather than charge and publish nothing
        instead = independence_instead(
            generative, plan.contract, context.workspace.artefacts,
            n_rows=len(read_codes(state["synthetic"])), seed=context.seed)
        if instead is not None:
            update["synthetic"], generative = instead
            check = generative["fairness_check"]
    if plan.method in PARITY_METHODS and not check["passed"] and not plan.allow_unfair:
        raise FairnessViolationError(
            f"method {plan.method!r} generated a table that fails its own fairness check ("
            + "; ".join(f"{v['protected']}: {v['why']}" for v in check["violations"])
            + f"; {check['criterion']}); nothing is published (--fairness tot --eta ETA on "
            "--resume applies TOT before this check; --allow-unfair publishes it, recorded "
            "in the manifest)")
    return {"generative": generative, **update}


def versus_line(manifest: Mapping[str, Any]) -> str:
    """What the terminal says of the comparison with independence (issue 42.1)."""
    versus = manifest.get("versus_independence") or {}
    if not versus.get("compared"):
        return (f"\npublished the INDEPENDENCE model: {versus.get('reason')}"
                if versus.get("published") == "independence" else "")
    gan, independent = (versus["scores"][k]["two_way"] for k in ("gan", "independence"))
    if versus["published"] == "independence":
        return ("\npublished the INDEPENDENCE model of the run's noisy marginals, not the "
                "GAN's table: "
                + (versus["why"] if versus.get("why") else
                   f"2-way TVD to the DP pair marginals {independent:.3f} against the GAN's "
                   f"{gan:.3f}"))
    return (f"\nthe GAN's table beats independence on the run's DP pair marginals (2-way "
            f"TVD {gan:.3f} against {independent:.3f})")


def _constrained_names(plan: ReleasePlan) -> tuple[str, ...]:
    from privfair.release.kinds.gan.stages import constrained_attributes

    return constrained_attributes(plan.contract, plan.method)


class GanKind(SyntheticTableKind):
    """A DP synthetic table from a GAN trained with DP-SGD (``--method dpgan|fairgan|...``)."""

    name = "gan"
    methods = GAN_METHODS
    description = "publish a DP synthetic table from a GAN (dpgan, FairGAN, FairGAN+, CFGAN)"

    def outcome(self, manifest: Mapping[str, Any]) -> str:
        check = manifest["fairness_check"]
        rows = (manifest.get("sampling") or {}).get("n_rows")
        claim = ("" if manifest["method"]["name"] in PARITY_METHODS
                 else " (not claimed by this method)")
        unfair = "; --allow-unfair" if manifest["parameters"].get("allow_unfair") else ""
        per = check["data_fairness"].get("per_protected") or {}
        judged = {a: p for a, p in per.items() if p.get("checked", p.get("constrained"))}
        gaps = ", ".join(f"{a} {abs(float(p['rd'])):.3f}" if math.isfinite(float(p["rd"]))
                         else f"{a} not judged (no two groups of {MIN_PARITY_ROWS} rows)"
                         for a, p in judged.items()) or (
            f"{abs(float(check['data_fairness']['rd'])):.3f}")
        return (f"built {manifest['method']['name']}: {rows} rows; statistical parity "
                f"|RD(D)| = {gaps} {'PASS' if check['passed'] else 'FAIL'}"
                f"{claim}{unfair}{versus_line(manifest)}")

    def summary(self, plan: ReleasePlan) -> str:
        from privfair.contracts.tot_settings import constrained_protected

        checked = constrained_protected(plan.contract)[0]
        constrained = ("none (dpgan has no fairness term)" if plan.method == "dpgan"
                       else ", ".join(_constrained_names(plan)))
        return (super().summary(plan) + "\n" + small_n_line(plan)
                + "\nthe GAN's table is compared with the independence model of the run's own "
                "noisy marginals (same charged measurements, no further cost); the better "
                "of the two is published and named"
                + f"\nparity checked for {', '.join(checked)} on the rows to be published "
                f"(after --fairness tot when given); constrained in training: {constrained}")

    def cost(self, plan: ReleasePlan) -> Cost:
        """The GAN's declared Rényi curve
        (:func:`~privfair.release.kinds.gan.stages.declared_curve`)."""
        return Cost(epsilon=plan.epsilon, delta=plan.delta, rdp=declared_curve(plan))

    def stages(self, plan: ReleasePlan) -> list[Stage]:
        return [*self.reading_stages(plan),
                Stage("train GAN (DP-SGD)", train_gan_stage, private=True, noise=True, at=0.2),
                Stage("sample", sample_gan_stage, at=0.8),
                Stage("fairness transform", fairness_stage, at=0.81),
                Stage("fairness check", gan_fairness_stage, at=0.83),
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
