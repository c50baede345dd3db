"""TOT's discrimination bound η, checked in one place.

The CLI's ``--eta``, the Prefect form, a contract's ``tot.eta``, ``evaluate --etas`` and
:class:`privfair.fair.tot.TOTransform` all refuse the same values with the same words.

η bounds a difference of two probabilities (additive form) or a ratio's distance from 1
(ratio form). η = 0 asks for exact parity (feasible on a table that already has it); an
additive η above 1 constrains nothing, and in the ratio form η = 1 already lets one group's
rate be twice another's. So both forms take η in [0, 1].
"""

from __future__ import annotations

import math

from privfair.core.errors import ParameterError

__all__ = ["MAX_ETA", "EtaError", "check_eta"]

#: The largest η either discrimination form takes (see the module docstring).
MAX_ETA = 1.0


class EtaError(ParameterError):
    """An η outside [0, 1]; ``reason`` is the message without the parameter's name."""


def check_eta(value: object, *, name: str = "eta") -> float:
    """Return ``value`` as a float when it is a discrimination bound in [0, 1]; otherwise
    raise :class:`EtaError` naming ``name`` (the parameter, flag or contract key).

    Examples
    --------
    >>> check_eta(0.05)
    0.05
    >>> try:
    ...     check_eta(2, name="tot.eta")
    ... except EtaError as error:
    ...     print(error)
    tot.eta: 2 is outside [0, 1]; expected a discrimination bound such as 0.05
    """
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise EtaError(name, f"{value!r} is not a finite number; expected a discrimination "
                             "bound such as 0.05")
    if not 0 <= value <= MAX_ETA:
        raise EtaError(name, f"{value:g} is outside [0, {MAX_ETA:g}]; expected a "
                             "discrimination bound such as 0.05")
    return float(value)
