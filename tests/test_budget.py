"""One declaration of ε, δ and η (issue 33.2): every place a person sets them refuses the same
values with the same words, and the run's ρ comes from one conversion."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from privfair.contracts.schema import parse_contract
from privfair.core.accounting import zcdp_rho
from privfair.core.budget import Budget, BudgetError
from privfair.core.domain import Domain
from privfair.core.errors import ParameterError
from privfair.evaluation.grid import EvaluateParams
from privfair.fair.eta import check_eta
from privfair.fair.tot import TOTransform
from privfair.release.options import params_error_line
from privfair.release.tabular.plan import ReleaseParams
from privfair.store.registry import check_budget_bounds

CONTRACT = (Path(__file__).parents[1] / "data_contracts" / "adult_safes.yaml").read_text()

EPSILONS = {1e-6: True, 0.5: True, 100: True, 0: False, -1: False, 1e-7: False, 100.5: False,
            math.inf: False, math.nan: False}
DELTAS = {1e-9: True, 0.5: True, 1e-49: True, 1e-50: False, 0: False, 1: False, 1.5: False,
          math.nan: False}
ETAS = {0.05: True, 1.0: True, 1e-4: True, 0: True, -0.1: False, 1.01: False, 2: False,
        math.inf: False, math.nan: False}


def reason(error: Exception) -> str:
    """The refusal's words without where it was found (flag, field or contract key)."""
    text = params_error_line(error) if isinstance(error, ValidationError) else str(error)
    found = re.search(r"\S+ is (outside|not a)", text)
    return text[found.start():] if found else text


def refusals(make, values):
    out = {}
    for value in values:
        try:
            make(value)
        except (ValueError, ValidationError) as error:
            out[repr(value)] = reason(error)
        else:
            out[repr(value)] = None
    return out


def contract_with(**budget) -> str:
    text = re.sub(r"(?m)^  epsilon: .*$", f"  epsilon: {budget.get('epsilon', 10.0)}", CONTRACT)
    text = re.sub(r"(?m)^  delta: .*$", f"  delta: {budget.get('delta', 1e-6)}", text)
    if "eta" in budget:
        text = text.replace("\n  discrimination: additive",
                            f"\n  discrimination: additive\n  eta: {budget['eta']}")
    return text


def yaml_number(value) -> str:
    # YAML spellings of the same numbers (PyYAML would read 'nan' as text).
    return {math.inf: ".inf", math.nan: ".nan"}.get(value, repr(value).lower()) \
        if isinstance(value, float) and not math.isfinite(value) else str(value).lower()


@pytest.mark.parametrize("field, values", [("epsilon", EPSILONS), ("delta", DELTAS)])
def test_a_release_a_contract_ledger_raise_and_the_grid_refuse_the_same_budgets(field, values):
    def release(v):
        ReleaseParams(**{"epsilon": 1.0, "delta": 1e-9, field: v})

    def contract(v):
        parse_contract(contract_with(**{field: yaml_number(v)}))

    def ledger_raise(v):
        check_budget_bounds(*((v, 1e-6) if field == "epsilon" else (1.0, v)))

    def grid(v):
        EvaluateParams(**({"epsilons": [v]} if field == "epsilon" else {"delta": v}))

    def budget(v):
        Budget(**{"epsilon": 1.0, "delta": 1e-9, field: v})

    seen = {name: refusals(make, values) for name, make in
            [("release", release), ("contract", contract), ("ledger raise", ledger_raise),
             ("grid", grid), ("budget", budget)]}
    for value, accepted in values.items():
        words = {name: seen[name][repr(value)] for name in seen}
        assert all((w is None) == accepted for w in words.values()), (field, value, words)
        if not accepted:  # one rule, one wording (the bool is refused by the CLI's parser)
            finite = {w for w in words.values() if "finite" not in w and "not a number" not in w}
            assert len(finite) <= 1, (field, value, words)


def test_a_release_a_contract_the_grid_and_tot_refuse_the_same_etas():
    def release(v):
        ReleaseParams(epsilon=1.0, delta=1e-9, fairness_transform="tot", eta=v)

    def contract(v):
        parse_contract(contract_with(eta=yaml_number(v)))

    def grid(v):
        EvaluateParams(datasets=["adult_safes"], etas=[v])

    def transform(v):  # the library's own transform, as a script would build it
        TOTransform(d_cols="g", x_cols="x", y_col="y", eta=v, distortion="safes-adult",
                    domain=Domain(("g", "x", "y"), (2, 2, 2))).check()

    seen = {name: refusals(make, ETAS) for name, make in
            [("release", release), ("contract", contract), ("grid", grid),
             ("tot", transform), ("check", check_eta)]}
    for value, accepted in ETAS.items():
        words = {name: seen[name][repr(value)] for name in seen}
        assert all((w is None) == accepted for w in words.values()), (value, words)
    assert seen["contract"]["2"] == seen["release"]["2"] == "2 is outside [0, 1]; expected a " \
                                                          "discrimination bound such as 0.05"


def test_a_budget_is_checked_and_converts_once():
    b = Budget(epsilon=1, delta=1e-9)
    assert isinstance(b.epsilon, float) and b == Budget(epsilon=1.0, delta=1e-9)
    assert b.rho == zcdp_rho(epsilon=1.0, delta=1e-9)
    assert b.epsilon_of(b.rho) == pytest.approx(1.0, rel=1e-9)
    assert b.epsilon_of(b.rho / 4) < 0.5
    with pytest.raises(BudgetError, match=r"^epsilon: 200 is outside") as caught:
        Budget(epsilon=200, delta=1e-9)
    assert isinstance(caught.value, ParameterError) and caught.value.name == "epsilon"
    assert ReleaseParams(epsilon=2.0, delta=1e-6).budget == Budget(epsilon=2.0, delta=1e-6)
