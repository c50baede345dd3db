"""The fast paths of issue 23.5 give exactly what the binary searches they replace gave.

Numeric binning (:func:`privfair.contracts.encoding._counted_bin_codes`) counts edges
instead of a ``searchsorted`` over clipped values; i.i.d. sampling
(:func:`privfair.synth.sampling._inverse_cdf`) runs a branchless binary search per group
instead of one ``searchsorted`` over every group's shifted CDF. Same codes, bit for bit,
for a given seed: release hashes (tests/test_parity.py) do not move.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfair.contracts.encoding import _bin_codes, _counted_bin_codes
from privfair.synth.sampling import _inverse_cdf


def _searchsorted_draw(shifted: np.ndarray, u: np.ndarray, parent_key: np.ndarray
                       ) -> np.ndarray:
    k = shifted.shape[1]
    flat = np.searchsorted(shifted.ravel(), u, side="right") - parent_key * k
    return np.minimum(flat, k - 1)


@pytest.mark.parametrize("seed", range(4))
def test_counted_binning_is_the_binary_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        edges = np.unique(np.round(rng.normal(0, 10, int(rng.integers(2, 40))),
                                   int(rng.integers(0, 3))))
        if len(edges) < 2:
            continue
        # bounds on, inside, outside the edges, infinite, or beside each other
        lower, upper = sorted(rng.choice(np.concatenate(
            [edges, rng.normal(0, 15, 4), [-np.inf, np.inf]]), 2))
        values = np.concatenate([rng.normal(0, 15, 200), edges, [lower, upper],
                                 [np.nan, np.inf, -np.inf], np.round(rng.normal(0, 10, 50))])
        expected = _bin_codes(list(edges), np.clip(values, lower, upper))
        got = _counted_bin_codes(list(edges), lower, upper, values)
        assert got.dtype == expected.dtype == np.int64
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", range(4))
def test_inverse_cdf_is_the_global_searchsorted(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        groups, k, n = int(rng.integers(1, 30)), int(rng.integers(1, 70)), int(
            rng.integers(0, 2000))
        cond = rng.dirichlet(np.full(k, float(rng.choice([0.05, 0.3, 1.0, 5.0]))),
                             size=groups)
        if rng.random() < 0.3:  # empty cells: repeated CDF values
            cond[rng.random(cond.shape) < 0.3] = 0.0
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0
        shifted = cdf + np.arange(groups)[:, None]
        parent_key = rng.integers(0, groups, n)
        u = rng.random(n) + parent_key
        if n:  # draws on the thresholds themselves and at the groups' ends
            at = rng.integers(0, n, n // 3)
            u[at] = shifted[parent_key[at], rng.integers(0, k, len(at))]
            u[:5] = parent_key[:5] + rng.choice([0.0, 1.0], min(n, 5))
        got = _inverse_cdf(shifted, u, parent_key)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, _searchsorted_draw(shifted, u, parent_key))


def test_inverse_cdf_falls_back_on_an_unsorted_table() -> None:
    rng = np.random.default_rng(5)
    shifted = np.array([[0.5, 0.2, 1.0], [1.1, np.nan, 2.0]])  # a negative mass, a NaN
    parent_key = rng.integers(0, 2, 500)
    u = rng.random(500) + parent_key
    np.testing.assert_array_equal(_inverse_cdf(shifted, u, parent_key),
                                  _searchsorted_draw(shifted, u, parent_key))


def test_contract_yaml_parsed_by_libyaml_as_by_the_python_loader() -> None:
    import yaml

    from privfair.contracts import schema
    from privfair.contracts.datasets import CONTRACTS_DIR

    for path in sorted(CONTRACTS_DIR.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert schema._load_yaml(text) == yaml.load(text, Loader=schema._ContractLoader)  # noqa: S506
    # YAML 1.2 floats and duplicate keys: the contract loader's own rules
    assert schema._load_yaml("a: 1e-6\n") == {"a": 1e-6}
    with pytest.raises(schema.ContractError, match="duplicate key 'a' at line 2"):
        schema.parse_contract("a: 1\na: 2\n")
    # a refused document is reported in the Python loader's words
    bad = "name: x\ncolumns: [a, b\n"
    with pytest.raises(yaml.YAMLError) as python_error:
        yaml.load(bad, Loader=schema._ContractLoader)  # noqa: S506
    with pytest.raises(schema.ContractError) as refused:
        schema.parse_contract(bad)
    assert str(python_error.value.problem) in str(refused.value)


def test_publication_takes_the_table_validation_decoded(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.contracts.datasets import CONTRACTS_DIR
    from privfair.contracts.schema import load_contract
    from privfair.release.tabular import post_noise
    from privfair.store.files import FileRef

    contract = load_contract(CONTRACTS_DIR / "compas.yaml")
    domain = contract.domain()
    rng = np.random.default_rng(0)
    path = tmp_path / "codes.parquet"
    pq.write_table(pa.table({a: rng.integers(0, domain.size(a), 50).astype(np.uint8)
                             for a in domain}), path)
    ref = FileRef.of(path)
    expected = post_noise.decode_codes(post_noise.read_codes(ref), contract)
    post_noise._DECODED.clear()
    post_noise._DECODED[(ref.sha256, contract.fingerprint())] = expected
    assert post_noise.decoded_synthetic(ref, contract) is expected  # handed over, once
    assert not post_noise._DECODED
    again = post_noise.decoded_synthetic(ref, contract)  # read and decoded again
    assert again is not expected
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(again, expected)
