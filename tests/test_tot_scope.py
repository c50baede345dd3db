"""``tot.distortion_scope``: the distortion bounds per (group, x, y) or for the pooled map.

``per_group`` (the default) is SAFES eq. (10) as written; ``pooled`` is AIF360 OptTools'
constraint on the group-averaged map per (x, y), which SAFES's experiments ran. On COMPAS at
η = 0.08 the first is infeasible (a changed recidivism costs 2, so each group's rate moves by
at most 0.05) and the second is not: the COMPAS contract declares ``pooled``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privfair.cli import main
from privfair.contracts.datasets import contract_path
from privfair.contracts.schema import load_contract, parse_contract
from privfair.contracts.tot_settings import tot_setting
from privfair.evaluation.evaluate import load_embedded
from privfair.fair.tot import InfeasibleFairnessError, TOTransform

ETA = 0.08


def compas_transform(scope: str) -> tuple[TOTransform, pd.DataFrame]:
    contract = load_contract(contract_path("compas"))
    s = tot_setting(contract, eta=ETA)
    data = load_embedded("compas", split_seed=2024)
    frame = pd.concat([data.train, data.test], ignore_index=True)
    tot = TOTransform(d_cols=list(s.protected), x_cols=list(s.features), y_col=s.outcome,
                      domain=contract.domain(), eta=s.eta, discrimination=s.discrimination,
                      distortion=s.distortion, clist=s.clist, dlist=s.dlist,
                      distortion_scope=scope)
    return tot, frame


def test_compas_contract_declares_the_pooled_scope():
    assert tot_setting(load_contract(contract_path("compas"))).distortion_scope == "pooled"
    assert tot_setting(load_contract(contract_path("adult_safes"))).distortion_scope == \
        "per_group"


def test_per_group_is_infeasible_and_pooled_meets_eta_on_compas():
    per_group, frame = compas_transform("per_group")
    with pytest.raises(InfeasibleFairnessError) as info:
        per_group.fit(frame)
    assert info.value.family == "discrimination"

    pooled, frame = compas_transform("pooled")
    pooled.fit(frame)
    assert pooled.discrimination_["input_max_additive_gap"] > 2 * 0.05 + ETA  # per group: out
    assert pooled.discrimination_["max_additive_gap"] <= ETA + 1e-6

    # The bounds hold for the group-averaged map per (x, y), and the map uses the freedom:
    # some group's cell changes recidivism (cost 2 >= 1.99) for more than 5 % of its rows.
    layout = pooled.layout_
    counts = np.diff(pooled.ptr_)
    d, xy = np.divmod(np.repeat(pooled.keys_, counts), layout.n_xy)
    cost = pooled.distortion(layout.decode_xy(xy), layout.decode_xy(pooled.targets_))
    weight = np.repeat(pooled.mass_, counts) * pooled.probabilities_
    cells = layout.n_d * layout.n_xy
    row_mass = np.bincount(d * layout.n_xy + xy, weights=weight, minlength=cells)
    for c, bound in zip(pooled.clist, pooled.dlist, strict=True):
        moved = np.bincount(d * layout.n_xy + xy, weights=weight * (cost >= c),
                            minlength=cells)
        live = row_mass.reshape(layout.n_d, -1).sum(0) > 0
        pooled_share = (moved.reshape(layout.n_d, -1).sum(0)[live]
                        / row_mass.reshape(layout.n_d, -1).sum(0)[live])
        assert pooled_share.max() <= bound + 1e-6
        if c == 1.99:
            group_share = moved[row_mass > 0] / row_mass[row_mass > 0]
            assert group_share.max() > bound + 0.01

    # Applied to the table (repeated so that sampling noise is small), η holds.
    big = pd.concat([frame] * 40, ignore_index=True)
    out = pooled.transform(big, rng=np.random.default_rng(7))
    rates = out.groupby(["race", "sex"])["two_year_recid"].mean()
    assert rates.max() - rates.min() <= ETA + 0.01
    before = big.groupby(["race", "sex"])["two_year_recid"].mean()
    assert before.max() - before.min() > ETA + 0.1


def test_scopes_agree_with_one_group_and_an_unknown_scope_is_refused():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"d": np.zeros(400, dtype=np.int64),
                          "x": rng.integers(0, 3, 400), "y": rng.integers(0, 2, 400)})
    kw = {"d_cols": "d", "x_cols": "x", "y_col": "y", "domain": {"d": 2, "x": 3, "y": 2},
          "eta": 0.0, "distortion": lambda o, n: 1.0 * (o["x"] != n["x"]) + 2.0 * (o["y"] != n["y"])}
    a = TOTransform(distortion_scope="per_group", **kw).fit(frame)
    b = TOTransform(distortion_scope="pooled", **kw).fit(frame)
    assert a.objective_ == pytest.approx(b.objective_, abs=1e-7)
    assert b.to_manifest()["parameters"]["distortion_scope"] == "pooled"
    with pytest.raises(ValueError, match="distortion_scope"):
        TOTransform(distortion_scope="global", **kw).fit(frame)


def test_compas_release_at_eta_0_08_publishes_and_records_the_scope(tmp_path, capsys):
    code = main(["release", "--contract", "compas", "--method", "aim", "--fairness", "tot",
                 "--eta", str(ETA), "--epsilon", "1", "--delta", "1e-9",
                 "--out", str(tmp_path / "releases"), "--work-dir", str(tmp_path / "work"),
                 # a fixed test seed: with fresh noise, TOT at this eta is feasible on most
                 # draws of the AIM table but not all (one in CI read 0.0837 > 0.08)
                 "--seed", "7", "--insecure-seed", "--no-prefect"])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = Path(out.strip().splitlines()[-1])
    record = json.loads((folder / "manifest.json").read_text())["fairness_transform"]
    assert record["applied"] and record["fairness_check"]["passed"]
    assert record["parameters"]["distortion_scope"] == "pooled"
    assert "AIF360 OptTools" in record["distortion_scope"]
    assert record["achieved_discrimination"]["max_additive_gap"] <= ETA + 1e-6
    assert "tot.distortion_scope" in (folder / "report.html").read_text()


STABLE_TOT = """
name: stable_tot
version: "1"
description: Written before tot.distortion_scope existed.
columns:
  - {name: sex, type: categorical, categories: [female, male]}
  - {name: age, type: numeric, integer: true, bins: [0, 25, 45, 120]}
  - {name: risk, type: categorical, categories: ["no", "yes"]}
