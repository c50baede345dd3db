"""Issue 21.2: a refusal caused by private data is a free, repeatable membership test.

After the reservation a release never stops or speaks on a condition of the private values:
values outside the declared domain, nulls and values that are not numbers get the contract's
policy (drop, clamp, map), and the rows each policy touched are released only as noisy
counts charged to the run. Only public facts (the file's schema, the parameters) refuse, and
before the reservation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_CONTRACT
from test_cli import release_argv, run_cli

from privfair.contracts.encoding import (
    PolicyTally,
    discretize,
    encode,
    policy_cells,
    policy_sensitivity,
)
from privfair.contracts.schema import load_contract, parse_contract
from privfair.core.errors import ReleaseInputError
from privfair.release.kinds.table.kind import TABLE
from privfair.release.policy_counts import LEDGER_NAME, POLICY_SHARE
from privfair.release.protocol import run_release
from privfair.store.registry import registry_ledgers


def _contract(tmp_path: Path, text: str = TOY_CONTRACT, name: str = "toy") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _kinds(contract_path: Path) -> list[str]:
    ledgers = registry_ledgers(load_contract(contract_path).name)
    return [e["kind"] for e in ledgers[0]["entries"]] if ledgers else []


def _release(tmp_path: Path, contract: Path, data: Path, *, seed: int = 3,
             out: str = "releases") -> dict:
    params = {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
              "method": "independent", "seed": seed, "insecure_seed": True,
              "out": str(tmp_path / out), "work_dir": str(tmp_path / f"w-{out}")}
    folder = run_release(TABLE, params)
    return json.loads((Path(folder) / "manifest.json").read_text())


def _assert_noisy_counts(manifest: dict, contract: Path) -> None:
    record = manifest["validation"]["input"]
    assert record["refused_on_values"] is False
    cells = policy_cells(load_contract(contract))
    assert [(r["column"], r["action"]) for r in record["touched_rows"]] == cells
    noise = record["noise"]
    sens = policy_sensitivity(load_contract(contract))
    rho = POLICY_SHARE * manifest["guarantee"]["rho"]
    assert noise["rho"] == pytest.approx(rho)
    assert noise["sigma"] == pytest.approx(sens / math.sqrt(2 * rho))
    (entry,) = [e for e in manifest["ledger"] if e["name"] == LEDGER_NAME]
    assert entry["rho"] == pytest.approx(rho) and entry["sigma"] == pytest.approx(noise["sigma"])
    assert entry["sensitivity"] == pytest.approx(sens)
    # exact discrete noise (issue 41.2): integers (σ is about 16 at ε = 1 here)
    assert all(r["noisy_count"] == round(r["noisy_count"]) for r in record["touched_rows"])
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(
        manifest["guarantee"]["rho"])


# --- (a) the Holand-Netherlands probe ------------------------------------------------------


def test_a_category_held_by_one_row_left_out_of_the_contract_still_publishes(
        tmp_path, toy_frame):
    frame = toy_frame.copy()
    frame.loc[17, "race"] = "D"  # one person, the only one with race D
    data = tmp_path / "d.parquet"
    frame.to_parquet(data, index=False)
    contract = _contract(tmp_path)  # race: [A, B, C], out_of_domain defaults to drop
    manifest = _release(tmp_path, contract, data)
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    _assert_noisy_counts(manifest, contract)


# --- (b) narrowing a numeric range ---------------------------------------------------------


def test_a_narrowed_numeric_range_still_publishes(tmp_path, toy_frame):
    frame = toy_frame.copy()
    frame.loc[5, "age"] = 89
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    narrowed = TOY_CONTRACT.replace("bins: [18, 30, 45, 65, 90]", "bins: [18, 30, 45, 65, 88]")
    contract = _contract(tmp_path, narrowed)
    manifest = _release(tmp_path, contract, data)
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    _assert_noisy_counts(manifest, contract)


# --- (c) nulls under a drop (formerly refuse) policy ---------------------------------------


def test_nulls_in_a_refuse_column_publish(tmp_path, toy_frame):
    frame = toy_frame.copy()
    frame["age"] = frame["age"].astype(float)
    frame.loc[[3, 9], "age"] = np.nan  # toy's age: nulls: refuse (the deprecated alias)
    frame.loc[4, "sex"] = None
    data = tmp_path / "d.parquet"
    frame.to_parquet(data, index=False)
    contract = _contract(tmp_path)
    manifest = _release(tmp_path, contract, data)
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    _assert_noisy_counts(manifest, contract)
    assert manifest["validation"]["input"]["policies"]["age"] == {
        "out_of_domain": "drop", "nulls": "drop"}


def test_values_that_are_not_numbers_and_infinities_publish(tmp_path, toy_frame):
    frame = toy_frame.astype({"hours": object, "age": object})
    frame.loc[3, "age"] = "forty"
    frame.loc[4, "hours"] = "inf"
    frame.loc[5, "hours"] = "-Infinity"
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    contract = _contract(tmp_path)
    manifest = _release(tmp_path, contract, data)
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    _assert_noisy_counts(manifest, contract)


def test_empty_input_publishes_from_noise(tmp_path, toy_frame):
    data = tmp_path / "empty.csv"
    data.write_text(",".join(toy_frame.columns) + "\n")
    contract = _contract(tmp_path)
    manifest = _release(tmp_path, contract, data)
    assert _kinds(contract) == ["open", "reserve", "spend", "publish"]
    assert manifest["validation"]["input"]["refused_on_values"] is False


# --- (d) public facts are still refused, before the reservation ----------------------------


@pytest.mark.parametrize("case", ["missing-csv", "missing-parquet", "type-parquet"])
def test_schema_problems_are_refused_before_the_reservation(case, capsys, tmp_path,
                                                            toy_frame):
    contract = _contract(tmp_path)
    if case == "missing-csv":
        data, words = tmp_path / "d.csv", ["missing column", "'race'"]
        toy_frame.drop(columns=["race"]).to_csv(data, index=False)
    elif case == "missing-parquet":
        data, words = tmp_path / "d.parquet", ["missing column", "'sex'"]
        toy_frame.drop(columns=["sex"]).to_parquet(data, index=False)
    else:
        data, words = tmp_path / "d.parquet", ["'age'", "type text", "numeric"]
        toy_frame.astype({"age": str}).to_parquet(data, index=False)
    store = tmp_path / "releases"
    code, out, err = run_cli(capsys, *release_argv(contract, data, store, tmp_path / "w"))
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert all(w in line for w in words), line
    assert _kinds(contract) == []  # no reserve, no ledger at all
    assert not store.exists()


# --- (e) D and D' differ in one out-of-domain row: only noisy fields differ ----------------


_NOISY_KEYS = {"noisy_count", "published_at", "started_at", "estimated_total", "n_rows",
               "rho_spent_after", "fingerprint", "iterations", "loss", "time_s", "version",
               "orchestrator", "code_version", "files", "run_id",
               "resolved_fingerprint"}


def _shape(value, key=None):
    """The manifest with every noisy or per-run leaf replaced by its type."""
    if key in _NOISY_KEYS:
        return type(value).__name__
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, float):
        return type(value).__name__
    return value


def test_neighbours_differing_in_one_out_of_domain_row_publish_the_same_structure(
        tmp_path, toy_frame):
    contract = _contract(tmp_path)
    d = tmp_path / "d.parquet"
    toy_frame.to_parquet(d, index=False)
    neighbour = pd.concat([toy_frame, toy_frame.iloc[[0]].assign(race="Martian")],
                          ignore_index=True)
    d2 = tmp_path / "d2.parquet"
    neighbour.to_parquet(d2, index=False)
    m1 = _release(tmp_path, contract, d, seed=11, out="r1")
    # another dataset name: one test seed serves one release of a dataset
    m2 = _release(tmp_path, _contract(tmp_path, TOY_CONTRACT.replace(
        "name: toy", "name: toy2"), "toy2"), d2, seed=11, out="r2")
    assert "Martian" not in json.dumps(m2)
    m2 = json.loads(json.dumps(m2).replace("toy2", "toy"))
    assert _shape(m1) == _shape(m2)


# --- the encoder: every row encoded or dropped, the tally per column and action -----------


POLICY_CONTRACT = """\
name: p
version: "1"
columns:
  - {name: c, type: categorical, categories: [x, y, other], out_of_domain: "other:other",
     nulls: refuse}
  - {name: n, type: numeric, bins: [0, 10, 20], out_of_domain: clamp, nulls: "as:[10, 20]"}
  - {name: d, type: categorical, categories: [a, b]}
