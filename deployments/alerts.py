"""Notify on failed or budget-refused releases: a notification block + a Prefect automation.

Every publishing flow's ``on_failure``/``on_crashed`` hook (``privfair-release``,
``privfair-train``, ... of ``flows/kinds.py``; ``tasks/ops.py``) emits one event per failed
run: ``privfair.release.refused`` (bad input, exhausted lifetime budget, broken
contract) or ``privfair.release.failed`` (anything else), with a public one-line message
(refusals name parameters and columns, never values; other failures give only the error
type). This script creates the automation ``privfair-release-alert`` that sends every such
event to a notification block::

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python deployments/alerts.py --webhook-url https://hooks.example.org/privfair
    python deployments/alerts.py --block slack-webhook/ops      # any saved notification block

``--webhook-url`` saves a ``CustomWebhookNotificationBlock`` named ``privfair-alerts`` that
POSTs ``{"subject": ..., "body": ...}`` as JSON. Re-running the script replaces the automation.
"""

from __future__ import annotations

import argparse
import contextlib
from uuid import UUID

AUTOMATION = "privfair-release-alert"
BLOCK_NAME = "privfair-alerts"


def save_webhook_block(url: str) -> UUID:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block = CustomWebhookNotificationBlock(
        name="privfair", url=url, method="POST",
        json_data={"subject": "{{subject}}", "body": "{{body}}"})
    return block.save(BLOCK_NAME, overwrite=True)


def block_id(slug: str) -> UUID:
    """The document id of a saved block, ``<block-type>/<name>``."""
    from prefect.blocks.core import Block

    block = Block.load(slug)
    assert block._block_document_id is not None
    return block._block_document_id


def create_automation(notify_block: UUID) -> UUID:
    from prefect.automations import Automation, EventTrigger, SendNotification
    from prefect.events.schemas.automations import Posture

    with contextlib.suppress(ValueError):  # ValueError: none yet
        Automation.read(name=AUTOMATION).delete()
    automation = Automation(
        name=AUTOMATION,
        description="A privfair release failed or was refused (e.g. lifetime budget spent).",
        trigger=EventTrigger(
            expect={"privfair.release.refused", "privfair.release.failed"},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            posture=Posture.Reactive, threshold=1),
        actions=[SendNotification(
            block_document_id=notify_block,
            subject="privfair: {{ event.event }} ({{ event.resource.name }})",
            body="{{ event.payload.message }}\nflow run: {{ event.resource.name }} "
                 "({{ event.resource.id }})")],
    ).create()
    return automation.id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook-url", help="POST alerts as JSON to this URL")
    where.add_argument("--block", help="a saved notification block, <block-type>/<name>")
    args = parser.parse_args(argv)
    notify = save_webhook_block(args.webhook_url) if args.webhook_url else block_id(args.block)
    print(f"automation {AUTOMATION} {create_automation(notify)} -> block {notify}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
