"""Issue 45.5: disk and state-folder failures after a reservation cancel it, name the path,
and print no traceback. A full disk under ``PRIVFAIR_STATE_HOME`` left the reservation held
with no cancel; a full work disk printed a raw ``OSError`` with no path."""

from __future__ import annotations

import errno

import pytest
from test_release_store import params

from privfair.cli import main
from privfair.contracts.schema import load_contract
from privfair.release.run import release_table as run_release
from privfair.release.tabular import stages
from privfair.store import witness
from privfair.store.files import StoreError
from privfair.store.registry import read_chain, read_lifetime_ledger


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _cancelled(contract) -> None:
    book = read_lifetime_ledger(None, load_contract(contract))
    assert book.pending == [] and book.releases == []
    assert [e["kind"] for e in read_chain("toy")] == ["open", "reserve", "cancel"]


def test_a_full_work_disk_after_the_reservation_cancels_it_and_names_the_folder(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "save_ledger", _full_disk)  # the first write of the run
    with pytest.raises(StoreError) as failed:
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    work = tmp_path / "work"
    assert f"the work folder {work} cannot be written (No space left on device)" in \
        str(failed.value)
    assert any("reservation is cancelled, nothing is charged" in note
               for note in failed.value.__notes__)
    _cancelled(toy_contract)


def test_the_cli_prints_one_line_for_a_full_disk(toy_contract, toy_parquet, tmp_path,
                                                 monkeypatch, capsys):
    monkeypatch.setattr(stages, "save_ledger", _full_disk)
    code = main(["release", "--contract", str(toy_contract), "--data", str(toy_parquet),
                 "--epsilon", "1", "--delta", "1e-9", "--out", str(tmp_path / "releases"),
                 "--work-dir", str(tmp_path / "work"), "--no-prefect"])
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1]
    assert code == 2 and "Traceback" not in "\n".join(err)
    assert line.startswith("privfair: error: ") and "No space left on device" in line
    assert str(tmp_path / "work") in line and "nothing is charged" in line
    _cancelled(toy_contract)


def test_a_full_state_folder_at_the_reservation_cancels_it(toy_contract, toy_parquet,
                                                           tmp_path, monkeypatch):
    """The reservation commits in the registry, then the client's witness cannot be written:
    the reservation is given back and the error names the state folder's file."""
    with monkeypatch.context() as m, pytest.raises(StoreError) as failed:
        m.setattr(witness, "atomic_write", _full_disk)
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
    message = str(failed.value)
    assert "witness.json cannot be written (No space left on device)" in message
    assert "PRIVFAIR_STATE_HOME" in message and "reservation is cancelled" in message
    assert "\n" not in message
    _cancelled(toy_contract)
    assert not list((tmp_path / "releases").glob("toy/v*"))


def test_a_state_home_that_is_a_file_is_refused_before_the_reservation(
        toy_contract, toy_parquet, tmp_path, monkeypatch):
    home = tmp_path / "state-file"
    home.write_text("not a folder")
    monkeypatch.setenv("PRIVFAIR_STATE_HOME", str(home))
    with pytest.raises(StoreError, match=f"state folder {home}"):
        run_release(params(toy_contract, toy_parquet, tmp_path, seed=None))
