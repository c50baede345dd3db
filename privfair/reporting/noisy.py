"""How a report shows a noisy count (issue 35.4): the released value is post-processing of a
Gaussian draw, so a reader gets an estimate that is never negative, the noise that came with
it and a reading in words, never a bare "−305 rows clamped"."""

from __future__ import annotations

import math

#: A count within this many noise deviations of 0 is read as "within noise of 0".
WITHIN_NOISE = 2.0


def count_estimate(value: float) -> int:
    """The count shown as a count: the noisy value rounded and clamped at 0."""
    return max(0, int(round(float(value))))


def count_reading(value: float, sigma: float | None) -> str:
    """A noisy count in words: ``within noise of 0`` below 2σ (a negative value included:
    the true count is never negative), else about how many rows, with the ± 2σ range
    (clamped at 0). No ``|`` in the text: it goes into Markdown tables too."""
    value = float(value)
    if sigma is None or not math.isfinite(float(sigma)) or sigma <= 0:
        return f"about {count_estimate(value):,} rows"
    spread = WITHIN_NOISE * float(sigma)
    if value < spread:  # a negative value, however far below 0, is noise around a small count
        return f"within noise of 0 (under 2σ = {spread:,.0f}): no evidence of any row"
    low, high = count_estimate(value - spread), count_estimate(value + spread)
    return f"about {count_estimate(value):,} rows (2σ range {low:,} to {high:,})"


NOISY_BY_DESIGN = (
    "These counts are noisy by design: each is the true count plus Gaussian noise of "
    "standard deviation σ, so that no single row can be inferred from them. A count within "
    "2σ of 0 says nothing about whether any row was touched; the raw noisy values (which can "
    "be negative) are in manifest.json.")
