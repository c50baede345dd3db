"""Pydantic field types for the numbers people set: ε, δ and TOT's η.

Each wraps the one check of its value (:mod:`privfair.core.budget`, :mod:`privfair.fair.eta`)
so that a release's parameters, a contract, the evaluation grid and ``ledger raise`` refuse
the same values with the same words. Pydantic names the field itself, so the validators
raise the check's reason without the name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from privfair.core.budget import check_delta, check_epsilon
from privfair.core.errors import ParameterError
from privfair.fair.eta import check_eta

__all__ = ["Delta", "Epsilon", "Eta"]


def _field(check: Callable[..., float]) -> Callable[[object], float]:
    def validate(value: object) -> float:
        try:
            return check(value)
        except ParameterError as error:
            raise ValueError(error.reason) from None

    return validate


def _no_bool(value: object) -> object:
    # pydantic would read True as 1.0 before the check could see it was a bool.
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number; expected a decimal such as 0.5")
    return value


#: ε of an (ε, δ)-DP guarantee, in [1e-6, 100].
Epsilon = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_epsilon))]
#: δ of an (ε, δ)-DP guarantee, in (1e-50, 1).
Delta = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_delta))]
#: TOT's discrimination bound η, in [0, 1].
Eta = Annotated[float, BeforeValidator(_no_bool), AfterValidator(_field(check_eta))]
