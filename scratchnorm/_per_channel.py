"""Per-channel helpers for inputs laid out (N, C, *): batch, channels, then any spatial axes.

BatchNorm, GroupNorm and InstanceNorm all read x this way, and all three end
with the same per-channel affine map, one weight and one bias per channel:

    y[n, c, ...] = x_hat[n, c, ...] * weight[c] + bias[c]

Its backward, with the sums taken over every axis except the channel axis 1:

    dweight[c] = sum dy[:, c, ...] * x_hat[:, c, ...]
    dbias[c]   = sum dy[:, c, ...]
    dL/dx_hat  = dy * weight[c]
"""
from __future__ import annotations

import numpy as np

from ._checks import check_bool


def reduce_axes(ndim: int) -> tuple:
    """Every axis except the channel axis 1: (0, 2, 3, ..., ndim - 1)."""
    return (0, *range(2, ndim))


def per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) vector shaped (1, C, 1, ..., 1) to broadcast against an ndim-axis (N, C, *) array."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def channel_sum(a: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """Sum over every axis except axis 1: (N, C, *) -> (C,), or (1, C, 1, ...) with keepdims."""
    return a.sum(axis=reduce_axes(a.ndim), keepdims=keepdims)


def channel_affine(x_hat: np.ndarray, weight, bias) -> np.ndarray:
    """y = x_hat * weight[c] + bias[c] (either may be None)."""
    y = x_hat
    if weight is not None:
        y = y * per_channel(weight, x_hat.ndim)
    if bias is not None:
        y = y + per_channel(bias, x_hat.ndim)
    return y


def add_channel_affine(layer, C: int, affine: bool, bias) -> None:
    """The layer's per-channel parameters: weight (C,) ones and, unless bias=False, bias (C,) zeros,
    when ``affine`` (torch.nn's BatchNorm, GroupNorm and InstanceNorm take the same keyword ``bias``)."""
    layer.bias = check_bool("bias", bias)
    if affine:
        layer._add_param("weight", np.ones(C))
        if layer.bias:
            layer._add_param("bias", np.zeros(C))


def dx_hat_of(dy: np.ndarray, weight) -> np.ndarray:
    """dL/dx_hat = dy * weight[c] (dy itself without a weight)."""
    return dy * per_channel(weight, dy.ndim) if weight is not None else dy


def channel_affine_grads(dy: np.ndarray, x_hat: np.ndarray, weight, bias) -> dict:
    """{"weight": dweight, "bias": dbias} for the parameters that exist, in their own dtypes."""
    grads = {}
    if weight is not None:
        grads["weight"] = channel_sum(dy * x_hat).astype(weight.dtype)
    if bias is not None:
        grads["bias"] = channel_sum(dy).astype(bias.dtype)
    return grads
