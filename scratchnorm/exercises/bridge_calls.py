"""The NumPy side of the torch bridge's ExerciseNorm (scratchnorm/torch_bridge): how the learner's forward
and backward are called, on NumPy arrays.

It imports no torch, so that it is tested where torch is not installed (tests/exercises/test_bridge_calls.py);
the bridge turns the tensors into arrays (copies) before, and the results into tensors after.
"""
from __future__ import annotations

from .._checks import fail


def learner_forward(forward, names: tuple, x, weight, rest: tuple):
    """(y, saved): y of the learner's ``forward(x, weight, *rest)``, and what the backward is given,
    saved = (x, weight, constants). ``names``: the gradients the backward returns, ("x", "weight"[, "bias"]);
    ``rest``: the bias when there is one, then the exercise's constants (eps, k, num_groups).

    The forward gets copies of x and of weight: a learner's forward may write into its arguments (x -= mean,
    weight *= ...), and the backward must get the values the forward was called with, as the stub says."""
    constants = rest[len(names) - 2:]                  # after the bias, when there is one
    y = forward(x.copy(), weight.copy(), *rest)
    return y, (x, weight, constants)


def learner_backward(backward, names: tuple, dy, saved) -> tuple:
    """The gradients of ``names`` from the learner's ``backward(dy, x, weight, *constants)``, which returns
    a dict (the stub's contract); a missing key is an error naming the dict the stub asks for."""
    x, weight, constants = saved
    grads = backward(dy, x, weight, *constants)
    if not isinstance(grads, dict) or any(k not in grads for k in names):
        fail(ValueError, "backward", f"a dict with the keys {list(names)}",
             sorted(grads) if isinstance(grads, dict) else type(grads).__name__,
             "return {" + ", ".join(f'"{k}": d{k}' for k in names) + "} as the stub says.")
    return tuple(grads[k] for k in names)
