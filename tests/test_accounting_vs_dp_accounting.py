"""Issue 32.9 (finding 7): the lifetime ledger's composition, exact and lifetime-independent.

At main one ``train --model pflr --epsilon 1`` (δ = 1e-6) showed ε 2.6 of a lifetime ε = 10
spent and ε 23 of a lifetime ε = 100 (DP-SGD: 1.05 and 22.6): a curve's charge was a ρ that
depended on the lifetime. A release is now charged its own curve; the ledger composes every
charge and converts once; dp-accounting, composing the same steps, agrees.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import TOY_CONTRACT

from benchmarks.accounting_vs_dp_accounting import compare
from privfair.contracts.schema import load_contract
from privfair.core.accounting import (
    LEGACY_RDP_ORDERS,
    RDP_ORDERS,
    rdp_epsilon,
    subsampled_gaussian_rdp,
    zcdp_epsilon,
    zcdp_rho,
)
from privfair.release.kinds.model.train import MODEL
from privfair.release.protocol import plan_release, reserve
from privfair.store.ledger import LifetimeLedger, fold
from privfair.store.registry import read_chain, read_lifetime_ledger


def test_the_ledger_agrees_with_dp_accounting_on_a_mixed_sequence():
    """Tables (zCDP), a DP-SGD model, a functional model and a causal graph: per release and
    composed, the ledger's ε is dp-accounting's RdpAccountant's for the same steps."""
    out = compare(pld=False)
    for row in out["releases"]:
        ours, theirs = row["ledger_epsilon"], row["dp_accounting_rdp_same_epsilon"]
        if row["charged_by"] == "renyi curve":
            assert ours == pytest.approx(theirs, rel=1e-9), row["release"]
        else:  # zCDP alone converts exactly (CKS, continuous orders): at most the grid's
            assert theirs * (1 - 1e-3) <= ours <= theirs * (1 + 1e-12), row["release"]
        # dp-accounting's own events (scalar Laplace) are never charged more than the same
        # steps' bounds the ledger composes
        assert row["dp_accounting_rdp_native_epsilon"] <= theirs * (1 + 1e-12), row["release"]
        assert ours <= 2.0 * (1 + 1e-8)  # no release is charged past its own ε
    composed = out["composed"]
    assert composed["ledger_epsilon"] == pytest.approx(
        composed["dp_accounting_rdp_same_epsilon"], rel=1e-9)
    assert composed["ledger_epsilon"] >= composed["dp_accounting_rdp_native_epsilon"]
    assert composed["ledger_epsilon"] < 0.6 * composed["sum_of_release_epsilons"]


def _toy(folder: Path, lifetime_epsilon: float) -> Path:
    folder.mkdir()
    path = folder / "toy.yaml"
    path.write_text(TOY_CONTRACT.replace("budget: {epsilon: 3.0",
                                         f"budget: {{epsilon: {lifetime_epsilon}"))
    assert load_contract(path).budget.epsilon == lifetime_epsilon
    return path


@pytest.mark.parametrize("model", ["pflr", "dpsgd"])
def test_a_release_is_charged_its_own_epsilon_whatever_the_lifetime(model, toy_parquet,
                                                                    tmp_path, monkeypatch):
    """The finding's reproducer: ε 1, δ 1e-6 against lifetimes ε 10 and ε 100 (each its own
    registry): the same charge, and the ledger shows at most ε 1 spent after the reservation."""
    shown = []
    for lifetime in (10.0, 100.0):
        monkeypatch.setenv("PRIVFAIR_REGISTRY", str(tmp_path / f"registry{lifetime:g}"))
        # each registry with its own client: one client binds a dataset to one registry (issue 45.2)
        monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / f"registry{lifetime:g}") + "-client")
        contract = _toy(tmp_path / f"life{lifetime:g}", lifetime)
        planned = plan_release(MODEL, {
            "contract": str(contract), "data": str(toy_parquet), "model": model,
            "epsilon": 1.0, "delta": 1e-6, "out": str(tmp_path / f"store{lifetime:g}"),
            "work_dir": str(tmp_path / "work")})
        reserve(planned)  # what a run holds before its first private read
        book = read_lifetime_ledger(None, load_contract(contract))
        (pending,) = book.pending
        assert "rho" not in pending  # no lifetime-dependent ρ
        shown.append(book.epsilon_spent())
        assert book.to_dict()["charges"][0]["epsilon_at_budget_delta"] == shown[-1]
    assert shown[0] == pytest.approx(shown[1], rel=1e-12)
    assert 0.99 < shown[0] <= 1.0 * (1 + 1e-8)


