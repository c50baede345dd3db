"""The parameters every release kind shares, declared once, and their data-free checks.

A kind's parameter model subclasses :class:`ReleaseOptions`; the CLI's options
(:func:`privfair.cli.options.add_options`) and the Prefect flow's form
(``flows/kinds.py``) are generated from it. A field's ``json_schema_extra`` may say
``{"cli": "--name"}`` (the CLI spelling, when it is not the field's name in kebab case) and
``{"form": False}`` (kept off the Prefect form: a test seed, internal folders).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import JsonDict

from privfair.contracts.datasets import PackagedContract
from privfair.contracts.fields import Delta, Epsilon, refuse_loose_numbers
from privfair.core.budget import MAX_EPSILON, MIN_DELTA, MIN_EPSILON, Budget
from privfair.core.errors import ReleaseInputError

#: Characters a path parameter may not hold: wildcards and control characters.
ODD_PATH = re.compile(r"[?*\[\]\x00-\x1f\x7f]")

PRIVATE_FIELD: JsonDict = {"form": False}


class ReleaseOptions(BaseModel):
    """Parameters of every release kind: what to read, the guarantee, where to publish."""

    model_config = ConfigDict(extra="forbid")

    contract: PackagedContract | str | None = Field(
        None, description="Data contract: a packaged contract's name ("
                          f"{', '.join(typing.get_args(PackagedContract))}) or the path of a "
                          "YAML file. Empty: the embedded Adult contract.")
    data: str | None = Field(
        None, description="Private table, CSV or Parquet. Empty: the contract's embedded data.")
    epsilon: Epsilon = Field(
        1.0, json_schema_extra={"cli_required": True},
        description=f"ε of this release's (ε, δ)-DP guarantee, in [{MIN_EPSILON:g}, "
                    f"{MAX_EPSILON:g}].")
    delta: Delta = Field(
        1e-6,
        description=f"δ of this release's guarantee, in ({MIN_DELTA:g}, 1).")
    out: str = Field("releases", description="Release store folder.")
    work_dir: str = Field(
        ".privfair", json_schema_extra=PRIVATE_FIELD,
        description="Project-local working folder (private staging, post-noise artefacts); "
                    "created mode 0700.")
    seed: int | None = Field(
        None, ge=0, json_schema_extra=PRIVATE_FIELD,
        description="Tests and demos only, with insecure_seed: whoever knows the seed can "
                    "remove the noise. Never recorded; its keyed fingerprint is, and a second "
                    "release of the dataset with it is refused.")
    insecure_seed: bool = Field(
        False, json_schema_extra=PRIVATE_FIELD,
        description="Test mode: allow a fixed seed (recorded as such in the manifest).")

    @model_validator(mode="before")
    @classmethod
    def _plain_numbers(cls, data: Any) -> Any:
        # A library or Prefect caller's '1_0' is not 10, as on the command line (issue 45.4).
        return refuse_loose_numbers(cls, data)

    def idle_fields(self) -> dict[str, str]:
        """Fields that do nothing with these settings, each with what it would need (a kind
        lists its own; :func:`refuse_idle_options` refuses those the user gave)."""
        return {}

    @property
    def budget(self) -> Budget:
        """This release's (ε, δ), checked, with its zCDP ρ."""
        return Budget(epsilon=self.epsilon, delta=self.delta)

    @field_validator("contract", "data", "out", "work_dir")
    @classmethod
    def _plain_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        flag = "--" + str(info.field_name).replace("_", "-")
        if not value.strip():
            raise ValueError(f"{flag} is empty; expected a path")
        if ODD_PATH.search(value):
            raise ValueError(f"{flag} {value!r} holds a wildcard or control character; "
                             "expected a literal path")
        try:  # a symbolic link to itself cannot name a folder or a file (issue 36)
            Path(value).expanduser().resolve()
        except (RuntimeError, OSError) as exc:
            raise ValueError(f"{flag} {value}: cannot be resolved (a symbolic link loop?): "
                             f"{' '.join(str(exc).split())}") from None
        return value


def refuse_idle_options(params: ReleaseOptions, given: Iterable[str]) -> None:
    """Refuse a parameter the user gave (``given``: the command line's) that does nothing in
    this combination (issue 36: a ``--distortion`` without TOT or a ``--dask-address``
    without the Dask engine was ignored, so the run was not the one asked for)."""
    idle = params.idle_fields()
    for name in given:
        if name in idle:
            info = type(params).model_fields[name]
            flag = str(field_extra(info).get("cli") or "--" + name.replace("_", "-"))
            raise ReleaseInputError(f"{flag} does nothing here: it needs {idle[name]}; drop it")


def params_error_line(exc: Exception) -> str:
    """One line naming the first problem of a pydantic ``ValidationError`` (or any error)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False, include_input=False)[0]
        except Exception:  # not a pydantic error after all
            return " ".join(str(exc).split())
        where = ".".join(str(p) for p in first.get("loc", ())) or "parameters"
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"invalid {where}: {message}"
    return " ".join(str(exc).split())


def field_extra(info: Any) -> dict[str, Any]:
    """A field's ``json_schema_extra`` as a dict (empty when it has none)."""
    extra = getattr(info, "json_schema_extra", None)
    return dict(extra) if isinstance(extra, dict) else {}

