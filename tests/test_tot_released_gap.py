"""Issue 42.6 (the unseen-table walk): a TOT report showed η 0.05, PASS and the released rows'
gap 0.0546 on one page with nothing relating them; it now says whether the rows' gap is
within η plus two standard errors of the difference of the two groups' rates."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from privfair.reporting.report import tot_section


def _manifest(eta: float) -> dict:
    return {"fairness_transform": {
        "applied": True,
        "parameters": {"eta": eta, "discrimination": "additive", "groups": "per_attribute"},
        "achieved_discrimination": {"max_additive_gap": eta, "input_max_additive_gap": 0.3},
        "columns": {"protected": ["sex", "band"], "outcome": "y", "features": ["f"]},
        "fairness_check": {"passed": True, "eta": eta, "achieved": eta}}}


def _rows(rate_a: float, rate_b: float, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    band = np.repeat(["a", "b"], n)
    y = np.concatenate([rng.random(n) < rate_a, rng.random(n) < rate_b])
    return pd.DataFrame({"sex": rng.choice(["f", "m"], 2 * n), "band": band,
                         "f": "x", "y": np.where(y, "yes", "no")})


def test_the_released_rows_gap_is_judged_against_eta_and_its_sampling_error():
    rows = _rows(0.30, 0.245, 20_000)  # a gap of about 0.055 at SE about 0.0044
    rates = rows.groupby("band")["y"].apply(lambda s: (s == "yes").mean())
    gap = float(rates.max() - rates.min())
    se = math.sqrt(sum(r * (1 - r) / 20_000 for r in rates))
    said = re.search(r"their largest, ([0-9.]+) \(band\), is (within|BEYOND) η \+ 2 "
                     r"standard errors of that difference \(([0-9.]+)\)",
                     tot_section(_manifest(0.05), rows))
    assert said is not None and said.group(2) == "within"
    assert math.isclose(float(said.group(1)), gap, abs_tol=1e-4)
    assert math.isclose(float(said.group(3)), 0.05 + 2 * se, abs_tol=1e-4)
    # the same gap against a bound it exceeds by far more than its sampling error
    assert "(band), is BEYOND" in tot_section(_manifest(0.03), rows)