def test_zcdp_only_ledgers_compose_as_rho_sums_exactly():
    rhos = [zcdp_rho(epsilon=1.0, delta=1e-9), 0.05, 0.2]
    book = LifetimeLedger("x", 10.0, 1e-6, [{"rho": r} for r in rhos])
    assert book.epsilon_spent() == zcdp_epsilon(rho=math.fsum(rhos), delta=1e-6)
    book.check(rho=book.rho_budget - math.fsum(rhos))  # exactly the rest fits
    with pytest.raises(Exception, match="lifetime budget"):
        book.check(rho=(book.rho_budget - math.fsum(rhos)) * 1.001)


def test_curves_on_the_old_grid_and_format_3_charges_load():
    """A format-3 entry: its curve on the orders 2..1024 and a lifetime-dependent ρ. The curve
    is extended below 2 with its value at 2 (RDP is non-decreasing in α) and the ρ ignored."""
    curve = subsampled_gaussian_rdp(noise_multiplier=1.0, sample_rate=0.01, steps=1000,
                                    orders=LEGACY_RDP_ORDERS)
    old = {"version": "v1", "rho": 5.9, "rdp": [float(v) for v in curve]}
    book = LifetimeLedger("x", 100.0, 1e-6, [old])
    assert book.rho_spent == 0.0  # the old lifetime-dependent ρ is not a charge
    own = rdp_epsilon(rdp=curve, delta=1e-6, orders=LEGACY_RDP_ORDERS)[0]
    assert book.epsilon_spent() == pytest.approx(own, rel=1e-12)
    extended = book.curve_spent()
    assert extended.shape == (len(RDP_ORDERS),)
    assert np.all(extended[:3] == curve[0]) and np.all(extended[3:] == curve)
    # the grid's new orders help a large composed ε (a lifetime of ε 100)
    table = [{"rho": 20.0}]
    assert LifetimeLedger("x", 100.0, 1e-6, table).epsilon_spent() < rdp_epsilon(
        rdp=20.0 * np.asarray(LEGACY_RDP_ORDERS), delta=1e-6, orders=LEGACY_RDP_ORDERS)[0]


def test_a_publish_past_the_declared_curve_is_checked_against_the_others(toy_contract,
                                                                         tmp_path):
    """A run's reservation holds its declared curve; a publication naming a larger curve
    must fit next to everything else (here it does not: refused)."""
    from privfair.store.registry import RunCharge, record_published, reserve_run

    contract = load_contract(toy_contract)  # lifetime (3, 1e-6)
    small = tuple(0.001 * np.asarray(RDP_ORDERS))
    run = RunCharge(run_id="r1", kind="model", dataset="toy", contract=contract,
                    store=tmp_path / "store", epsilon=1.0, delta=1e-6, rho=None,
                    method="model:test", contract_fingerprint="f", rdp=small)
    reserve_run(run)
    with pytest.raises(Exception, match="lifetime budget"):
        record_published(ident="toy", name="toy", budget=(3.0, 1e-6), store=tmp_path / "store",
                         releases=[{"run_id": "r1", "version": "v1",
                                    "rdp": [float(v) for v in 5 * np.asarray(RDP_ORDERS)]}])
    record_published(ident="toy", name="toy", budget=(3.0, 1e-6), store=tmp_path / "store",
                     releases=[{"run_id": "r1", "version": "v1",
                                "rdp": [float(v) / 2 for v in small]}])
    book = fold(read_chain("toy"), "toy", "toy")
    assert book.epsilon_spent() == pytest.approx(
        rdp_epsilon(rdp=np.asarray(small) / 2, delta=1e-6)[0])
