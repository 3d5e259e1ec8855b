r"""RMSNorm (Zhang & Sennrich, 2019): forward, hand-derived backward (closed form and staged), the layer.

For one row x of d features (every leading axis is a batch axis), with the
statistic taken over the first k features (k = d for RMSNorm, k < d for
pRMSNorm, see ``partial_rmsnorm.py``):

Forward
    ms    = (1/k) sum_{j<k} x_j^2                  mean square; no mean is subtracted
    rstd  = rstd(ms, eps)                          "inside": 1/sqrt(ms + eps); see eps_modes.py
    x_hat = x * rstd                               the whole row is divided, not just the first k
    y     = x_hat * weight + bias                  (weight, bias optional)

Backward, with g = dy * weight (= dL/dx_hat)
    dbias   = sum over rows of dy
    dweight = sum over rows of dy * x_hat
    dx_i    = rstd * g_i + [i < k] * (2 x_i / k) * (sum_j g_j x_j) * d rstd/d ms
            = rstd * (g_i + [i < k] * a * x_hat_i),   a = (2/k) (sum_j g_j x_hat_j) (d rstd/d ms) / rstd^3
    deps    = sum over rows of (sum_j g_j x_hat_j) * d log(rstd)/d eps   (RMSNormLearnableEps)

Why. x_hat_i = x_i * rstd(ms) depends on x_i directly (rstd * g_i) and
through ms, which only the first k features feed: d ms/d x_i = 2 x_i / k.
The chain rule through rstd collects sum_j g_j x_j once per row. The second
line is the same number written with x = x_hat / rstd; it is the one the code
(and the numba kernel) uses, because a and x_hat stay of order one whether
rstd is tiny (|x| up to 1e150) or huge (ms + eps below 1e-308), where rstd^2
and rstd^3 would leave floating-point range (eps_modes.drstd_dms_per_rstd3).

For the usual case, eps "inside" and k = d, d rstd/d ms = -rstd^3/2, and the
formula folds into the one in the paper's gradient analysis:

    dx = rstd * (g - x_hat * mean(g * x_hat))

Compared with LayerNorm's rstd * (g - mean(g) - x_hat * mean(g * x_hat)),
the mean(g) term is gone because no mean was subtracted. Consequence, checked
by the tests: without the affine and with eps = 0, dx . x = 0 per row: the
gradient has no component along x, so the Jacobian (the paper's R matrix,
``jacobian.py``) has rank d - 1, and scaling x does not change y.
"""
from __future__ import annotations

import numpy as np

from ._results import store, sum_rows, upstream
from ._checks import EPS_MODES, check_bool, check_cache, check_choice, check_eps
from ._arguments import rms_norm_args
from .backend import implementation, register
from ._shapes import rows_of
from .casts import CASTS, check_promote, rms_norm_cast
from .dtypes import upcast_half
from .eps_modes import dlog_rstd_deps, dlog_rstd_dms, drstd_dms_per_rstd3, rescue_huge_rows, rstd_from_ms
from .trailing_axes import TrailingAxesNorm


