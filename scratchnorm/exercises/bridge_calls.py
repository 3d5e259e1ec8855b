"""The NumPy side of the torch bridge (scratchnorm/torch_bridge): how the learner's forward and backward are
called, on NumPy arrays, in either contract (contract.py): scratchnorm's, for ExerciseNorm, and the cache
contract (CS231n's), for CacheNorm.

It imports no torch, so that it is tested where torch is not installed (tests/exercises/test_bridge_calls.py);
the bridge turns the tensors into arrays (copies) before, and the results into tensors after.
"""
from __future__ import annotations

import numpy as np

from .._checks import fail
from .contract import what_returned


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


def cache_forward(forward, x, gamma, beta, param: dict, extra: tuple = ()):
    """(out, cache) of the learner's ``forward(x, gamma, beta, *extra, param)``, the cache contract's
    (``extra``: G for spatial_groupnorm_forward), called as the checker calls it (contract.Cache). ``param``
    is the bridge's own dict: the learner reads eps, mode and momentum from it, and writes the running
    averages into it. A forward that returns anything but a pair (out, cache) with out of x's shape is an error
    naming the fix."""
    result = forward(x, gamma, beta, *extra, param)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(ValueError, forward.__name__, "a pair (out, cache)", what_returned(result),
             "end it with `return out, cache`.")
    out, cache = result
    if not (isinstance(out, np.ndarray) and out.shape == x.shape):
        fail(ValueError, f"{forward.__name__}'s out", f"an array of x's shape {x.shape}", what_returned(out),
             "return out = gamma * x_hat + beta, of x's shape, first in the pair.")
    return out, cache


def cache_backward(backward, dout, cache, gamma_shape: tuple) -> tuple:
    """(dx, dgamma, dbeta) of the learner's ``backward(dout, cache)``, the cache contract's: dx of dout's
    shape, dgamma and dbeta of gamma's (``gamma_shape``); anything else is an error naming the fix."""
    grads = backward(dout, cache)
    if not (isinstance(grads, (tuple, list)) and len(grads) == 3):
        fail(ValueError, backward.__name__, "a triple (dx, dgamma, dbeta)", what_returned(grads),
             "end it with `return dx, dgamma, dbeta`.")
    for name, g, shape in zip(("dx", "dgamma", "dbeta"), grads, (dout.shape, gamma_shape, gamma_shape)):
        if not (isinstance(g, np.ndarray) and g.shape == shape):
            fail(ValueError, f"{backward.__name__}'s {name}", f"an array of shape {shape}", what_returned(g),
                 "return dx of x's shape, and dgamma and dbeta of gamma's (sum them over every axis gamma is "
                 "shared across).")
    return tuple(grads)

