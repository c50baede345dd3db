"""Serve the release flow from this process: a monthly release of the embedded Adult data and
an ad-hoc deployment whose form the Prefect UI renders from ``ReleaseParams``.

    prefect server start                                   # terminal 1 (UI on :4200)
    export PREFECT_API_URL=http://127.0.0.1:4200/api       # terminal 2
    python deployments/serve.py

Runs then execute in this process; see deployments/README.md.
"""

from __future__ import annotations

from pathlib import Path

from prefect import serve
from prefect.deployments.runner import EntrypointType

from flows.kinds import FLOWS, release
from tasks import ops, registry_blocks

#: Datasets whose one-slot concurrency limits exist from the start (not from the first run),
#: so the deployment page shows them and the first two runs cannot race.
SLOTTED_DATASETS = ("adult", "compas")

#: AIM methods' time budget (seconds) in both deployments: well inside the flow timeout, so
#: an AIM run ends with a release (its last round spends the rest of ρ) instead of timing
#: out. Other methods ignore it; a run may override it (form, ``--param max_time_s=...``).
AIM_TIME_BUDGET_S = 1800.0

#: The scheduled release: embedded Adult data and contract (params left out use defaults).
#: The flow has no seed parameter: every deployed run draws fresh OS entropy.
MONTHLY_PARAMS = {"contract": "adult", "epsilon": 1.0, "delta": 1e-9,
                  "method": "prefair-greedy", "out": "releases",
                  "max_time_s": AIM_TIME_BUDGET_S}


def deployments() -> list:
    # Module-path entrypoints (flows.kinds.release): the flows are an installed package, so
    # a worker imports them like any module instead of loading a file by path.
    module = EntrypointType.MODULE_PATH
    monthly = release.to_deployment(
        name="monthly-adult", entrypoint_type=module, cron="0 3 1 * *", parameters=MONTHLY_PARAMS,
        tags=["privfair", "scheduled"],
        description="Monthly DP synthetic release of the embedded Adult data (03:00 UTC, day 1).")
    ad_hoc = release.to_deployment(
        name="ad-hoc", entrypoint_type=module, tags=["privfair", "ad-hoc"],
        parameters={"max_time_s": AIM_TIME_BUDGET_S},
        description="Any contract/data/budget, from the UI form or `prefect deployment run`.")
    # Every other release kind gets an ad-hoc deployment with the same controls.
    others = [flow.to_deployment(name="ad-hoc", entrypoint_type=module, tags=["privfair", "ad-hoc"],
                                 description=f"privfair {command}: any contract, data and "
                                             "budget, from the UI form")
              for command, flow in FLOWS.items() if command != "release"]
    return [monthly, ad_hoc, *others]


def prepare(*, alert_webhook: str | None = None, alert_block: str | None = None,
            registry_url: str | None = None, registry_key_file: Path | None = None) -> None:
    """What deploying sets up besides the deployments: the datasets' concurrency limits,
    when a registry is given, the team's registry block (its key a Secret field), and, when a
    notification target is given, the alert automation."""
    for dataset in SLOTTED_DATASETS:
        ops.ensure_dataset_slot(dataset)
    if registry_url:
        registry_blocks.save_block(url=registry_url, key_file=registry_key_file)
    if alert_webhook or alert_block:
        import alerts

        notify = (alerts.save_webhook_block(alert_webhook) if alert_webhook
                  else alerts.block_id(alert_block))
        alerts.create_automation(notify)


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(description="serve privfair's deployments from here")
    cli.add_argument("--alert-webhook", help="also create the alert automation (a webhook)")
    cli.add_argument("--alert-block", help="or with a saved notification block type/name")
    cli.add_argument("--registry-url", help="also save the team's registry block: a folder or "
                     "postgresql:// URL (see python -m tasks.registry_blocks save)")
    cli.add_argument("--registry-key-file", type=Path, help="its registry.key (stored as a "
                     "Secret field)")
    options = cli.parse_args()
    prepare(alert_webhook=options.alert_webhook, alert_block=options.alert_block,
            registry_url=options.registry_url, registry_key_file=options.registry_key_file)
    # pause_on_shutdown=False: stopping this process must not silently pause the schedule.
    serve(*deployments(), pause_on_shutdown=False)
