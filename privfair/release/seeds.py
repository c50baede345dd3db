"""Randomness of a release: one independent generator per stage.

Production runs draw every stage's generator from fresh OS entropy (numpy seeds an unseeded
``default_rng`` from ``secrets``-grade OS randomness), and the exact discrete Gaussian takes
its integers from ``random.SystemRandom``. A fixed seed exists only as an explicit, recorded
test mode (``ReleaseParams.insecure_seed``): whoever knows it can remove the noise, and two
releases with one seed cancel it. The seed itself is never recorded; :func:`seed_fingerprint`
gives a keyed fingerprint that lets the store refuse a second release with the same seed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

__all__ = ["SEED_KEY_FILE", "seed_fingerprint", "stage_rng"]

_STAGE_KEYS = {"one-way": 1, "select": 2, "measure": 3, "sample": 4, "aim": 5, "tot": 6,
               "domains": 7, "gan": 8}

#: The secret HMAC key for seed fingerprints, inside the private work dir (mode 0600).
SEED_KEY_FILE = "seed-fingerprint.key"


def stage_rng(seed: int | None, stage: str) -> np.random.Generator:
    """An independent generator per stage: seeded streams for tests, OS entropy otherwise."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_STAGE_KEYS[stage],)))


def _seed_key(work_dir: Path) -> bytes:
    path = work_dir / SEED_KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    tmp = work_dir / f".{SEED_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    try:
        os.link(tmp, path)  # first writer wins; a concurrent run reads the winner's key
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_bytes()


class SeedOptions(BaseModel):
    """The test-mode seed of model and graph release parameters (see
    :func:`check_seed_policy`)."""

    seed: int | None = Field(None, ge=0, description="Tests and demos only, with "
                             "insecure_seed; never recorded.")
    insecure_seed: bool = Field(False, description="Test mode: allow a fixed seed (recorded "
                                "as such in the manifest).")


def check_seed_policy(seed: int | None, insecure_seed: bool, *,
                      error: type[Exception] = ValueError) -> None:
    """Refuse a fixed seed unless the run asks for the insecure test mode (issue 10.3);
    ``error`` is the caller's one-line refusal type."""
    if seed is not None and not insecure_seed:
        raise error("seed: a fixed seed is a test mode that lets anyone who knows it remove the "
                    "noise; pass insecure_seed (--insecure-seed) to use one, or leave seed "
                    "empty for fresh OS entropy")


def seed_fingerprint(seed: int, *, work_dir: str | Path) -> str:
    """A keyed fingerprint of a test seed: ``"hmac-sha256:<hex>"``.

    HMAC-SHA256 of the seed under a random 32-byte key kept in ``work_dir`` (created on first
    use, mode 0600), so equal seeds give equal fingerprints within one project while the
    fingerprint, unlike a plain hash of a small integer, cannot be inverted to the seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    key = _seed_key(Path(work_dir).expanduser().resolve())
    digest = hmac.new(key, str(int(seed)).encode("ascii"), hashlib.sha256).hexdigest()
    return f"hmac-sha256:{digest}"
