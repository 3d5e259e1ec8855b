"""GroupRMSNorm: RMSNorm taken separately over num_groups contiguous groups of the last axis.

x: (..., d) is viewed as (..., G, m) with m = d / G. Each group gets its own RMS:

    x_hat[..., g, :] = x[..., g, :] * rstd(mean(x[..., g, :]^2))
    y                = x_hat.reshape(..., d) * weight          weight: (d,)

Backward: g = dy * weight is pushed through RMSNorm's backward (rmsnorm.py)
group by group; dweight = sum over rows of dy * x_hat. G = 1 is RMSNorm.
"""
from __future__ import annotations

import numpy as np

from ._results import store, sum_rows, upstream
from ._checks import EPS_MODES, check_cache, check_choice, check_eps, check_groups, check_int, check_last_axis
from ._arguments import group_rms_norm_args
from .backend import implementation, register
from .layer import Layer
from .rmsnorm import rms_norm_backward, rms_norm_forward


def group_rms_norm_forward(x, weight=None, *, num_groups, eps=1e-6, eps_mode="inside", out=None):
    """GroupRMSNorm forward. x: (..., d); weight: (d,) or None. Returns ``(y, cache)``."""
    x, G, eps = group_rms_norm_args(x, weight, num_groups, eps, eps_mode)
    d = x.shape[-1]
    xg = x.reshape(*x.shape[:-1], G, d // G)                              # (..., G, m)
    x_hat, inner = rms_norm_forward(xg.astype(np.float64), eps=eps, eps_mode=eps_mode)
    x_hat = x_hat.reshape(x.shape)                                        # (..., d)
    y = x_hat * weight if weight is not None else x_hat
    cache = {"made_by": "scratchnorm.group_rms_norm_forward", "inner": inner, "x_hat": x_hat, "weight": weight,
             "num_groups": G, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def group_rms_norm_backward(dy, cache, *, dx_out=None):
    """GroupRMSNorm backward. Returns {"x", "weight"} (weight if it exists)."""
    check_cache(cache, "scratchnorm.group_rms_norm_forward")
    dy = upstream(dy, cache["x_hat"].shape)                      # (..., d)
    weight, G = cache["weight"], cache["num_groups"]
    g = dy * weight if weight is not None else dy                         # dL/dx_hat
    dx = rms_norm_backward(g.reshape(*g.shape[:-1], G, g.shape[-1] // G), cache["inner"])["x"].reshape(dy.shape)
    grads = {"x": store(dx, cache["dtype"], dx_out, "dx_out")}
    if weight is not None:
        grads["weight"] = sum_rows(dy * cache["x_hat"]).astype(weight.dtype)
    return grads


class GroupRMSNorm(Layer):
    """GroupRMSNorm(d, num_groups, eps=1e-6): RMSNorm per contiguous group of d / num_groups features."""

    def __init__(self, d, num_groups, eps=1e-6, eps_mode="inside", *, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.d = check_int("d", d)
        self.num_groups = check_groups(num_groups, self.d)
        self.eps = check_eps(eps)
        self.eps_mode = check_choice("eps_mode", eps_mode, EPS_MODES)
        self._add_param("weight", np.ones(self.d))

    def _check_input(self, x):
        check_last_axis("GroupRMSNorm", x, self.d)

    def _forward(self, x):
        return implementation(self.backend, "group_rms_norm_forward")(
            x, self.params["weight"], num_groups=self.num_groups, eps=self.eps, eps_mode=self.eps_mode)

    def _backward(self, dy, cache):
        return implementation(self.backend, "group_rms_norm_backward")(dy, cache)

    def extra_repr(self):
        return f"{self.d}, num_groups={self.num_groups}, eps={self.eps}"


register("numpy", {"group_rms_norm_forward": group_rms_norm_forward,
                   "group_rms_norm_backward": group_rms_norm_backward})
