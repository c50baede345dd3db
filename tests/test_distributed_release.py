"""A release over a partitioned Parquet dataset, and a partitioned output, locally and on a
Dask LocalCluster (issue 23.1)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.core.errors import ReleaseInputError
from privfair.release.tabular.dask_engine import WORKER_MALLOC


@pytest.fixture
def toy_dataset(tmp_path: Path, toy_frame: pd.DataFrame) -> Path:
    """The toy table as a hive-partitioned dataset: sex=F/…, sex=M/…, two files each."""
    folder = tmp_path / "toy-dataset"
    for sex, rows in toy_frame.groupby("sex"):
        part = folder / f"sex={sex}"
        part.mkdir(parents=True)
        rows = rows.drop(columns="sex")
        half = len(rows) // 2
        rows.iloc[:half].to_parquet(part / "part-0.parquet", index=False)
        rows.iloc[half:].to_parquet(part / "part-1.parquet", index=False)
    return folder


def _release(tmp_path: Path, monkeypatch, name: str, data: Path, toy_contract: Path,
             **extra) -> Path:
    from privfair.release.run import release_table

    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / name / "registry"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / name / "registry") + "-client")
    return release_table({
        "contract": str(toy_contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
        "method": "mst", "seed": 5, "insecure_seed": True,
        "out": str(tmp_path / name / "releases"), "work_dir": str(tmp_path / name / "work"),
        "max_iters": 200, "batch_size": 400, **extra})


def _files(folder: Path) -> dict[str, str]:
    return json.loads((folder / "manifest.json").read_text())["files"]


def test_a_dataset_release_equals_the_one_file_release(toy_contract, toy_parquet,
                                                        toy_dataset, tmp_path, monkeypatch):
    """Same rows in 4 files (one partition column in the folder names): same counts, same
    seeded noise, so the same synthetic table."""
    whole = _release(tmp_path, monkeypatch, "file", toy_parquet, toy_contract)
    parts = _release(tmp_path, monkeypatch, "dataset", toy_dataset, toy_contract)
    assert _files(parts)["synthetic.parquet"] == _files(whole)["synthetic.parquet"]
    manifest = json.loads((parts / "manifest.json").read_text())
    assert manifest["parameters"]["data_source"].startswith("operator-supplied Parquet dataset")
    assert manifest["validation"]["input"] == json.loads(
        (whole / "manifest.json").read_text())["validation"]["input"]


def test_the_dataset_schema_is_checked_before_the_reservation(toy_contract, toy_dataset,
                                                              tmp_path, monkeypatch):
    from privfair.store.registry import registry_root

    bad = toy_dataset / "sex=M" / "part-2.parquet"
    pd.DataFrame({"age": ["x"], "race": ["A"], "edu": ["HS"], "hours": [1],
                  "income": ["low"]}).to_parquet(bad, index=False)
    with pytest.raises(ReleaseInputError, match=r"file sex=M/part-2.parquet\): column 'age'"):
        _release(tmp_path, monkeypatch, "bad", toy_dataset, toy_contract)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseInputError, match="holds no Parquet files"):
        _release(tmp_path, monkeypatch, "bad", tmp_path / "empty", toy_contract)
    root = registry_root()
    assert not root.exists() or not list(root.rglob("*ledger*.json"))


@pytest.mark.parametrize(("extra", "match"), [
    ({"sample_mode": "round"}, "sample_mode 'round'"),
    ({"fairness_transform": "tot", "eta": 0.1}, "fairness_transform 'tot'"),
])
def test_partitioned_output_refuses_what_needs_the_whole_table(
        extra, match, toy_contract, toy_parquet, tmp_path, monkeypatch):
    with pytest.raises(ReleaseInputError, match=match):
        _release(tmp_path, monkeypatch, "refused", toy_parquet, toy_contract,
                 output="partitioned", **extra)


def test_part_sizes():
    from privfair.release.tabular.partitioned import part_sizes

    assert part_sizes(10, 4) == [4, 4, 2]
    assert part_sizes(8, 4) == [4, 4]
    assert part_sizes(3, 4) == [3]
    assert part_sizes(0, 4) == [0]


def test_dask_release_on_a_local_cluster_writes_a_partitioned_output(
        toy_contract, toy_dataset, tmp_path, monkeypatch):
    """The whole ``--engine dask`` release on privfair's LocalCluster (2 worker processes):
    per-file load and encoding, per-part counts summed, noise once, sampling in parts with
    spawned generators. The parts equal the local engine's, byte for byte; every part is in
    the manifest; no worker's scratch folder is readable by others."""
    distributed = pytest.importorskip("distributed")
    from privfair.release.tabular import private

    class Cluster(distributed.LocalCluster):
        def __init__(self, **kw):
            super().__init__(**{**kw, "n_workers": 2, "threads_per_worker": 1})

    monkeypatch.setattr(distributed, "LocalCluster", Cluster)
    monkeypatch.setattr(private, "_CLUSTERS", {})
    options = {"output": "partitioned", "part_rows": 400, "n_rows": 1500}
    try:
        on_dask = _release(tmp_path, monkeypatch, "dask", toy_dataset, toy_contract,
                           engine="dask", **options)
        (client,) = private._CLUSTERS.values()
        assert len(client.scheduler_info()["workers"]) == 2
        worker_dirs = client.run(lambda dask_worker: dask_worker.local_directory)
        scratch = tmp_path / "dask" / "work" / "dask-scratch"
        assert len(worker_dirs) == 2
        for folder in map(Path, worker_dirs.values()):  # checked while the workers live
            assert scratch in folder.parents
            for path in (folder, folder.parent, scratch):
                assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
        # the workers' malloc keeps a part's arrays on the heap (dask_engine.WORKER_MALLOC)
        environ = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})
        assert all(env == {k: str(v) for k, v in WORKER_MALLOC.items()}
                   for env in environ.values())
    finally:
        for c in private._CLUSTERS.values():
            cluster = c.cluster
            c.close()
            cluster.close()
    local = _release(tmp_path, monkeypatch, "local", toy_dataset, toy_contract, **options)

    files = _files(on_dask)
    parts = sorted(name for name in files if name.startswith("synthetic/"))
    assert parts == [f"synthetic/part-{i:05d}.parquet" for i in range(4)]
    assert "synthetic.parquet" not in files and "report.html" in files
    assert {n: files[n] for n in parts} == {n: _files(local)[n] for n in parts}
    rows = [pq.read_metadata(on_dask / name).num_rows for name in parts]
    assert rows == [400, 400, 400, 300]
    table = pd.read_parquet(on_dask / "synthetic")
    assert len(table) == 1500 and set(table.columns) >= {"age", "sex", "income"}
    manifest = json.loads((on_dask / "manifest.json").read_text())
    assert manifest["sampling"]["output"] == "partitioned"
    assert manifest["sampling"]["parts"] == 4 and manifest["sampling"]["n_rows"] == 1500
    assert manifest["validation"]["output"]["passed"]

    # the run's private staging (codes parts, tally) is gone
    assert not any((tmp_path / "dask" / "work" / "staging").rglob("*.parquet"))


