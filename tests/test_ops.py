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

from flows.release import PackagedContract, release, release_params  # noqa: E402
from privfair.contracts.datasets import CONTRACTS_DIR, contract_path  # noqa: E402
from privfair.core.errors import BudgetExceededError  # noqa: E402
from privfair.release.table.manifest import ledger_rows, summary_markdown  # noqa: E402
from privfair.release.table.plan import ReleaseInputError  # noqa: E402
from tasks import ops, post_noise  # noqa: E402


def test_contract_choices_are_the_packaged_contracts():
    assert set(PackagedContract.__args__) == {p.stem for p in CONTRACTS_DIR.glob("*.yaml")}


def test_flat_parameters_map_onto_release_params(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVFAIR_WORK_DIR", str(tmp_path / "work"))
    p = release_params({"contract": "compas", "epsilon": 0.5, "out": "x"})
    assert p.contract == str(contract_path("compas")) and p.epsilon == 0.5
    assert p.seed is None and p.work_dir == str(tmp_path / "work")
    assert release_params({"contract": str(tmp_path / "c.yaml")}).contract == str(
        tmp_path / "c.yaml")
    with pytest.raises(ReleaseInputError, match=r"^invalid epsilon: .*greater than 0"):
        release_params({"contract": "adult", "epsilon": -1})


def test_flow_has_timeout_hooks_and_no_seed_parameter():
    assert release.timeout_seconds == ops.FLOW_TIMEOUT_S
    assert ops.on_release_failure in release.on_failure_hooks
    assert ops.on_release_failure in release.on_crashed_hooks
    assert "seed" not in release.parameters.model_dump()["properties"]
    # the sample task's cache key does not hash the seed
    inputs = next(p for p in post_noise.sample.cache_policy.policies
                  if type(p).__name__ == "Inputs")
    assert "seed" in inputs.exclude


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
    assert not f.filter(_record("Encountered exception", exc=refusal,
                                flow_name="privfair-release"))


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


def test_preflight_value_errors_are_refusals(monkeypatch):
    from privfair.release.table import plan
    from tasks import public

    def bad(params):
        raise ValueError("epsilon: 1e+06 is outside [1e-06, 100]")

    monkeypatch.setattr(plan, "preflight", bad)
    with pytest.raises(ReleaseInputError, match=r"^epsilon: 1e\+06 is outside"):
        public.preflight.fn(None)
