r"""BatchNorm: statistics over the batch, running statistics, two modes, the hand-derived backward.

x is (N, C) or (N, C, *): batch, channels, then any spatial axes (PyTorch's
BatchNorm1d, 2d and 3d are this one class). Each channel c has its own
statistics, taken over the M = N * (spatial size) values x[:, c, ...]. Below,
i runs over those M values of one channel; everything is done per channel.

Forward, training mode (``batch_norm_forward``)
    mu    = (1/M) sum_i x_i
    var   = (1/M) sum_i (x_i - mu)^2        biased (divides by M); two passes
    rstd  = 1 / sqrt(var + eps)
    x_hat = (x_i - mu) * rstd
    y     = x_hat * weight + bias            one weight and one bias per channel

Running statistics (``update_running_stats``), after each training forward
    running_mean <- (1 - m) * running_mean + m * mu
    running_var  <- (1 - m) * running_var  + m * var * M / (M - 1)

    m = momentum weights the NEW batch, as in PyTorch (momentum=0.1); Keras's
    momentum=0.99 weights the OLD value, so it is m = 0.01 here. momentum=None
    gives the plain average of all batches so far, m = 1 / (batches seen).

    The classic confusion: the normalization uses the biased var, but
    running_var receives the UNBIASED variance (divided by M - 1), as PyTorch
    does. So even with m = 1, eval mode does not reproduce the training output
    of the same batch: it divides by sqrt(var * M/(M-1) + eps) instead of
    sqrt(var + eps). The tests show both facts.

Forward, eval mode (``batch_norm_eval_forward``)
    y = (x - running_mean) / sqrt(running_var + eps) * weight + bias

    A fixed affine map per channel: no sample affects another, and the
    backward is that of the map, dx = dy * weight / sqrt(running_var + eps).

Backward, training mode (``batch_norm_backward``), with g_i = dy_i * weight
    dbias   = sum_i dy_i
    dweight = sum_i dy_i * x_hat_i
    dx_i    = (rstd / M) * (M g_i - sum_j g_j - x_hat_i * sum_j g_j x_hat_j)

Derivation. x_i reaches the loss three ways: directly through x_hat_i,
through mu, and through var. With dL/dx_hat_j = g_j:

    dL/dvar = sum_j g_j (x_j - mu) * d rstd/d var = -(rstd^3 / 2) sum_j g_j (x_j - mu)
    dL/dmu  = sum_j g_j * (-rstd)  +  dL/dvar * dvar/dmu
    dvar/dmu = -(2/M) sum_j (x_j - mu) = 0

The deviations from the mean sum to zero, so the second term of dL/dmu
vanishes: moving mu does not change var to first order, because var is at
its minimum over the choice of centre exactly at the mean. Then

    dx_i = rstd * g_i  +  dL/dvar * 2 (x_i - mu) / M  +  dL/dmu / M
         = rstd * g_i  -  (rstd^3 / M) (x_i - mu) sum_j g_j (x_j - mu)  -  (rstd / M) sum_j g_j

and with (x_j - mu) * rstd = x_hat_j the middle term is
(rstd / M) x_hat_i sum_j g_j x_hat_j, which gives the closed form above.
``batch_norm_backward_staged`` walks the graph node by node and keeps the
dvar/dmu term (it is round-off, not exactly zero); a test shows the two agree.

Two consequences, per channel, checked by the tests: sum_i dx_i = 0 and
sum_i dx_i x_hat_i = 0. And dx_i depends on the dy of every other sample in
the batch: in training mode a sample's gradient depends on its batch-mates.

It is LayerNorm's formula (layernorm.py) with the roles of the axes swapped:
LayerNorm normalizes each sample over its features, BatchNorm each channel
over the batch.
"""
from __future__ import annotations

import numpy as np

from ._results import store, upstream
from ._per_channel import add_channel_affine, channel_affine, channel_affine_grads, channel_sum, dx_hat_of, per_channel
from ._checks import check_bool, check_cache, check_channels_input, check_eps, check_int, check_momentum, fail
from ._arguments import batch_norm_args, batch_norm_eval_args
from .backend import implementation, register
from .dtypes import upcast_half
from .layer import Layer


