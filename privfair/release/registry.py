"""Every release kind: the one list a new kind joins (issue 33.1).

Each line names a kind (the ledger's and the manifest's ``kind``), the CLI command that
publishes it and the module under :mod:`privfair.release.kinds` that declares it. The CLI,
the Prefect flows (``flows/kinds.py``), the protocol test suite (``tests/test_protocol.py``)
and the seeds (:data:`privfair.release.seeds.KIND_KEYS`) iterate it.

A family is one publishing command: the kinds listed with it (``release`` runs the table
kind or, for a GAN method, the gan kind: the first whose ``runs(options)`` holds) and the
parameter model of its first kind, from which the CLI options and the Prefect form are
generated.

This module imports no kind: a kind's module is imported by its name when a family is first
used (a table release does not pay for the causal or embedding kinds' SciPy and torch
imports), so the seeds and the protocol read this list without an import cycle. The kinds'
own imports are what import-linter checks (no kind imports another).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the kinds import pandas: not for `privfair --help`
    from privfair.release.options import ReleaseOptions
    from privfair.release.protocol import ReleaseKind


@dataclass(frozen=True)
class Registered:
    """One kind: its name, its command (and the command's description, given with the
    command's first kind), and ``module:attribute`` under ``privfair.release.kinds``."""

    name: str
    command: str
    declared_in: str
    description: str = ""

    def load(self) -> ReleaseKind:
        module, _, attribute = self.declared_in.partition(":")
        kind: ReleaseKind = getattr(importlib.import_module(f".{module}", "privfair.release.kinds"),
                       attribute)
        if kind.name != self.name or kind.command != self.command:
            raise RuntimeError(f"registry line {self.name!r} ({self.command}) declares kind "
                               f"{kind.name!r} ({kind.command}) in {self.declared_in}")
        return kind


#: Every kind, in order. Append only: a kind's position gives its stages' spawn keys
#: (:data:`privfair.release.seeds.KIND_KEYS`), which seeded test releases depend on.
REGISTRY: tuple[Registered, ...] = (
    Registered("table", "release", "table.kind:TABLE",
               "publish a DP synthetic table (MST, PreFair, AIM, independent, or a DP GAN)"),
    Registered("gan", "release", "gan.kind:GAN"),
    Registered("model", "train", "model.train:MODEL",
               "publish a DP (and fair) classifier as a model release"),
    Registered("graph", "discover", "causal_graph.kind:GRAPH",
               "publish a DP causal graph (PrivPC, LapMech or PrivPC*) as a graph release"),
    Registered("embedding", "embed", "embedding.kind:EMBEDDING",
               "publish edge-level DP node embeddings (DPNE) of an edge-list dataset"),
)


@dataclass(frozen=True)
class ReleaseFamily:
    """A publishing command and the kinds it runs (imported on first use)."""

    command: str
    description: str
    registered: tuple[Registered, ...]

    @property
    def flow_name(self) -> str:
        return f"privfair-{self.command}"

    @cached_property
    def kinds(self) -> tuple[ReleaseKind, ...]:
        return tuple(entry.load() for entry in self.registered)

    @property
    def params(self) -> type[ReleaseOptions]:
        return self.kinds[0].params

    def kind_for(self, options: ReleaseOptions) -> ReleaseKind:
        """The kind that runs ``options`` (``release --method``: the table or gan kind)."""
        return next((kind for kind in self.kinds if kind.runs(options)), self.kinds[0])


FAMILIES: list[ReleaseFamily] = [
    ReleaseFamily(command, next(r.description for r in REGISTRY if r.command == command),
                  tuple(r for r in REGISTRY if r.command == command))
    for command in dict.fromkeys(r.command for r in REGISTRY)]

#: The families that get a Prefect flow (all of them).
FLOW_KINDS = FAMILIES


def __getattr__(name: str) -> Any:
    # KINDS imports every kind's module: only the callers that iterate all kinds pay for it.
    if name == "KINDS":
        return [kind for family in FAMILIES for kind in family.kinds]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_named(name: str) -> ReleaseKind:
    """The kind of a ledger's or checkpoint's ``kind`` name."""
    return next(r for r in REGISTRY if r.name == name).load()


def family(command: str) -> ReleaseFamily:
    """The family of a CLI command."""
    return next(f for f in FAMILIES if f.command == command)
