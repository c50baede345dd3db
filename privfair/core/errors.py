"""Exceptions and warnings raised by privfair.

Every error names the parameter or column at fault and what was expected, in one line, so it
can be shown as-is by the CLI and the Prefect UI.
"""

from __future__ import annotations


class PrivfairError(Exception):
    """Base class of every error privfair raises on purpose."""


class DomainError(PrivfairError, ValueError):
    """Data or arguments do not fit the declared domain."""


class RoleError(PrivfairError, ValueError):
    """Attribute roles (protected, admissible, outcome) are inconsistent."""


class ContractError(PrivfairError, ValueError):
    """A data contract (YAML declaration of a dataset) is malformed or inconsistent."""


class ReleaseInputError(PrivfairError, ValueError):
    """A release request cannot go ahead as given; the message names the parameter."""


class ParameterError(PrivfairError, ValueError):
    """A parameter's value is outside its declared bounds.

    The message is ``"NAME: REASON"``; ``reason`` alone serves callers that name the
    parameter themselves (a pydantic field's location, a contract key).
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


class BudgetExceededError(PrivfairError):
    """A step would spend more privacy budget than the ledger has left."""


class StructureSearchLimitError(PrivfairError):
    """The exact fair-structure search hit its user-set bound before proving optimality."""


class FairnessViolationError(PrivfairError):
    """A built structure failed the justifiable-fairness check."""


class PrivacyLeakWarning(RuntimeWarning):
    """Something was done that could weaken the privacy guarantee."""