def batch_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None):
    """BatchNorm with the batch's statistics (training mode). Returns ``(y, cache)``.

    x: (N, C, *), float16/32/64. weight, bias: (C,) or None. y: like x.
    cache["mean"] and cache["var"] (the biased variance), both (C,), and
    cache["count"] (M) feed ``update_running_stats``. eps >= 0; with eps = 0 a
    constant channel gives NaN, as the formula does.
    """
    x, eps = batch_norm_args(x, weight, bias, eps)
    xf = upcast_half(x).astype(np.float64)           # (N, C, *) computed in float64
    count = x.size // x.shape[1]                     # M: values per channel
    mean = channel_sum(xf) / count                   # (C,)
    mean += channel_sum(xf - per_channel(mean, x.ndim)) / count   # corrected, as in layernorm.py
    xm = xf - per_channel(mean, x.ndim)              # (N, C, *) deviations
    var = channel_sum(xm * xm) / count               # (C,) biased
    rstd = 1.0 / np.sqrt(var + eps)                  # (C,)
    x_hat = xm * per_channel(rstd, x.ndim)           # (N, C, *)
    y = channel_affine(x_hat, weight, bias)
    cache = {"made_by": "scratchnorm.batch_norm_forward", "x_hat": x_hat, "xm": xm, "mean": mean, "var": var,
             "rstd": rstd, "count": count, "eps": eps, "weight": weight, "bias": bias, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def batch_norm_backward(dy, cache, *, dx_out=None):
    """Closed-form backward of ``batch_norm_forward``. Returns {"x", "weight", "bias"} (those that exist).

    dx = (rstd / M) * (M g - sum(g) - x_hat * sum(g * x_hat)) per channel, g = dy * weight.
    """
    check_cache(cache, "scratchnorm.batch_norm_forward")
    dy = upstream(dy, cache["x_hat"].shape)           # (N, C, *)
    x_hat, M, weight = cache["x_hat"], cache["count"], cache["weight"]
    rstd = per_channel(cache["rstd"], dy.ndim)                  # (1, C, 1, ...)
    g = dx_hat_of(dy, weight)                                   # dL/dx_hat
    sum_g = channel_sum(g, keepdims=True)                       # (1, C, 1, ...)
    sum_gx = channel_sum(g * x_hat, keepdims=True)              # (1, C, 1, ...)
    dx = (rstd / M) * (M * g - sum_g - x_hat * sum_gx)          # (N, C, *)
    return {"x": store(dx, cache["dtype"], dx_out, "dx_out"), **channel_affine_grads(dy, x_hat, weight, cache["bias"])}


def batch_norm_backward_staged(dy, cache):
    """Backward of ``batch_norm_forward``, node by node through the graph, no simplification.

    Graph, per channel: mu = sum(x)/M; xm = x - mu; sq = xm^2; var = sum(sq)/M;
    std = sqrt(var + eps); rstd = 1/std; x_hat = xm * rstd; y = x_hat * weight + bias.
    """
    check_cache(cache, "scratchnorm.batch_norm_forward", "scratchnorm.batch_norm_backward_staged")
    dy = upstream(dy, cache["x_hat"].shape)                 # (N, C, *)
    xm, M, weight = cache["xm"], cache["count"], cache["weight"]
    std = per_channel(np.sqrt(cache["var"] + cache["eps"]), dy.ndim)  # (1, C, 1, ...)
    rstd = 1.0 / std
    dx_hat = dx_hat_of(dy, weight)                    # y = x_hat * weight + bias
    dxm = dx_hat * rstd                               # x_hat = xm * rstd   (xm path)
    drstd = channel_sum(dx_hat * xm, keepdims=True)   #                     (rstd path)
    dstd = -drstd / std**2                            # rstd = 1 / std
    dvar = dstd * 0.5 / std                           # std = sqrt(var + eps)
    dsq = dvar / M                                    # var = sum(sq) / M: each sq gets dvar / M
    dxm = dxm + 2.0 * xm * dsq                        # sq = xm^2
    dmu = -channel_sum(dxm, keepdims=True)            # xm = x - mu   (mu path, incl. 2 dsq sum(xm) ~ 0)
    dx = dxm + dmu / M                                # mu = sum(x) / M
    grads = channel_affine_grads(dy, cache["x_hat"], weight, cache["bias"])
    return {"x": dx.astype(cache["dtype"]), **grads}


def batch_norm_eval_forward(x, running_mean, running_var, weight=None, bias=None, *, eps=1e-5, out=None):
    """BatchNorm with fixed statistics (eval mode). Returns ``(y, cache)``.

    x: (N, C, *); running_mean, running_var, weight, bias: (C,) (weight, bias may be None).
    y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
    """
    x, eps, C = batch_norm_eval_args(x, running_mean, running_var, weight, bias, eps)
    xf = upcast_half(x).astype(np.float64)                                  # (N, C, *)
    mean = per_channel(np.asarray(running_mean, dtype=np.float64), x.ndim)  # (1, C, 1, ...)
    rstd = 1.0 / np.sqrt(np.asarray(running_var, dtype=np.float64) + eps)   # (C,)
    x_hat = (xf - mean) * per_channel(rstd, x.ndim)                         # (N, C, *)
    y = channel_affine(x_hat, weight, bias)
    cache = {"made_by": "scratchnorm.batch_norm_eval_forward", "x_hat": x_hat, "rstd": rstd, "weight": weight,
             "bias": bias, "dtype": x.dtype}
    return store(y, x.dtype, out), cache


def batch_norm_eval_backward(dy, cache, *, dx_out=None):
    """Backward of ``batch_norm_eval_forward``: the fixed affine map's, dx = dy * weight * rstd."""
    check_cache(cache, "scratchnorm.batch_norm_eval_forward")
    dy = upstream(dy, cache["x_hat"].shape)           # (N, C, *)
    weight = cache["weight"]
    dx = dx_hat_of(dy, weight) * per_channel(cache["rstd"], dy.ndim)
    return {"x": store(dx, cache["dtype"], dx_out, "dx_out"),
            **channel_affine_grads(dy, cache["x_hat"], weight, cache["bias"])}


def update_running_stats(running_mean, running_var, mean, var, count, momentum):
    """Blend one batch into the running statistics, IN PLACE.

    running_mean, running_var: (C,) arrays, updated in place (they keep their dtype).
    mean, var: the batch's mean and biased variance (C,), as ``batch_norm_forward``'s
    cache holds them; count: the M values per channel they came from (>= 2).
    momentum: the weight of the new batch, in [0, 1]. running_var receives the
    unbiased variance var * M / (M - 1), as in PyTorch.
    """
    m = check_momentum(momentum)
    if m is None:
        fail(TypeError, "momentum", "a number in [0, 1]", momentum,
             "pass the weight of this batch; for a cumulative average pass 1 / (batches seen so far).")
    count = check_int("count", count, minimum=2)
    unbiased = np.asarray(var, dtype=np.float64) * (count / (count - 1))   # (C,)
    running_mean[...] = (1.0 - m) * running_mean.astype(np.float64) + m * np.asarray(mean, dtype=np.float64)
    running_var[...] = (1.0 - m) * running_var.astype(np.float64) + m * unbiased


class BatchNorm(Layer):
    """BatchNorm(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, *, bias=True).

    Input (N, C) or (N, C, *). Training mode (``layer.train()``, the default)
    normalizes with the batch's statistics and updates ``layer.buffers``
    "running_mean", "running_var" (unbiased) and "num_batches_tracked"; eval mode
    (``layer.eval()``) normalizes with the running statistics. With
    track_running_stats=False there are no buffers and both modes use the batch.
    bias=False (with affine): a weight and no bias, as torch's keyword of that name.
    Defaults follow torch.nn.BatchNorm2d. See the module docstring.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, *, bias=True,
                 backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.num_features = check_int("num_features", num_features)
        self.eps = check_eps(eps)
        self.momentum = check_momentum(momentum)
        self.affine = check_bool("affine", affine)
        self.track_running_stats = check_bool("track_running_stats", track_running_stats)
        add_channel_affine(self, self.num_features, self.affine, bias)
        if self.track_running_stats:
            self._add_buffer("running_mean", np.zeros(self.num_features))
            self._add_buffer("running_var", np.ones(self.num_features))
            self.buffers["num_batches_tracked"] = np.zeros((), dtype=np.int64)

    @property
    def uses_batch_stats(self) -> bool:
        """True when forward normalizes with the batch's statistics."""
        return self.training or not self.track_running_stats

    def _check_input(self, x):
        check_channels_input("BatchNorm", x, self.num_features)
        if self.uses_batch_stats and x.size == x.shape[1]:
            fail(ValueError, "x", "more than one value per channel (N * spatial size >= 2) to take "
                 "batch statistics in BatchNorm", x,
                 "call layer.eval() to normalize with the running statistics, use a larger batch, or use "
                 "GroupNorm / LayerNorm, whose statistics do not span the batch.")

    def _forward(self, x):
        weight, bias = self.params.get("weight"), self.params.get("bias")
        if not self.uses_batch_stats:
            rm, rv = self.buffers["running_mean"], self.buffers["running_var"]
            y, cache = implementation(self.backend, "batch_norm_eval_forward")(x, rm, rv, weight, bias, eps=self.eps)
            return y, ("batch_norm_eval_backward", cache)
        y, cache = implementation(self.backend, "batch_norm_forward")(x, weight, bias, eps=self.eps)
        if self.training and self.track_running_stats:
            self.buffers["num_batches_tracked"] += 1
            m = self.momentum if self.momentum is not None else 1.0 / int(self.buffers["num_batches_tracked"])
            update_running_stats(self.buffers["running_mean"], self.buffers["running_var"],
                                 cache["mean"], cache["var"], cache["count"], m)
        return y, ("batch_norm_backward", cache)

    def _backward(self, dy, cache):
        backward, inner = cache          # the backward of the mode the forward ran in
        return implementation(self.backend, backward)(dy, inner)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


register("numpy", {"batch_norm_forward": batch_norm_forward, "batch_norm_backward": batch_norm_backward,
                   "batch_norm_eval_forward": batch_norm_eval_forward,
                   "batch_norm_eval_backward": batch_norm_eval_backward})
