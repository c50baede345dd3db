"""AIM's time budget (issue 15): out of time, one final round spends the rest of ρ."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from privfair.core.accounting import PrivacyLedger
from privfair.core.domain import Domain
from privfair.synth.aim import candidate_cliques, run_aim
from privfair.synth.measure import count_marginals


def test_first_admissible_pick_samples_the_mechanism_restricted_to_admissible_ones():
    from privfair.synth.aim import exponential_first_admissible

    scores = np.array([0.0, 1.0, 2.0, 3.0])
    allowed = {0, 2}
    rng = np.random.default_rng(5)
    ledger = PrivacyLedger(rho_budget=1e6)
    calls = []

    def admissible(i):
        calls.append(i)
        return i in allowed

    picks = []
    for _ in range(4000):
        calls.clear()
        index, examined = exponential_first_admissible(
            scores, admissible, epsilon=2.0, sensitivity=1.0, rng=rng, ledger=ledger,
            name="pick")
        assert calls[-1] == index and examined == len(calls)  # stops at the first success
        picks.append(index)
    weights = np.exp(2.0 * scores[[0, 2]] / 2)
    expected = weights / weights.sum()
    observed = np.bincount(picks, minlength=4)[[0, 2]] / len(picks)
    assert set(picks) <= allowed
    # 4000 draws: standard error < 0.008; 4 of them is a generous bound
    np.testing.assert_allclose(observed, expected, atol=0.032)
    assert len(ledger.entries) == 4000 and ledger.entries[0].mechanism == "exponential"


def test_progress_is_monotone_and_ends_at_one():
    rng = np.random.default_rng(3)
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    data = {a: rng.integers(0, s, 3000) for a, s in domain.items()}
    tables = count_marginals(domain, candidate_cliques(domain), [data])
    seen = []
    run_aim(tables, domain, rho=0.5, rng=np.random.default_rng(4),
            ledger=PrivacyLedger(rho_budget=1.0), max_iters=30, final_max_iters=60,
            progress=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)


class SlowClock:
    """A stand-in for the ``time`` module whose clocks jump ``step`` seconds per reading:
    every budget anything might time runs out at once."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def _tick(self) -> float:
        self.now += self.step
        return self.now

    def monotonic(self) -> float:
        return self._tick()

    def perf_counter(self) -> float:
        return self._tick()

    def time(self) -> float:
        return self._tick()

    def __getattr__(self, name: str):
        return getattr(time, name)


#: Every module of a table release that read a clock (AIM's rounds, the synthesizer, the
#: estimator and the estimate stage).
CLOCKED = ("privfair.synth.aim", "privfair.synth.synthesizer", "privfair.synth.estimation",
           "privfair.release.kinds.table.kind", "privfair.release.tabular.private")


def _slow_clock(monkeypatch, step: float) -> None:
    import importlib

    clock = SlowClock(step)
    for name in CLOCKED:
        module = importlib.import_module(name)
        if hasattr(module, "time"):
            monkeypatch.setattr(module, "time", clock)


def test_rounds_do_not_depend_on_the_clock(monkeypatch):
    """Issue 41.5 (and 32.10 before it): AIM's rounds, σ and ledger are planned from public
    inputs and the noise, never a clock: with every clock reading 10 minutes later than the
    last, past a 20 s budget at once, the synthesizer measures exactly what it measures on a
    fast machine, and the run's logged alarm is the only trace."""
    from privfair.core.domain import Roles
    from privfair.synth.synthesizer import FairSynthesizer

    rng = np.random.default_rng(6)
    domain = Domain(("a", "b", "c", "d"), (3, 2, 4, 2))
    data = {a: rng.integers(0, s, 3000) for a, s in domain.items()}

    def run() -> tuple:
        synth = FairSynthesizer(domain=domain, roles=Roles(), epsilon=1.0, delta=1e-9,
                                method="aim", max_time_s=20.0, small_n_fallback=False)
        synth.measure(rng=np.random.default_rng(7),
                      counter=lambda cliques: count_marginals(domain, list(cliques), [data]))
        assert synth.ledger_.spent == pytest.approx(synth.ledger_.rho_budget, rel=1e-9)
        measured = [(m.clique, m.values.tolist()) for m in synth.selected_]
        potentials = {c: v.tolist() for c, v in synth.warm_start_.potentials.items()}
        return (synth.aim_rounds_, [(e.name, e.rho, e.sigma) for e in synth.ledger_.entries],
                measured, potentials)

    instant = run()
    _slow_clock(monkeypatch, 600.0)
    slow = run()
    assert len(instant[0]) > 1
    assert slow == instant


def test_a_release_on_a_slow_clock_publishes_the_same_bytes(monkeypatch, toy_contract,
                                                            toy_parquet, tmp_path):
    """The same seed, AIM at its default budget, once with a clock that jumps 10 minutes at
    every reading: the synthetic table and the manifest (less its timestamps and run id)
    are identical."""
    import json
    import os
    import re

    from privfair.release.run import release_table

    def release(root: Path) -> tuple[bytes, str]:
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(root / "registry"))
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(root / "state"))
        final = release_table({"contract": str(toy_contract), "data": str(toy_parquet),
                               "epsilon": 1.0, "delta": 1e-9, "method": "aim", "seed": 5,
                               "insecure_seed": True, "out": str(root / "releases"),
                               "work_dir": str(root / "work"), "max_iters": 100})
        manifest = json.loads((final / "manifest.json").read_text())
        for key in ("published_at", "started_at", "run_id", "files", "insecure_seed"):
            manifest.pop(key, None)
        text = json.dumps(manifest, sort_keys=True).replace(str(root), "<root>")
        text = re.sub(r"\d{8}T\d{6}-[0-9a-f]{8}", "<run id>", text)
        return (final / "synthetic.parquet").read_bytes(), text

    fast = release(tmp_path / "fast")
    _slow_clock(monkeypatch, 600.0)
    slow = release(tmp_path / "slow")
    assert os.environ["PRIVFAIR_REGISTRY"].endswith("registry")
    assert slow[0] == fast[0]
    assert slow[1] == fast[1]
