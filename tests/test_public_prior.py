"""Merged rare categories are spread by the contract's public prior (issue 15.3)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privfair.contracts.schema import parse_contract
from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.core.errors import ContractError
from privfair.synth.measure import compress_domain, measure_marginals
from privfair.synth.sampling import decompress

CONTRACT = """\
name: prior
version: "1"
columns:
  - name: colour
    type: categorical
    categories: [red, blue, teal, lime, gold, plum]
    prior: [40, 40, 0, 0, 18, 2]
  - name: size
    type: categorical
    categories: [S, M, L]
  - name: label
    type: categorical
    categories: ["no", "yes"]
roles: {protected: [], admissible: [size], outcome: [label]}
budget: {epsilon: 5.0, delta: 1.0e-6}
"""


def _merged_bucket(prior):
    domain = Domain(("a",), (6,))
    true = {("a",): np.array([5000, 4000, 3, 1, 0, 2])}
    (m,) = measure_marginals(true, [("a",)], rho=0.005, rng=np.random.default_rng(0),
                             ledger=PrivacyLedger(rho_budget=1.0), name="1-way")
    compression, _ = compress_domain([m], domain, threshold=3.0, prior=prior)
    assert list(compression.merged["a"]) == [2, 3, 4, 5]
    return compression


def test_merged_bucket_follows_the_prior_and_never_draws_a_zero_weight_code():
    compression = _merged_bucket({"a": [1, 1, 0, 6, 3, 1]})
    assert compression.spread_rule("a") == "public prior"
    assert compression.to_dict()["a"]["spread"] == "public prior"
    codes = {"a": np.full(20_000, 2)}  # every row in the merged bucket
    back = decompress(codes, compression, rng=np.random.default_rng(1))["a"]
    shares = np.bincount(back, minlength=6) / back.size
    assert shares[2] == 0.0 and shares[0] == shares[1] == 0.0
    # prior restricted to the merged codes 2..5: (0, 6, 3, 1) / 10; SE < 0.004
    np.testing.assert_allclose(shares[3:], [0.6, 0.3, 0.1], atol=0.02)


def test_without_a_prior_or_with_zero_weight_on_the_bucket_it_stays_uniform():
    for prior in (None, {"a": [1, 1, 0, 0, 0, 0]}):
        compression = _merged_bucket(prior)
        assert compression.spread_rule("a") == "uniform"
        back = decompress({"a": np.full(20_000, 2)}, compression,
                          rng=np.random.default_rng(2))["a"]
        np.testing.assert_allclose(np.bincount(back, minlength=6)[2:] / back.size,
                                   [0.25] * 4, atol=0.02)


@pytest.mark.parametrize("line, message", [
    ("prior: [40, 40, 0, 0, 18, 2]", None),
    ("prior: [1, 2]", "prior: 2 weights for 6 categories"),
    ("prior: [1, 1, 1, 1, 1, -1]", "weights must be finite numbers >= 0"),
    ("prior: [0, 0, 0, 0, 0, 0]", "not all zero"),
])
def test_contract_checks_the_prior(line, message):
    text = CONTRACT.replace("prior: [40, 40, 0, 0, 18, 2]", line)
    if message is None:
        assert parse_contract(text).priors() == {"colour": (40, 40, 0, 0, 18, 2)}
        return
    with pytest.raises(ContractError, match=message) as caught:
        parse_contract(text)
    assert "\n" not in str(caught.value)


def test_a_prior_is_part_of_the_fingerprint():
    with_prior = parse_contract(CONTRACT)
    without = parse_contract(CONTRACT.replace("    prior: [40, 40, 0, 0, 18, 2]\n", ""))
    assert without.priors() == {}
    assert with_prior.fingerprint() != without.fingerprint()


def test_release_spreads_rare_categories_by_the_prior_and_says_so(tmp_path):
    from privfair.release.run import release_table as run_release

    rng = np.random.default_rng(3)
    n = 3000
    colour = rng.choice(["red", "blue"], n)
    # rare (15 rows each, under 3σ ≈ 41 of the one-way noise): merged into one bucket
    colour[:60] = np.repeat(["teal", "lime", "gold", "plum"], 15)
    size = rng.choice(["S", "M", "L"], n)
    frame = pd.DataFrame({"colour": colour, "size": size,
                          "label": np.where(size == "L", "yes", "no")})
    (tmp_path / "prior.yaml").write_text(CONTRACT)
    frame.to_parquet(tmp_path / "prior.parquet", index=False)
    final = run_release({"contract": str(tmp_path / "prior.yaml"),
                         "data": str(tmp_path / "prior.parquet"), "epsilon": 1.0,
                         "delta": 1e-6, "method": "mst", "seed": 4, "insecure_seed": True,
                         "n_rows": 20_000, "out": str(tmp_path / "releases"),
                         "work_dir": str(tmp_path / "work")})
    manifest = json.loads((final / "manifest.json").read_text())
    record = manifest["method"]["compression"]["colour"]
    assert record["merged_codes"] == [2, 3, 4, 5] and record["spread"] == "public prior"
    released = pd.read_parquet(final / "synthetic.parquet")["colour"].astype(str)
    counts = released.value_counts()
    assert "teal" not in counts and "lime" not in counts  # zero prior weight
    assert counts.get("gold", 0) > counts.get("plum", 0)  # 18 : 2


def test_library_synthesizer_spreads_merged_buckets_by_its_prior():
    from privfair.core.domain import Roles
    from privfair.synth.synthesizer import FairSynthesizer

    domain = Domain(("a", "y"), (6, 2))
    rng = np.random.default_rng(3)
    a = np.repeat(np.arange(6), [5000, 4000, 3, 1, 0, 2])
    data = pd.DataFrame({"a": a, "y": rng.integers(0, 2, a.size)})
    roles = Roles(protected=(), admissible=(), outcome=("y",))
    kwargs = {"domain": domain, "roles": roles, "epsilon": 0.5, "delta": 1e-6}
    synth = FairSynthesizer(**kwargs, prior={"a": [1, 1, 0, 6, 3, 1]})
    synth.fit(data, rng=np.random.default_rng(0))
    assert synth.compression_.spread_rule("a") == "public prior"
    sample = synth.sample(20_000, rng=np.random.default_rng(1))
    assert not (np.asarray(sample["a"]) == 2).any()  # zero prior weight: never drawn
    plain = FairSynthesizer(**kwargs).fit(data, rng=np.random.default_rng(0))
    assert plain.compression_.spread_rule("a") != "public prior"
    for prior, message in (({"b": [1, 1]}, "'b' is not in the declared domain"),
                           ({"a": [1, 1]}, "'a' needs 6 weights"),
                           ({"a": [0] * 6}, "not all 0")):
        with pytest.raises(ValueError, match=message):
            FairSynthesizer(**kwargs, prior=prior)
