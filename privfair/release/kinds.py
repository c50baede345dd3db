"""Every release kind, and the commands (families) that publish them.

A family is one publishing command: its parameter model (from which the CLI options and the
Prefect form are generated) and the kinds it can run (``release`` runs the table kind or,
for a GAN method, the gan kind). Adding a kind is adding it here: the CLI, the Prefect flows
(``flows/kinds.py``) and the protocol test suite (``tests/test_protocol.py``) iterate
:data:`KINDS` and :data:`FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfair.release.embedding.kind import EMBEDDING
from privfair.release.graph.kind import GRAPH
from privfair.release.model.train import MODEL
from privfair.release.options import ReleaseOptions
from privfair.release.protocol import Progress, ReleaseKind, run_release
from privfair.release.table.kind import GAN, TABLE, table_kind_for


@dataclass(frozen=True)
class ReleaseFamily:
    """A publishing command and the kinds it runs."""

    command: str
    params: type[ReleaseOptions]
    kinds: tuple[ReleaseKind, ...]
    description: str
    choose: Callable[[ReleaseOptions], ReleaseKind]

    @property
    def flow_name(self) -> str:
        return f"privfair-{self.command}"

    def kind_for(self, options: ReleaseOptions) -> ReleaseKind:
        return self.choose(options)


def _only(kind: ReleaseKind) -> Callable[[ReleaseOptions], ReleaseKind]:
    return lambda options: kind


FAMILIES: list[ReleaseFamily] = [
    ReleaseFamily("release", TABLE.params, (TABLE, GAN),
                  "publish a DP synthetic table (MST, PreFair, AIM, independent, or a DP GAN)",
                  lambda options: table_kind_for(options.method)),  # type: ignore[attr-defined]
    ReleaseFamily("train", MODEL.params, (MODEL,), MODEL.description, _only(MODEL)),
    ReleaseFamily("discover", GRAPH.params, (GRAPH,), GRAPH.description, _only(GRAPH)),
    ReleaseFamily("embed", EMBEDDING.params, (EMBEDDING,), EMBEDDING.description,
                  _only(EMBEDDING)),
]

#: Every release kind, in the order the protocol tests run them.
KINDS: list[ReleaseKind] = [kind for family in FAMILIES for kind in family.kinds]

#: The families that get a Prefect flow (all of them).
FLOW_KINDS = FAMILIES


def kind_named(name: str) -> ReleaseKind:
    """The kind of a ledger's or checkpoint's ``kind`` name."""
    return next(k for k in KINDS if k.name == name)


def family(command: str) -> ReleaseFamily:
    """The family of a CLI command."""
    return next(f for f in FAMILIES if f.command == command)


def release_table(params: ReleaseOptions | Mapping[str, Any], *,
                  progress: Progress | None = None) -> Path:
    """Run a table or GAN release in this process (the library's ``privfair release``)."""
    options = TABLE.parse(params)
    return run_release(family("release").kind_for(options), options, progress=progress)
