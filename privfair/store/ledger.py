"""A dataset's lifetime ledger folded from its chain, and its exact composition.

Every charged run (a published release, or a run that holds its reservation or drew noise)
is charged by its own privacy curve, whatever the lifetime's size:

* a zCDP charge (table, causal graph and embedding kinds): its ρ, whose Rényi curve is ρα;
* a Rényi curve (model and GAN kinds: DP-SGD's subsampled Gaussian, the functional
  mechanism's pure-DP steps with their tight curve), stored on the order grid
  (:data:`~privfair.core.accounting.RDP_ORDERS`).

The ledger composes them all and converts once, at the lifetime δ: a ledger of zCDP charges
only composes as the sum of their ρ, converted exactly (CKS); once it holds a curve, the ρα of
the zCDP charges and the curves add up order by order and the conversion is on the grid. The
budget check is on that composed ε; a release's own charge, shown per release, is its curve's
ε alone.

Format 4 (issue 32.9). In format 3 a curve's entry also carried a ρ that depended on the
lifetime (what was left of the budget when it was reserved); that ρ is ignored: an entry with
a curve is charged by its curve. Curves stored on the grid before orders below 2 are extended
by :func:`~privfair.core.accounting.rdp_on_grid` (their value at α = 2, a valid bound).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfair.core.accounting import (
    RDP_ORDERS,
    RdpCurve,
    rdp_epsilon,
    rdp_on_grid,
    zcdp_epsilon,
    zcdp_rho,
)
from privfair.core.errors import BudgetExceededError
from privfair.store.chain import GENESIS, Entry
from privfair.store.files import StoreError

LEDGER_FORMAT = "privfair-lifetime-ledger/4"
_RTOL = 1e-9


def charge_curve(record: Mapping[str, Any]) -> RdpCurve | None:
    """The Rényi curve a release (or pending run) is charged by, or None for a zCDP charge."""
    if record.get("rdp") is None:
        return None
    try:
        return rdp_on_grid(record["rdp"])
    except ValueError as exc:
        raise StoreError(f"a lifetime ledger entry's curve: {exc}") from None


def charge_rho(record: Mapping[str, Any]) -> float:
    """The ρ of a zCDP charge (0 for a curve charge: its curve is what counts)."""
    return 0.0 if record.get("rdp") is not None else float(record.get("rho") or 0.0)


def charge_epsilon(record: Mapping[str, Any], delta: float) -> float:
    """A release's own charge as ε at ``delta``: its curve's (or its ρ's, exactly) alone."""
    curve = charge_curve(record)
    if curve is None:
        return zcdp_epsilon(rho=charge_rho(record), delta=delta)
    return rdp_epsilon(rdp=curve, delta=delta)[0]


def composed_epsilon(*, rho: float, curve: RdpCurve | None, delta: float) -> float:
    """ε at ``delta`` of zCDP charges of total ``rho`` composed with a Rényi ``curve``:
    exact (CKS) without a curve, on the order grid with one."""
    if curve is None:
        return zcdp_epsilon(rho=rho, delta=delta)
    return rdp_epsilon(rdp=curve + rho * np.asarray(RDP_ORDERS), delta=delta)[0]


@dataclass
class LifetimeLedger:
    """Everything charged to one dataset, composed against its lifetime budget.

    ``releases`` are the published releases; ``pending`` the reservations of runs that have
    not published (state ``reserved`` or ``spent, not published``): both count as spent.
    """

    dataset: str
    epsilon_budget: float
    delta_budget: float
    releases: list[dict[str, Any]]
    pending: list[dict[str, Any]] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    dataset_id: str = ""

    @property
    def charged(self) -> list[dict[str, Any]]:
        """Every release and pending run, each charged by its own curve or ρ."""
        return [*self.releases, *self.pending]

    @property
    def rho_budget(self) -> float:
        return zcdp_rho(epsilon=self.epsilon_budget, delta=self.delta_budget)

    @property
    def rho_spent(self) -> float:
        """Sum of the ρ of the zCDP charges (curve charges are not in it)."""
        return math.fsum(charge_rho(r) for r in self.charged)

    def curve_spent(self) -> RdpCurve | None:
        """Sum of the curve charges on the order grid (None when there is none)."""
        curves = [c for c in (charge_curve(r) for r in self.charged) if c is not None]
        return np.sum(curves, axis=0) if curves else None

    def epsilon_spent(self, *, rho: float = 0.0, rdp: Sequence[float] | None = None) -> float:
        """Composed ε at the lifetime δ of everything charged (plus a charge of ``rho`` or
        Rényi curve ``rdp``)."""
        curve = self.curve_spent()
        if rdp is not None:
            extra = rdp_on_grid(rdp)
            curve = extra if curve is None else curve + extra
        return composed_epsilon(rho=self.rho_spent + rho, curve=curve,
                                delta=self.delta_budget)

    def fits(self, *, rho: float = 0.0, rdp: Sequence[float] | None = None) -> bool:
        """Whether a further charge of ``rho`` (zCDP) or ``rdp`` (a curve) fits the budget."""
        if rdp is None and self.curve_spent() is None:  # zCDP only: exactly the ρ sum
            return self.rho_spent + rho <= self.rho_budget * (1 + _RTOL)
        return self.epsilon_spent(rho=rho, rdp=rdp) <= self.epsilon_budget * (1 + _RTOL)

    @property
    def rho_remaining(self) -> float:
        """The largest ρ a further zCDP charge may have (composed with every curve)."""
        if self.curve_spent() is None:
            return max(0.0, self.rho_budget - self.rho_spent)
        lo, hi = 0.0, self.rho_budget
        if not self.fits():
            return 0.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.fits(rho=mid) else (lo, mid)
        return lo

    def check(self, *, rho: float = 0.0, rdp: Sequence[float] | None = None) -> None:
        """Refuse a charge of ``rho`` (zCDP) or Rényi curve ``rdp`` past the lifetime budget."""
        if not math.isfinite(rho) or rho < 0:
            raise BudgetExceededError(f"a release cost of rho={rho!r} cannot be charged")
        if rdp is not None:
            curve = rdp_on_grid(rdp)
            if not (np.all(np.isfinite(curve)) and np.all(curve >= 0)):
                raise BudgetExceededError("a release's Renyi curve must be finite and >= 0")
        if self.fits(rho=rho, rdp=rdp):
            return
        own = (rdp_epsilon(rdp=rdp_on_grid(rdp), delta=self.delta_budget)[0] if rdp is not None
               else zcdp_epsilon(rho=rho, delta=self.delta_budget))
        raise BudgetExceededError(
            f"lifetime budget of dataset {self.dataset_id or self.dataset!r} exceeded: this "
            f"release (epsilon {own:.4g} alone) would bring the composed spend to epsilon="
            f"{self.epsilon_spent(rho=rho, rdp=rdp):.4g} > {self.epsilon_budget:g} "
            f"(delta={self.delta_budget:g}; {self.epsilon_spent():.4g} spent)")

    def without(self, run_id: str | None) -> LifetimeLedger:
        """A copy without the pending run ``run_id`` (to compare a run with the others)."""
        others = copy.copy(self)
        others.pending = [r for r in self.pending if r.get("run_id") != run_id]
        return others

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

    def charges(self) -> list[dict[str, Any]]:
        """Each charged run's own charge: ε at the lifetime δ of its curve (or ρ) alone."""
        return [{"run_id": r.get("run_id"), "version": r.get("version"),
                 "state": r.get("state", "published"),
                 "charged_by": "renyi curve" if r.get("rdp") is not None else "zcdp rho",
                 "rho": None if r.get("rdp") is not None else charge_rho(r),
                 "epsilon_at_budget_delta": charge_epsilon(r, self.delta_budget)}
                for r in self.charged if r.get("rdp") is not None or charge_rho(r) > 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "dataset": self.dataset,
            "dataset_id": self.dataset_id or self.dataset,
            "budget": {"epsilon": self.epsilon_budget, "delta": self.delta_budget,
                       "rho": self.rho_budget},
            "spent": {"epsilon_at_budget_delta": self.epsilon_spent(),
                      "rho": self.rho_spent,
                      "curves": sum(r.get("rdp") is not None for r in self.charged)},
            "accounting": "each release and unpublished run that drew noise is charged by its "
                          "own privacy curve (zCDP rho as rho*alpha, or its Renyi curve); all "
                          "compose (rho sums exactly when there is no curve, else order by "
                          "order) and convert once at the lifetime delta; spent.rho is the sum "
                          "of the zCDP charges only",
            "charges": self.charges(),
            "releases": self.releases,
            "pending": self.pending,
            "head": self.head,
            "entries": self.entries,
        }


def fold(entries: list[Entry], name: str, ident: str) -> LifetimeLedger:
    """The ledger of a verified chain: its budget, releases and pending runs."""
    budget = (math.nan, math.nan)
    reserves: dict[str, dict[str, Any]] = {}
    releases: list[dict[str, Any]] = []
    for e in entries:
        kind = e["kind"]
        if kind in ("open", "raise"):
            budget = (float(e["epsilon"]), float(e["delta"]))
        elif kind == "reserve" and e.get("settles") and e["run_id"] in reserves:
            # a GAN run's own curve, settled (chains written before issue 41.3 removed it)
            reserves[e["run_id"]]["rdp"] = e["rdp"]
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
            if "rdp" not in release and held.get("rdp") is not None \
                    and not release.get("post_processing_of"):
                release["rdp"] = held["rdp"]  # charged by the curve it reserved
            if release.get("rdp") is None:
                release.setdefault("rho", held.get("rho", 0.0))
            for key in ("epsilon", "delta", "method", "contract_fingerprint",
                        "seed_fingerprint"):
                if key in held:
                    release.setdefault(key, held[key])
            releases.append(release)
    return LifetimeLedger(name, budget[0], budget[1], releases, list(reserves.values()),
                          entries, ident)


def budget_history(entries: list[Entry]) -> list[dict[str, Any]]:
    """Each change of a chain's lifetime budget, oldest first: its opening, then every raise,
    with the budget it set, when, why and by whom (``privfair ledger show``)."""
    return [{"change": "opened" if e["kind"] == "open" else "raised",
             "epsilon": float(e["epsilon"]), "delta": float(e["delta"]), "at": e.get("at", ""),
             "reason": str(e.get("reason", "")), "by": str(e.get("by", ""))}
            for e in entries if e["kind"] in ("open", "raise")]


#: What each run state means to the person reading ``ledger show``, by whether the run's
#: process still runs; a state absent here (published, cancelled) reads as it is.
_STATE_WORDS = {
    ("reserved", True): "running: reserved, no noise drawn yet",
    ("reserved", False): "stopped before drawing noise: reservation held (`privfair store "
                         "check --repair` gives it back)",
    ("spent, not published", True): "running: charged, noise drawn",
    ("spent, not published", False): "stopped after drawing noise: charged, not published "
                                      "(a table or GAN run: `--resume RUN` publishes it)",
}


def run_state_words(state: str, *, alive: bool) -> str:
    """A run's state in words, given whether its process still runs.

    Parameters
    ----------
    state : str
        The run's state in the chain (:func:`run_history`).
    alive : bool
        Whether the process that holds the run still runs (true when it cannot be told, as
        for a run on another host).

    Returns
    -------
    str
        What the run is doing and, for a stopped run, what to do about it.
    """
    return _STATE_WORDS.get((state, alive), state)


def run_history(entries: list[Entry]) -> list[dict[str, Any]]:
    """Every run of a chain, charged or given back: its state, its own charge (``rho`` for a
    zCDP charge, None for a curve; ``epsilon``: the charge alone as ε at the lifetime δ),
    version, the store it publishes into, and reason.

    A release published without a reservation (imported, or from an older version) is a run
    of its own, keyed by its version.
    """
    # keyed by run id; a reservation written without one (by an older version) keys None
    runs: dict[str | None, dict[str, Any]] = {}
    delta = math.nan
    for e in entries:
        kind, run_id = e["kind"], e.get("run_id")
        if kind in ("open", "raise"):
            delta = float(e["delta"])
        elif kind == "reserve" and e.get("settles") and run_id in runs:
            runs[run_id]["charge"] = e
        elif kind == "reserve":
            # the store tells apart two stores' versions of one name (v1 of the CLI's store,
            # v1 of a deployment's) drawn on one registry
            runs[run_id] = {"run_id": run_id, "state": "reserved", "charge": e,
                            "method": e.get("method"), "kind": e.get("release_kind"),
                            "at": e["at"], "version": None, "reason": "",
                            "store": e.get("store")}
        elif kind == "spend" and run_id in runs:
            runs[run_id]["state"] = "spent, not published"
        elif kind == "cancel" and run_id in runs:
            runs[run_id] |= {"state": "cancelled (not charged)", "charge": {"rho": 0.0},
                             "reason": str(e.get("reason", ""))}
        elif kind == "publish" and e.get("post_processing_of") and run_id in runs:
            # a later version of a published run (--resume): no cost of its own
            runs[run_id].setdefault("also_published", []).append(e.get("version"))
        elif kind == "publish":
            key = run_id if run_id in runs else f"release {e.get('version')}"
            run = runs.setdefault(key, {"run_id": run_id, "charge": {"rho": 0.0},
                                        "method": e.get("method"),
                                        "kind": e.get("release_kind"), "at": e["at"],
                                        "reason": "published without a reservation",
                                        "store": e.get("store")})
            run |= {"state": "published", "version": e.get("version")}
            if e.get("rdp") is not None or "rho" in e:
                run["charge"] = e
    for run in runs.values():
        charge = run.pop("charge")
        run["rho"] = None if charge.get("rdp") is not None else charge_rho(charge)
        run["epsilon"] = (charge_epsilon(charge, delta) if math.isfinite(delta)
                          and (charge.get("rdp") is not None or charge_rho(charge) > 0)
                          else 0.0)
    return list(runs.values())
