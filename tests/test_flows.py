"""The Prefect flows of the release protocol (``flows/kinds.py``, ``tasks/stages.py``).

Static checks of every flow and every stage task need no server; the few flow runs share the
session-scoped harness.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SECRET_PREFIX
from kind_cases import CASES

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from prefect.cache_policies import NO_CACHE  # noqa: E402

from flows.kinds import FLOWS, release, run_local  # noqa: E402
from privfair.cli import main  # noqa: E402
from privfair.release import protocol  # noqa: E402
from privfair.release.kinds.table import kind as table_kind  # noqa: E402
from privfair.release.kinds.table.kind import TABLE  # noqa: E402
from privfair.release.protocol import plan_release  # noqa: E402
from privfair.release.registry import KINDS  # noqa: E402
from privfair.release.tabular.plan import ReleaseInputError, ReleaseParams  # noqa: E402
from privfair.store.catalog import list_releases  # noqa: E402
from privfair.store.files import StoreError  # noqa: E402
from tasks import ops  # noqa: E402
from tasks.stages import _stage_task  # noqa: E402

#: The kinds with a small request in kind_cases.py (a new kind adds one there).
COVERED = [kind for kind in KINDS if kind.name in CASES]


def params(contract, data, tmp_path, **kw) -> ReleaseParams:
    base = {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "prefair-greedy", "seed": 5, "insecure_seed": True,
            "out": str(tmp_path / "releases"), "work_dir": str(tmp_path / "work")}
    base.update(kw)
    if base["seed"] is None and "insecure_seed" not in kw:  # fresh entropy: the test mode
        base["insecure_seed"] = False  # goes with a seed only (issue 45.4)
    return ReleaseParams(**base)


@pytest.mark.parametrize("kind", COVERED, ids=lambda k: k.name)
def test_stage_tasks_never_retry_cache_or_persist(kind, toy_contract, toy_parquet, tmp_path):
    """Every stage of every kind, as the Prefect driver runs it: a retry of a private stage
    would be a second, charged run, and no stage result may land in result storage."""
    case = CASES[kind.name]
    planned = protocol.plan_release(kind, case.params(toy_contract, toy_parquet, tmp_path))
    stages = kind.stages(planned.plan)
    assert stages and any(s.private for s in stages) and any(s.noise for s in stages)
    for stage in stages:
        t = _stage_task(stage)
        assert t.retries == 0, stage.name
        assert t.persist_result is False, stage.name
        assert t.cache_policy is NO_CACHE, stage.name
        assert t.name == stage.name.replace(" ", "-")


def test_release_form_is_flat_and_renders():
    """Flat parameters: the operator's choices only; no seed, no internal settings."""
    fields = release.parameters.model_dump()["properties"]
    assert set(fields) >= {"contract", "data", "epsilon", "delta", "method", "n_rows",
                           "sample_mode", "out", "discrete_noise", "fairness_transform", "eta",
                           "discrimination", "distortion", "max_time_s", "engine",
                           "dask_address", "data_docs"}
    assert not set(fields) & {"seed", "insecure_seed", "work_dir", "batch_size", "max_iters"}
    assert {"mst", "prefair-greedy", "prefair-exact", "aim", "aim-fair"} <= set(
        fields["method"]["enum"])
    assert fields["fairness_transform"]["enum"] == ["none", "tot"]
    assert "ε" in fields["epsilon"]["description"]
    assert fields["engine"]["enum"] == ["local", "dask"]
    assert fields["data_docs"]["default"] is False  # GX Data Docs are opt-in
    assert "time budget" in fields["max_time_s"]["description"]


@pytest.mark.parametrize("command", sorted(FLOWS))
def test_every_form_is_flat_described_and_seedless(command):
    flow = FLOWS[command]
    schema = flow.parameters.model_dump()
    fields = schema["properties"]
    assert fields and not set(fields) & {"seed", "insecure_seed", "work_dir"}
    for name, field in fields.items():
        assert field.get("description"), f"{command}: {name} has no description"
        # flat: scalars, choices and lists of scalars only (the UI renders them as inputs)
        assert "$ref" not in json.dumps(field) and "allOf" not in field, (command, name)
    assert schema.get("definitions", {}) == {}
    assert flow.description


