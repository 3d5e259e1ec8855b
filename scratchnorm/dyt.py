r"""DyT, Dynamic Tanh (Zhu, Chen, He, LeCun & Liu, "Transformers without Normalization", CVPR 2025).

The paper's observation: in trained Transformers, LayerNorm's input-output map
looks like an S-shaped tanh curve (the DyT lesson measures it). So it replaces the
norm by an elementwise tanh with a learnable steepness, and no statistics at all:

Forward, elementwise on x (..., d)
    z = alpha * x                  alpha: one learnable scalar (initialized to alpha0, 0.5 by default)
    t = tanh(z)
    y = t * weight + bias          weight, bias: (d,), like LayerNorm's affine

Backward, with g = dy * weight (= dL/dt)
    dz      = g * (1 - t^2)                     tanh'(z) = 1 - tanh(z)^2, from the t the forward kept
    dx      = alpha * dz
    dalpha  = sum over every element of dz * x  (alpha multiplies every element: its gradient
                                                 collects all of them, a reduction over the whole batch)
    dweight = sum over rows of dy * t
    dbias   = sum over rows of dy

Why no mean term as in LayerNorm's backward: y_i depends on x_i alone. The
Jacobian dy/dx is diagonal, where a norm's couples every feature of the row
through the statistic. For |z| beyond about 19 (float64), t rounds to +-1 and
1 - t^2 to 0: the true derivative there (about 4 exp(-2|z|)) is below 1e-16.
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np

from ._results import store, sum_rows, upstream
from ._checks import check_bool, check_cache, check_int, check_last_axis, fail
from ._arguments import dyt_args
from .backend import implementation, register
from .dtypes import upcast_half
from .layer import Layer


def dyt_forward(x, alpha, weight=None, bias=None, *, out=None):
    """y = tanh(alpha * x) * weight + bias. Returns ``(y, cache)``.

    x: (..., d), float16/32/64, computed in float64 and rounded once. alpha: a
    real scalar, or an array of shape () or (1,) (the gradient gets its shape).
    weight, bias: (d,) or None.
    """
    x, a, alpha_like = dyt_args(x, alpha, weight, bias)
    xf = upcast_half(x).astype(np.float64)      # (..., d)
    t = np.tanh(a * xf)                         # (..., d)
    y = t
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    cache = {"made_by": "scratchnorm.dyt_forward", "x": xf, "t": t, "alpha": a, "alpha_like": alpha_like,
             "weight": weight, "bias": bias, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def dyt_grads(dy, cache, dx, dalpha: float) -> dict:
    """dx with dalpha (in alpha's shape and dtype), dweight and dbias."""
    shape, dtype = cache["alpha_like"]
    grads = {"x": dx, "alpha": np.full(shape, dalpha, dtype=dtype)}
    for name, value in (("weight", lambda: dy * cache["t"]), ("bias", lambda: dy)):
        if cache[name] is not None:
            grads[name] = sum_rows(value()).astype(cache[name].dtype)
    return grads


def dyt_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "alpha", "weight", "bias"} (those that exist). See the module docstring."""
    t = check_cache(cache, "scratchnorm.dyt_forward")["t"]
    dy = upstream(dy, t.shape)                               # (..., d) float64
    g = dy * cache["weight"] if cache["weight"] is not None else dy
    dz = g * (1.0 - t * t)                                   # (..., d) dL/dz
    dx = store(cache["alpha"] * dz, cache["dtype"], dx_out, "dx_out")
    with np.errstate(invalid="ignore"):                      # an infinite x: dz = 0, 0 * inf = NaN in dalpha
        dalpha = float(np.sum(dz * cache["x"]))
    return dyt_grads(dy, cache, dx, dalpha)


def check_alpha0(alpha0) -> float:
    """DyT's initial alpha: a finite number > 0."""
    if isinstance(alpha0, (bool, np.bool_)) or not isinstance(alpha0, Real):
        fail(TypeError, "alpha0", "a real number", alpha0, "pass alpha0 as a float such as 0.5.")
    if not (math.isfinite(float(alpha0)) and float(alpha0) > 0):
        fail(ValueError, "alpha0", "a finite number > 0 (the initial steepness of tanh)", alpha0,
             "pass alpha0=0.5 (the paper's default for most models) or another small positive value.")
    return float(alpha0)


class DyT(Layer):
    """DyT(d, alpha0=0.5, *, bias=True): y = tanh(alpha * x) * weight + bias, elementwise; a drop-in for LayerNorm.

    Parameters: "alpha" (1,), initialized to alpha0; "weight" (d,) ones; "bias" (d,) zeros
    (bias=False: no bias, y = tanh(alpha * x) * weight).
    The paper uses alpha0 = 0.5 for most models and smaller values for large LLMs.
    """

    def __init__(self, d, alpha0=0.5, *, bias=True, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.d = check_int("d", d)
        self.alpha0 = check_alpha0(alpha0)
        self.bias = check_bool("bias", bias)
        self._add_param("alpha", np.array([self.alpha0]))
        self._add_param("weight", np.ones(self.d))
        if self.bias:
            self._add_param("bias", np.zeros(self.d))

    def _check_input(self, x):
        check_last_axis("DyT", x, self.d)

    def _forward(self, x):
        p = self.params
        return implementation(self.backend, "dyt_forward")(x, p["alpha"], p["weight"], p.get("bias"))

    def _backward(self, dy, cache):
        return implementation(self.backend, "dyt_backward")(dy, cache)

    def extra_repr(self):
        return f"{self.d}, alpha0={self.alpha0}" + ("" if self.bias else ", bias=False")


register("numpy", {"dyt_forward": dyt_forward, "dyt_backward": dyt_backward})
