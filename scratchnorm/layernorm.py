r"""LayerNorm: forward, the hand-derived backward (closed form and staged), the layer.

For one row x of d features (every leading axis is a batch axis):

Forward
    mu    = (1/d) sum_j x_j                  then corrected: mu += (1/d) sum_j (x_j - mu)
    var   = (1/d) sum_j (x_j - mu)^2         two passes, never E[x^2] - E[x]^2
    rstd  = 1 / sqrt(var + eps)
    x_hat = (x - mu) * rstd
    y     = x_hat * weight + bias

Backward, with g = dy * weight (= dL/dx_hat)
    dbias   = sum over rows of dy
    dweight = sum over rows of dy * x_hat
    dx      = rstd * (g - mean(g) - x_hat * mean(g * x_hat))

Where the closed form comes from. x_hat depends on x_i three ways: directly
(rstd * g_i), through mu, and through var. Through var:
dL/dvar = sum_j g_j (x_j - mu) * (-1/2) rstd^3, and dvar/dx_i = 2 (x_i - mu)/d,
which gives -rstd * x_hat_i * mean(g * x_hat). Through mu:
dL/dmu = -rstd * sum_j g_j + dL/dvar * dvar/dmu, and
dvar/dmu = -(2/d) sum_j (x_j - mu) = 0, because the deviations from the mean
sum to zero. That is the term "missing" from textbook code. What is left,
-rstd * mean(g), finishes the formula. ``layer_norm_backward_staged`` walks the
graph node by node without that simplification; a test shows the two agree.

The correction of mu. In exact arithmetic the deviations sum to zero; in
floating point mu is one rounding off, and for a constant row far from 0
(4.35e15, say) x - mu is then a tiny nonzero number that rstd = 1/sqrt(eps)
blows up to +-1. Adding the deviations' mean back makes mu the row's value
exactly, and x_hat = 0: the output is the bias, as the formula says. (The
numba kernel starts from the guess x_0 instead of mean(x), and so saves a
pass: mu = x_0 + mean(x - x_0), exact for a constant row too.)

Two consequences, checked by the tests: sum_i dx_i = 0 (dx is orthogonal to
the all-ones vector) and sum_i dx_i x_hat_i = 0 (orthogonal to x_hat), so the
Jacobian has rank d - 2.
"""
from __future__ import annotations

import numpy as np

from ._results import store, sum_rows, upstream
from ._checks import check_bool, check_cache, check_eps
from ._shapes import rows_of
from ._arguments import layer_norm_args
from .backend import implementation, register
from .dtypes import upcast_half
from .eps_modes import rescue_huge_rows
from .trailing_axes import TrailingAxesNorm


def layer_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None):
    """LayerNorm over the last axis. Returns ``(y, cache)``.

    x: (..., d), float16/32/64. weight, bias: (d,) or None. y: like x.
    See the module docstring for the formulas.
    """
    x, eps = layer_norm_args(x, weight, bias, eps)
    xf = upcast_half(x).astype(np.float64)          # (..., d) computed in float64
    mu = xf.mean(axis=-1, keepdims=True)            # (..., 1)
    mu = mu + (xf - mu).mean(axis=-1, keepdims=True)    # corrected: the deviations' rounding (docstring)
    xm = xf - mu                                    # (..., d) deviations
    with np.errstate(over="ignore"):                # |x - mu| beyond ~1e154: var is inf, and then
        var = (xm * xm).mean(axis=-1, keepdims=True)    # (..., 1)
    rstd = 1.0 / np.sqrt(var + eps)                 # (..., 1)
    rescue_huge_rows(rstd, var, xm, eps, "inside")  # ... rstd is taken on the row scaled (eps_modes.py)
    x_hat = xm * rstd                               # (..., d)
    y = x_hat
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    cache = {"made_by": "scratchnorm.layer_norm_forward", "x_hat": x_hat, "xm": xm, "var": var, "rstd": rstd,
             "eps": eps, "weight": weight, "bias": bias, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def _layer_norm_grads(dy, cache, dx):
    """Pack dx with dweight, dbias in their parameters' dtypes."""
    grads = {"x": dx}
    x_hat, weight, bias = cache["x_hat"], cache["weight"], cache["bias"]
    if weight is not None:
        grads["weight"] = sum_rows(dy * x_hat).astype(weight.dtype)
    if bias is not None:
        grads["bias"] = sum_rows(dy).astype(bias.dtype)
    return grads


def layer_norm_backward(dy, cache, *, dx_out=None):
    """Closed-form LayerNorm backward. Returns {"x", "weight", "bias"} (those that exist).

    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  g = dy * weight.
    """
    check_cache(cache, "scratchnorm.layer_norm_forward")
    dy = upstream(dy, cache["x_hat"].shape)   # (..., d)
    x_hat, rstd, weight = cache["x_hat"], cache["rstd"], cache["weight"]
    g = dy * weight if weight is not None else dy       # dL/dx_hat
    mean_g = g.mean(axis=-1, keepdims=True)             # (..., 1)
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)  # (..., 1)
    dx = rstd * (g - mean_g - x_hat * mean_gx)          # (..., d)
    return _layer_norm_grads(dy, cache, store(dx, cache["dtype"], dx_out, "dx_out"))


