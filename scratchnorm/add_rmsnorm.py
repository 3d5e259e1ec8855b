r"""Residual add fused with RMSNorm: what inference engines run between two sublayers.

In a pre-norm Transformer a sublayer ends with the residual add, and the next
one starts with its norm. Engines do both in one pass (vLLM's
``fused_add_rms_norm``, llama.cpp, TensorRT-LLM): it reads x and the residual
once and writes the new residual stream h and the normalized y, instead of
writing h, then reading it back to normalize it.

Forward, for one row of d features
    h     = x + residual               the new residual stream, rounded to x's dtype
                                       (the stream is stored in it, as engines do)
    y     = RMSNorm(h) = h_hat * weight,   h_hat = h * rstd,  rstd = 1/sqrt(mean(h^2) + eps)

Backward. h reaches the loss by two paths: through y, and on down the
residual stream (the next add), whose gradient arrives as dh. Paths into one
value add, and h = x + residual passes its gradient to both inputs unchanged
(d h / d x = d h / d residual = I):

    dh_total  = dh + RMSNorm's backward of dy       (rmsnorm.py: rstd (g - h_hat mean(g h_hat)), g = dy weight)
    dx        = dresidual = dh_total
    dweight   = sum over rows of dy * h_hat

Options, as engines and Liger-Kernel name them. ``offset``: the scale is offset + weight (Gemma's
1 + w: offset=1). ``cast``: where a float16/bfloat16/float32 h is rounded to its dtype
(casts.py): "gemma" (once, at the end: the default), "llama" (h_hat rounded before the weight, as
vLLM's fused_add_rms_norm and LLaMA-style engines do: y = round(round(h_hat) * round(weight))) or
"none" (every step in the input dtype, a naive port). The backward is the same for every cast.

Nothing here re-derives RMSNorm: the reference calls ``rms_norm_forward`` and
``rms_norm_backward`` (rmsnorm.py). Its backward runs in float64 and dh is added
before the one rounding to x's dtype. The two gradients are separate arrays with
the same values (a learner who writes into one must not change the other).
"""
from __future__ import annotations

import numpy as np

from ._checks import check_cache
from ._results import store, upstream
from ._arguments import add_rms_norm_args
from .backend import register
from .casts import rms_norm_cast
from .rmsnorm import rms_norm_backward, rms_norm_forward


def add_rms_norm_forward(x, residual, weight, eps=1e-6, *, cast="gemma", offset=0.0, out=None, h_out=None):
    """h = x + residual, y = RMSNorm(h) * (offset + weight) over the last axis. Returns ``(y, h, cache)``.

    x, residual: (..., d), the same shape and float dtype (h has it too).
    weight: (d,) or None. eps >= 0 (eps = 0: an all-zero h gives NaN, as the formula does).
    cast: "gemma", "llama" or "none" (module docstring); offset: 0.0, or 1.0 for Gemma.
    out, h_out: arrays of x's shape and dtype to write y and h into (h_out=residual updates the
    stream in place, as engines do); the backward reads h, so leave h_out alone until then. They
    are two results, so they may not share memory (a ValueError says so in the argument checks, _arguments.py).
    """
    x, residual, eps, offset = add_rms_norm_args(x, residual, weight, eps, cast, offset, out, h_out)
    h = np.add(x, residual)                              # (..., d) in x's dtype: the stream as stored
    scale = weight + offset if weight is not None and offset else weight         # (d,) in weight's dtype
    y, norm_cache = rms_norm_forward(h, scale, eps=eps, out=out)
    if cast != "gemma" and x.dtype != np.float64:       # the other roundings, into y's array (casts.py)
        y[...] = rms_norm_cast(h, weight, None, eps, "inside", h.shape[-1], cast, offset=offset)
    if h_out is not None:
        h = store(h, x.dtype, h_out, "h_out")
    return y, h, {"made_by": "scratchnorm.add_rms_norm_forward", "norm": norm_cache, "shape": x.shape,
                  "dtype": x.dtype}


def add_rms_norm_backward(dy, dh, cache):
    """Returns {"x", "residual", "weight"} ("weight" when the forward had one).

    dy: dL/dy, dh: dL/dh (the gradient of the residual stream from above), both (..., d).
    dx = dresidual = dh + RMSNorm's backward of dy; dweight = sum of dy * h_hat.
    """
    check_cache(cache, "scratchnorm.add_rms_norm_forward")
    dh = upstream(dh, cache["shape"], "dh")              # (..., d) float64 (checked: shape, float dtype)
    norm = dict(cache["norm"], dtype=np.float64)          # RMSNorm's dx before its rounding ...
    grads = rms_norm_backward(dy, norm)
    dx = store(grads.pop("x") + dh, cache["dtype"])      # ... plus dh, rounded once
    grads.pop("eps")                                      # (eps is not a parameter here)
    return {"x": dx, "residual": dx.copy(), **grads}


register("numpy", {"add_rms_norm_forward": add_rms_norm_forward, "add_rms_norm_backward": add_rms_norm_backward})