def test_deployments_expose_the_aim_time_budget():
    """serve.py and prefect.yaml both give max_time_s to both deployments (issue 15)."""
    import yaml

    sys.path.insert(0, str(ROOT / "deployments"))
    try:
        from serve import AIM_TIME_BUDGET_S, deployments
    finally:
        sys.path.remove(str(ROOT / "deployments"))
    served = list(deployments())
    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    # Every publishing command has a deployment, in serve.py and in prefect.yaml alike.
    assert {(d.flow_name, d.name) for d in served} == {
        ("privfair-release", "monthly-adult"), *((f"privfair-{c}", "ad-hoc") for c in FLOWS)}
    # Module paths of the installed flows package; nothing deployed loads benchmarks/.
    assert {d["entrypoint"] for d in spec["deployments"]} == {
        f"flows.kinds:{c}" for c in FLOWS}
    declared = {d["name"]: d.get("parameters", {}) for d in spec["deployments"]
                if d["entrypoint"] == "flows.kinds:release"}
    for deployment in served:
        schema = deployment._parameter_openapi_schema.model_dump()["properties"]
        assert "seed" not in schema and "insecure_seed" not in schema
        if deployment.flow_name != "privfair-release":
            continue
        assert deployment.entrypoint == "flows.kinds.release"
        assert deployment.parameters["max_time_s"] == AIM_TIME_BUDGET_S
        assert declared[deployment.name]["max_time_s"] == AIM_TIME_BUDGET_S
        assert {"max_time_s", "engine", "dask_address"} <= set(schema)


def test_every_flow_loads_from_its_entrypoint():
    """A served or worker run imports its flow by module path from the installed package."""
    from prefect.flows import load_flow_from_entrypoint

    for command, flow in FLOWS.items():
        assert flow.fn.__qualname__ == command
        loaded = load_flow_from_entrypoint(f"flows.kinds:{command}")
        assert loaded.name == flow.name == f"privfair-{command}"


def _prefect_files() -> list[Path]:
    """Every file Prefect wrote as results (the default local storage and the home)."""
    from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH

    roots = {Path(PREFECT_LOCAL_STORAGE_PATH.value()), Path(PREFECT_HOME.value()) / "storage"}
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


