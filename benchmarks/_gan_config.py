"""GAN settings from the command line, for the GAN benchmarks.

Apart from ``_common`` so that importing ``_common`` (every benchmark does) does not make the
GAN code part of a reproduction section's sources (``benchmarks/reproduce/core.py:
section_sources`` follows imports inside functions too).
"""

from __future__ import annotations


def gan_overrides(items: list[str]) -> dict:
    """``FIELD=VALUE`` strings as GANConfig overrides, each value cast to the field's type."""
    from privfair.generative.gan import GANConfig

    defaults = GANConfig()
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = type(getattr(defaults, name))(value)
    return out