@pytest.mark.prefect
def test_the_prefect_flow_runs_its_stages_on_a_dask_task_runner(
        prefect_harness, toy_contract, toy_dataset, tmp_path, monkeypatch):
    """Given an address, the flow submits every stage through prefect-dask's DaskTaskRunner;
    it publishes the bytes the in-process run publishes."""
    import sys

    distributed = pytest.importorskip("distributed")
    prefect_dask = pytest.importorskip("prefect_dask")
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from flows.kinds import run_local
    from privfair.release.tabular.plan import ReleaseParams

    submitted = []
    submit = prefect_dask.DaskTaskRunner.submit

    def spy(self, task, parameters, *args, **kw):
        submitted.append(task.name)
        return submit(self, task, parameters, *args, **kw)

    monkeypatch.setattr(prefect_dask.DaskTaskRunner, "submit", spy)
    options = {"output": "partitioned", "part_rows": 400, "n_rows": 1500}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "flow" / "registry"))
        # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "flow" / "registry") + "-client")
        flow = Path(run_local(ReleaseParams.model_validate({
            "contract": str(toy_contract), "data": str(toy_dataset), "epsilon": 1.0,
            "delta": 1e-9, "method": "mst", "seed": 5, "insecure_seed": True,
            "out": str(tmp_path / "flow" / "releases"),
            "work_dir": str(tmp_path / "flow" / "work"), "max_iters": 200,
            "batch_size": 400, "engine": "dask", "dask_address": cluster.scheduler_address,
            **options}), command="release"))
    assert {"load", "discretize", "measure-marginals", "estimate", "sample",
            "validate-output"} <= set(submitted)
    local = _release(tmp_path, monkeypatch, "local", toy_dataset, toy_contract, **options)
    parts = [n for n in _files(local) if n.startswith("synthetic/")]
    assert len(parts) == 4
    assert {n: _files(flow)[n] for n in parts} == {n: _files(local)[n] for n in parts}


def test_dataset_files_of_a_flat_and_a_hive_folder(tmp_path, toy_frame, toy_dataset):
    from privfair.contracts.encoding import dataset_files

    flat = tmp_path / "flat"
    flat.mkdir()
    toy_frame.to_parquet(flat / "part-1.parquet", index=False)
    toy_frame.to_parquet(flat / "part-0.parquet", index=False)
    files, partitions = dataset_files(flat)
    assert [p.name for p, _ in files] == ["part-0.parquet", "part-1.parquet"]
    assert all(keys == {} for _, keys in files) and partitions.names == []
    files, partitions = dataset_files(toy_dataset)
    assert [keys for _, keys in files] == [{"sex": "F"}] * 2 + [{"sex": "M"}] * 2
    assert partitions.names == ["sex"]


def test_a_parts_codes_are_written_as_the_one_file_codes_are(toy_contract, toy_dataset,
                                                               tmp_path):
    """Each worker writes its codes part as the single-process release writes its codes
    (``CODES_PARQUET``: delta-packed integers, no dictionary, no compression), which its
    counting pass reads back faster than zstd pages."""
    from privfair.contracts.schema import load_contract
    from privfair.release.tabular.partitioned import ingest_part

    contract = load_contract(toy_contract)
    source = next(iter(sorted(toy_dataset.rglob("*.parquet"))))
    ref, tally = ingest_part(str(source), {"sex": "F"}, {"sex": pa.string()},
                             contract, str(tmp_path), 0, 400, True)
    meta = pq.ParquetFile(ref.path).metadata
    assert meta.num_rows == pq.ParquetFile(source).metadata.num_rows and tally is not None
    for i in range(meta.num_columns):
        column = meta.row_group(0).column(i)
        assert column.compression == "UNCOMPRESSED"
        assert "PLAIN_DICTIONARY" not in column.encodings
        assert "RLE_DICTIONARY" not in column.encodings
