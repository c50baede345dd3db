"""How a report shows a noisy count (issue 35.4): the released value is post-processing of a
Gaussian draw, so a reader gets an estimate that is never negative, the noise that came with
it and a reading in words, never a bare "−305 rows clamped"."""

from __future__ import annotations

import math
from statistics import NormalDist

#: A count within this many noise deviations of 0 is read as "within noise of 0" when it is
#: read alone; the 2σ range shown beside an estimate uses it too.
WITHIN_NOISE = 2.0
#: The share of releases with no touched row at all in which some count still reads as
#: evidence of touched rows: the reading is one test per count, and a release reads all its
#: counts together (25 cells at 2σ each gave an alarm in about 4 releases of 10).
FAMILY_ALARM_RATE = 0.05


def evidence_threshold(cells: int) -> float:
    """How many noise deviations a count must stand above 0 to read as evidence of touched
    rows when ``cells`` counts are read together: one-sided Bonferroni at
    :data:`FAMILY_ALARM_RATE`, never below :data:`WITHIN_NOISE`."""
    z = NormalDist().inv_cdf(1.0 - FAMILY_ALARM_RATE / max(1, int(cells)))
    return max(WITHIN_NOISE, z)


def count_estimate(value: float) -> int:
    """The count shown as a count: the noisy value rounded and clamped at 0."""
    return max(0, int(round(float(value))))


def count_reading(value: float, sigma: float | None, *, cells: int = 1) -> str:
    """A noisy count in words: ``within noise of 0`` below :func:`evidence_threshold` σ (a
    negative value included: the true count is never negative), else about how many rows,
    with the ± 2σ range (clamped at 0). No ``|`` in the text: it goes into Markdown tables
    too.

    Parameters
    ----------
    value, sigma : float
        The noisy count and its noise's standard deviation.
    cells : int
        How many counts the reader sees together (every policy count of the release): the
        threshold grows with it so that clean columns raise no alarm in 95 % of releases.
    """
    value = float(value)
    if sigma is None or not math.isfinite(float(sigma)) or sigma <= 0:
        return f"about {count_estimate(value):,} rows"
    z = evidence_threshold(cells)
    threshold = z * float(sigma)
    if value < threshold:  # a negative value, however far below 0, is noise around 0
        among = f" among {cells} counts" if cells > 1 else ""
        return (f"within noise of 0 (under {z:.2g}σ = {threshold:,.0f}{among}): no evidence "
                "of any row")
    spread = WITHIN_NOISE * float(sigma)
    low, high = count_estimate(value - spread), count_estimate(value + spread)
    return f"about {count_estimate(value):,} rows (2σ range {low:,} to {high:,})"


NOISY_BY_DESIGN = (
    "These counts are noisy by design: each is the true count plus Gaussian noise of "
    "standard deviation σ, so that no single row can be inferred from them. A count under the "
    "threshold shown (which grows with the number of counts read together) says nothing about whether any row was touched; the raw noisy values (which can "
    "be negative) are in manifest.json.")
