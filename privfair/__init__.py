"""privfair: differentially private, justifiably fair synthetic tables.

The library is pure Python/numpy and never imports Prefect; the pipeline in ``flows/`` and
``tasks/`` wraps it.

The names below are loaded on first use (PEP 562), so that ``import privfair.cli`` costs only
the standard library: ``privfair --help`` is instant, and ``privfair release`` can start the
temporary Prefect server before numpy and pandas load (issue 15).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the module that defines it.
_EXPORTS = {
    **dict.fromkeys(("LedgerEntry", "PrivacyLedger", "zcdp_delta", "zcdp_epsilon", "zcdp_rho"),
                    "privfair.core.accounting"),
    **dict.fromkeys(("Clique", "Domain", "Roles"), "privfair.core.domain"),
    **dict.fromkeys(("BudgetExceededError", "ContractError", "DomainError",
                     "FairnessViolationError", "PrivacyLeakWarning", "PrivfairError",
                     "RoleError", "StructureSearchLimitError"), "privfair.core.errors"),
    **dict.fromkeys(("GraphicalModel", "estimate"), "privfair.synth.estimation"),
    "Measurement": "privfair.synth.measure",
    **dict.fromkeys(("METHODS", "FairnessCheck", "SelectedStructure", "check_fairness"),
                    "privfair.synth.structure"),
    **dict.fromkeys(("FairSynthesizer", "SynthesisResult", "synthesize"),
                    "privfair.synth.synthesizer"),
}

__all__ = [
    "METHODS",
    "BudgetExceededError",
    "Clique",
    "ContractError",
    "Domain",
    "DomainError",
    "FairSynthesizer",
    "FairnessCheck",
    "FairnessViolationError",
    "GraphicalModel",
    "LedgerEntry",
    "Measurement",
    "PrivacyLeakWarning",
    "PrivacyLedger",
    "PrivfairError",
    "RoleError",
    "Roles",
    "SelectedStructure",
    "StructureSearchLimitError",
    "SynthesisResult",
    "check_fairness",
    "estimate",
    "synthesize",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'privfair' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from privfair.core.accounting import (
        LedgerEntry,
        PrivacyLedger,
        zcdp_delta,
        zcdp_epsilon,
        zcdp_rho,
    )
    from privfair.core.domain import Clique, Domain, Roles
    from privfair.core.errors import (
        BudgetExceededError,
        ContractError,
        DomainError,
        FairnessViolationError,
        PrivacyLeakWarning,
        PrivfairError,
        RoleError,
        StructureSearchLimitError,
    )
    from privfair.synth.estimation import GraphicalModel, estimate
    from privfair.synth.measure import Measurement
    from privfair.synth.structure import METHODS, FairnessCheck, SelectedStructure, check_fairness
    from privfair.synth.synthesizer import FairSynthesizer, SynthesisResult, synthesize
