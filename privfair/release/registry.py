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
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the protocol imports the registry and pandas: not for `privfair --help`
    from privfair.release.options import ReleaseOptions
    from privfair.release.protocol import Progress, ReleaseKind

#: What a family's loader returns: its params model, its kinds, and how options pick a kind.
Declaration = tuple[type["ReleaseOptions"], tuple["ReleaseKind", ...],
                    Callable[["ReleaseOptions"], "ReleaseKind"]]


@dataclass(frozen=True)
class ReleaseFamily:
    """A publishing command and the kinds it runs.

    The kinds' modules are imported on first use of ``params``, ``kinds`` or ``kind_for``:
    a command imports its own kinds only (a table release does not pay for the causal or
    graph kinds' SciPy and torch imports).
    """

    command: str
    description: str
    load: Callable[[], Declaration]

    @property
    def flow_name(self) -> str:
        return f"privfair-{self.command}"

    @cached_property
    def declaration(self) -> Declaration:
        return self.load()

    @property
    def params(self) -> type[ReleaseOptions]:
        return self.declaration[0]

    @property
    def kinds(self) -> tuple[ReleaseKind, ...]:
        return self.declaration[1]

    def kind_for(self, options: ReleaseOptions) -> ReleaseKind:
        return self.declaration[2](options)


def _table_family() -> Declaration:
    from privfair.generative import GAN_METHODS
    from privfair.release.kinds.gan.kind import GAN
    from privfair.release.kinds.table.kind import TABLE

    # `--method` picks the kind: a GAN method runs the gan kind, the others the table kind
    return (TABLE.params, (TABLE, GAN),
            lambda options: GAN if options.method in GAN_METHODS  # type: ignore[attr-defined]
            else TABLE)


def _model_family() -> Declaration:
    from privfair.release.kinds.model.train import MODEL

    return MODEL.params, (MODEL,), lambda options: MODEL


def _graph_family() -> Declaration:
    from privfair.release.kinds.causal_graph.kind import GRAPH

    return GRAPH.params, (GRAPH,), lambda options: GRAPH


def _embedding_family() -> Declaration:
    from privfair.release.embedding.kind import EMBEDDING

    return EMBEDDING.params, (EMBEDDING,), lambda options: EMBEDDING


FAMILIES: list[ReleaseFamily] = [
    ReleaseFamily("release", "publish a DP synthetic table (MST, PreFair, AIM, independent, "
                  "or a DP GAN)", _table_family),
    ReleaseFamily("train", "publish a DP (and fair) classifier as a model release",
                  _model_family),
    ReleaseFamily("discover", "publish a DP causal graph (PrivPC, LapMech or PrivPC*) as a "
                  "graph release", _graph_family),
    ReleaseFamily("embed", "publish edge-level DP node embeddings (DPNE) of an edge-list "
                  "dataset", _embedding_family),
]

#: The families that get a Prefect flow (all of them).
FLOW_KINDS = FAMILIES


def __getattr__(name: str) -> Any:
    # KINDS imports every kind's module: only the callers that iterate all kinds pay for it.
    if name == "KINDS":
        return [kind for family in FAMILIES for kind in family.kinds]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_named(name: str) -> ReleaseKind:
    """The kind of a ledger's or checkpoint's ``kind`` name (imports the families in order
    until one has it)."""
    for family_ in FAMILIES:
        for kind in family_.kinds:
            if kind.name == name:
                return kind
    raise StopIteration(name)


def family(command: str) -> ReleaseFamily:
    """The family of a CLI command."""
    return next(f for f in FAMILIES if f.command == command)


def release_table(params: ReleaseOptions | Mapping[str, Any], *,
                  progress: Progress | None = None) -> Path:
    """Run a table or GAN release in this process (the library's ``privfair release``)."""
    from privfair.release.protocol import run_release

    table = family("release")
    options = table.kinds[0].parse(params)
    return run_release(table.kind_for(options), options, progress=progress)
