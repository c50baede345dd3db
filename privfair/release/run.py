"""Run a release in this process: the library's entry point (``--no-prefect`` runs the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfair.release.options import ReleaseOptions
from privfair.release.protocol import Progress, run_release
from privfair.release.registry import family


def release(command: str, params: ReleaseOptions | Mapping[str, Any], *,
            progress: Progress | None = None) -> Path:
    """Run the release a publishing ``command`` makes of ``params``; returns its folder."""
    publisher = family(command)
    options = publisher.kinds[0].parse(params)
    return run_release(publisher.kind_for(options), options, progress=progress)


def release_table(params: ReleaseOptions | Mapping[str, Any], *,
                  progress: Progress | None = None) -> Path:
    """Run a table or GAN release in this process (the library's ``privfair release``)."""
    return release("release", params, progress=progress)
