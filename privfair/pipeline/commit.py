"""The commit point of a release of any kind: lifetime ledger, catalog row, folder rename.

:func:`commit_release` is the all-or-nothing tail of a publication, run under the dataset lock
once the release folder is fully written in a temporary folder. It is shared by model releases
(:mod:`privfair.pipeline.train`) and is what the table publication
(:mod:`privfair.pipeline.publish`) does inline.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfair.pipeline.artefacts import atomic_write, json_bytes
from privfair.pipeline.store import CATALOG_COLUMNS, catalog, ledger_path


def commit_release(*, store: Path, dataset: str, version: str, staged: Path, final: Path,
                   lifetime: Mapping[str, Any], catalog_row: Sequence[Any]) -> None:
    """Write the lifetime ledger, add the catalog row, rename ``staged`` to ``final``.

    Any failure restores the previous lifetime ledger, removes the catalog row and the staged
    folder, and re-raises. A hard crash between the ledger write and the rename can only
    over-count the budget, never under-count.
    """
    lifetime_file = ledger_path(store, dataset)
    old_ledger = lifetime_file.read_bytes() if lifetime_file.is_file() else None
    row_added = False
    try:
        atomic_write(lifetime_file, json_bytes(dict(lifetime)))
        with catalog(store) as con:
            con.execute(f"INSERT INTO releases ({', '.join(CATALOG_COLUMNS)}) VALUES "
                        f"({', '.join('?' * len(CATALOG_COLUMNS))})", list(catalog_row))
        row_added = True
        staged.rename(final)
    except BaseException:
        if row_added:
            with contextlib.suppress(Exception), catalog(store) as con:
                con.execute("DELETE FROM releases WHERE dataset = ? AND version = ?",
                            [dataset, version])
        if old_ledger is None:
            lifetime_file.unlink(missing_ok=True)
        else:
            atomic_write(lifetime_file, old_ledger)
        shutil.rmtree(staged, ignore_errors=True)
        raise
