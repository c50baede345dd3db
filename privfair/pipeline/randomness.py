"""Randomness of a release: one independent generator per stage.

Production runs draw every stage's generator from fresh OS entropy; a seed exists only for
tests and demos and is never recorded.
"""

from __future__ import annotations

import numpy as np

_STAGE_KEYS = {"one-way": 1, "select": 2, "measure": 3, "sample": 4, "aim": 5, "tot": 6,
               "domains": 7, "gan": 8}


def stage_rng(seed: int | None, stage: str) -> np.random.Generator:
    """An independent generator per stage: seeded streams for tests, OS entropy otherwise."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_STAGE_KEYS[stage],)))