def layer_norm_backward_staged(dy, cache):
    """LayerNorm backward, node by node through the forward graph, no simplification.

    Graph: mu = mean(x); xm = x - mu; var = mean(xm^2); rstd = (var + eps)^(-1/2);
    x_hat = xm * rstd; y = x_hat * weight + bias.
    """
    check_cache(cache, "scratchnorm.layer_norm_forward", "scratchnorm.layer_norm_backward_staged")
    dy = upstream(dy, cache["x_hat"].shape)
    xm, var, rstd, eps, weight = cache["xm"], cache["var"], cache["rstd"], cache["eps"], cache["weight"]
    d = xm.shape[-1]
    dx_hat = dy * weight if weight is not None else dy        # y = x_hat * weight + bias
    dxm = dx_hat * rstd                                       # x_hat = xm * rstd  (xm path)
    drstd = (dx_hat * xm).sum(axis=-1, keepdims=True)         #                   (rstd path)
    dvar = drstd * (-0.5) * (var + eps) ** -1.5               # rstd = (var + eps)^(-1/2)
    dxm = dxm + dvar * 2.0 * xm / d                           # var = mean(xm^2)
    dmu = -dxm.sum(axis=-1, keepdims=True)                    # xm = x - mu  (mu path)
    dx = dxm + dmu / d                                        # mu = mean(x)
    return _layer_norm_grads(dy, cache, dx.astype(cache["dtype"]))


class LayerNorm(TrailingAxesNorm):
    """LayerNorm(d, eps=1e-5, elementwise_affine=True, bias=True): y = x_hat * weight + bias.

    Normalizes over the last axis of x (..., d), or over several trailing axes when d is a tuple
    (torch's normalized_shape; the weight and bias then have that shape: _shapes.py). Defaults follow
    torch.nn.LayerNorm.
    """

    def __init__(self, d, eps=1e-5, elementwise_affine=True, bias=True, *, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self._set_shape(d)
        self.eps = check_eps(eps)
        self.elementwise_affine = check_bool("elementwise_affine", elementwise_affine)
        check_bool("bias", bias)
        if self.elementwise_affine:
            self._add_param("weight", np.ones(self.normalized_shape))
            if bias:
                self._add_param("bias", np.zeros(self.normalized_shape))

    _backward_op = "layer_norm_backward"

    def _forward(self, x):
        fwd = implementation(self.backend, "layer_norm_forward")
        y, cache = fwd(rows_of(x, self.normalized_shape), self._flat("weight"), self._flat("bias"), eps=self.eps)
        return y.reshape(x.shape), cache

    def extra_repr(self):
        return f"{self._shape_repr()}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


register("numpy", {"layer_norm_forward": layer_norm_forward, "layer_norm_backward": layer_norm_backward})
