"""What a model release needs of this machine, from public facts only (issue 45.5).

The plan multiplies out the contract's one-hot width and the options (hidden widths, batch
size) into a memory estimate and refuses, before anything is reserved, a model that cannot
fit: after the reservation a ``MemoryError`` would have stayed charged. The estimate is an
upper bound of the live arrays, not a measurement:

* the functional-mechanism models (PFLR, PFLR*, PrivLR) hold the d × d coefficients of their
  noisy objective a few times over (the objective, its noise, the solver's Hessian and
  factorisation): :data:`FUNCTIONAL_COPIES` × 8 d² bytes;
* DP-SGD holds its P parameters (weights, gradients, the optimiser's and the clipping's
  copies: :data:`SGD_PARAMETER_COPIES` × 4 P bytes) and a batch's activations and their
  gradients (:data:`SGD_ACTIVATION_COPIES` × 4 bytes per unit per row).
"""

from __future__ import annotations

from collections.abc import Sequence

from privfair.release.resources import MEMORY_SHARE, ResourceError, check_memory, physical_memory

__all__ = ["MEMORY_SHARE", "ResourceError", "check_model_resources", "model_bytes",
           "physical_memory"]

#: Live copies of the d × d coefficient matrix of a functional-mechanism model.
FUNCTIONAL_COPIES = 6
#: Live float32 copies of each DP-SGD parameter.
SGD_PARAMETER_COPIES = 8
#: Live float32 values per unit and batch row (activation, its gradient, the ghost norms).
SGD_ACTIVATION_COPIES = 4


def model_bytes(*, model: str, dimension: int, hidden: Sequence[int], batch_size: int) -> int:
    """The estimated peak bytes of training ``model`` on ``dimension`` inputs."""
    if model in ("pflr", "pflr-star", "privlr"):
        return FUNCTIONAL_COPIES * 8 * dimension * dimension
    widths = [dimension, *hidden, 1]
    parameters = sum((a + 1) * b for a, b in zip(widths, widths[1:], strict=False))
    units = sum(widths)
    return 4 * (SGD_PARAMETER_COPIES * parameters + SGD_ACTIVATION_COPIES * batch_size * units)


def check_model_resources(*, model: str, dimension: int, hidden: Sequence[int],
                          batch_size: int, flag: str) -> None:
    """Refuse, in one line naming ``flag``, a model whose estimate exceeds
    :data:`MEMORY_SHARE` of this machine's memory."""
    need = model_bytes(model=model, dimension=dimension, hidden=hidden, batch_size=batch_size)
    check_memory(need, flag=flag,
                 what=f"model {model} on {dimension:,} inputs"
                 + (f" with hidden widths {list(hidden)}" if hidden else ""),
                 fix="fewer inputs: merge categories in the contract; smaller --hidden or "
                     "--batch-size")