roles: {protected: [sex], admissible: [age], outcome: [risk]}
tot:
  features: [age]
  eta: 0.1
  distortion:
    combine: sum
    columns:
      age: {ordinal: [0, 1, 2]}
      risk: {changes: {}, default: 2}
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


def test_contracts_without_the_key_keep_their_fingerprints():
    # Fingerprints before tot.distortion_scope existed (commit 45dd4a7).
    old = "053f04c9c930cb110176f8f85e69425e5cdfbacb804d3af41b781629aeb2e65a"
    assert parse_contract(STABLE_TOT).fingerprint() == old
    explicit = STABLE_TOT.replace("  eta: 0.1\n", "  eta: 0.1\n  distortion_scope: per_group\n")
    assert parse_contract(explicit).fingerprint() == old
    pooled = STABLE_TOT.replace("  eta: 0.1\n", "  eta: 0.1\n  distortion_scope: pooled\n")
    assert parse_contract(pooled).fingerprint() != old
    # The shipped COMPAS contract: without the key it reads as per_group, as it did.
    compas = contract_path("compas").read_text()
    assert "  distortion_scope: pooled\n" in compas
    without = compas.replace("  distortion_scope: pooled\n", "")
    assert parse_contract(without).fingerprint() == parse_contract(
        compas.replace("distortion_scope: pooled", "distortion_scope: per_group")).fingerprint()
    assert parse_contract(without).fingerprint() != parse_contract(compas).fingerprint()
