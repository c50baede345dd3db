"""The Prefect flow and tasks. Only a few flow runs, through one session-scoped harness."""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path

import pytest
from conftest import SECRET_PREFIX

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from prefect.cache_policies import NO_CACHE  # noqa: E402

from flows.release import release, run_local  # noqa: E402
from privfair.cli import main  # noqa: E402
from privfair.release.table import post_noise as post_noise_lib  # noqa: E402
from privfair.release.table.plan import ReleaseInputError, ReleaseParams  # noqa: E402
from privfair.store.artefacts import FileRef, StoreError  # noqa: E402
from privfair.store.registry import list_releases  # noqa: E402
from tasks import post_noise, private, public  # noqa: E402


def params(contract, data, tmp_path, **kw) -> ReleaseParams:
    base = {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "prefair-greedy", "seed": 5, "insecure_seed": True, "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work")}
    base.update(kw)
    return ReleaseParams(**base)


def test_task_policies_keep_private_results_out_of_storage():
    """Static: private tasks never persist or cache; only estimate/sample cache."""
    for t in (private.load, private.validate_input, private.discretize,
              private.measure_one_way, private.select, private.measure_selected,
              public.preflight, public.publish, post_noise.fairness_transform,
              post_noise.validate_output):
        assert t.persist_result is False, t.name
        assert t.cache_policy is NO_CACHE, t.name
    for t in (post_noise.estimate, post_noise.sample):
        assert t.persist_result is True
        assert {type(p).__name__ for p in t.cache_policy.policies} == {"Inputs", "TaskSource"}
    assert private.load.retries == 2 and public.publish.retries == 2
    assert all(t.retries == 0 for t in (private.discretize, private.select,
                                        post_noise.estimate, post_noise.sample))


def test_only_io_errors_are_retried():
    from types import SimpleNamespace

    from tasks._common import retry_on_io_error

    def state(exc):
        return SimpleNamespace(data=exc)

    assert retry_on_io_error(None, None, state(OSError("disk hiccup")))
    assert not retry_on_io_error(None, None, state(ReleaseInputError("missing column")))
    assert not retry_on_io_error(None, None, state(StoreError("store is a file")))
    assert not retry_on_io_error(None, None, state(RuntimeError("bug")))


def test_release_params_schema_renders_a_form():
    """Flat parameters: the operator's choices only; no seed, no internal settings."""
    fields = release.parameters.model_dump()["properties"]
    assert set(fields) >= {"contract", "data", "epsilon", "delta", "method", "n_rows",
                           "sample_mode", "out", "discrete_noise", "fairness_transform", "eta",
                           "discrimination", "distortion", "max_time_s", "engine",
                           "dask_address", "data_docs"}
    assert not set(fields) & {"seed", "work_dir", "batch_size", "max_iters"}
    assert {"mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair"} <= set(
        fields["method"]["enum"])
    assert fields["fairness_transform"]["enum"] == ["none", "tot"]
    assert fields["epsilon"]["exclusiveMinimum"] == 0
    assert "ε" in fields["epsilon"]["description"]
    assert fields["engine"]["enum"] == ["local", "dask"]
    assert fields["data_docs"]["default"] is False  # GX Data Docs are opt-in
    assert "time budget" in fields["max_time_s"]["description"]


def test_deployments_expose_the_aim_time_budget():
    """serve.py and prefect.yaml both give max_time_s to both deployments (issue 15)."""
    import yaml

    sys.path.insert(0, str(ROOT / "deployments"))
    try:
        from serve import AIM_TIME_BUDGET_S, deployments
    finally:
        sys.path.remove(str(ROOT / "deployments"))
    served = {d.name: d for d in deployments()}
    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    declared = {d["name"]: d.get("parameters", {}) for d in spec["deployments"]}
    assert set(served) == set(declared) == {"monthly-adult", "ad-hoc"}
    for name, deployment in served.items():
        assert deployment.parameters["max_time_s"] == AIM_TIME_BUDGET_S
        assert declared[name]["max_time_s"] == AIM_TIME_BUDGET_S
        schema = deployment._parameter_openapi_schema.model_dump()["properties"]
        assert {"max_time_s", "engine", "dask_address"} <= set(schema)


