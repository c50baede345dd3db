"""The hash chain of a lifetime ledger: entry checks, keyed (HMAC) and legacy hashes.

A ledger is an append-only list of entries: ``open`` (the budget, fixed at the first release),
``raise`` (a recorded budget raise), ``reserve`` (a run's ρ, before its first private read),
``spend`` (the run drew noise: it stays charged), ``cancel`` (a run that drew no noise gives
its reservation back) and ``publish`` (the run's release is in a store). Each entry holds the
hash of the one before it.

In the registry database the hash is HMAC-SHA256 under the registry key, over the dataset id
and the entry, so nobody without the key can recompute a chain after an edit. The JSON files
of earlier versions (``privfair-lifetime-ledger/2``) used plain SHA-256; they are verified
with ``key=None`` only to be imported once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from typing import Any

from privfair.store.files import StoreError, utc_now

GENESIS = "0" * 64
ENTRY_KINDS = ("open", "raise", "reserve", "spend", "cancel", "publish")

#: One entry of a dataset's chain as stored: a JSON object (``seq``, ``kind``, ``at``,
#: ``prev``, ``hash``, and the fields of its kind, which vary by kind and by version).
Entry = dict[str, Any]
#: What a registry transaction appends: ``(kind, fields)`` pairs, chained when written.
NewEntries = list[tuple[str, dict[str, Any]]]


def canonical(value: Any) -> bytes:
    """The one byte form of a JSON value that is hashed (sorted keys, no NaN)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def entry_hash(body: Mapping[str, Any], *, key: bytes | None = None, ident: str = "") -> str:
    """HMAC-SHA256 of ``ident`` and ``body`` under ``key``; plain SHA-256 when ``key`` is None
    (the legacy JSON ledgers, which held no dataset id in the hash)."""
    if key is None:
        return hashlib.sha256(canonical(dict(body))).hexdigest()
    message = ident.encode("utf-8") + b"\n" + canonical(dict(body))
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def finite(value: Any, what: str, *, positive: bool = False, below_one: bool = False) -> float:
    """``value`` as a float, refused unless finite, non-negative (or positive, or < 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0) \
            or (below_one and number >= 1):
        raise ValueError(f"{what} is {value!r}; expected a finite "
                         f"{'positive' if positive else 'non-negative'} number"
                         f"{' below 1' if below_one else ''}")
    return number


def check_entry(entry: Mapping[str, Any], index: int) -> None:
    """Refuse an entry whose kind, numbers or place in the chain are impossible."""
    kind = entry.get("kind")
    if kind not in ENTRY_KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if kind in ("open", "raise"):
        finite(entry.get("epsilon"), "epsilon", positive=True)
        finite(entry.get("delta"), "delta", positive=True, below_one=True)
    if (kind == "reserve" and entry.get("rdp") is None) or (kind == "publish" and "rho" in entry):
        finite(entry.get("rho"), "rho")
    if kind in ("reserve", "publish") and entry.get("rdp") is not None:
        curve = entry["rdp"]  # a run charged by its Rényi curve
        if not isinstance(curve, list) or not curve:
            raise ValueError("rdp is not a list of numbers")
        for value in curve:
            finite(value, "an rdp value")
    if kind in ("reserve", "spend", "cancel") and not entry.get("run_id"):
        raise ValueError("no run_id")
    if kind == "open" and index != 0:
        raise ValueError("a second 'open' entry")
    if index == 0 and kind != "open":
        raise ValueError("the chain does not start with 'open'")


def verify_chain(entries: list[Entry], *, where: str, key: bytes | None = None,
                 ident: str = "", start: int = 0, prev: str = GENESIS) -> None:
    """Refuse a chain whose hashes, order or numbers were changed.

    ``key`` is the registry key (HMAC chain); None checks a legacy unkeyed JSON chain.
    ``entries`` may be the continuation of a verified chain: from entry ``start``, after the
    entry whose hash is ``prev``.
    """
    for i, entry in enumerate(entries, start):
        try:
            if not isinstance(entry, dict):
                raise ValueError("not an object")
            body = {k: v for k, v in entry.items() if k != "hash"}
            if body.get("seq") != i or body.get("prev") != prev:
                raise ValueError("out of order or an entry is missing")
            if not hmac.compare_digest(entry_hash(body, key=key, ident=ident),
                                       str(entry.get("hash"))):
                raise ValueError("its hash does not match (edited)")
            check_entry(entry, i)
        except ValueError as exc:
            raise StoreError(f"lifetime ledger {where} fails its check at entry {i}: {exc}; "
                             "restore it from a backup (never edit it by hand)") from None
        prev = entry["hash"]


def chain_append(entries: list[Entry], kind: str, *, key: bytes | None,
                 ident: str, at: str | None = None, **fields: Any) -> Entry:
    """Append one checked entry to ``entries`` (in place) and return it."""
    body = {"seq": len(entries), "prev": entries[-1]["hash"] if entries else GENESIS,
            "kind": kind, "at": at or utc_now(), **fields}
    check_entry(body, len(entries))
    entry = {**body, "hash": entry_hash(body, key=key, ident=ident)}
    entries.append(entry)
    return entry
