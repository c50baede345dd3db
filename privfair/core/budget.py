"""The privacy budget: one (ε, δ) value type, its bounds and its conversion to zCDP.

Every layer that takes an (ε, δ) from a person (a release's parameters, a contract's
lifetime ``budget:``, ``ledger raise``) checks it here, so the CLI, the Prefect form and a
contract refuse exactly the same values with the same words, and every layer that needs the
run's ρ asks :attr:`Budget.rho` rather than converting on its own.

Examples
--------
>>> b = Budget(epsilon=1.0, delta=1e-9)
>>> round(b.rho, 5)
0.01497
>>> try:
...     Budget(epsilon=0.0, delta=1e-9)
... except BudgetError as error:
...     print(error)
epsilon: 0 is outside [1e-06, 100]; expected a privacy level the accounting can represent
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from privfair.core.accounting import zcdp_epsilon, zcdp_rho
from privfair.core.errors import ParameterError

__all__ = ["MAX_EPSILON", "MIN_DELTA", "MIN_EPSILON", "Budget", "BudgetError",
           "check_delta", "check_epsilon"]

#: ε above this gives no meaningful guarantee, and exp(ε) overflows in the accounting.
MAX_EPSILON = 100.0
#: ε below this is numerically indistinguishable from no release at all.
MIN_EPSILON = 1e-6
#: δ at or below this underflows 1/δ-style terms (a manifest would hold Infinity).
MIN_DELTA = 1e-50


class BudgetError(ParameterError):
    """An ε or δ outside what the accounting can represent."""


def _number(value: object, name: str) -> float:
    # bool is an int to Python, and True as ε is always a slip.
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise BudgetError(name, f"{value!r} is not a finite number; expected a decimal such "
                                "as 0.5 or 1e-6")
    return float(value)


def check_epsilon(value: object, *, name: str = "epsilon") -> float:
    """Return ``value`` as a float when it is an ε in [1e-6, 100]; otherwise raise
    :class:`BudgetError` naming ``name`` (the parameter, flag or contract key)."""
    epsilon = _number(value, name)
    if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise BudgetError(name, f"{epsilon:g} is outside [{MIN_EPSILON:g}, {MAX_EPSILON:g}]; "
                                "expected a privacy level the accounting can represent")
    return epsilon


def check_delta(value: object, *, name: str = "delta") -> float:
    """Return ``value`` as a float when it is a δ in (1e-50, 1); otherwise raise
    :class:`BudgetError` naming ``name``."""
    delta = _number(value, name)
    if not MIN_DELTA < delta < 1:
        raise BudgetError(name, f"{delta:g} is outside ({MIN_DELTA:g}, 1); expected a delta "
                                "the accounting can represent (e.g. 1e-9)")
    return delta


@dataclass(frozen=True)
class Budget:
    """An (ε, δ)-DP budget, checked on construction.

    Parameters
    ----------
    epsilon : float
        In [1e-6, 100].
    delta : float
        In (1e-50, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        # Normalise ints to floats so that equal budgets compare and hash equal.
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    @cached_property
    def rho(self) -> float:
        """The largest zCDP ρ whose guarantee implies this (ε, δ): what a zCDP run spends."""
        return zcdp_rho(epsilon=self.epsilon, delta=self.delta)

    def epsilon_of(self, rho: float) -> float:
        """The ε that ``rho`` of zCDP costs at this budget's δ (a share of the budget, read
        in the units people set it in)."""
        return zcdp_epsilon(rho=rho, delta=self.delta)
