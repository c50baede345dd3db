"""A GAN release never spends more than it declared (publisher walk: credit dpgan at ε = 1).

The GAN kind declares ρ = zcdp_rho(ε, δ) and reserves it; the lifetime ledger charges its
Rényi curve :func:`~privfair.store.registry.rho_reservation`, which also pays for composing
on the ledger's order grid instead of zCDP's continuous orders. D1's σ is calibrated so that
charge stays within the reservation, and a run whose counts alone could not is refused before
any noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import TOY_CONTRACT, make_toy_frame

from privfair.core.accounting import RDP_ORDERS, LedgerEntry, PrivacyLedger, zcdp_rho
from privfair.core.errors import BudgetExceededError
from privfair.generative.calibration import count_rho, noise_multiplier_on_ledger
from privfair.release.gan.stages import lifetime_limit
from privfair.store.ledger import LifetimeLedger


def _toy(tmp_path, *, lifetime_epsilon: float, rows: int = 1000):
    contract = tmp_path / "toy.yaml"
    contract.write_text(TOY_CONTRACT.replace("epsilon: 3.0", f"epsilon: {lifetime_epsilon}"))
    data = tmp_path / "toy.parquet"
    make_toy_frame(rows).to_parquet(data, index=False)
    return contract, data


def _params(contract, data, tmp_path):
    return {"contract": str(contract), "data": str(data), "epsilon": 1.0, "delta": 1e-9,
            "method": "dpgan", "seed": 11, "insecure_seed": True, "gan_epochs": 1,
            "out": str(tmp_path / "store"), "work_dir": str(tmp_path / "work")}


def _entries(contract):
    from privfair.contracts.schema import load_contract
    from privfair.store.registry import dataset_id, read_chain

    return read_chain(dataset_id(load_contract(contract)))


def test_small_table_dpgan_publishes_within_its_reservation(tmp_path):
    """1,000 rows (q = b/ñ ≈ 0.44), lifetime (6, 1e-6): the charge of the curve calibrated on
    the run's ledger alone was rho 0.0159 > the reserved 0.0150, refused after the noise."""
    pytest.importorskip("torch")
    import json

    from privfair.release.kinds import release_table

    contract, data = _toy(tmp_path, lifetime_epsilon=6.0)
    final = release_table(_params(contract, data, tmp_path))
    entries = _entries(contract)
    assert [e["kind"] for e in entries] == ["open", "reserve", "spend", "publish"]
    reserved, published = entries[1], entries[3]
    assert reserved["rho"] == pytest.approx(zcdp_rho(epsilon=1.0, delta=1e-9))
    assert published["rho"] <= reserved["rho"] * (1 + 1e-9)
    assert published["rho"] > 0.99 * reserved["rho"]  # the lifetime bound is what set σ
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["guarantee"]["spent"]["epsilon"] <= 1.0 * (1 + 1e-9)


def test_a_lifetime_that_cannot_hold_the_gan_is_refused_before_any_noise(tmp_path):
    """Lifetime (20, 1e-6): composing any Rényi curve there costs rho 0.107 > the declared
    0.015, so the run is refused at planning: nothing reserved, read or drawn."""
    from privfair.release.kinds import release_table

    contract, data = _toy(tmp_path, lifetime_epsilon=20.0)
    with pytest.raises(BudgetExceededError, match="before DP-SGD even starts"):
        release_table(_params(contract, data, tmp_path))
    assert not any(e["kind"] in ("reserve", "spend") for e in _entries(contract))


def _run_ledger(epsilon: float, delta: float) -> PrivacyLedger:
    """A GAN run's ledger before DP-SGD: the policy counts' share, then the anchor counts."""
    rho = zcdp_rho(epsilon=epsilon, delta=delta)
    book = PrivacyLedger(rho_budget=rho, delta=delta)
    book.spend(LedgerEntry("policy counts", "gaussian", 1.0, rho=0.02 * rho))
    book.spend(LedgerEntry("anchor counts", "gaussian", 1.0, rho=count_rho(book)))
    return book


@pytest.mark.parametrize(("n", "epsilon", "lifetime"), [
    (1000, 1.0, (6.0, 1e-6)), (1000, 1.0, (10.0, 1e-6)), (1000, 3.0, (10.0, 1e-6)),
    (48842, 1.0, (10.0, 1e-6)), (48842, 1.0, (3.0, 1e-6))])
def test_sigma_is_the_smallest_within_the_run_and_the_lifetime(n, epsilon, lifetime):
    delta, epochs = 1e-9, 2
    book = _run_ledger(epsilon, delta)
    rho = book.rho_budget
    q = min(1.0, 500 / n)
    steps = epochs * math.ceil(1 / q)

    def charges(sigma):
        return [{"name": "D1", "noise_multiplier": sigma, "sample_rate": q, "steps": steps}]

    life = LifetimeLedger("toy", *lifetime, [], dataset_id="toy")
    limit = lifetime_limit(life, rho=rho, run_id=None)

    def curve(sigma):
        trial = PrivacyLedger.from_state_dict(book.state_dict())
        for kwargs in charges(sigma):
            trial.spend_subsampled_gaussian(**kwargs)  # raises past the run's own budget
        return trial.rdp()

    alone = noise_multiplier_on_ledger(book, charges=charges)
    sigma = noise_multiplier_on_ledger(book, charges=charges, limit=limit)
    assert limit(curve(sigma)) <= 1.0
    assert sigma >= alone
    if limit(curve(alone)) <= 1.0:
        assert sigma == alone  # the lifetime bound changes nothing where it holds already
    else:
        assert limit(curve(sigma / 1.01)) > 1.0  # and is the smallest σ that meets it
    assert len(book.entries) == 2  # calibration tries copies only


def test_counts_that_cannot_fit_are_refused_before_they_are_drawn():
    pytest.importorskip("torch")
    from privfair.core.domain import Domain
    from privfair.generative.gan import GANConfig, fit_gan

    frame = make_toy_frame(200)
    domain = Domain(("sex", "edu", "income"), (2, 4, 2))
    codes = {"sex": (frame["sex"] == "M").to_numpy().astype(np.int64),
             "edu": frame["edu"].map({"HS": 0, "BA": 1, "MA": 2, "PhD": 3}).to_numpy(),
             "income": (frame["income"] == "high").to_numpy().astype(np.int64)}
    book = PrivacyLedger(rho_budget=zcdp_rho(epsilon=1.0, delta=1e-9), delta=1e-9)
    with pytest.raises(BudgetExceededError, match="nothing was drawn"):
        fit_gan(codes, domain, protected="sex", outcome="income", ledger=book,
                rng=np.random.default_rng(0), config=GANConfig(method="dpgan", epochs=1),
                limit=lambda curve: float(curve[0]) / (RDP_ORDERS[0] * 1e-6))
    assert book.entries == ()
