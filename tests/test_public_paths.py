"""Issue 45.5: a name too long and a state home that is a file printed raw OS errors
(``[Errno 36] File name too long``, ``[Errno 17] File exists``) and the second only after
the reservation; both are refused by the plan, in one line naming what to fix."""

from __future__ import annotations

import pytest
from test_release_store import params

from privfair.release.run import release_table as run_release
from privfair.store.files import StoreError
from privfair.store.registry import has_ledger


@pytest.mark.parametrize("flag", ["out", "work_dir"])
def test_a_folder_name_too_long_is_refused_naming_its_flag(toy_contract, toy_parquet,
                                                           tmp_path, flag):
    long = str(tmp_path / ("x" * 300))
    with pytest.raises(StoreError) as refused:
        run_release(params(toy_contract, toy_parquet, tmp_path, **{flag: long}))
    message = str(refused.value)
    assert message.startswith("--" + flag.replace("_", "-")) and "255 bytes" in message
    assert "Errno" not in message and "\n" not in message
    assert not has_ledger("toy")  # refused before the reservation


def test_a_state_home_that_is_a_file_is_refused_before_the_reservation(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    state = tmp_path / "state-file"
    state.write_text("not a folder")
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(state))
    with pytest.raises(StoreError) as refused:
        run_release(params(toy_contract, toy_parquet, tmp_path))
    message = str(refused.value)
    assert "PRIVFAIR_STATE_HOME" in message and "is a file" in message
    assert "Errno" not in message
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(tmp_path / "state"))
    assert not has_ledger("toy")