def rms_norm_forward(x, weight=None, bias=None, *, eps=1e-6, eps_mode="inside", k=None, out=None):
    """RMSNorm over the last axis. Returns ``(y, cache)``.

    x: (..., d), float16/32/64. weight, bias: (d,) or None. k: features that
    feed the statistic (None: all d). eps >= 0; with eps = 0 an all-zero row
    gives NaN, as the formula does. See the module docstring for the formulas.
    """
    x, eps, k = rms_norm_args(x, weight, bias, eps, eps_mode, k)
    xf = upcast_half(x).astype(np.float64)                   # (..., d) computed in float64
    with np.errstate(over="ignore"):                         # |x| beyond ~1e154: ms is inf, and then
        ms = (xf[..., :k] ** 2).mean(axis=-1, keepdims=True)     # (..., 1)
    rstd = rstd_from_ms(ms, eps, eps_mode)                   # (..., 1)
    rescue_huge_rows(rstd, ms, xf[..., :k], eps, eps_mode)   # ... rstd is taken on the row scaled (eps_modes.py)
    x_hat = xf * rstd                                        # (..., d)
    y = x_hat
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    cache = {"made_by": "scratchnorm.rms_norm_forward", "x": xf, "x_hat": x_hat, "ms": ms, "rstd": rstd, "eps": eps,
             "eps_mode": eps_mode, "k": k, "weight": weight, "bias": bias, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def _rms_norm_grads(dy, cache, dx, gxh):
    """Pack dx with dweight, dbias and deps. gxh = sum_j g_j x_hat_j per row, (..., 1)."""
    grads = {"x": dx}
    weight, bias = cache["weight"], cache["bias"]
    if weight is not None:
        grads["weight"] = sum_rows(dy * cache["x_hat"]).astype(weight.dtype)
    if bias is not None:
        grads["bias"] = sum_rows(dy).astype(bias.dtype)
    with np.errstate(over="ignore", invalid="ignore"):   # rstd^2 beyond float64 (ms + eps < 1e-308): so is deps
        grads["eps"] = np.sum(gxh * dlog_rstd_deps(cache["ms"], cache["rstd"], cache["eps"], cache["eps_mode"]))
    return grads


def rms_norm_backward(dy, cache, *, dx_out=None):
    """Closed-form RMSNorm backward. Returns {"x", "weight", "bias", "eps"} (those that exist).

    dx_i = rstd * (g_i + [i < k] * a * x_hat_i),  a = (2/k) (sum_j g_j x_hat_j) (d rstd/d ms) / rstd^3.
    """
    check_cache(cache, "scratchnorm.rms_norm_forward")
    dy = upstream(dy, cache["x_hat"].shape)             # (..., d)
    x_hat, ms, rstd, k = cache["x_hat"], cache["ms"], cache["rstd"], cache["k"]
    weight = cache["weight"]
    g = dy * weight if weight is not None else dy               # dL/dx_hat
    gxh = (g * x_hat).sum(axis=-1, keepdims=True)               # (..., 1)
    a = gxh * drstd_dms_per_rstd3(ms, rstd, cache["eps"], cache["eps_mode"]) * (2.0 / k)   # (..., 1)
    dx = np.array(g)                                            # (..., d) direct path (a copy: g may be dy)
    dx[..., :k] += a * x_hat[..., :k]                           # path through ms
    dx *= rstd
    return _rms_norm_grads(dy, cache, store(dx, cache["dtype"], dx_out, "dx_out"), gxh)


def rms_norm_backward_staged(dy, cache):
    """RMSNorm backward, node by node through the forward graph.

    Graph: sq = x[:k]^2; ms = mean(sq); rstd = rstd(ms); x_hat = x * rstd; y = x_hat * weight + bias.
    """
    check_cache(cache, "scratchnorm.rms_norm_forward", "scratchnorm.rms_norm_backward_staged")
    dy = upstream(dy, cache["x_hat"].shape)
    x, ms, rstd, k, weight = cache["x"], cache["ms"], cache["rstd"], cache["k"], cache["weight"]
    dx_hat = dy * weight if weight is not None else dy          # y = x_hat * weight + bias
    dx = dx_hat * rstd                                          # x_hat = x * rstd   (x path)
    drstd = (dx_hat * x).sum(axis=-1, keepdims=True)            #                    (rstd path)
    drstd_dms = rstd * dlog_rstd_dms(ms, rstd, cache["eps"], cache["eps_mode"])
    dms = drstd * drstd_dms                                     # rstd = rstd(ms)
    dsq = np.broadcast_to(dms / k, x[..., :k].shape)            # ms = mean(sq)
    dx[..., :k] += dsq * 2.0 * x[..., :k]                       # sq = x[:k]^2
    return _rms_norm_grads(dy, cache, dx.astype(cache["dtype"]), drstd * rstd)


class RMSNorm(TrailingAxesNorm):
    """RMSNorm(d, eps=1e-6, eps_mode="inside", elementwise_affine=True, cast="gemma", promote=False):
    y = x / RMS(x) * weight.

    d: the features of the last axis, or a tuple of trailing axes normalized together (torch's
    normalized_shape; the weight has that shape: _shapes.py).
    eps: the default 1e-6 is LLaMA-1's; eps=None is torch.nn.RMSNorm's default, the machine epsilon
    of the computation dtype: float64's for float64 input, float32's for float32, float16 and
    bfloat16 input (PyTorch computes those in float32).
    eps_mode: "inside" x*rsqrt(ms+eps) (PyTorch, LLaMA); "outside" x/(sqrt(ms)+eps)
    (the paper's PyTorch code); "clamp" x*rsqrt(max(ms, eps)). See eps_modes.py.
    cast: where a float16/bfloat16/float32 input is rounded back to its dtype: "gemma"
    (once, at the end: the default), "llama" or "none" (casts.py). promote=True (with "llama" or
    "none"): the weight is not rounded to the input dtype and y has the promoted dtype, as Hugging
    Face's LlamaRMSNorm returns float32 from float32 weights and a bfloat16 input (casts.py).
    """

    _backward_op = "rms_norm_backward"
    _k = None  # features that feed the statistic; None = all (see PartialRMSNorm)
    _offset = 0.0  # the scale is offset + weight (GemmaRMSNorm: 1)

    def __init__(self, d, eps=1e-6, eps_mode="inside", elementwise_affine=True, *, cast="gemma", promote=False,
                 backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self._set_shape(d)
        self.eps = None if eps is None else check_eps(eps)
        self.eps_mode = check_choice("eps_mode", eps_mode, EPS_MODES)
        self.cast = check_choice("cast", cast, CASTS)
        self.promote = check_promote(promote, self.cast)
        self.elementwise_affine = check_bool("elementwise_affine", elementwise_affine)
        if self.elementwise_affine:
            self._add_param("weight", np.full(self.normalized_shape, 1.0 - self._offset))

    def _eps_value(self, x) -> float:
        """eps, or (eps=None) the machine epsilon of the dtype x is computed in, as torch.nn.RMSNorm."""
        if self.eps is not None:
            return self.eps
        return float(np.finfo(np.float64 if x.dtype == np.float64 else np.float32).eps)

    def _forward(self, x):
        fwd = implementation(self.backend, "rms_norm_forward")
        eps, weight, bias = self._eps_value(x), self._flat("weight"), self._flat("bias")
        scale = weight + self._offset if weight is not None and self._offset else weight   # in the params' dtype
        rows = rows_of(x, self.normalized_shape)
        y, cache = fwd(rows, scale, bias, eps=eps, eps_mode=self.eps_mode, k=self._k)
        if self.cast != "gemma" and x.dtype != np.float64:      # the other roundings (casts.py)
            y = rms_norm_cast(rows, weight, bias, eps, self.eps_mode, self._k or self.d, self.cast,
                              offset=self._offset, promote=self.promote)
        return y.reshape(x.shape), cache

    def extra_repr(self):
        return (f"{self._shape_repr()}, eps={self.eps}, eps_mode={self.eps_mode!r}"
                + (f", cast={self.cast!r}" if self.cast != "gemma" else "")
                + (", promote=True" if self.promote else ""))


register("numpy", {"rms_norm_forward": rms_norm_forward, "rms_norm_backward": rms_norm_backward})
