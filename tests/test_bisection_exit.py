"""The zCDP conversions stop bisecting once the interval is two adjacent floats (issue 23.5:
a release computes them thousands of times); their values are those of all 200 steps."""

from __future__ import annotations

import math

import pytest

from privfair.core.accounting import zcdp_delta, zcdp_epsilon, zcdp_rho


def _delta_200_steps(rho: float, epsilon: float) -> float:
    lo, hi = 1.0 + 1e-12, max(2.0, (epsilon + 1) / (2 * rho) + 2)
    for _ in range(200):
        mid = (lo + hi) / 2
        if (2 * mid - 1) * rho - epsilon + math.log1p(-1 / mid) < 0:
            lo = mid
        else:
            hi = mid
    alpha = (lo + hi) / 2
    return min(1.0, math.exp((alpha - 1) * (alpha * rho - epsilon)
                             + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)))


def _rho_200_steps(epsilon: float, delta: float) -> float:
    lo, hi = 0.0, epsilon + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _delta_200_steps(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


@pytest.mark.parametrize("rho", [1e-8, 1e-3, 0.05, 1.0, 30.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0, 5.0])
def test_delta_is_the_200_step_value(rho: float, epsilon: float) -> None:
    assert zcdp_delta(rho=rho, epsilon=epsilon) == _delta_200_steps(rho, epsilon)


@pytest.mark.parametrize(("epsilon", "delta"), [(1e-3, 1e-9), (1.0, 1e-9), (1.0, 1e-5),
                                                (8.0, 1e-12), (0.5, 0.1)])
def test_rho_is_the_200_step_value(epsilon: float, delta: float) -> None:
    rho = zcdp_rho(epsilon=epsilon, delta=delta)
    assert rho == _rho_200_steps(epsilon, delta)
    assert zcdp_delta(rho=rho, epsilon=epsilon) <= delta
    assert zcdp_epsilon(rho=rho, delta=delta) == pytest.approx(epsilon, rel=1e-9)
