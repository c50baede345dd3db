"""Operations of the release flow without a Prefect server (issue 16): parameters, refusals,
failure events, artifact formatting."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from flows.kinds import FLOWS, form_fields, options_for  # noqa: E402
from privfair.contracts.datasets import (  # noqa: E402
    CONTRACTS_DIR,
    PackagedContract,
    contract_path,
)
from privfair.core.errors import BudgetExceededError, ContractError  # noqa: E402
from privfair.release.checks import resolve_contract  # noqa: E402
from privfair.release.registry import FAMILIES, family  # noqa: E402
from privfair.release.tabular.manifest import ledger_rows, summary_markdown  # noqa: E402
from privfair.release.tabular.plan import ReleaseInputError, ReleaseParams  # noqa: E402
from tasks import ops  # noqa: E402


def test_contract_choices_are_the_packaged_contracts():
    stems = {p.stem for p in CONTRACTS_DIR.glob("*.yaml")}
    assert set(PackagedContract.__args__) == stems
    for command, flow in FLOWS.items():  # each form offers them beside a free path
        choices = flow.parameters.model_dump()["properties"]["contract"]["anyOf"]
        assert {"enum": sorted(stems), "type": "string"} in [
            {**c, "enum": sorted(c["enum"])} if "enum" in c else c for c in choices], command
        assert {"type": "string"} in choices, command


def test_flat_parameters_map_onto_the_options(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    release = family("release")
    p = options_for(release, {"contract": "compas", "epsilon": 0.5, "out": "x"})
    assert p.contract == str(contract_path("compas")) and p.epsilon == 0.5
    assert p.seed is None and p.work_dir == str(tmp_path / "work")
    assert options_for(release, {"contract": str(tmp_path / "c.yaml")}).contract == str(
        tmp_path / "c.yaml")
    with pytest.raises(ReleaseInputError, match=r"^invalid epsilon: -1 is outside") as info:
        options_for(release, {"contract": "adult", "epsilon": -1})
    assert "\n" not in str(info.value)


def test_a_packaged_contract_name_resolves_on_every_path(tmp_path, monkeypatch):
    """`--contract compas` on the CLI, `contract=compas` on the form: the packaged file."""
    assert resolve_contract(ReleaseParams(contract="compas")) == contract_path("compas")
    assert resolve_contract(ReleaseParams()) == contract_path("adult")
    for name in PackagedContract.__args__:
        for f in FAMILIES:
            assert resolve_contract(f.params(contract=name)) == contract_path(name)
    with pytest.raises(ContractError, match=r"'nope' is not packaged; expected one of "
                                            r"\['adult'"):
        resolve_contract(ReleaseParams(contract="nope"))
    monkeypatch.chdir(tmp_path)  # a relative path stays a path
    (tmp_path / "mine.yaml").write_text("name: x\n")
    assert resolve_contract(ReleaseParams(contract="mine.yaml")) == tmp_path / "mine.yaml"


def test_every_flow_has_timeout_hooks_and_no_seed_parameter():
    assert {f.command for f in FAMILIES} == set(FLOWS)
    for f in FAMILIES:
        flow = FLOWS[f.command]
        assert flow.name == f.flow_name == f"privfair-{f.command}"
        assert flow.timeout_seconds == ops.FLOW_TIMEOUT_S
        assert ops.on_release_failure in flow.on_failure_hooks
        assert ops.on_release_failure in flow.on_crashed_hooks
        assert flow.persist_result is False
        fields = flow.parameters.model_dump()["properties"]
        assert set(fields) == set(form_fields(f.params)) | {"resume_run"}
        assert not set(fields) & {"seed", "insecure_seed", "work_dir"}, f.command


def test_parameter_errors_are_one_line_refusals():
    for f in FAMILIES:
        for kind in f.kinds:
            with pytest.raises(ReleaseInputError, match=r"^invalid epsilon: ") as info:
                kind.parse({"epsilon": 1e6})
            assert "\n" not in str(info.value)
            with pytest.raises(ReleaseInputError, match=r"^invalid (bogus|parameters)"):
                kind.parse({"epsilon": 1.0, "bogus": 1})


def _record(msg: str, *, level=logging.ERROR, exc=None, **extra) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc else None
    record = logging.LogRecord("prefect.task_runs", level, __file__, 1, msg, (), exc_info)
    record.__dict__.update(extra)
    return record


def test_refusal_filter_drops_repeats_keeps_the_one_line_and_real_errors():
    f = ops.RefusalTracebackFilter()
    refusal = ReleaseInputError("data file x: missing column(s) ['income']")
    assert not f.filter(_record("Encountered exception during execution", exc=refusal))
    assert not f.filter(_record(f"Task run failed with exception: {refusal!r} - Retries are "
                                "exhausted"))
    assert not f.filter(_record("Finished in state Failed('Task run encountered an exception "
                                "BudgetExceededError: lifetime budget exceeded')"))
    assert f.filter(_record("release refused: ReleaseInputError: ...", privfair_refusal=True))
    assert f.filter(_record("Encountered exception", exc=RuntimeError("bug")))
    assert f.filter(_record("ReleaseInputError: (info)", level=logging.INFO))
    # another flow's refusals keep their records
    assert f.filter(_record("Encountered exception", exc=refusal, flow_name="privfair-evaluate"))
    for flow in FAMILIES:  # every publishing flow's refusals are shortened
        assert not f.filter(_record("Encountered exception", exc=refusal,
                                    flow_name=flow.flow_name))
    assert ops.release_flow_names() >= {"privfair-release", "privfair-discover"}


def test_failure_events_keep_unexpected_messages_out():
    run = SimpleNamespace(id="r", name="n", parameters={}, deployment_id=None)
    event, line = ops.failure_event(run, SimpleNamespace(
        data=BudgetExceededError("lifetime budget of dataset 'adult' exceeded"), name="Failed"))
    assert event == "privfair.release.refused"
    assert line == ("release refused: BudgetExceededError: lifetime budget of dataset 'adult' "
                    "exceeded")
    event, line = ops.failure_event(run, SimpleNamespace(
        data=KeyError("secret-value-42"), name="Failed"))
    assert event == "privfair.release.failed" and "secret-value-42" not in line
    assert "KeyError" in line


def _manifest() -> dict:
    entry = {"name": "one-way marginals", "mechanism": "gaussian", "rho": 0.004991349917411203,
             "sigma": 24.517346912, "epsilon": None, "queries": 19}
    return {
        "dataset": "toy", "version": "v1",
        "guarantee": {"epsilon": 1.0, "delta": 1e-9, "rho": 0.014974049752233609,
                      "spent": {"rho": 0.014974049752233609, "epsilon": 0.999999}},
        "ledger": [entry, {**entry, "name": "select", "mechanism": "exponential",
                           "sigma": None, "epsilon": 0.0446, "queries": 12}],
        "lifetime": {"rho_spent_after": 0.0299, "rho_budget": 0.2, "epsilon_budget": 3,
                     "delta_budget": 1e-6},
        "method": {"name": "prefair-greedy", "discrete_noise": False},
        "structure": {"edges": [["a", "b"]]},
        "fairness_check": {"passed": True, "criterion": "c"},
        "fairness_transform": {"applied": False},
        "validation": {"input": {"passed": True}, "output": {"passed": True}},
        "sampling": {"n_rows": 10, "mode": "iid"},
        "contract": {"name": "toy", "version": "1", "fingerprint": "f" * 64},
        "seed_policy": "fresh OS entropy",
        "orchestrator": {"flow_run_id": "id", "flow_run_name": "brave-fox",
                         "ui_url": "http://ui/runs/flow-run/id"},
    }


def test_ledger_table_has_four_digits_and_whole_query_counts():
    rows = ledger_rows(_manifest())
    assert [r["rho"] for r in rows] == ["0.004991", "0.004991", "0.01497"]
    assert rows[0]["sigma"] == "24.52" and rows[1]["epsilon"] == "0.0446"
    assert [r["queries"] for r in rows] == ["19", "12", "31"]
    assert all(set(r) == {"step", "mechanism", "rho", "sigma", "epsilon", "queries"}
               for r in rows)


def test_summary_markdown_has_a_header_row_and_the_run_link():
    md = summary_markdown(_manifest(), "/releases/toy/v1")
    assert "| Item | Value |\n|---|---|" in md
    assert "ρ = 0.01497 zCDP" in md and "0.014974049" not in md
    assert "| Flow run | [brave-fox](http://ui/runs/flow-run/id) |" in md


def test_a_deployments_own_parameters_are_defaults_not_idle_options(monkeypatch, tmp_path):
    """The monthly deployment gives max_time_s (AIM's time budget) to a prefair-greedy run:
    the operator's preset for every run, not an option this run gave, so it is not refused as
    idle; the same value given by the run itself outside a deployment is refused."""
    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    release = family("release")
    run = {"contract": "adult", "method": "prefair-greedy", "max_time_s": 1800.0, "out": "x"}
    with pytest.raises(ReleaseInputError, match="does nothing here"):
        options_for(release, run)
    # a run of a deployment whose parameters preset it
    from prefect.runtime import deployment

    monkeypatch.setattr(deployment, "parameters", {"max_time_s": 1800.0}, raising=False)
    assert options_for(release, run).max_time_s == 1800.0