@pytest.mark.prefect
def test_flow_release_artifacts_and_clean_result_storage(prefect_harness, capsys, caplog,
                                                        toy_contract, toy_parquet, toy_frame,
                                                        tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    caplog.set_level(logging.INFO, logger="prefect.flow_runs")
    before = set(_prefect_files())
    options = params(toy_contract, toy_parquet, tmp_path, data_docs=True)
    planned = plan_release(TABLE, options)  # the CLI's priced plan: the flow runs it
    final = Path(run_local(options, command="release", planned=planned))
    assert final == tmp_path / "releases" / "toy" / "v1"
    assert json.loads((final / "manifest.json").read_text())["run_id"] == planned.plan.run_id
    assert (final / "synthetic.parquet").is_file()
    # stage logs in public terms: the stages, each mechanism's ρ and σ, the release folder
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "prefect.flow_runs")
    assert "stage load (private: reads the data)" in text
    assert re.search(r"^stage [\w -]+ \(private: reads the data\), draws noise$", text, re.M)
    assert "charged ρ = " in text and "σ = " in text and "over " in text
    assert f"published {final}" in text
    assert SECRET_PREFIX not in text
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
    assert run["name"] == "prefect"
    assert json.loads(list_releases(tmp_path / "releases")[0]["orchestrator"]) == run
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(run["flow_run_id"])
        limit = client.read_global_concurrency_limit_by_name("privfair-release-toy")
        tasks = client.read_task_runs()
    assert flow_run.name == run["flow_run_name"]
    # Issue 25.7: the final state names the release (`deployment run --watch` prints it).
    assert flow_run.state.is_completed() and flow_run.state.message == f"published {final}"
    assert not {"seed", "insecure_seed", "work_dir"} & set(flow_run.parameters)
    assert flow_run.parameters["epsilon"] == 1.0 and limit.limit == 1
    assert limit.active_slots == 0  # released
    names = {t.name.rsplit("-", 1)[0] for t in tasks if t.flow_run_id == flow_run.id}
    assert {"load", "discretize", "estimate", "sample", "validate-output"} <= names
    assert all(t.state.is_completed() for t in tasks if t.flow_run_id == flow_run.id)
    # the CLI runs the same flow (in another registry and store: one registry refuses a
    # second release of a seed) and publishes the same table
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-2"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "registry-2") + "-client")
    code = main(["release", "--contract", str(toy_contract), "--data", str(toy_parquet),
                 "--epsilon", "1", "--delta", "1e-9", "--method", "prefair-greedy", "--seed",
                 "5", "--insecure-seed", "--out", str(tmp_path / "releases-2"), "--work-dir",
                 str(tmp_path / "work")])
    out, err = capsys.readouterr()
    assert code == 0, err
    again = tmp_path / "releases-2" / "toy" / "v1"
    assert out.strip().splitlines()[-1] == str(again)
    assert [r["version"] for r in list_releases(tmp_path / "releases-2")] == ["v1"]
    assert (again / "synthetic.parquet").read_bytes() == (
        final / "synthetic.parquet").read_bytes()

    # result storage stays clean: no stage persists a result; the private staging is gone
    work = tmp_path / "work"
    assert set(_prefect_files()) == before
    assert not (work / "prefect-results").exists() or not any(
        p.is_file() for p in (work / "prefect-results").rglob("*"))
    assert list((work / "staging").iterdir()) == []
    true_counts = [json.dumps(toy_frame[c].value_counts().sort_index().tolist())
                   for c in ("sex", "race", "edu", "income")]
    for path in [*work.rglob("*"), *Path(os.environ["PREFECT_HOME"]).rglob("*")]:
        if path.is_file() and path.suffix not in (".db", ".db-wal", ".db-shm"):
            raw = path.read_bytes()
            assert SECRET_PREFIX.encode() not in raw, path
            assert not any(c.encode() in raw for c in true_counts), path

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(
            any_=["privfair-release", "privfair-release-ledger", "privfair-release-link"])))
        progress = [a for a in client.read_artifacts() if a.type == "progress"
                    and a.flow_run_id == flow_run.id]
    mine = {a.key: a for a in artifacts if a.flow_run_id == flow_run.id}
    assert set(mine) == {"privfair-release", "privfair-release-ledger", "privfair-release-link"}
    assert "`toy` v1" in mine["privfair-release"].data
    assert mine["privfair-release-link"].data.endswith(f"({(final / 'report.html').as_uri()})")
    table = mine["privfair-release-ledger"].data
    table = json.loads(table) if isinstance(table, str) else table
    assert [r["step"] for r in table] == [e["name"] for e in manifest["ledger"]] + ["total"]
    assert all(float(r["rho"]) > 0 for r in table)
    assert progress and float(progress[0].data) == 100.0


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
        m.setattr(table_kind, "sample", boom)
        with pytest.raises(Injected) as info:
            run_local(params(toy_contract, toy_parquet, tmp_path), command="release")
    assert any("stays charged" in note for note in getattr(info.value, "__notes__", []))
    assert not any(p.is_dir() and p.name[1:].isdigit() for p in store.rglob("v*"))
    assert list((tmp_path / "work" / "staging").iterdir()) == []
    # the charged run used seed 5: a second run with it is refused (the two would cancel
    # their noise), so the rerun takes another
    with pytest.raises(StoreError, match="seed"):
        run_local(params(toy_contract, toy_parquet, tmp_path), command="release")
    stale = plan_release(TABLE, params(toy_contract, toy_parquet, tmp_path, seed=7))
    rerun = Path(run_local(params(toy_contract, toy_parquet, tmp_path, seed=6),
                           command="release", planned=stale))  # other options: planned anew
    assert rerun.name == "v1"
    assert json.loads((rerun / "manifest.json").read_text())["run_id"] != stale.plan.run_id

    before = store_snapshot(store)
    bad = tmp_path / "bad.parquet"
    toy_frame.drop(columns=["income"]).to_parquet(bad, index=False)
    caplog.clear()
    with pytest.raises(ReleaseInputError, match=r"missing column\(s\) \['income'\]"):
        run_local(params(toy_contract, bad, tmp_path, seed=None, insecure_seed=False),
                  command="release")
    assert store_snapshot(store) == before
    # a refusal is one ERROR line, without a traceback
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    refused = [r for r in errors if "release refused: ReleaseInputError" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in errors]
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in errors)


@pytest.mark.prefect
@pytest.mark.parametrize("command", sorted({k.command for k in COVERED}))
def test_every_flow_refuses_in_one_line(prefect_harness, command, toy_contract, toy_parquet,
                                        tmp_path, caplog, store_snapshot):
    """A request missing a column the kind reads: refused before any read, one ERROR line."""
    from kind_cases import without_column

    from privfair.release.registry import family

    kind = next(k for k in family(command).kinds if k.name in CASES)
    case = CASES[kind.name]
    bad = without_column(toy_parquet, case.column, tmp_path)
    options = family(command).params.model_validate(case.params(toy_contract, bad, tmp_path))
    caplog.clear()
    with pytest.raises(ReleaseInputError) as info:
        run_local(options, command=command)
    assert "\n" not in str(info.value) and case.column in str(info.value)
    assert store_snapshot(tmp_path / "releases") == {}
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    refused = [r for r in errors if "release refused: " in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in errors]
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in errors)


