"""The commit point of a release of any kind: folder rename, lifetime ledger, catalog row.

:func:`commit_release` is the tail of a publication, run under the dataset lock once the
release folder is fully written in a temporary folder. It is shared by model releases
(:mod:`privfair.pipeline.train`); it follows the protocol of :mod:`privfair.pipeline.publish`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfair.pipeline.publish import commit_publication, write_intent


def commit_release(*, store: Path, dataset: str, version: str, staged: Path, final: Path,
                   lifetime: Mapping[str, Any], catalog_row: Sequence[Any]) -> None:
    """Rename ``staged`` to ``final``, append its ``publish`` entry, add the catalog row.

    ``lifetime`` is the caller's view of the ledger (``LifetimeLedger.to_dict()``) with the
    new release appended to ``releases``. A failure before the ledger entry removes the
    folder; after it, recovery completes the catalog.
    """
    release = dict(next(r for r in reversed(lifetime["releases"])
                        if r.get("version") == version))
    budget = lifetime["budget"]
    ident = str(lifetime.get("dataset_id") or dataset)
    intent = write_intent(final.parent, version, staged=staged, ident=ident)
    commit_publication(store=store, contract_budget=(float(budget["epsilon"]),
                                                     float(budget["delta"])),
                       ident=ident, dataset=dataset, version=version, staged=staged,
                       final=final, intent=intent, release=release,
                       catalog_row=list(catalog_row))
