"""RMSNorm variants that change only the parameters: none, a bias, a learnable eps.

All of them call ``rms_norm_forward`` / ``rms_norm_backward`` (rmsnorm.py);
nothing here re-derives the math.

* ``SimpleRMSNorm(eps)``: y = x / RMS(x). No parameters, any d.
* ``RMSNormWithBias(d, eps)``: y = x / RMS(x) * weight + bias.
* ``RMSNormLearnableEps(d, eps)``: parameters weight and eps; the eps used is
  |eps|, so it stays >= 0 whatever the optimizer does. Its gradient is
  dL/d eps = sign(eps) * sum over rows of (sum_j g_j x_j) * d rstd/d eps.
* ``GemmaRMSNorm(d, eps)``: y = x / RMS(x) * (1 + weight), weight initialized to 0
  (Gemma's "zero-centered" weight: weight decay pulls the scale toward 1, not 0).
  RMSNorm with scale s = 1 + weight; since ds/dweight = 1, dL/dweight = dL/ds.
  1 + weight is formed in the parameters' dtype (float32 or float64), never in
  the input's: in bfloat16, 1 + 0.0039 rounds to 1 (the precision lesson shows it).
"""
from __future__ import annotations

import numpy as np

from ._checks import EPS_MODES, check_choice, check_eps, fail
from .backend import implementation
from .layer import Layer
from .rmsnorm import RMSNorm


class SimpleRMSNorm(Layer):
    """SimpleRMSNorm(eps=1e-6): y = x * rsqrt(mean(x^2) + eps) over the last axis; no parameters."""

    def __init__(self, eps=1e-6, eps_mode="inside", *, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.eps = check_eps(eps)
        self.eps_mode = check_choice("eps_mode", eps_mode, EPS_MODES)

    def _check_input(self, x):
        if x.ndim < 1:
            fail(ValueError, "x", "an array with at least one axis", x, "pass x of shape (..., d).")

    def _forward(self, x):
        return implementation(self.backend, "rms_norm_forward")(x, eps=self.eps, eps_mode=self.eps_mode)

    def _backward(self, dy, cache):
        return implementation(self.backend, "rms_norm_backward")(dy, cache)

    def extra_repr(self):
        return f"eps={self.eps}, eps_mode={self.eps_mode!r}"


class RMSNormWithBias(RMSNorm):
    """RMSNormWithBias(d, eps=1e-6): y = x / RMS(x) * weight + bias."""

    def __init__(self, d, eps=1e-6, eps_mode="inside", *, backend="numba", dtype=np.float64):
        super().__init__(d, eps=eps, eps_mode=eps_mode, backend=backend, dtype=dtype)
        self._add_param("bias", np.zeros(self.normalized_shape))


class GemmaRMSNorm(RMSNorm):
    """GemmaRMSNorm(d, eps=1e-6, elementwise_affine=True, cast="gemma"): y = x * rsqrt(mean(x^2) + eps)
    * (1 + weight); weight starts at 0. elementwise_affine=False: no weight, y = x * rsqrt(mean(x^2) + eps)
    (Gemma 3n's norms without a scale, ``with_scale=False``). cast: as RMSNorm's (casts.py); only
    "gemma" keeps a small weight."""

    _offset = 1.0

    def __init__(self, d, eps=1e-6, elementwise_affine=True, *, cast="gemma", backend="numba", dtype=np.float64):
        super().__init__(d, eps=eps, elementwise_affine=elementwise_affine, cast=cast, backend=backend, dtype=dtype)

    def extra_repr(self):
        return (f"{self._shape_repr()}, eps={self.eps}"
                + ("" if self.elementwise_affine else ", elementwise_affine=False")
                + (f", cast={self.cast!r}" if self.cast != "gemma" else ""))


class RMSNormLearnableEps(RMSNorm):
    """RMSNormLearnableEps(d, eps=1e-6): parameters weight (d,) and eps (1,); effective eps = |eps|."""

    def __init__(self, d, eps=1e-6, eps_mode="inside", *, backend="numba", dtype=np.float64):
        super().__init__(d, eps=check_eps(eps), eps_mode=eps_mode, backend=backend, dtype=dtype)
        self._add_param("eps", np.array([self.eps]))

    def _eps_value(self, x) -> float:
        eps = abs(float(self.params["eps"][0]))
        if eps == 0.0:
            fail(ValueError, "params['eps']", "a non-zero value (|eps| > 0)", 0.0,
                 "re-initialize params['eps'] to a small positive value such as 1e-6.")
        return eps

    def _backward(self, dy, cache):
        grads = super()._backward(dy, cache)
        sign = np.sign(self.params["eps"])                       # d|eps|/d eps
        grads["eps"] = (sign * grads["eps"]).astype(self.dtype)  # (1,)
        return grads
