r"""InstanceNorm (Ulyanov et al., 2016): each channel of each sample normalized over its positions.

x is (N, C, *) with at least one spatial axis. For sample n and channel c the
statistics are taken over the spatial values x[n, c, ...]:

    x_hat[n, c] = (x[n, c] - mean(x[n, c])) / sqrt(var(x[n, c]) + eps)
    y[n, c]     = x_hat[n, c] * weight[c] + bias[c]      (affine=False by default, as in PyTorch)

That is GroupNorm with one channel per group (num_groups = C), so the layer
calls ``group_norm_forward`` / ``group_norm_backward`` (groupnorm.py) with
num_groups = C; the backward is LayerNorm's over each (n, c) slice.
"""
from __future__ import annotations

import numpy as np

from ._checks import check_int
from .groupnorm import GroupNorm


class InstanceNorm(GroupNorm):
    """InstanceNorm(num_features, eps=1e-5, affine=False): input (N, C, L, ...), statistics per (n, c).

    The channel count is checked even when affine=False: a mismatch means x's
    axes are not what the layer was built for.
    """

    _min_ndim = 3                       # at least one spatial axis
    _channels_arg = "num_features"
    _one_value = ("more than one spatial position per (sample, channel) (spatial size >= 2)",
                  "pass an input with more spatial positions; with one, x_hat = 0 and the output is the bias "
                  "whatever x is. For an (N, C, 1) input use BatchNorm, or GroupNorm with fewer groups.")

    def __init__(self, num_features, eps=1e-5, affine=False, *, backend="numba", dtype=np.float64):
        self.num_features = check_int("num_features", num_features)
        C = self.num_features
        super().__init__(C, C, eps=eps, affine=affine, backend=backend, dtype=dtype)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"
