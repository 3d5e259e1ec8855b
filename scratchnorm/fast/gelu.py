"""GELU (tanh approximation) as numba loops: scratchnorm/nn/activations.py's reference (the formulas and
their derivation are there), element by element, in float64, rounded once to x's dtype.

    forward    s  = 1 / (1 + exp(-2c (x + a x^3))),   y = x s
    backward   dx = dy (s + x 2c s (1 - s) (1 + 3 a x^2))

One pass over the elements where the reference's NumPy expressions make about ten: 1.8x faster
forward, ~5x backward at the Transformer lessons' sizes (NOTES.md). The backward's operations are
the reference's, in its order: the same bits from the same cache. The forward's exp is the C
library's, not NumPy's: s and y may differ from the reference's in the last bit or two (tested).
"""
from __future__ import annotations

import math

import numpy as np

from .._arrays import store
from ..dtypes import as_float_array, upcast_half
from ._jit import jit

GELU_C = math.sqrt(2.0 / math.pi)     # the reference's constants (nn/activations.py; a test compares them)
GELU_A = 0.044715


def gelu_forward(x, *, out=None):
    """As scratchnorm.nn.gelu_forward. Returns ``(y, cache)``; the cache keeps x (float64) and s."""
    x = as_float_array(x)
    xf = upcast_half(x).astype(np.float64, copy=False)          # (...,) float64
    flat = np.ascontiguousarray(xf).reshape(-1)
    y, s = np.empty_like(flat), np.empty_like(flat)
    with np.errstate(over="ignore"):                  # (NUMBA_DISABLE_JIT: NumPy's exp of a float warns)
        gelu_forward_loop(flat, y, s)
    return store(y.reshape(x.shape), x.dtype, out, owned=True), {"x": xf, "s": s.reshape(x.shape), "dtype": x.dtype}


def gelu_backward(dy, cache):
    """As scratchnorm.nn.gelu_backward. Returns {"x"}."""
    dy = as_float_array(dy, "dy").astype(np.float64, copy=False)
    x, s = cache["x"], cache["s"]
    dx = np.empty(x.size)
    gelu_backward_loop(np.ascontiguousarray(dy).reshape(-1), np.ascontiguousarray(x).reshape(-1),
                       np.ascontiguousarray(s).reshape(-1), dx)
    return {"x": store(dx.reshape(x.shape), cache["dtype"], owned=True)}


@jit
def gelu_forward_loop(x, y, s):
    """x, y, s: (n,) float64."""
    for i in range(x.shape[0]):
        v = x[i]
        s[i] = 1.0 / (1.0 + np.exp(-2.0 * GELU_C * (v + GELU_A * (v * v * v))))   # exp(inf) = inf: s = 0
        y[i] = v * s[i]


@jit
def gelu_backward_loop(dy, x, s, dx):
    """dy, x, s, dx: (n,) float64."""
    for i in range(x.shape[0]):
        v, si = x[i], s[i]
        dx[i] = dy[i] * (si + v * (2.0 * GELU_C) * si * (1.0 - si) * (1.0 + 3.0 * GELU_A * v * v))
