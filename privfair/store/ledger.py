"""A dataset's lifetime ledger folded from its chain, and its composition in Rényi DP."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfair.core.accounting import RDP_ORDERS, rdp_epsilon, zcdp_epsilon, zcdp_rdp, zcdp_rho
from privfair.core.errors import BudgetExceededError
from privfair.store.artefacts import StoreError
from privfair.store.chain import GENESIS

LEDGER_FORMAT = "privfair-lifetime-ledger/3"


@dataclass
class LifetimeLedger:
    """Everything charged to one dataset, composed in zCDP against its lifetime budget.

    ``releases`` are the published releases; ``pending`` the reservations of runs that have
    not published (state ``reserved`` or ``spent, not published``): both count as spent.
    """

    dataset: str
    epsilon_budget: float
    delta_budget: float
    releases: list[dict[str, Any]]
    pending: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    dataset_id: str = ""

    @property
    def rho_budget(self) -> float:
        return zcdp_rho(epsilon=self.epsilon_budget, delta=self.delta_budget)

    @property
    def rho_spent(self) -> float:
        return math.fsum([float(r["rho"]) for r in self.releases]
                         + [float(r["rho"]) for r in self.pending])

    @property
    def rho_remaining(self) -> float:
        return max(0.0, self.rho_budget - self.rho_spent)

    def epsilon_spent(self) -> float:
        return zcdp_epsilon(rho=self.rho_spent, delta=self.delta_budget)

    def check(self, *, rho: float) -> None:
        """Refuse a release of cost ``rho`` that would pass the lifetime budget."""
        if not math.isfinite(rho) or rho < 0:
            raise BudgetExceededError(f"a release cost of rho={rho!r} cannot be charged")
        if self.rho_spent + rho > self.rho_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"lifetime budget of dataset {self.dataset!r} exceeded: this release costs "
                f"rho={rho:.6g} but only {self.rho_remaining:.6g} of {self.rho_budget:.6g} "
                f"(epsilon={self.epsilon_budget:g}, delta={self.delta_budget:g}) is left")

    def run_state(self, run_id: str) -> str | None:
        """``reserved``, ``spent, not published``, ``published`` or None (unknown/cancelled)."""
        for p in self.pending:
            if p["run_id"] == run_id:
                return str(p["state"])
        if any(r.get("run_id") == run_id for r in self.releases):
            return "published"
        return None

    @property
    def head(self) -> str:
        return self.entries[-1]["hash"] if self.entries else GENESIS

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "dataset": self.dataset,
            "dataset_id": self.dataset_id or self.dataset,
            "budget": {"epsilon": self.epsilon_budget, "delta": self.delta_budget,
                       "rho": self.rho_budget},
            "spent": {"rho": self.rho_spent,
                      "epsilon_at_budget_delta": self.epsilon_spent()},
            "accounting": "zCDP: rho of releases and of unpublished runs that drew noise add "
                          "up; converted with the lifetime delta",
            "releases": self.releases,
            "pending": self.pending,
            "head": self.head,
            "entries": self.entries,
        }


def fold(entries: list[dict[str, Any]], name: str, ident: str) -> LifetimeLedger:
    """The ledger of a verified chain: its budget, releases and pending runs."""
    budget = (math.nan, math.nan)
    reserves: dict[str, dict[str, Any]] = {}
    releases: list[dict[str, Any]] = []
    for e in entries:
        kind = e["kind"]
        if kind in ("open", "raise"):
            budget = (float(e["epsilon"]), float(e["delta"]))
        elif kind == "reserve":
            reserves[e["run_id"]] = {k: e[k] for k in (
                "run_id", "rho", "epsilon", "delta", "method", "contract_fingerprint", "pid",
                "host", "store", "seed_fingerprint", "rdp", "release_kind") if k in e} | {
                "state": "reserved", "reserved_at": e["at"]}
        elif kind == "spend" and e["run_id"] in reserves:
            reserves[e["run_id"]]["state"] = "spent, not published"
        elif kind == "cancel" and e["run_id"] in reserves:
            reserves.pop(e["run_id"])
        elif kind == "publish":
            held = reserves.pop(e.get("run_id") or "", None) or {}
            release = {k: v for k, v in e.items()
                       if k not in ("seq", "prev", "hash", "kind", "at", "release_kind",
                                    "legacy_hash")}
            if "release_kind" in e:
                release["kind"] = e["release_kind"]
            release.setdefault("rho", held.get("rho", 0.0))
            for key in ("epsilon", "delta", "method", "contract_fingerprint",
                        "seed_fingerprint"):
                if key in held:
                    release.setdefault(key, held[key])
            releases.append(release)
    return LifetimeLedger(name, budget[0], budget[1], releases, list(reserves.values()),
                          entries, ident)


def run_history(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every run of a chain, charged or given back: its state, ρ, version and reason.

    A release published without a reservation (imported, or from an older version) is a run
    of its own, keyed by its version.
    """
    runs: dict[str, dict[str, Any]] = {}
    for e in entries:
        kind, run_id = e["kind"], e.get("run_id")
        if kind == "reserve":
            runs[run_id] = {"run_id": run_id, "state": "reserved", "rho": float(e["rho"]),
                            "method": e.get("method"), "kind": e.get("release_kind"),
                            "at": e["at"], "version": None, "reason": ""}
        elif kind == "spend" and run_id in runs:
            runs[run_id]["state"] = "spent, not published"
        elif kind == "cancel" and run_id in runs:
            runs[run_id] |= {"state": "cancelled (not charged)", "rho": 0.0,
                             "reason": str(e.get("reason", ""))}
        elif kind == "publish" and e.get("post_processing_of") and run_id in runs:
            # a later version of a published run (--resume): no cost of its own
            runs[run_id].setdefault("also_published", []).append(e.get("version"))
        elif kind == "publish":
            key = run_id if run_id in runs else f"release {e.get('version')}"
            run = runs.setdefault(key, {"run_id": run_id, "rho": 0.0, "method": e.get("method"),
                                        "kind": e.get("release_kind"), "at": e["at"],
                                        "reason": "published without a reservation"})
            run |= {"state": "published", "version": e.get("version")}
            if "rho" in e:
                run["rho"] = float(e["rho"])
    return list(runs.values())


