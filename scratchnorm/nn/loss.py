r"""Softmax cross-entropy: the mean negative log-likelihood of integer targets under softmax(logits).

logits: (..., C) floats; targets: (...) integers in [0, C). With M = the
number of target positions (the product of the leading axes):

Forward
    L = (1/M) sum_m [ logsumexp(z_m) - z_m[t_m] ]

logsumexp (softmax.py) takes the row's maximum out first, so logits of
1e4 give a finite loss where log(sum(exp(z))) would give inf - inf = NaN.

Backward, for an upstream dL (1 when L is the loss being minimized)
    dz_m = dL * (softmax(z_m) - onehot(t_m)) / M

Derivation: d logsumexp(z)/dz_i = softmax(z)_i, and d z[t]/dz_i = [i = t].
This is the softmax backward (softmax.py) with dp = -onehot(t)/p folded in:
the division by p cancels, which is why the fused form is both shorter and
safe when p underflows to 0.
"""
from __future__ import annotations

import numpy as np

from .._results import store
from .._checks import fail
from ..dtypes import as_float_array, upcast_half
from ..layer import Layer
from .ids import as_ids, check_id_range
from .softmax import logsumexp


def check_targets(targets, logits: np.ndarray) -> np.ndarray:
    """targets: integers of shape logits.shape[:-1], each in [0, C)."""
    if logits.ndim < 1 or logits.size == 0:
        fail(ValueError, "logits", "a non-empty array of shape (..., C), classes on the last axis", logits,
             "pass at least one row of logits, e.g. logits[None] for a single row.")
    targets = as_ids(targets, "targets")
    if targets.shape != logits.shape[:-1]:
        fail(ValueError, "targets", f"shape {logits.shape[:-1]} (logits' shape {logits.shape} without the "
             "class axis)", targets, "pass one class index per row of logits; logits' last axis holds the classes.")
    check_id_range(targets, logits.shape[-1], "targets", "C")
    return targets


def softmax_cross_entropy_forward(logits, targets):
    """L = mean over rows of logsumexp(z) - z[t]. Returns ``(L, cache)``; L is a 0-d array of logits' dtype."""
    logits = as_float_array(logits, "logits")
    targets = check_targets(targets, logits)
    z = upcast_half(logits).astype(np.float64, copy=False)                               # (..., C)
    lse = logsumexp(z)                                                         # (..., 1)
    z_t = np.take_along_axis(z, targets[..., None], axis=-1)                   # (..., 1)
    loss = np.mean(lse - z_t)
    cache = {"z": z, "lse": lse, "targets": targets, "dtype": logits.dtype}
    return store(np.asarray(loss), logits.dtype), cache


def softmax_cross_entropy_backward(dloss, cache):
    """dlogits = dloss * (softmax(z) - onehot(t)) / M. Returns {"x": dlogits}."""
    z, targets = cache["z"], cache["targets"]
    g = np.exp(z - cache["lse"])                                               # softmax(z), (..., C)
    np.put_along_axis(g, targets[..., None], np.take_along_axis(g, targets[..., None], axis=-1) - 1.0, axis=-1)
    M = targets.size
    return {"x": store(float(dloss) * g / M, cache["dtype"], owned=True)}


class SoftmaxCrossEntropy(Layer):
    """SoftmaxCrossEntropy(): ``loss = ce.forward(logits, targets)``; ``dlogits = ce.backward()``.

    logits (..., C) floats, targets (...) integer classes. The loss is the mean over
    the target positions. backward's argument is the upstream gradient, 1.0 by default.
    """

    def __init__(self, *, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self._targets = None

    def forward(self, logits, targets):
        self._targets = targets
        return super().forward(logits)

    __call__ = forward

    def backward(self, dloss=1.0):
        return super().backward(dloss)

    def _as_input(self, x):
        return as_float_array(x, "logits")

    def _forward(self, logits):
        return softmax_cross_entropy_forward(logits, self._targets)

    def _backward(self, dy, cache):
        return softmax_cross_entropy_backward(dy, cache)
