"""The privacy registry as a Prefect block, saved once for the team (issue 35.8).

A flow run loads the block :data:`BLOCK_NAME` of type :class:`PrivfairRegistry` when one is
saved and hands it to the library (:func:`privfair.store.backends.using_registry`) before
the first registry access; with none saved, the environment decides as before
(``$PRIVFAIR_REGISTRY``, the key file). The key lives only in the block's ``key`` field, a
``SecretStr`` that Prefect stores encrypted and never shows; it is never a flow parameter and
never logged. Save it once::

    python -m tasks.registry_blocks save --url postgresql://privfair@db/registry \\
        --key-file ~/.local/share/privfair/registry/registry.key
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import sqlalchemy as sa
from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from privfair.store.backends import RegistrySettings, using_registry
from privfair.store.files import StoreError

#: The name of the team's block (one registry per Prefect workspace).
BLOCK_NAME = "privfair"


class PrivfairRegistry(Block):
    """The team's privacy registry: where the lifetime ledgers are and their key."""

    _block_type_name = "Privfair Registry"
    _block_type_slug = "privfair-registry"
    _description = ("The privacy registry every privfair flow run charges: a folder or a "
                    "postgresql:// URL (no password: use ~/.pgpass) and its 32-byte key.")

    url: str = Field(description="A registry folder or a postgresql:// URL without a password.")
    key: SecretStr | None = Field(
        default=None, description="The registry key, hex (64 characters); empty reads the "
        "key file as the environment would.")

    def settings(self, *, name: str = BLOCK_NAME) -> RegistrySettings:
        """The library's settings; bad values are refused in one line naming the field."""
        source = f"privfair-registry/{name}"
        key = None
        if self.key is not None:
            try:
                key = bytes.fromhex(self.key.get_secret_value())
            except ValueError:
                raise StoreError(f"{source}.key: not hex (64 characters)") from None
        return RegistrySettings(url=self.url, key=key, source=f"{source}.url" if key is None
                                else source)


def save_block(*, url: str, key_file: Path | None, name: str = BLOCK_NAME) -> PrivfairRegistry:
    """Save (or replace) the team's registry block; the URL is checked first."""
    if url.startswith(("postgresql", "postgres:")) and sa.engine.make_url(url).password:
        raise StoreError("--url: carries a password, which would be stored in clear; put it "
                         "in ~/.pgpass or $PGPASSFILE")
    key = None
    if key_file is not None:
        raw = Path(key_file).expanduser().read_bytes()
        key = SecretStr(raw.hex())
    block = PrivfairRegistry(url=url, key=key)
    block.settings(name=name)  # refuse a bad URL or key before saving
    block.save(name, overwrite=True)
    return block


def load_settings(name: str = BLOCK_NAME) -> RegistrySettings | None:
    """The saved block's settings, or None when none is saved (the environment decides)."""
    try:
        # Prefect's async_dispatch types both outcomes; called synchronously, it is the block.
        block = cast(PrivfairRegistry, PrivfairRegistry.load(name))
    except ValueError:  # Prefect: no block document of that name
        return None
    return block.settings(name=name)


@contextlib.contextmanager
def team_registry() -> Iterator[None]:
    """Inside a flow run: use the saved block's registry, else the environment's."""
    with using_registry(load_settings()):
        yield


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m tasks.registry_blocks",
                                  description="save the team's privacy registry block")
    sub = cli.add_subparsers(dest="command", required=True)
    save = sub.add_parser("save", help="save or replace the block")
    save.add_argument("--url", required=True, help="registry folder or postgresql:// URL")
    save.add_argument("--key-file", type=Path, help="the registry.key to store as a Secret")
    save.add_argument("--name", default=BLOCK_NAME, help=f"block name (default {BLOCK_NAME})")
    args = cli.parse_args(argv)
    try:
        save_block(url=args.url, key_file=args.key_file, name=args.name)
    except (StoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"saved privfair-registry/{args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