@pytest.mark.prefect
def test_dataset_slot_is_held_and_waiting_is_logged(prefect_harness):
    """Two runs of one dataset queue on its one-slot limit; the second says it waits."""
    lines: list[str] = []
    order: list[str] = []

    def second() -> None:
        with ops.dataset_slot("slot-test", log=lines.append):
            order.append("second holds")

    with ops.dataset_slot("slot-test", log=lines.append):
        assert lines == []
        waiter = threading.Thread(target=second)
        waiter.start()
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        order.append("first releases")
    waiter.join(60)
    assert order == ["first releases", "second holds"]
    assert len(lines) == 1 and lines[0].startswith(
        "waiting for concurrency slot 'privfair-release-slot-test': another release of "
        "'slot-test' holds it (held by pid ")


@pytest.mark.prefect
def test_flow_parameter_max_time_s_reaches_aim_as_an_alarm(prefect_harness, toy_contract,
                                                          toy_parquet, tmp_path, monkeypatch,
                                                          caplog):
    """The flow's max_time_s (as a deployment passes it) is AIM's time budget, an alarm only
    since issue 41.5: an expired budget is logged, and the release spends exactly its
    declared ρ over rounds planned from public inputs."""
    import logging

    from prefect.client.orchestration import get_client

    from privfair.core.accounting import zcdp_rho

    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    with caplog.at_level(logging.WARNING, logger="privfair.synth.synthesizer"):
        final = Path(release(contract=str(toy_contract), data=str(toy_parquet), epsilon=1.0,
                             delta=1e-9, method="aim", max_time_s=1e-9,
                             out=str(tmp_path / "releases")))
    assert any("past the 1e-09 s time budget" in r.getMessage() for r in caplog.records)
    manifest = json.loads((final / "manifest.json").read_text())
    names = [e["name"] for e in manifest["ledger"] if e["name"].startswith("AIM")]
    assert names[0] == "AIM initial one-way marginals" and "AIM measure round 1" in names
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
        # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / engine / "registry") + "-client")
        final = run_local(params(toy_contract, toy_parquet, tmp_path / engine, engine=engine,
                                 dask_address=address, method="mst", batch_size=400,
                                 max_iters=200), command="release")
        return json.loads((Path(final) / "manifest.json").read_text())

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        on_dask = release_on("dask", cluster.scheduler_address)
        counted = dict(cluster.scheduler.task_prefixes["count_partition"].state_counts)
    # one pass (the 1-way tables and all pairs together) over the codes' units (>= 2)
    assert counted.get("memory", 0) >= 2, counted
    local = release_on("local", None)
    # same counts, same seeded noise: the same synthetic table
    assert on_dask["files"]["synthetic.parquet"] == local["files"]["synthetic.parquet"]


@pytest.mark.prefect
def test_deploying_creates_the_dataset_slots(prefect_harness):
    """Issue 25.7: the limits exist once deployed, not only after the first run."""
    from prefect.client.orchestration import get_client

    sys.path.insert(0, str(ROOT / "deployments"))
    try:
        from serve import SLOTTED_DATASETS, prepare
    finally:
        sys.path.remove(str(ROOT / "deployments"))
    prepare()
    with get_client(sync_client=True) as client:
        for dataset in SLOTTED_DATASETS:
            limit = client.read_global_concurrency_limit_by_name(f"privfair-release-{dataset}")
            assert limit.limit == 1


