"""Registry administration: find earlier JSON ledgers to import, export, verify, reset.

Earlier versions kept ``<registry>/<dataset_id>/lifetime_ledger.json`` (an unkeyed SHA-256
chain) and ``<registry>/<dataset_id>/seed-fingerprint.key``; ``registry_sql.import_files``
verifies each chain, re-chains it under the registry key (every entry keeps its old hash as
``legacy_hash``) and renames the file ``lifetime_ledger.json.imported``. A folder registry is
migrated when its database is created; ``privfair ledger import FILE`` does it by hand (e.g.
into PostgreSQL).
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfair.store import registry, registry_sql
from privfair.store.chain import GENESIS
from privfair.store.files import StoreError, utc_now
from privfair.store.ledger import fold, run_history


def ledger_files(path: Path) -> list[Path]:
    """``path`` itself, or every ``<path>/<dataset>/lifetime_ledger.json``."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise StoreError(f"{path} is neither a ledger file nor a folder of ledgers")
    return sorted(path.glob(f"*/{registry_sql.LEDGER_FILE}"))


# --- export, verify, reset ----------------------------------------------------------------


def reset_ledger(ident: str, *, reason: str) -> dict[str, Any]:
    """Start anew a dataset's ledger that was lost or fails its check (``privfair ledger
    reset``), recorded in the registry. Refused for a ledger that verifies: a reset must never
    give back spent budget.

    The new generation starts with the longest prefix of the old chain that still verifies,
    re-chained (each entry keeps its old hash as ``carried_hash``): the budget, releases and
    charged runs it proves stay charged. Returns what was lost and what was carried.
    """
    if not reason.strip():
        raise StoreError("a ledger reset needs a --reason (it is recorded in the registry)")

    def carry(verified: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for i, e in enumerate(verified):
            fields = {k: v for k, v in e.items() if k not in ("seq", "prev", "hash", "kind")}
            fields["carried_hash"] = e["hash"]
            if i == 0:
                fields["carried_after_reset"] = {"entries": len(verified), "reason": reason}
            out.append((str(e["kind"]), fields))
        return out

    lost = registry_sql.reset(ident, reason=reason, by=getpass.getuser(), at=utc_now(),
                              carry=carry)
    carried = lost["carried"]
    if carried:
        book = fold(carried, registry.dataset_name(carried, ident), ident)
        lost["carried_releases"] = [r.get("version") for r in book.releases]
        lost["carried_runs"] = [p["run_id"] for p in book.pending]
        lost["carried_epsilon"] = book.epsilon_spent()
        lost["carried_rho"] = book.rho_spent
        lost["budget"] = (book.epsilon_budget, book.delta_budget)
    return lost


def export_ledger(ident: str) -> dict[str, Any]:
    """The verified ledger of ``ident`` for auditors: summary, runs and every entry."""
    entries = registry.read_chain(ident)
    if not entries:
        raise StoreError(f"dataset {ident!r} has no lifetime ledger in registry "
                         f"{registry.registry_name()}")
    book = fold(entries, registry.dataset_name(entries, ident), ident)
    return {"registry": registry.registry_name(),
            "verified": "HMAC-SHA256 chain, head and entry count checked against the registry "
                        "key", "exported_at": utc_now(), "runs": run_history(entries),
            **book.to_dict()}


@dataclass(frozen=True)
class LedgerCheck:
    """One ledger's verification: its entry count and head, or why it fails its check."""

    dataset: str
    entries: int
    head: str
    problem: str | None = None


def verify_registry() -> list[LedgerCheck]:
    """Verify every ledger of the registry; a damaged one is reported and the others are
    still verified (one dataset's damage never hides the rest)."""
    out = []
    for name in registry_sql.datasets():
        try:
            entries = registry.read_chain(name)
        except StoreError as exc:
            out.append(LedgerCheck(name, 0, GENESIS, str(exc)))
            continue
        out.append(LedgerCheck(name, len(entries), entries[-1]["hash"] if entries else GENESIS))
    return out
