r"""Activations: ReLU and GELU, with their derivatives.

ReLU
    y  = max(x, 0)
    dx = dy * [x > 0]                   the derivative at x = 0 is taken as 0, as in PyTorch

GELU, tanh approximation (Hendrycks & Gimpel 2016; the form GPT-2 uses)
    u  = c (x + a x^3),   c = sqrt(2 / pi),  a = 0.044715
    t  = tanh(u)
    y  = x/2 (1 + t)
    dx = dy * [ (1 + t)/2  +  x/2 (1 - t^2) c (1 + 3 a x^2) ]

Derivation: y = x * s with s = (1 + t)/2, so dy/dx = s + x ds/dx, and
ds/dx = (1/2) dt/du du/dx = (1/2)(1 - t^2) c (1 + 3 a x^2).

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
from ..layer import Layer

GELU_C = np.sqrt(2.0 / np.pi)
GELU_A = 0.044715


def relu_forward(x, *, out=None):
    """y = max(x, 0). Returns ``(y, cache)``."""
    x = as_float_array(x)
    return store(np.maximum(x, 0), x.dtype, out), {"positive": x > 0, "dtype": x.dtype}


def relu_backward(dy, cache):
    """dx = dy where x > 0, else 0. Returns {"x"}."""
    dy = as_float_array(dy, "dy")
    return {"x": np.where(cache["positive"], dy, 0).astype(cache["dtype"])}


def gelu_forward(x, *, out=None):
    """GELU, tanh approximation: y = x/2 (1 + tanh(c (x + a x^3))). Returns ``(y, cache)``."""
    x = as_float_array(x)
    xf = upcast_half(x).astype(np.float64)
    t = np.tanh(GELU_C * (xf + GELU_A * (xf * xf * xf)))       # x*x*x: NumPy's x**3 calls pow(), ~100x slower
    return store(0.5 * xf * (1.0 + t), x.dtype, out), {"x": xf, "t": t, "dtype": x.dtype}


def gelu_backward(dy, cache):
    """dx = dy * ((1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2)). Returns {"x"}."""
    dy = as_float_array(dy, "dy").astype(np.float64)
    x, t = cache["x"], cache["t"]
    dydx = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x)
    return {"x": store(dy * dydx, cache["dtype"])}


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
    """GELU(): tanh approximation, y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    _pair = (gelu_forward, gelu_backward)


#: name -> class, for the ``activation=`` argument of the model builders
ACTIVATIONS = {"relu": ReLU, "gelu": GELU}