def _decode_results(folder: Path) -> list[tuple[bytes, object]]:
    import cloudpickle

    out = []
    for path in folder.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            payload = json.loads(raw)
            out.append((raw, cloudpickle.loads(base64.b64decode(payload["result"]))))
    return out


@pytest.mark.prefect
def test_flow_release_artifacts_and_clean_result_storage(prefect_harness, capsys, caplog,
                                                        toy_contract, toy_parquet, toy_frame,
                                                        tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    caplog.set_level(logging.INFO, logger="prefect.flow_runs")
    final = Path(run_local(params(toy_contract, toy_parquet, tmp_path, data_docs=True)))
    assert final == tmp_path / "releases" / "toy" / "v1"
    assert (final / "synthetic.parquet").is_file()
    # stage logs in public terms
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "prefect.flow_runs")
    assert "charged ρ = " in text and "σ = " in text and "selected 5 cliques" in text
    assert "sampled " in text and " synthetic rows" in text
    # opted in: GX suites beside the contract fingerprint, output Data Docs linked from the
    # report
    manifest = json.loads((final / "manifest.json").read_text())
    output = manifest["validation"]["output"]
    docs = (final / output["data_docs"]).resolve()
    assert docs.is_file() and docs.parent.parent.parent.name == (
        manifest["contract"]["resolved_fingerprint"][:16])
    assert "toy-output" in docs.read_text()
    suite = json.loads((final / output["suites"]["output"]).read_text())
    assert {e["type"] for e in suite["expectations"]} >= {"expect_column_values_to_be_in_set"}
    assert f"href='{output['data_docs']}'" in (final / "report.html").read_text()
    # the run is recorded in the manifest and the catalog; the seed is no flow parameter
    run = manifest["orchestrator"]
    assert json.loads(list_releases(tmp_path / "releases")[0]["orchestrator"]) == run
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(run["flow_run_id"])
        limit = client.read_global_concurrency_limit_by_name("privfair-release-toy")
    assert flow_run.name == run["flow_run_name"] and "seed" not in flow_run.parameters
    assert flow_run.parameters["epsilon"] == 1.0 and limit.limit == 1
    # the CLI runs the same flow; the same seed and data reuse the cached estimate and sample
    # (in another registry and store: one registry refuses a second release of a seed)
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-2"))
    code = main(["release", "--contract", str(toy_contract), "--data", str(toy_parquet),
                 "--epsilon", "1", "--delta", "1e-9", "--method", "prefair-greedy", "--seed",
                 "5", "--insecure-seed", "--out", str(tmp_path / "releases-2"), "--work-dir",
                 str(tmp_path / "work")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip().splitlines()[-1] == str(tmp_path / "releases-2" / "toy" / "v1")
    assert [r["version"] for r in list_releases(tmp_path / "releases-2")] == ["v1"]

    work = tmp_path / "work"
    results = work / "prefect-results"
    assert results.stat().st_mode & 0o777 == 0o700
    decoded = _decode_results(results)
    assert len(decoded) == 2  # estimate + sample, nothing from the private side
    true_counts = [json.dumps(toy_frame[c].value_counts().sort_index().tolist())
                   for c in ("sex", "race", "edu", "income")]
    for raw, value in decoded:
        assert isinstance(value, FileRef)
        assert Path(value.path).parent == work / "artefacts"
        for needle in (SECRET_PREFIX, "PAR1", "staging", "codes.parquet", str(toy_parquet)):
            assert needle.encode() not in raw and needle not in value.path
        for counts in true_counts:
            assert counts.encode() not in raw
    assert list((work / "staging").iterdir()) == []

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(
            any_=["privfair-release", "privfair-release-ledger"])))
        progress = [a for a in client.read_artifacts() if a.type == "progress"]
        link = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(
            any_=["privfair-release-report"])))
    assert any(a.data.endswith(f"({(final / 'report.html').as_uri()})") for a in link)
    kinds = {a.key: a for a in artifacts}
    assert "Guarantee" in kinds["privfair-release"].data
    assert "| Item | Value |" in kinds["privfair-release"].data
    assert "Fairness check | passed" in kinds["privfair-release"].data
    table = kinds["privfair-release-ledger"].data
    table = json.loads(table) if isinstance(table, str) else table
    assert table[-1]["step"] == "total"
    assert all(len(r["rho"].replace(".", "").lstrip("0").split("e")[0]) <= 4 for r in table)
    assert int(table[-1]["queries"]) == sum(int(r["queries"]) for r in table[:-1]) > 0
    assert progress and any(float(a.data) == 100.0 for a in progress)


