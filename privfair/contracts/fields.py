"""Pydantic field types for the numbers people set: ε, δ and TOT's η, and the one strict
reading of a number people type.

Each type wraps the one check of its value (:mod:`privfair.core.budget`,
:mod:`privfair.fair.eta`) so that a release's parameters, a contract, the evaluation grid and
``ledger raise`` refuse the same values with the same words. Pydantic names the field itself,
so the validators raise the check's reason without the name.

:func:`plain_decimal` and :func:`plain_whole` read a number spelt plainly (ASCII digits, an
optional sign, point and exponent): Python's ``float`` and ``int`` and pydantic also read
``1_0`` (10), ``" 1"``, ``"٣"`` (Arabic-Indic 3), ``nan`` and ``inf``, which a typo must not
become (issue 36, 45.4). Every number option of the command line goes through them
(:mod:`privfair.cli_options`), and :func:`refuse_loose_numbers` holds a contract's quoted
numbers to them.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator

from privfair.core.budget import check_delta, check_epsilon
from privfair.core.errors import ParameterError
from privfair.fair.eta import check_eta

__all__ = ["PLAIN_DECIMAL", "PLAIN_WHOLE", "Delta", "Epsilon", "Eta", "plain_decimal",
           "plain_whole", "refuse_loose_numbers"]

#: A decimal number spelt plainly (``[0-9]`` is ASCII only in Python's ``re``).
PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: A whole number spelt plainly.
PLAIN_WHOLE = re.compile(r"[+-]?[0-9]+")


def plain_decimal(text: str) -> float:
    """The finite number ``text`` spells plainly; ValueError (one line) for anything else."""
    if not PLAIN_DECIMAL.fullmatch(text):
        raise ValueError(f"{text!r} is not a finite decimal number; expected one such as 0.5 "
                         "or 1e-6")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite decimal number (it overflows)")
    return value


def plain_whole(text: str) -> int:
    """The whole number ``text`` spells plainly; ValueError (one line) for anything else."""
    if not PLAIN_WHOLE.fullmatch(text):
        raise ValueError(f"{text!r} is not a whole number; expected digits only, such as 100")
    return int(text)


def _numeric(annotation: Any) -> bool:
    """Whether a field holds numbers only (``float``, ``int | None``, ``tuple[float, ...]``)."""
    if annotation in (int, float):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _numeric(args[0])
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return bool(rest) and all(_numeric(a) for a in rest)
    if origin in (tuple, list):
        items = [a for a in args if a is not Ellipsis]
        return bool(items) and all(_numeric(a) for a in items)
    return False


_NUMERIC_FIELDS: dict[type[BaseModel], dict[str, str]] = {}


def _numeric_fields(model: type[BaseModel]) -> dict[str, str]:
    """The input keys (aliases) of ``model``'s numeric fields, each with its field name."""
    found = _NUMERIC_FIELDS.get(model)
    if found is None:
        found = {info.alias or name: name for name, info in model.model_fields.items()
                 if _numeric(info.annotation)}
        _NUMERIC_FIELDS[model] = found
    return found


def _refuse_loose(value: Any, key: str) -> None:
    if isinstance(value, bool):
        raise ValueError(f"{key}: the YAML boolean {value!r} is not a number (yes/no/on/off "
                         "are booleans); write a decimal number such as 0.5")
    if isinstance(value, str):
        try:
            plain_decimal(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_loose(item, key)


def refuse_loose_numbers(model: type[BaseModel], data: Any) -> Any:
    """``data`` for ``model``, after refusing a number field given as a boolean or as text
    that is not a plain decimal (pydantic would read ``'1_0'`` as 10 and ``' 3'`` as 3): a
    ``model_validator(mode="before")`` of the contract's models."""
    if isinstance(data, dict):
        for key in _numeric_fields(model).keys() & data.keys():
            _refuse_loose(data[key], key)
    return data


def _field(check: Callable[..., float]) -> Callable[[object], float]:
    def validate(value: object) -> float:
        try:
            return check(value)
        except ParameterError as error:
            raise ValueError(error.reason) from None

    return validate


def _no_bool(value: object) -> object:
    # pydantic would read True as 1.0 before the check could see it was a bool, and the text
    # '1_0' as 10 (a Prefect form's or a library caller's string: issue 45.4).
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number; expected a decimal such as 0.5")
    if isinstance(value, str):
        return plain_decimal(value)
    return value


#: ε of an (ε, δ)-DP guarantee, in [1e-6, 100].
Epsilon = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_epsilon))]
#: δ of an (ε, δ)-DP guarantee, in (1e-50, 1).
Delta = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_delta))]
#: TOT's discrimination bound η, in [0, 1].
Eta = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_eta))]
