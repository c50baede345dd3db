"""Library-level tests of the release pipeline and store (no Prefect)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SECRET_PREFIX

from privfair.contracts.schema import load_contract
from privfair.core.accounting import PrivacyLedger, zcdp_rho
from privfair.core.errors import BudgetExceededError, ContractError
from privfair.release import ingest
from privfair.release.kinds.table import kind as runner
from privfair.release.run import release_table as run_release
from privfair.release.tabular import plan, post_noise
from privfair.release.tabular import private as private_stages
from privfair.release.tabular import stages as shared_stages
from privfair.release.tabular.plan import ReleaseParams
from privfair.store import artefacts, files, publication
from privfair.store.catalog import list_releases
from privfair.store.registry import lifetime_ledgers

ROOT = Path(__file__).resolve().parents[1]


def params(contract: Path, data: Path, tmp_path: Path, **kw) -> ReleaseParams:
    base = {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "prefair-greedy", "seed": 11, "insecure_seed": True, "out": str(tmp_path / "releases"),
            "work_dir": str(tmp_path / "work"), "max_iters": 400}
    base.update(kw)
    if base["seed"] is None and "insecure_seed" not in kw:  # fresh entropy: the test mode
        base["insecure_seed"] = False  # goes with a seed only (issue 45.4)
    return ReleaseParams(**base)


def version_dirs(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob("*/*") if p.is_dir())


def test_release_end_to_end(toy_contract, toy_parquet, tmp_path):
    seen = []
    p = params(toy_contract, toy_parquet, tmp_path, seed=987654321)
    final = run_release(p, progress=lambda stage, f: seen.append(stage))
    store = tmp_path / "releases"
    assert final == store / "toy" / "v1"
    assert sorted(x.name for x in final.iterdir()) == [
        "contract.yaml", "manifest.json", "report.html", "synthetic.parquet"]
    assert seen[0] == "check" and seen[-1] == "done" and "estimate" in seen

    # synthetic.parquet holds declared labels, not codes
    contract = load_contract(toy_contract)
    synth = pd.read_parquet(final / "synthetic.parquet")
    assert list(synth.columns) == list(contract.column_names)
    for col in synth.columns:
        assert set(synth[col].astype(str)) <= set(contract.labels(col))

    manifest = json.loads((final / "manifest.json").read_text())
    text = (final / "manifest.json").read_text()
    rho = zcdp_rho(epsilon=1.0, delta=1e-9)
    assert manifest["guarantee"]["rho"] == pytest.approx(rho)
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(rho, rel=1e-9)
    assert manifest["fairness_check"]["passed"] is True
    assert manifest["contract"]["fingerprint"] == contract.fingerprint()
    assert manifest["code_version"]["privfair"]
    assert "seed is not recorded" in manifest["seed_policy"]
    assert "987654321" not in text  # the seed itself is never written
    assert str(toy_parquet) not in text  # neither is the private data's path
    assert manifest["fairness_transform"] == {"name": "none", "applied": False}
    # issue 21.2: no verdict on the private values, only noisy counts of touched rows
    record = manifest["validation"]["input"]
    assert record["refused_on_values"] is False and "passed" not in record
    assert {r["column"] for r in record["touched_rows"]} == {
        *manifest["domain"]["attributes"], "(unparsed record)"}
    assert manifest["validation"]["output"]["passed"] is True
    # GX suites and Data Docs are opt-in (data_docs): none kept by default
    assert "data_docs" not in manifest["validation"]["output"]
    assert not (store / "toy" / "validation").exists()
    assert manifest["files"]["synthetic.parquet"] == files.sha256_file(
        final / "synthetic.parquet")

    html = (final / "report.html").read_text()
    # inline SVG: structure, ledger, and one one-way chart per released column
    assert html.count("<svg class='chart'") == 2 + len(manifest["domain"]["attributes"])
    assert "http://" not in html and "https://" not in html and "<script" not in html

    # catalog + lifetime ledger
    rows = list_releases(store)
    assert [(r["dataset"], r["version"], r["path"]) for r in rows] == [("toy", "v1", "toy/v1")]
    ledger = json.loads((store / "toy" / "lifetime_ledger.json").read_text())
    assert [r["version"] for r in ledger["releases"]] == ["v1"]
    assert ledger["spent"]["rho"] == pytest.approx(rho)

    # private staging is gone; work folders are 0700
    work = tmp_path / "work"
    assert list((work / "staging").iterdir()) == []
    for sub in ("", "staging", "artefacts", "prefect-results"):
        assert (work / sub).stat().st_mode & 0o777 == 0o700
    assert not any(SECRET_PREFIX.encode() in p.read_bytes()
                   for p in work.rglob("*") if p.is_file())

    # the next release gets the next version and is charged too
    final2 = run_release(params(toy_contract, toy_parquet, tmp_path, seed=None,
                                method="mst", sample_mode="round", n_rows=321,
                                discrete_noise=True, data_docs=True))
    assert final2.name == "v2"
    assert len(pd.read_parquet(final2 / "synthetic.parquet")) == 321
    m2 = json.loads((final2 / "manifest.json").read_text())
    # opted in on the --no-prefect path too: suites and Data Docs beside the fingerprint
    docs = (final2 / m2["validation"]["output"]["data_docs"]).resolve()
    assert docs.is_file() and docs.parent.parent.parent.parent.name == "validation"
    assert m2["seed_policy"].startswith("fresh OS entropy")
    assert {e["mechanism"] for e in m2["ledger"]} == {"discrete-gaussian", "exponential"}
    assert [r["version"] for r in list_releases(store, "toy")] == ["v1", "v2"]
    assert lifetime_ledgers(store)[0]["spent"]["rho"] == pytest.approx(2 * rho)


def test_same_seed_same_release_and_csv_equals_parquet(toy_contract, toy_parquet, toy_csv,
                                                       tmp_path, monkeypatch):
    a = run_release(params(toy_contract, toy_parquet, tmp_path, method="prefair-exact"))
    # The registry refuses a second release with one seed (issue 10.3): replay it elsewhere.
    monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / "registry-b"))
    # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "registry-b") + "-client")
    b = run_release(params(toy_contract, toy_csv, tmp_path, method="prefair-exact",
                           out=str(tmp_path / "releases-b")))
    fa = pd.read_parquet(a / "synthetic.parquet")
    fb = pd.read_parquet(b / "synthetic.parquet")
    pd.testing.assert_frame_equal(fa, fb)
    assert json.loads((a / "manifest.json").read_text())["structure"]["search_nodes"] >= 1


def test_lifetime_budget_refused_before_any_private_read(toy_contract, toy_parquet, tmp_path,
                                                         monkeypatch, store_snapshot):
    contract = load_contract(toy_contract)
    life = zcdp_rho(epsilon=contract.budget.epsilon, delta=contract.budget.delta)
    # one release of 3/4 of the lifetime epsilon fits; a second one does not
    eps, delta = 0.75 * contract.budget.epsilon, contract.budget.delta
    assert 0.5 * life < zcdp_rho(epsilon=eps, delta=delta) < life
    run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=eps, delta=delta,
                       max_iters=50))
    store = tmp_path / "releases"
    before = store_snapshot(store)

    def boom(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(shared_stages, "load", boom)
    with pytest.raises(BudgetExceededError, match="lifetime budget of dataset 'toy' exceeded"):
        run_release(params(toy_contract, toy_parquet, tmp_path, epsilon=eps, delta=delta))
    assert store_snapshot(store) == before
    assert version_dirs(store) == ["v1"]


STAGES = ["load", "discretize_counted", "measure_policy_counts", "measure_table", "estimate", "sample", "fairness_transform", "validate_output",
          "write_table_release"]


def test_fault_in_every_stage_leaves_store_consistent(toy_contract, toy_parquet, tmp_path,
                                                      monkeypatch):
    """Issue 10.4/10.8: a fault at any stage leaves the store as it was, and a run that drew
    noise stays charged in the lifetime ledger ("spent, not published")."""
    from privfair.store.registry import read_lifetime_ledger, store_problems

    store, work = tmp_path / "releases", tmp_path / "work"
    contract = load_contract(toy_contract)
    run_release(params(toy_contract, toy_parquet, tmp_path, max_iters=50, epsilon=0.1, seed=None))
    ledger_path = store / "toy" / "lifetime_ledger.json"
    ledger_before = ledger_path.read_bytes()
    catalog_before = list_releases(store)
    rho = zcdp_rho(epsilon=0.1, delta=1e-9)

    def check_consistent():
        assert version_dirs(store) == ["v1"]
        assert not [p for p in (store / "toy").iterdir() if p.name.startswith((".tmp",
                                                                                 ".intent"))]
        assert ledger_path.read_bytes() == ledger_before
        assert list_releases(store) == catalog_before
        assert list((work / "staging").iterdir()) == []
        assert store_problems(store, read_lifetime_ledger(store, contract)) == []

    class Injected(RuntimeError):
        pass

    def boom(*a, **k):
        raise Injected("injected fault")

    import privfair.reporting.report

    # The runner calls each stage by the name it imported, so faults are injected there.
    targets = [(runner if hasattr(runner, name) else shared_stages, name)
               for name in STAGES] + [
        (privfair.reporting.report, "build_report"),  # inside publish, folder half-written
        (publication, "record_published"),               # the commit point itself
    # The rename now follows the commit (issue 36.5): see test_fault_injection's "rename" step.
    ]
    for module, name in targets:
        spent = read_lifetime_ledger(store, contract).rho_spent
        with monkeypatch.context() as m:
            m.setattr(module, name, boom)
            with pytest.raises(Injected):
                run_release(params(toy_contract, toy_parquet, tmp_path, max_iters=50,
                                   epsilon=0.1, seed=None))
        check_consistent()
        drew_noise = name not in ("load", "discretize_counted")
        after = read_lifetime_ledger(store, contract)
        assert after.rho_spent == pytest.approx(spent + (rho if drew_noise else 0.0)), name
        if drew_noise:
            assert after.pending[-1]["state"] == "spent, not published"
    # and a re-run then succeeds
    final = run_release(params(toy_contract, toy_parquet, tmp_path, max_iters=50, epsilon=0.1, seed=None))
    assert final.name == "v2"
    assert [r["version"] for r in json.loads(ledger_path.read_text())["releases"]] == ["v1",
                                                                                        "v2"]


def test_store_not_writable_is_refused(toy_contract, toy_parquet, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(files.StoreError, match="is a file"):
        plan.check(params(toy_contract, toy_parquet, tmp_path, out=str(blocker / "store")))
    assert blocker.read_text() == "x"


def test_dataset_name_must_be_a_folder_name(tmp_path, toy_parquet):
    from conftest import TOY_CONTRACT

    evil = tmp_path / "evil.yaml"
    evil.write_text(TOY_CONTRACT.replace("name: toy", "name: ../../etc"))
    with pytest.raises(ContractError, match="cannot name a release folder"):
        plan.check(params(evil, toy_parquet, tmp_path))


def test_open_domain_column_is_released_with_cathist(tmp_path):
    from privfair.contracts.datasets import contract_path

    rng = np.random.default_rng(0)
    n = 6000
    gender = rng.choice(["female", "male"], size=n, p=[0.45, 0.55]).astype(object)
    gender[:3] = ["nonbinary", "agender", "prefer-not"]  # rare answers: below the threshold
    frame = pd.DataFrame({
        "gender": gender, "age": rng.integers(18, 99, n),
        "degree": rng.choice(["none", "BSc", "MSc", "PhD"], size=n),
        "hired": rng.choice(["no", "yes"], size=n)})
    data = tmp_path / "survey.parquet"
    frame.to_parquet(data)
    p = params(contract_path("example_open_domain"), data, tmp_path, epsilon=0.9, delta=1e-7)
    final = run_release(p)
    manifest = json.loads((final / "manifest.json").read_text())
    cathist_entries = [e for e in manifest["ledger"] if e["mechanism"] == "laplace"]
    assert [e["name"] for e in cathist_entries] == ["CatHist categories of gender"]
    rho = zcdp_rho(epsilon=0.9, delta=1e-7)
    assert cathist_entries[0]["rho"] == pytest.approx(plan.DOMAIN_SHARE * rho)
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(rho, rel=1e-9)
    assert manifest["contract"]["resolved_fingerprint"] != manifest["contract"]["fingerprint"]
    released = manifest["domain"]["labels"]["gender"]
    assert {"female", "male", "(other)"} <= set(released)
    assert not {"nonbinary", "agender", "prefer-not"} & set(released)
    synth = pd.read_parquet(final / "synthetic.parquet")
    assert set(synth["gender"].astype(str)) <= set(released)


def test_open_domain_column_without_other_bucket_is_refused(tmp_path, toy_parquet):
    from privfair.contracts.datasets import contract_path

    text = contract_path("example_open_domain").read_text().replace(
        'out_of_domain: "other:(other)"\n    nulls: "as:(other)"', "out_of_domain: refuse")
    contract = tmp_path / "no_other.yaml"
    contract.write_text(text)
    with pytest.raises(Exception, match="needs out_of_domain"):
        plan.check(params(contract, toy_parquet, tmp_path))


def test_artefacts_roundtrip(toy_contract, toy_parquet, tmp_path):
    """Model and measurement artefacts reload to the same objects (no pickle)."""
    ws = files.Workspace.open(tmp_path / "w")
    run = plan.check(params(toy_contract, toy_parquet, tmp_path))
    c = run.contract
    staged = ingest.load(run.data_path, c, ws.staging)
    codes = ingest.discretize(staged, c, ws.staging)
    led = artefacts.save_ledger(PrivacyLedger(rho_budget=run.rho, delta=run.delta),
                                ws.artefacts)
    measured = private_stages.measure_table(codes, c, led, ws.artefacts, method="mst",
                                            epsilon=run.epsilon, delta=run.delta,
                                            rho=run.rho, seed=1)
    one, sel, led = measured["one_way"], measured["selected"], measured["ledger"]
    assert artefacts.load_ledger(led).spent == pytest.approx(run.rho)
    model_ref = post_noise.estimate(one, sel, ws.artefacts, max_iters=100)
    model = artefacts.load_model(model_ref)
    for clique in model.potentials:
        assert model.marginal(clique).sum() == pytest.approx(model.total)
    a = post_noise.sample(model_ref, one, ws.artefacts, n_rows=50, seed=3)
    b = post_noise.sample(model_ref, one, ws.artefacts, n_rows=50, seed=3)
    assert a == b  # content-addressed: same seed, same file
    assert Path(a.path).parent == ws.artefacts
    # a tampered artefact is refused
    Path(one.path).write_text("{}")
    with pytest.raises(files.StoreError, match="changed"):
        artefacts.load_one_way(one)


def test_validation_messages_name_columns_not_values(toy_contract, toy_frame):
    from privfair.contracts.validation import validate_frames

    contract = load_contract(toy_contract)
    good = toy_frame.drop(columns=["secret_name"]).astype({"age": float, "hours": float})
    assert validate_frames([good], contract, side="input").passed
    bad = good.copy()
    bad.loc[3, "race"] = "Zorblax"
    bad.loc[4, "age"] = np.nan
    outcome = validate_frames([good, bad], contract, side="input")
    assert not outcome.passed
    line = outcome.problem_line()
    assert "'race'" in line and "'age'" in line and "Zorblax" not in line
    assert "Zorblax" not in json.dumps(outcome.public_summary())
    assert "Zorblax" in json.dumps(outcome.private_details)  # kept for the private side only


def test_library_never_imports_prefect():
    code = ("import sys, privfair, privfair.release.registry, privfair.reporting.report, "
            "privfair.contracts.validation, "
            "privfair.cli; assert 'prefect' not in sys.modules, 'prefect imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_fair_aim_release_with_tot_transform_on_the_safes_view(tmp_path):
    from privfair.contracts.datasets import contract_path, embedded_dataset_for

    contract = contract_path("adult_safes")
    p = ReleaseParams(contract=str(contract), epsilon=1.0, delta=1e-9, method="aim-fair",
                      seed=3, insecure_seed=True, out=str(tmp_path / "releases"),
                      work_dir=str(tmp_path / "work"),
                      fairness_transform="tot", eta=0.05, max_iters=300)
    final = run_release(p)
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["method"]["name"] == "aim-fair"
    assert manifest["method"]["compress"] is False
    assert manifest["fairness_check"]["passed"] is True
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(
        zcdp_rho(epsilon=1.0, delta=1e-9), rel=1e-9)
    assert any(e["name"].startswith("AIM select round") for e in manifest["ledger"])
    transform = manifest["fairness_transform"]
    assert transform["applied"] and transform["additional_privacy_cost"] == 0.0
    assert transform["parameters"]["eta"] == 0.05
    assert transform["achieved_discrimination"]["max_additive_gap"] <= 0.05 + 1e-6
    # The transform ran on the released table: its group rates are what the release shows.
    synth = pd.read_parquet(final / "synthetic.parquet")
    rates = synth.groupby(["race", "sex"], observed=True)["income"].apply(
        lambda s: (s == ">50K").mean())
    assert rates.max() - rates.min() < 0.05 + 0.03  # within sampling noise of the bound
    assert embedded_dataset_for("adult_safes").name == "adult.parquet"


@pytest.mark.parametrize("kw, message", [
    ({"fairness_transform": "tot"}, "needs eta"),
    ({"fairness_transform": "tot", "eta": 0.1, "distortion": "nope"}, "not registered"),
])
def test_bad_fairness_transform_settings_are_refused(toy_contract, toy_parquet, tmp_path, kw,
                                                     message):
    with pytest.raises(plan.ReleaseInputError, match=message):
        run_release(params(toy_contract, toy_parquet, tmp_path, **kw))
    assert not (tmp_path / "releases").exists() or version_dirs(tmp_path / "releases") == []


def test_dp_bins_are_published_by_the_release(tmp_path):
    text = (ROOT / "data_contracts" / "compas.yaml").read_text().replace(
        '''    bins: [0, 1, 4, .inf]
    labels: ["0", "1-3", ">3"]
    lower: 0
''', '''    dp_bins: 3
    lower: 0
    upper: 40
''').replace("name: compas", "name: compas_dp_bins")
    contract = tmp_path / "compas_dp_bins.yaml"
    contract.write_text(text)
    from privfair.contracts.datasets import dataset_path

    p = ReleaseParams(contract=str(contract), data=str(dataset_path("compas")), epsilon=2.0,
                      delta=1e-9, method="prefair-greedy", seed=5, insecure_seed=True,
                      out=str(tmp_path / "releases"), work_dir=str(tmp_path / "work"),
                      max_iters=300)
    final = run_release(p)
    manifest = json.loads((final / "manifest.json").read_text())
    quantiles = [e for e in manifest["ledger"] if e["name"].startswith("DP bins of priors")]
    assert [e["mechanism"] for e in quantiles] == ["exponential", "exponential"]
    rho = zcdp_rho(epsilon=2.0, delta=1e-9)
    assert sum(e["rho"] for e in quantiles) == pytest.approx(plan.DOMAIN_SHARE * rho)
    assert sum(e["rho"] for e in manifest["ledger"]) == pytest.approx(rho, rel=1e-9)
    labels = manifest["domain"]["labels"]["priors_count"]
    assert 2 <= len(labels) <= 3
    assert manifest["contract"]["resolved_fingerprint"] != manifest["contract"]["fingerprint"]