@pytest.mark.prefect
def test_flow_fault_then_rerun_and_bad_input(prefect_harness, toy_contract, toy_parquet,
                                            toy_frame, tmp_path, monkeypatch, store_snapshot,
                                            caplog):
    store = tmp_path / "releases"

    class Injected(RuntimeError):
        pass

    def boom(*a, **k):
        raise Injected("injected in sample")

    with monkeypatch.context() as m:
        m.setattr(post_noise_lib, "sample", boom)
        with pytest.raises(Injected):
            run_local(params(toy_contract, toy_parquet, tmp_path))
    assert store_snapshot(store) == {}
    assert list((tmp_path / "work" / "staging").iterdir()) == []
    assert Path(run_local(params(toy_contract, toy_parquet, tmp_path))).name == "v1"

    before = store_snapshot(store)
    bad = tmp_path / "bad.parquet"
    toy_frame.drop(columns=["income"]).to_parquet(bad, index=False)
    caplog.clear()
    with pytest.raises(ReleaseInputError, match=r"missing column\(s\) \['income'\]"):
        run_local(params(toy_contract, bad, tmp_path, seed=None))
    assert store_snapshot(store) == before
    # a refusal is one ERROR line, without a traceback
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    refused = [r for r in errors if "release refused: ReleaseInputError" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in errors]
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in errors)


@pytest.mark.prefect
def test_flow_parameter_max_time_s_reaches_the_aim_rounds(prefect_harness, toy_contract,
                                                         toy_parquet, tmp_path, monkeypatch):
    """The flow's max_time_s (as a deployment passes it) is AIM's time budget: an expired
    budget makes round 1 the final one, which spends the rest of ρ, and caps the final fit."""
    from prefect.client.orchestration import get_client

    from privfair.core.accounting import zcdp_rho
    from privfair.release.table import post_noise as lib

    fits = []
    original = lib.estimate

    def recording(*args, **kwargs):
        fits.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(lib, "estimate", recording)
    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    final = Path(release(contract=str(toy_contract), data=str(toy_parquet), epsilon=1.0,
                         delta=1e-9, method="aim", max_time_s=1e-9,
                         out=str(tmp_path / "releases")))
    # The final fit starts from the last round's model and gets only what the budget left
    # (its floor, a share of max_time_s), as on the in-process path.
    (fit,) = fits
    assert fit["warm_start"] is not None and 0 < fit["max_time_s"] <= 1e-9
    manifest = json.loads((final / "manifest.json").read_text())
    assert [e["name"] for e in manifest["ledger"]] == [
        "AIM initial one-way marginals", "AIM select round 1", "AIM measure round 1"]
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(
        zcdp_rho(epsilon=1.0, delta=1e-9))
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(manifest["orchestrator"]["flow_run_id"])
    assert run.parameters["max_time_s"] == 1e-9


@pytest.mark.prefect
def test_flow_counts_on_dask(prefect_harness, toy_contract, toy_parquet, tmp_path, monkeypatch):
    """engine=dask through Prefect: every measurement stage counts per row group on the
    cluster (a client inside the task), and the seeded release equals the local one."""
    distributed = pytest.importorskip("distributed")

    def release_on(engine: str, address: str | None) -> dict:
        # a registry each: one registry refuses a second release of one test seed
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / engine / "registry"))
        final = run_local(params(toy_contract, toy_parquet, tmp_path / engine, engine=engine,
                                 dask_address=address, method="mst", batch_size=400,
                                 max_iters=200))
        return json.loads((Path(final) / "manifest.json").read_text())

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        on_dask = release_on("dask", cluster.scheduler_address)
        counted = dict(cluster.scheduler.task_prefixes["count_partition"].state_counts)
    # 1-way, all pairs (select), selected pairs: 3 stages x the codes' row groups (>= 2)
    assert counted.get("memory", 0) >= 6, counted
    local = release_on("local", None)
    # same counts, same seeded noise: the same synthetic table
    assert on_dask["files"]["synthetic.parquet"] == local["files"]["synthetic.parquet"]
