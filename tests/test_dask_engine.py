"""Counting marginals per partition of a Parquet dataset, locally and on a Dask LocalCluster."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.core.domain import Domain
from privfair.synth.measure import all_pairs, count_marginals, count_marginals_parquet

DOMAIN = Domain(("a", "b", "c"), (3, 4, 2))


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "codes"
    folder.mkdir()
    frames = []
    for k, n in enumerate((500, 1, 1200)):
        columns = {a: rng.integers(0, s, n).astype(np.uint8) for a, s in
                   zip(DOMAIN.attributes, DOMAIN.sizes, strict=True)}
        # two row groups in the last file: units are (file, row group)
        pq.write_table(pa.table(columns), folder / f"part-{k}.parquet", row_group_size=700)
        frames.append(columns)
    whole = {a: np.concatenate([f[a] for f in frames]) for a in DOMAIN}
    return folder, whole


def _expected(whole):
    return count_marginals(DOMAIN, [(a,) for a in DOMAIN] + all_pairs(DOMAIN), [whole])


def test_local_engine_equals_counting_the_whole_table(dataset):
    folder, whole = dataset
    got = count_marginals_parquet(DOMAIN, [(a,) for a in DOMAIN] + all_pairs(DOMAIN), folder)
    expected = _expected(whole)
    assert got.keys() == expected.keys()
    for clique in expected:
        np.testing.assert_array_equal(got[clique], expected[clique])
    with pytest.raises(ValueError, match="engine must be one of"):
        count_marginals_parquet(DOMAIN, [("a",)], folder, engine="spark")


def test_dask_engine_on_a_local_cluster_sums_partitions_on_the_driver(dataset):
    distributed = pytest.importorskip("distributed")
    folder, whole = dataset
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=":0") as cluster,
          distributed.Client(cluster) as client):
        got = count_marginals_parquet(DOMAIN, [(a,) for a in DOMAIN] + all_pairs(DOMAIN),
                                      folder, engine="dask", client=client)
        # no partial table stays on the cluster (releases are messages: wait for them)
        for _ in range(100):
            if not client.who_has():
                break
            time.sleep(0.05)
        assert not client.who_has()
    expected = _expected(whole)
    for clique in expected:
        np.testing.assert_array_equal(got[clique], expected[clique])


def test_release_on_dask_equals_the_local_release(toy_contract, toy_parquet, tmp_path):
    """Same counts, same seeded noise: the synthetic table is byte-identical."""
    import json

    from privfair.release.kinds import release_table as run_release

    distributed = pytest.importorskip("distributed")

    def release(engine: str, address: str | None) -> str:
        final = run_release({
            "contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 1.0,
            "delta": 1e-9, "method": "mst", "seed": 5, "insecure_seed": True,
            "out": str(tmp_path / engine / "releases"), "work_dir": str(tmp_path / engine),
            "max_iters": 200, "batch_size": 400, "engine": engine, "dask_address": address})
        return json.loads((final / "manifest.json").read_text())["files"]["synthetic.parquet"]

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        on_dask = release("dask", cluster.scheduler_address)
    assert on_dask == release("local", None)
