"""What a release needs of this machine, from public facts only (issue 45.5).

The kinds multiply out the contract's domain sizes and the options (hidden widths, batch
sizes, rows to sample) into a memory estimate and refuse, before anything is reserved, a
release that cannot fit: after the reservation a ``MemoryError`` would have stayed charged.
This module holds what every kind shares: the machine's memory, the share a release may plan
to use and the one-line refusal.
"""

from __future__ import annotations

import os

from privfair.core.errors import PrivfairError

#: Share of this machine's memory a release may plan to use.
MEMORY_SHARE = 0.6


class ResourceError(PrivfairError, ValueError):
    """A release that cannot run on this machine, refused before the reservation."""


def physical_memory() -> int:
    """This machine's memory in bytes (a public fact of the machine, not of the data)."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_memory(need: int, *, flag: str, what: str, fix: str) -> None:
    """Refuse, in one line naming ``flag``, an estimate ``need`` (bytes) above
    :data:`MEMORY_SHARE` of this machine's memory."""
    have = physical_memory()
    if need > MEMORY_SHARE * have:
        raise ResourceError(
            f"{flag}: {what} needs about {need / 2**30:,.1f} GiB of memory, more than "
            f"{MEMORY_SHARE:.0%} of this machine's {have / 2**30:,.1f} GiB; refused before "
            f"anything is reserved ({fix})")
