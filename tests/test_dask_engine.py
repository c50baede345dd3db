"""Counting marginals per partition of a Parquet dataset, locally and on a Dask LocalCluster."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.core.domain import Domain
from privfair.synth.measure import (
    all_pairs,
    count_marginals,
    count_marginals_parquet,
    parquet_partitions,
)

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
        # two row groups in the last file: units are runs of one file's row groups
        pq.write_table(pa.table(columns), folder / f"part-{k}.parquet", row_group_size=700)
        frames.append(columns)
    whole = {a: np.concatenate([f[a] for f in frames]) for a in DOMAIN}
    return folder, whole


def _expected(whole):
    return count_marginals(DOMAIN, [(a,) for a in DOMAIN] + all_pairs(DOMAIN), [whole])


def test_counting_units_are_runs_of_row_groups_bounded_by_their_number(dataset, tmp_path):
    folder, _ = dataset
    files = [str(folder / f"part-{k}.parquet") for k in range(3)]
    # at most 64 units: one per row group here (1 + 1 + 2)
    assert parquet_partitions(folder) == [(files[0], (0,)), (files[1], (0,)),
                                          (files[2], (0,)), (files[2], (1,))]
    # fewer units asked than files: one per file, each file's groups in one run
    assert parquet_partitions(folder, units=2) == [(files[0], (0,)), (files[1], (0,)),
                                                   (files[2], (0, 1))]
    # one file of 10 row groups dealt into runs of ceil(10 / 3) = 4
    one = tmp_path / "one.parquet"
    pq.write_table(pa.table({"a": np.zeros(10, np.uint8)}), one, row_group_size=1)
    assert [groups for _, groups in parquet_partitions(one, units=3)] == [
        (0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]


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


def test_release_on_dask_equals_the_local_release(toy_contract, toy_parquet, tmp_path,
                                                   monkeypatch):
    """Same counts, same seeded noise: the synthetic table is byte-identical (one registry
    per release: a registry refuses a seed it has seen)."""
    import json

    from privfair.release.run import release_table as run_release

    distributed = pytest.importorskip("distributed")

    def release(engine: str, address: str | None) -> str:
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / engine / "registry"))
        # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / engine / "registry") + "-client")
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


def _request(toy_contract, toy_parquet, tmp_path, address):
    return {"contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 1.0,
            "delta": 1e-9, "method": "mst", "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work"), "engine": "dask", "dask_address": address}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("address", "match"), [
    ("tcp://203.0.113.7:8786", "plain TCP to another machine"),
    ("203.0.113.7:8786", "plain TCP to another machine"),
    ("tls://203.0.113.7:8786", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"),
    ("udp://127.0.0.1:8786", "expected tls://host:port"),
    ("tcp://127.0.0.1", "expected tls://host:port"),
    (None, "no scheduler answers"),  # a free local port: nothing listens
])
def test_a_bad_dask_address_is_refused_before_the_reservation(
        address, match, toy_contract, toy_parquet, tmp_path, monkeypatch):
    """Issue 21.6: refused by the check in one line, in well under the old 30 s, with no
    ledger entry."""
    from privfair.core.errors import ReleaseInputError
    from privfair.release.run import release_table as run_release
    from privfair.store.registry import registry_root

    pytest.importorskip("distributed")
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "registry") + "-client")
    address = address or f"tcp://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with pytest.raises(ReleaseInputError, match=match) as info:
        run_release(_request(toy_contract, toy_parquet, tmp_path, address))
    assert time.monotonic() - started < 10
    assert "\n" not in str(info.value)
    root = registry_root()
    assert not root.exists() or not list(root.rglob("*ledger*.json"))
    assert not (tmp_path / "releases").exists() or not any((tmp_path / "releases").iterdir())


def test_tls_address_with_certificates_is_checked_for_an_answer(monkeypatch):
    import dask

    from privfair.core.errors import ReleaseInputError
    from privfair.release.tabular.dask_engine import check_dask_address, security

    pytest.importorskip("distributed")
    tls = {"distributed.comm.tls.ca-file": "/ca.pem", "distributed.comm.tls.client.cert":
           "/c.pem", "distributed.comm.tls.client.key": "/k.pem"}
    with dask.config.set(tls):
        with pytest.raises(ReleaseInputError, match="no scheduler answers"):
            check_dask_address(f"tls://127.0.0.1:{_free_port()}")
        assert security("tls://example.org:8786").require_encryption
    check_dask_address(None)


def test_local_cluster_scratch_is_private_to_the_work_folder(tmp_path, monkeypatch):
    """Issue 21.6: the LocalCluster's local_directory is <work_dir>/dask-scratch, 0700; no
    world-readable dask-scratch-space appears in the system temp folder."""
    import stat
    import tempfile

    from privfair.release.tabular import private

    distributed = pytest.importorskip("distributed")
    system_tmp = tmp_path / "systmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    work = tmp_path / "work"
    made = []

    class Cluster(distributed.LocalCluster):
        def __init__(self, **kw):
            made.append(kw["local_directory"])
            super().__init__(**{**kw, "processes": False, "n_workers": 1,
                                "threads_per_worker": 1})

    monkeypatch.setattr(distributed, "LocalCluster", Cluster)
    monkeypatch.setattr(private, "_CLUSTERS", {})
    try:
        with private.dask_client(None, scratch=work) as client:
            assert client.submit(lambda: 1).result() == 1
    finally:
        for c in private._CLUSTERS.values():
            cluster = c.cluster
            c.close()
            cluster.close()
    assert made == [str(work / "dask-scratch")]
    assert stat.S_IMODE((work / "dask-scratch").stat().st_mode) == 0o700
    assert not any(p.name.startswith("dask-scratch") for p in system_tmp.iterdir())
