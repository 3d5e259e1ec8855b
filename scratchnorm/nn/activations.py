r"""Activations: ReLU and GELU, with their derivatives.

ReLU
    y  = max(x, 0)
    dx = dy * [x > 0]                   the derivative at x = 0 is taken as 0, as in PyTorch

GELU, tanh approximation (Hendrycks & Gimpel 2016; the form GPT-2 uses)
    u  = c (x + a x^3),   c = sqrt(2 / pi),  a = 0.044715
    y  = x/2 (1 + tanh(u))  =  x s,    s = (1 + tanh(u))/2 = 1 / (1 + exp(-2u))
    dx = dy * [ s  +  x 2 s (1 - s) c (1 + 3 a x^2) ]

Derivation: (1 + tanh(u))/2 = e^u / (e^u + e^-u) = 1 / (1 + e^-2u), the logistic
sigmoid of 2u; so y = x s, dy/dx = s + x ds/dx, and ds/dx = 2 s (1 - s) du/dx
with du/dx = c (1 + 3 a x^2) (the sigmoid's derivative is s (1 - s)).

Why s and not tanh: the same function, computed better and faster. 1 + tanh(u)
cancels for large negative u (tanh(u) = -0.99999992 at x = -5), and
1 / (1 + exp(-2u)) does not; for u below -354, exp(-2u) overflows to inf and s is
0, the right limit. NumPy's float64 tanh is scalar code, its exp is vectorized:
4.7 against 1.0 ns an element on this machine (NOTES.md).

Why the tanh form and not the exact x * Phi(x) = x/2 (1 + erf(x / sqrt 2)):
NumPy has no vectorized erf, and the tanh form is a few NumPy expressions
whose derivative is written out above. The two differ by at most 4.7e-4,
near x = +-2.7 (a test measures it against math.erf); a model trained with
one is not quite the model trained with the other, so the choice is fixed here.

Both are computed in float64 and rounded to x's dtype once (dtypes.py).
"""
from __future__ import annotations

import numpy as np

from .._results import store
from ..dtypes import as_float_array, upcast_half
from ..backend import implementation, register
from ..layer import Layer

GELU_C = np.sqrt(2.0 / np.pi)
GELU_A = 0.044715


def relu_forward(x, *, out=None):
    """y = max(x, 0), exact in x's dtype. Returns ``(y, cache)``."""
    x = as_float_array(x)
    y = np.maximum(x, x.dtype.type(0))                         # a new array; NaN stays NaN
    return store(y, x.dtype, out, owned=True), {"positive": x > 0, "dtype": x.dtype}


def relu_backward(dy, cache):
    """dx = dy where x > 0, else 0. Returns {"x"}."""
    dy = as_float_array(dy, "dy")
    return {"x": np.where(cache["positive"], dy, 0).astype(cache["dtype"], copy=False)}


def gelu_forward(x, *, out=None):
    """GELU, tanh approximation: y = x s, s = 1 / (1 + exp(-2c (x + a x^3))). Returns ``(y, cache)``."""
    x = as_float_array(x)
    xf = upcast_half(x).astype(np.float64, copy=False)          # (...,) float64; x itself when float64
    with np.errstate(over="ignore"):                            # exp(-2u) = inf for u < -354: s = 0
        s = 1.0 / (1.0 + np.exp(-2.0 * GELU_C * (xf + GELU_A * (xf * xf * xf))))   # x*x*x: x**3 calls pow()
    return store(xf * s, x.dtype, out, owned=True), {"x": xf, "s": s, "dtype": x.dtype}


def gelu_backward(dy, cache):
    """dx = dy * (s + x 2 s (1 - s) c (1 + 3 a x^2)). Returns {"x"}."""
    dy = as_float_array(dy, "dy").astype(np.float64, copy=False)
    x, s = cache["x"], cache["s"]
    dydx = s + x * (2.0 * GELU_C) * s * (1.0 - s) * (1.0 + 3.0 * GELU_A * x * x)
    return {"x": store(dy * dydx, cache["dtype"], owned=True)}


class _Activation(Layer):
    """An element-wise map with no parameters: any float x, y and dx of x's shape and dtype."""

    _pair = None  # (forward, backward)

    def _forward(self, x):
        return self._pair[0](x)

    def _backward(self, dy, cache):
        return self._pair[1](dy, cache)


class ReLU(_Activation):
    """ReLU(): y = max(x, 0)."""

    _pair = (relu_forward, relu_backward)


class GELU(_Activation):
    """GELU(): tanh approximation, y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); on the layer's backend
    (numba: scratchnorm/fast/gelu.py, one loop; numpy: the functions above)."""

    def _forward(self, x):
        return implementation(self.backend, "gelu_forward")(x)

    def _backward(self, dy, cache):
        return implementation(self.backend, "gelu_backward")(dy, cache)


register("numpy", {"gelu_forward": gelu_forward, "gelu_backward": gelu_backward})

#: name -> class, for the ``activation=`` argument of the model builders
ACTIVATIONS = {"relu": ReLU, "gelu": GELU}
