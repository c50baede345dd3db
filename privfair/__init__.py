"""privfair: differentially private, justifiably fair synthetic tables.

The library is pure Python/numpy and never imports Prefect; the pipeline in ``flows/`` and
``tasks/`` wraps it.
"""

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