@pytest.mark.prefect
def test_a_killed_holder_does_not_block_its_dataset(prefect_harness, tmp_path):
    """Issue 45.3: a kill -9 of a Prefect release left its dataset's slot held
    (``active_slots=1``, no decay) and every later release waited forever, silently. The next
    release on the machine frees the dead holder's slot at once and says so."""
    import os
    import signal
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time\nfrom tasks import ops\nwith ops.dataset_slot('kill-test'):\n"
         "    print('held', flush=True)\n    time.sleep(600)\n"],
        env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert ops.slot_holder("privfair-release-kill-test")["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        holder.stdout.close()
    assert ops.ensure_dataset_slot("kill-test").active_slots == 1  # the dead run's slot
    lines: list[str] = []
    started = time.monotonic()
    with ops.dataset_slot("kill-test", log=lines.append):
        held_after = time.monotonic() - started
    assert held_after < 10, lines
    assert any(line.startswith("freed concurrency slot 'privfair-release-kill-test'")
               and f"pid {holder.pid}" in line for line in lines), lines
    assert ops.ensure_dataset_slot("kill-test").active_slots == 0


class ListHandler(logging.Handler):
    """Keeps every record that reaches it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.prefect
def test_a_wait_for_a_live_holder_is_bounded_and_says_what_it_waits_for(prefect_harness,
                                                                        monkeypatch):
    """Issue 45.3: every wait has a bound and a line saying what it waits for; the bound
    refuses with one line (before any reservation)."""
    from privfair.core.errors import ReleaseInputError

    monkeypatch.setenv("PRIVFAIR_SLOT_WAIT_S", "3")
    monkeypatch.setattr(ops, "SLOT_WAIT_STEP_S", 1.0)
    lines: list[str] = []
    # each timed-out step was also an ERROR record of Prefect's ("Service
    # 'ConcurrencySlotAcquisitionWithLeaseService' failed to process item"), on the terminal
    service = logging.getLogger(ops.CONCURRENCY_SERVICE_LOGGER)
    errors = ListHandler()
    service.addHandler(errors)
    try:
        with (ops.dataset_slot("bounded-test"), pytest.raises(ReleaseInputError) as refused,
              ops.dataset_slot("bounded-test", log=lines.append)):
            pass  # pragma: no cover - never acquired
    finally:
        service.removeHandler(errors)
    assert [r.getMessage() for r in errors.records if r.levelno >= logging.ERROR] == []
    message = str(refused.value)
    assert "\n" not in message and "privfair-release-bounded-test" in message
    assert "held by pid" in message and "Prefect UI" in message
    assert lines[0].startswith("waiting for concurrency slot") and "up to 3 s" in lines[0]
    assert any(line.startswith("still waiting") for line in lines)


@pytest.mark.prefect
def test_store_check_repair_frees_a_dead_runs_slot(prefect_harness, tmp_path, capsys):
    """Issue 45.3: ``store check`` reports the slot a killed Prefect release still holds, and
    ``--repair`` frees it (before, it said "consistent" and the next release waited)."""
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

    name = ops.slot_name("repair-test")
    ops.ensure_dataset_slot("repair-test")
    with get_client(sync_client=True) as client:  # what a kill -9 of the holder leaves
        client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(
            active_slots=1))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ops.holder_path(name).parent.mkdir(parents=True, exist_ok=True)
    ops.holder_path(name).write_text(json.dumps({
        "pid": dead.pid, "host": ops.socket.gethostname(), "since": "2026-01-01T00:00:00Z",
        "flow_run_id": None}))
    store, work = tmp_path / "releases", tmp_path / "work"
    store.mkdir()
    assert main(["store", "check", "--out", str(store), "--work-dir", str(work)]) == 1
    out = capsys.readouterr().out
    assert f"concurrency slot {name!r} is held by a dead run (pid {dead.pid}" in out
    assert ops.ensure_dataset_slot("repair-test").active_slots == 1
    assert main(["store", "check", "--out", str(store), "--work-dir", str(work),
                 "--repair"]) == 0
    out = capsys.readouterr().out
    assert f"repaired: freed concurrency slot {name!r}" in out and "consistent" in out
    assert ops.ensure_dataset_slot("repair-test").active_slots == 0
    assert ops.slot_holder(name) is None


@pytest.mark.prefect
def test_a_full_disk_after_the_reservation_is_one_line_through_prefect(
        prefect_harness, toy_contract, toy_parquet, tmp_path, monkeypatch, caplog):
    """Issue 45.5: through Prefect, a full disk printed whole tracebacks; now one ERROR line
    naming the work folder, no traceback, and the reservation given back."""
    import errno

    from privfair.release.tabular import stages
    from privfair.store.registry import read_chain

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(stages, "save_ledger", full_disk)
    caplog.clear()
    with pytest.raises(StoreError) as failed:
        run_local(params(toy_contract, toy_parquet, tmp_path, seed=None, insecure_seed=False),
                  command="release")
    assert f"the work folder {tmp_path / 'work'} cannot be written" in str(failed.value)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("No space left on device" in r.getMessage() for r in errors), errors
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in errors)
    assert [e["kind"] for e in read_chain("toy")][-2:] == ["reserve", "cancel"]
