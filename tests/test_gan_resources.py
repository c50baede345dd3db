"""Issue 45.5: a GAN's memory is estimated from public facts before the reservation, like
the model kind's: a contract whose one-hot width cannot be fitted on this machine is refused
by the plan in one line, before anything is reserved (it failed after the noise, charged)."""

from __future__ import annotations

import dataclasses

import pytest
from test_release_store import params

from privfair.release import resources as shared
from privfair.release.kinds.gan.resources import GAN_SHAPE, check_gan_resources, gan_bytes
from privfair.release.resources import ResourceError
from privfair.release.run import release_table as run_release
from privfair.store.registry import read_chain


def test_the_estimate_uses_the_gans_own_shapes():
    from privfair.generative.gan import GANConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GANConfig)}
    assert {k: defaults[k] for k in GAN_SHAPE} == dict(GAN_SHAPE)


def test_the_estimate_grows_with_the_widest_domain():
    small = gan_bytes(sizes={"a": 2, "b": 10}, method="fairgan", heads=2, **GAN_SHAPE)
    wide = gan_bytes(sizes={"a": 2, "b": 100_000}, method="fairgan", heads=2, **GAN_SHAPE)
    assert small < 50 * 2**20  # the toy contract: tens of MiB at most
    # a 100k-category column: the sampled chunk's probabilities alone are 3 x 8192 x 100k
    # float32 (9.2 GiB)
    assert wide > 9 * 2**30


@pytest.mark.parametrize("method", ["dpgan", "fairgan", "fairgan-plus", "cfgan"])
def test_a_gan_too_wide_for_this_machine_is_refused(method, monkeypatch):
    monkeypatch.setattr(shared, "physical_memory", lambda: 4 * 2**30)
    with pytest.raises(ResourceError) as refused:
        check_gan_resources(sizes={"sex": 2, "zip": 100_000, "income": 2}, method=method,
                            heads=2)
    message = str(refused.value)
    assert "\n" not in message and "--contract" in message and "'zip'" in message
    assert "GiB" in message and "before anything is reserved" in message
    check_gan_resources(sizes={"sex": 2, "zip": 50, "income": 2}, method=method, heads=2)


def test_the_release_refuses_before_the_reservation(toy_contract, toy_parquet, tmp_path,
                                                    monkeypatch):
    monkeypatch.setattr(shared, "physical_memory", lambda: 2**20)  # a 1 MiB machine
    with pytest.raises(ResourceError, match="GAN fairgan over"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None, method="fairgan"))
    assert read_chain("toy") == []  # nothing reserved