budget: {epsilon: 1.0, delta: 1.0e-6}
"""


def test_the_encoder_applies_every_policy_and_tallies_it():
    contract = parse_contract(POLICY_CONTRACT)
    frame = pd.DataFrame({"c": ["x", "zz", None, "y", "x"],
                          "n": ["5", "25", "7", None, "abc"],
                          "d": ["a", "b", "b", "q", "a"]})
    enc = encode(frame, contract)
    assert enc.keep.tolist() == [True, True, False, False, False]
    assert enc.codes["c"].tolist() == [0, 2] and enc.codes["n"].tolist() == [0, 1]
    assert enc.tally.to_dict() == {"c": {"mapped": 1, "dropped": 1},
                                   "n": {"clamped": 1, "mapped": 1, "dropped": 1},
                                   "d": {"dropped": 1}}
    tally = PolicyTally()
    codes = discretize(frame, contract, tally=tally)
    assert codes["d"].tolist() == [0, 1] and tally == enc.tally
    assert policy_cells(contract) == [("c", "dropped"), ("c", "mapped"), ("n", "dropped"),
                                      ("n", "clamped"), ("n", "mapped"), ("d", "dropped"),
                                      ("(unparsed record)", "dropped")]
    assert policy_sensitivity(contract) == pytest.approx(math.sqrt(3))
    # refuse is a deprecated alias of drop; its contracts keep their fingerprint
    assert contract.column("c").null_policy.kind == "drop"
    renamed = parse_contract(POLICY_CONTRACT.replace("nulls: refuse", "nulls: drop"))
    assert renamed.fingerprint() == contract.fingerprint()


def test_check_source_schema_reads_no_rows(tmp_path, toy_frame):
    from privfair.contracts.encoding import check_source_schema

    contract = load_contract(_contract(tmp_path))
    data = tmp_path / "d.csv"
    toy_frame.head(0).to_csv(data, index=False)
    assert set(check_source_schema(data, contract)) == set(contract.column_names)
    toy_frame.assign(zip="1").to_parquet(tmp_path / "x.parquet", index=False)
    with pytest.raises(ReleaseInputError, match="unexpected column.*zip"):
        check_source_schema(tmp_path / "x.parquet", contract)
