"""Randomness of a release: one independent generator per kind and stage.

Production runs draw every stage's generator from fresh OS entropy (numpy seeds an unseeded
``default_rng`` from ``secrets``-grade OS randomness), and the exact discrete Gaussian takes
its integers from ``random.SystemRandom``. A fixed seed exists only as an explicit, recorded
test mode (``insecure_seed``): whoever knows it can remove the noise, and two releases with
one seed cancel it. The seed itself is never recorded; :func:`seed_fingerprint` gives a
fingerprint keyed by the dataset's secret in the privacy registry, so a second release of the
dataset with the same seed is refused whoever runs it and from whatever folder.

Spawn keys: the table and gan kinds keep the one-element keys of their stages (so a seeded
table release is the same as before the protocol existed); every other kind's stages get
two-element keys ``(kind, stage)``, so no two kinds or stages ever share a stream.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

from privfair.release.registry import REGISTRY
from privfair.store.registry import seed_key

__all__ = ["KIND_KEYS", "STAGE_KEYS", "check_seed_given", "check_seed_policy", "kind_rng",
           "seed_fingerprint", "stage_rng"]

#: Spawn keys of the table and gan kinds' stages.
STAGE_KEYS = {"one-way": 1, "select": 2, "measure": 3, "sample": 4, "aim": 5, "tot": 6,
              "domains": 7, "gan": 8, "policies": 9, "independence": 10}
#: The kinds whose stages keep those one-element keys (older than the protocol).
TABLE_KINDS = ("table", "gan")
#: First spawn-key element of the other kinds, from their position in the registry (10 × it:
#: model 20, graph 30, embedding 40); their stages follow in declaration order.
KIND_KEYS = {entry.name: 10 * position for position, entry in enumerate(REGISTRY)
             if entry.name not in TABLE_KINDS}


def stage_rng(seed: int | None, stage: str) -> np.random.Generator:
    """A table/gan stage's generator: seeded streams for tests, OS entropy otherwise."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(STAGE_KEYS[stage],)))


def kind_rng(seed: int | None, kind: str, stage: str, *,
             stages: tuple[str, ...]) -> np.random.Generator:
    """The generator of ``stage`` of a kind declared with :data:`KIND_KEYS`.

    ``stage`` must be one of the kind's ``stages`` (its ``seed_stages``); its position there
    is the second spawn-key element.
    """
    if seed is None:
        return np.random.default_rng()
    if kind not in KIND_KEYS:
        return stage_rng(seed, stage)
    if stage not in stages:
        raise ValueError(f"kind {kind!r} declares no random stage {stage!r}; expected one of "
                         f"{list(stages)}")
    return np.random.default_rng(np.random.SeedSequence(
        seed, spawn_key=(KIND_KEYS[kind], stages.index(stage) + 1)))


def check_seed_policy(seed: int | None, insecure_seed: bool, *,
                      error: type[Exception] = ValueError) -> None:
    """Refuse a fixed seed unless the run asks for the insecure test mode (issue 10.3);
    ``error`` is the caller's one-line refusal type."""
    if seed is not None and not insecure_seed:
        raise error("seed: a fixed seed is a test mode that lets anyone who knows it remove the "
                    "noise; pass insecure_seed (--insecure-seed) to use one, or leave seed "
                    "empty for fresh OS entropy")


def check_seed_given(seed: int | None, insecure_seed: bool, *,
                     error: type[Exception] = ValueError) -> None:
    """Refuse the insecure test mode without a seed (issue 45.4): the flag alone changes
    nothing, so the run would not be the one asked for. (A resumed run is the exception: its
    checkpoint keeps the flag, never the seed.)"""
    if insecure_seed and seed is None:
        raise error("insecure_seed: --insecure-seed was given without --seed; it only allows "
                    "a fixed --seed (tests, demos): add --seed N, or drop --insecure-seed for "
                    "fresh OS entropy")


def seed_fingerprint(seed: int, *, dataset: str) -> str:
    """A keyed fingerprint of a test seed: ``"hmac-sha256:<hex>"``.

    HMAC-SHA256 of the seed under the dataset's random 32-byte key in the privacy registry,
    so equal seeds give equal fingerprints for one dataset while the fingerprint, unlike a
    plain hash of a small integer, cannot be inverted to the seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    digest = hmac.new(seed_key(dataset), str(int(seed)).encode("ascii"),
                      hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest}"
