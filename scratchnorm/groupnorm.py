r"""GroupNorm (Wu & He, 2018): LayerNorm over each group of channels, then a per-channel affine.

x is (N, C, *). The C channels are cut into G = num_groups groups of C/G
consecutive channels. For one sample n and one group, the statistics are
taken over the m = (C/G) * (spatial size) values of its channels at all
positions; nothing is shared across samples, so the batch size does not
matter (unlike BatchNorm).

Forward
    view x as (N, G, m)                      the group's values, contiguous in memory
    x_hat = LayerNorm without affine over the last axis of that view
            (mu, var, rstd per (n, group); two passes; see layernorm.py)
    y     = x_hat * weight[c] + bias[c]      back in (N, C, *); one weight per CHANNEL

Backward, with g = dy * weight[c] (= dL/dx_hat)
    dbias[c]   = sum of dy over every axis but c
    dweight[c] = sum of dy * x_hat over every axis but c
    dx         = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  means over each group's m values

Why it is LayerNorm's backward. Within one group, x -> x_hat is exactly
LayerNorm's map of m values, so its derivation, including the dvar/dmu term
that vanishes because the deviations sum to zero, carries over unchanged. The
affine acts after the normalization, so it only turns dy into g before
LayerNorm's backward and adds the two per-channel sums. The code is that: a
reshape to (N, G, m) and ``layer_norm_forward`` / ``layer_norm_backward``.

Two special cases, both checked by the tests:
* G = C: each group is one channel of one sample; that is InstanceNorm
  (instancenorm.py) with affine=True.
* G = 1: the statistics are LayerNorm's over the whole (C, *) sample, but the
  affine has C weights (one per channel), where LayerNorm over (C, *) would
  have one per element. "GroupNorm(1, C) is LayerNorm" holds for the
  normalization only.
"""
from __future__ import annotations

import numpy as np

from ._results import store, upstream
from ._per_channel import add_channel_affine, channel_affine, channel_affine_grads, dx_hat_of
from ._checks import check_bool, check_cache, check_channels_input, check_eps, check_groups, check_int, fail
from ._arguments import group_norm_args
from .backend import implementation, register
from .dtypes import upcast_half
from .layer import Layer
from .layernorm import layer_norm_backward, layer_norm_forward


def group_norm_forward(x, weight=None, bias=None, *, num_groups, eps=1e-5, out=None):
    """GroupNorm forward. Returns ``(y, cache)``.

    x: (N, C, *), float16/32/64, C divisible by num_groups. weight, bias: (C,) or None.
    eps >= 0; with eps = 0 a constant group gives NaN, as the formula does.
    """
    x, G, eps = group_norm_args(x, weight, bias, num_groups, eps)
    xg = upcast_half(x).astype(np.float64).reshape(x.shape[0], G, -1)   # (N, G, m)
    _, inner = layer_norm_forward(xg, eps=eps)                          # statistics per (n, group)
    x_hat = inner["x_hat"].reshape(x.shape)                             # (N, C, *)
    y = channel_affine(x_hat, weight, bias)
    cache = {"made_by": "scratchnorm.group_norm_forward", "inner": inner, "x_hat": x_hat, "weight": weight,
             "bias": bias, "num_groups": G, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def group_norm_backward(dy, cache, *, dx_out=None):
    """GroupNorm backward. Returns {"x", "weight", "bias"} (those that exist)."""
    check_cache(cache, "scratchnorm.group_norm_forward")
    dy = upstream(dy, cache["x_hat"].shape)                     # (N, C, *)
    weight, G = cache["weight"], cache["num_groups"]
    g = dx_hat_of(dy, weight).reshape(dy.shape[0], G, -1)                # (N, G, m) dL/dx_hat
    dx = layer_norm_backward(g, cache["inner"])["x"].reshape(dy.shape)   # (N, C, *)
    return {"x": store(dx, cache["dtype"], dx_out, "dx_out"),
            **channel_affine_grads(dy, cache["x_hat"], weight, cache["bias"])}


class GroupNorm(Layer):
    """GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, *, bias=True): input (N, C, *).

    Statistics per sample over each group of C / num_groups channels and all their
    positions; weight and bias have one entry per channel (bias=False: the weight only).
    Defaults follow torch.nn.GroupNorm.
    """

    _min_ndim = 2                       # (N, C) is allowed
    _channels_arg = "num_channels"
    _one_value = ("more than one value per group ((C / num_groups) * spatial size >= 2)",
                  "use fewer groups or an input with spatial axes: with one value per group, x_hat = 0 "
                  "and the output is the bias whatever x is.")

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *, bias=True, backend="numba",
                 dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.num_channels = check_int("num_channels", num_channels)
        self.num_groups = check_groups(num_groups, self.num_channels, of="num_channels")
        self.eps = check_eps(eps)
        self.affine = check_bool("affine", affine)
        add_channel_affine(self, self.num_channels, self.affine, bias)

    def _check_input(self, x):
        name = type(self).__name__
        check_channels_input(name, x, self.num_channels, min_ndim=self._min_ndim, arg=self._channels_arg)
        if x.size == x.shape[0] * self.num_groups:
            expected, fix = self._one_value
            fail(ValueError, "x", f"{expected} for {name}", x, fix)

    def _forward(self, x):
        return implementation(self.backend, "group_norm_forward")(x, self.params.get("weight"), self.params.get("bias"),
                                                      num_groups=self.num_groups, eps=self.eps)

    def _backward(self, dy, cache):
        return implementation(self.backend, "group_norm_backward")(dy, cache)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


register("numpy", {"group_norm_forward": group_norm_forward, "group_norm_backward": group_norm_backward})
