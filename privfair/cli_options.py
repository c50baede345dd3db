"""Command-line options generated from a release kind's parameter model.

One declaration per parameter: a field of the pydantic model (its type, default, choices and
description) becomes one ``--kebab-case`` option. A field's ``json_schema_extra`` may give
``cli`` (another spelling, e.g. ``--fairness`` for ``fairness_transform``) and
``cli_required`` (the option must be given although the model has a default). Values the user
leaves out are left out, so the model's defaults apply, and the model validates everything.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel

from privfair.contracts.fields import plain_decimal, plain_whole


def decimal(text: str) -> float:
    """A finite decimal number, spelt plainly (:func:`privfair.contracts.fields.plain_decimal`,
    the one strict parser): Python's ``float`` also reads ``1_0`` (10), ``nan``, ``inf``,
    ``" 1"`` and ``"٣"``, which an operator's typo must not become (issue 36, 45.4)."""
    try:
        return plain_decimal(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def whole(text: str) -> int:
    """A whole number, spelt plainly (``int`` also reads ``1_000``, ``" 1"`` and ``"٣"``)."""
    try:
        return plain_whole(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _flag(name: str, info: Any) -> str:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    return str(extra.get("cli") or "--" + name.replace("_", "-"))


def _plain(annotation: Any) -> tuple[Any, bool]:
    """The annotation without ``None``, and whether ``None`` was allowed."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else str), True
    return annotation, False


def add_options(parser: argparse.ArgumentParser, model: type[BaseModel]) -> None:
    """Add one option per field of ``model`` to ``parser`` (dest: the field's name)."""
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        annotation, _ = _plain(info.annotation)
        help_text = " ".join((info.description or "").split()).replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": help_text}
        if extra.get("cli_required"):  # enforced by the command (not with --resume)
            kwargs["help"] += " (required)"
        if annotation is bool:
            kwargs.update(action="store_true", default=None)
        elif typing.get_origin(annotation) is Literal:
            kwargs.update(choices=typing.get_args(annotation))
        elif typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            kwargs.update(type=_PARSE.get(item, item), nargs="*")
        elif annotation in (int, float, str):
            kwargs.update(type=_PARSE.get(annotation, annotation))
        else:
            kwargs.update(type=str)
        # A required field has no default to show (its ``default`` is PydanticUndefined); an
        # empty one (a default_factory's list) says nothing the help text does not.
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        if default not in (None, [], "") and not extra.get("cli_required") and annotation is not bool:
            kwargs["help"] += f" (default: {default})"
        parser.add_argument(_flag(name, info), **kwargs)


_PARSE: dict[Any, Any] = {float: decimal, int: whole}


def options_from_args(model: type[BaseModel], args: argparse.Namespace) -> dict[str, Any]:
    """The values the user gave, by field name (absent ones take the model's defaults)."""
    return {name: getattr(args, name) for name in model.model_fields
            if getattr(args, name, None) is not None}


def missing_required(model: type[BaseModel], args: argparse.Namespace) -> list[str]:
    """The ``cli_required`` options the user did not give."""
    return [_flag(name, info) for name, info in model.model_fields.items()
            if isinstance(info.json_schema_extra, dict)
            and info.json_schema_extra.get("cli_required") and getattr(args, name) is None]
