"""Strict numbers and contract files (issue 45.4, 45.5).

A contract's numbers are plain decimals: YAML 1.1 reads ``010`` as 8, ``0x0A`` as 10,
``0b11`` as 3 and ``1:30`` as 90, and pydantic reads the strings ``'1_0'`` and ``' 3'`` as
numbers; each is refused with its line and key. Categories are compared after Unicode NFC
normalisation. Every number of the command line goes through one strict parser, and
``--insecure-seed`` needs ``--seed``. A contract is a regular file of bounded size.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import TOY_CONTRACT

from privfair.cli import main
from privfair.contracts import schema
from privfair.contracts.encoding import match_text
from privfair.contracts.schema import load_contract, parse_contract
from privfair.core.errors import ContractError

BUDGET = "budget: {epsilon: 3.0, delta: 1.0e-6}"
BUDGET_LINE = TOY_CONTRACT.splitlines().index(BUDGET) + 1
BINS = "bins: [1, 20, 40, 60, 100]"


def _refused(old: str, new: str) -> str:
    assert old in TOY_CONTRACT
    with pytest.raises(ContractError) as refused:
        parse_contract(TOY_CONTRACT.replace(old, new))
    return str(refused.value)


@pytest.mark.parametrize("spelling", ["010", "0x0A", "0b11", "0o10", "1:30", "1_0", "+010",
                                      "-0x1", "'1_0'", "' 3'", "'٣'", "'0x0A'", "\"3 \"",
                                      "yes", "'1e400'"])
def test_budget_numbers_are_plain_decimals(spelling):
    message = _refused("epsilon: 3.0", f"epsilon: {spelling}")
    assert "epsilon" in message, message
    if spelling[0] not in "'\"" and spelling not in ("yes", "0o10"):  # YAML numbers: line, key
        assert f"line {BUDGET_LINE}" in message and "budget.epsilon" in message, message


@pytest.mark.parametrize("spelling", ["020", "0x14", "2_0", "0:20", "'2_0'"])
def test_bin_edges_are_plain_decimals(spelling):
    message = _refused(BINS, f"bins: [1, {spelling}, 40, 60, 100]")
    assert "bins" in message, message


def test_plain_decimals_still_read_as_before():
    for old, new, budget in (("epsilon: 3.0", "epsilon: 3", 3.0),
                             ("epsilon: 3.0", "epsilon: +3", 3.0),
                             ("epsilon: 3.0", "epsilon: 3.", 3.0),
                             ("epsilon: 3.0", "epsilon: 0.5", 0.5),
                             ("epsilon: 3.0", "epsilon: 5e-1", 0.5),
                             ("epsilon: 3.0", "epsilon: '3'", 3.0),
                             ("delta: 1.0e-6", "delta: 0.000001", 3.0)):
        contract = parse_contract(TOY_CONTRACT.replace(old, new))
        assert contract.budget.epsilon == budget
    contract = parse_contract(TOY_CONTRACT.replace(BINS, "bins: [-.inf, 0, 20, 40, .inf]"))
    assert [c for c in contract.columns if c.name == "hours"][0].bins[1:4] == (0.0, 20.0, 40.0)


def test_a_leading_zero_is_refused_in_every_number_of_the_contract():
    text = TOY_CONTRACT.replace("  - name: income", "  - name: score\n    type: numeric\n"
                                "    dp_bins: 010\n    lower: 0\n    upper: 10\n"
                                "  - name: income")
    with pytest.raises(ContractError, match="dp_bins"):
        parse_contract(text)


def test_categories_are_compared_after_nfc():
    composed, decomposed = "\u00e9", "e\u0301"
    message = _refused("categories: [F, M]", f'categories: ["{composed}", "{decomposed}"]')
    assert "twice" in message or "same" in message, message
    message = _refused("categories: [F, M]",
                       f'categories: ["{composed}", M]\n    aliases: {{"{decomposed}": M}}')
    assert "alias" in message, message
    contract = parse_contract(TOY_CONTRACT.replace("categories: [F, M]",
                                                   f'categories: ["{composed}", M]'))
    codes = match_text(contract, "sex", pd.Series([decomposed, composed, "M", "x"]))
    assert codes.tolist() == [0, 0, 1, -1]
    # a category written decomposed matches the composed spelling of the data too
    contract = parse_contract(TOY_CONTRACT.replace("categories: [F, M]",
                                                   f'categories: ["{decomposed}", M]'))
    assert match_text(contract, "sex", pd.Series([composed])).tolist() == [0]


def test_column_names_equal_after_nfc_are_one_name_declared_twice():
    text = TOY_CONTRACT.replace("  - name: income", "  - name: \"caf\u00e9\"\n    type: categorical\n"
                                "    categories: [a]\n  - name: \"cafe\u0301\"\n"
                                "    type: categorical\n    categories: [a]\n  - name: income")
    with pytest.raises(ContractError, match="more than once"):
        parse_contract(text)


# --- the command line --------------------------------------------------------------------------


def _cli(capsys, *argv: object) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("value", ["1_0", "\u0663", " 1", "1e400", "nan", "0x1"])
def test_audit_scale_noise_goes_through_the_strict_parser(value, capsys, monkeypatch):
    import privfair.evaluation.audit as audit

    def ran(**kwargs):  # the audit itself (minutes) must never start on a bad number
        raise AssertionError(f"the audit ran with --scale-noise {value!r}")

    monkeypatch.setattr(audit, "run_audit", ran)
    code, err = _cli(capsys, "audit", "--noise-only", "--scale-noise", value)
    assert code == 2 and "--scale-noise" in err and len(err.strip().splitlines()) == 1, err


def test_every_number_option_of_the_cli_uses_the_strict_parser():
    """No option of any command reads numbers with Python's ``float`` or ``int``, which take
    ``1_0``, ``' 1'`` and other digits than ASCII."""
    import argparse

    from privfair.cli import build_parser

    loose = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
            elif action.type in (float, int):
                loose.append(f"{where} {action.option_strings}")

    walk(build_parser(), "privfair")
    assert not loose, loose


def test_insecure_seed_needs_a_seed(tmp_path, capsys, toy_contract, toy_parquet):
    code, err = _cli(capsys, "release", "--contract", toy_contract, "--data", toy_parquet,
                     "--epsilon", "1", "--delta", "1e-9", "--method", "mst", "--out",
                     tmp_path / "releases", "--work-dir", tmp_path / "w", "--no-prefect",
                     "--dry-run", "--insecure-seed")
    assert code == 2 and "--insecure-seed" in err and "--seed" in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- contract files: regular, bounded ---------------------------------------------------------


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_not_a_contract(device):
    if not Path(device).exists():
        pytest.skip(f"{device} is not on this machine")
    started = time.monotonic()
    with pytest.raises(ContractError, match="not a regular file"):
        load_contract(device)
    assert time.monotonic() - started < 2


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "contract.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_contract(fifo)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - what the loader raised, checked below
            outcome.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=5)
    hung = reader.is_alive()
    if hung:  # broken code waits for a writer: give it one (EOF) so the test ends
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        reader.join(timeout=5)
    assert not hung, "load_contract waited on a FIFO"
    assert isinstance(outcome[0], ContractError) and "not a regular file" in str(outcome[0])


def test_an_oversized_contract_is_refused_without_reading_it(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:  # sparse: no disk used
        fh.truncate(getattr(schema, "MAX_CONTRACT_BYTES", 64 * 2**20) + 1)
    with pytest.raises(ContractError, match="larger than"):
        load_contract(big)
    code, err = _cli(capsys, "contract", "check", "/dev/zero")
    assert code == 2 and "/dev/zero" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("value", ["1_0", " 4", "\u0663", "nan", "-2", "0"])
def test_the_memory_limit_variable_is_read_strictly(value, monkeypatch):
    from privfair.core.errors import ReleaseInputError
    from privfair.release.checks import memory_limit

    monkeypatch.setenv("PRIVFAIR_MEMORY_GB", value)
    with pytest.raises(ReleaseInputError, match="PRIVFAIR_MEMORY_GB"):
        memory_limit()
    monkeypatch.setenv("PRIVFAIR_MEMORY_GB", "0.5")
    assert memory_limit() == 2**29


def test_release_parameters_from_a_library_or_prefect_caller_are_read_strictly(
        toy_contract, toy_parquet, tmp_path):
    from privfair.release.registry import family

    params = family("release").params
    good = {"contract": str(toy_contract), "data": str(toy_parquet), "epsilon": 1.0,
            "delta": 1e-9, "method": "mst", "out": str(tmp_path / "r")}
    assert params.model_validate({**good, "epsilon": "0.5"}).epsilon == 0.5
    for name, value in (("epsilon", "1_0"), ("epsilon", " 1"), ("delta", "1e-9 "),
                        ("max_iters", "1_000"), ("n_rows", "\u0663"), ("epsilon", True)):
        with pytest.raises(ValueError, match=name):
            params.model_validate({**good, name: value})


def test_the_evaluation_grid_reads_its_numbers_strictly():
    from privfair.evaluation.grid import EvaluateParams

    assert EvaluateParams(epsilons=["0.5"]).epsilons == [0.5]
    for value in ("1_0", " 1", "\u0663"):
        with pytest.raises(ValueError, match="epsilons"):
            EvaluateParams(epsilons=[value])