# --- lifetime composition in Rényi DP ----------------------------------------------------------


def release_curve(release: Mapping[str, Any]) -> np.ndarray:
    """A release's (or pending run's) Rényi curve: its own, or ρα for a zCDP charge."""
    if release.get("rdp") is not None:
        curve = np.asarray(release["rdp"], dtype=float)
        if curve.size != len(RDP_ORDERS):
            raise StoreError("a lifetime ledger entry has an RDP curve on another grid")
        return curve
    return zcdp_rdp(rho=float(release["rho"]))


def lifetime_curve(lifetime: LifetimeLedger) -> np.ndarray:
    """Composed RDP curve of every release (and pending reservation) in ``lifetime``."""
    total = np.zeros(len(RDP_ORDERS))
    # Reservations of runs that have not published count as spent, like releases.
    for release in [*lifetime.releases, *lifetime.pending]:
        total += release_curve(release)
    return total


def lifetime_epsilon(lifetime: LifetimeLedger, extra: np.ndarray | None = None) -> float:
    """ε at the lifetime δ of everything charged (plus ``extra``), composed in RDP."""
    curve = lifetime_curve(lifetime) + (0 if extra is None else extra)
    return rdp_epsilon(rdp=curve, delta=lifetime.delta_budget)[0]


def rho_reservation(lifetime: LifetimeLedger, curve: np.ndarray) -> float:
    """ρ to record for a release of RDP ``curve`` so the zCDP check of later table releases
    stays sound: ``ρ_budget − (table ρ so far) − ρ'``, with ρ' the most zCDP that still fits
    next to every curve."""
    base = lifetime_curve(lifetime) + curve
    orders = np.asarray(RDP_ORDERS)
    lo, hi = 0.0, lifetime.rho_budget
    for _ in range(60):
        mid = (lo + hi) / 2
        fits = rdp_epsilon(rdp=base + mid * orders,
                           delta=lifetime.delta_budget)[0] <= lifetime.epsilon_budget
        lo, hi = (mid, hi) if fits else (lo, mid)
    return max(0.0, lifetime.rho_budget - lifetime.rho_spent - lo)
