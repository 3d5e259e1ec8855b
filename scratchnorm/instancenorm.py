r"""InstanceNorm (Ulyanov et al., 2016): each channel of each sample normalized over its positions.

x is (N, C, *) with at least one spatial axis. For sample n and channel c the
statistics are taken over the spatial values x[n, c, ...]:

    x_hat[n, c] = (x[n, c] - mean(x[n, c])) / sqrt(var(x[n, c]) + eps)
    y[n, c]     = x_hat[n, c] * weight[c] + bias[c]      (affine=False by default, as in PyTorch)

That is GroupNorm with one channel per group (num_groups = C), so the layer
calls ``group_norm_forward`` / ``group_norm_backward`` (groupnorm.py) with
num_groups = C; the backward is LayerNorm's over each (n, c) slice.

Running statistics (track_running_stats=True), as torch.nn.InstanceNorm*d keeps them. In training
mode each forward still normalizes with the slice's own statistics, and then moves the buffers toward
the batch's average of them, with M the spatial size:

    running_mean[c] <- (1 - momentum) running_mean[c] + momentum * mean_n(mean(x[n, c]))
    running_var[c]  <- (1 - momentum) running_var[c]  + momentum * mean_n(var(x[n, c])) * M / (M - 1)

(the unbiased variance, as BatchNorm's; momentum=None is PyTorch's 0: the buffers never move). In
eval mode the layer normalizes with the buffers instead: y = (x - running_mean[c]) /
sqrt(running_var[c] + eps) * weight[c] + bias[c], BatchNorm's eval map (batchnorm.py), whose
backward is dx = dy * weight[c] * rstd[c].

Unbatched input. ``spatial_dims`` (1, 2 or 3, as InstanceNorm1d/2d/3d) fixes the number of spatial
axes; then an input with one axis fewer is a single sample (C, *): it is normalized as x[None],
and y and dx have its shape.
"""
from __future__ import annotations

import numpy as np

from ._checks import check_bool, check_channels_input, check_int, check_momentum, fail
from .backend import implementation
from .batchnorm import update_running_stats
from .groupnorm import GroupNorm


class InstanceNorm(GroupNorm):
    """InstanceNorm(num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, *,
    bias=True, spatial_dims=None): input (N, C, L, ...), statistics per (n, c). Defaults and the order of
    the arguments follow torch.nn.InstanceNorm1d.

    The channel count is checked even when affine=False: a mismatch means x's
    axes are not what the layer was built for.
    """

    _min_ndim = 3                       # at least one spatial axis
    _channels_arg = "num_features"
    _one_value = ("more than one spatial position per (sample, channel) (spatial size >= 2)",
                  "pass an input with more spatial positions; with one, x_hat = 0 and the output is the bias "
                  "whatever x is. For an (N, C, 1) input use BatchNorm, or GroupNorm with fewer groups.")

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, *,
                 bias=True, spatial_dims=None, backend="numba", dtype=np.float64):
        self.num_features = check_int("num_features", num_features)
        C = self.num_features
        super().__init__(C, C, eps=eps, affine=affine, bias=bias, backend=backend, dtype=dtype)
        self.momentum = check_momentum(momentum)
        self.track_running_stats = check_bool("track_running_stats", track_running_stats)
        self.spatial_dims = None if spatial_dims is None else check_int("spatial_dims", spatial_dims)
        if self.track_running_stats:
            self._add_buffer("running_mean", np.zeros(C))
            self._add_buffer("running_var", np.ones(C))

    @property
    def uses_batch_stats(self) -> bool:
        """True when forward normalizes with each slice's own statistics."""
        return self.training or not self.track_running_stats

    def _unbatched(self, x) -> bool:
        return self.spatial_dims is not None and x.ndim == self.spatial_dims + 1

    def _check_input(self, x):
        if self.spatial_dims is not None and x.ndim not in (self.spatial_dims + 1, self.spatial_dims + 2):
            n = self.spatial_dims
            fail(ValueError, "x", f"{n + 2} axes (N, C, *{n} spatial) or {n + 1} (C, *{n} spatial: one sample) "
                 f"for InstanceNorm with spatial_dims={n}", x,
                 f"pass x with {n} spatial axes, or build the layer with spatial_dims={max(x.ndim - 2, 1)}.")
        if self._unbatched(x):
            if x.shape[0] != self.num_features:
                fail(ValueError, "x", f"axis 0 (the channels of one sample) of size num_features={self.num_features}"
                     f" for InstanceNorm with spatial_dims={self.spatial_dims}", x,
                     f"pass one sample of shape ({self.num_features}, *{self.spatial_dims} spatial axes), or a "
                     f"batch (N, {self.num_features}, ...).")
            x = x[None]
        if self.uses_batch_stats:
            super()._check_input(x)
        else:
            check_channels_input("InstanceNorm", x, self.num_features, min_ndim=3, arg="num_features")

    def _forward(self, x):
        if self._unbatched(x):
            y, cache = self._forward(x[None])
            return y[0], ("unbatched", cache)
        weight, bias = self.params.get("weight"), self.params.get("bias")
        if not self.uses_batch_stats:
            rm, rv = self.buffers["running_mean"], self.buffers["running_var"]
            y, cache = implementation(self.backend, "batch_norm_eval_forward")(x, rm, rv, weight, bias, eps=self.eps)
            return y, ("batch_norm_eval_backward", cache)
        y, cache = super()._forward(x)
        if self.track_running_stats:
            xs = x.astype(np.float64).reshape(x.shape[0], x.shape[1], -1)         # (N, C, M)
            mean = xs.mean(axis=-1)                                               # (N, C)
            var = ((xs - mean[..., None]) ** 2).mean(axis=-1)                     # (N, C) biased, two passes
            update_running_stats(self.buffers["running_mean"], self.buffers["running_var"], mean.mean(axis=0),
                                 var.mean(axis=0), xs.shape[-1], self.momentum or 0.0)
        return y, ("group_norm_backward", cache)

    def _backward(self, dy, cache):
        backward, inner = cache
        if backward == "unbatched":
            grads = self._backward(dy[None], inner)
            grads["x"] = grads["x"][0]
            return grads
        return implementation(self.backend, backward)(dy, inner)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}" + ("" if self.bias else ", bias=False")
                + (f", spatial_dims={self.spatial_dims}" if self.spatial_dims else ""))
