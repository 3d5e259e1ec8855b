"""Helpers for inputs laid out (N, C, *): batch, channels, then any spatial axes.

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

from ._checks import fail


def check_channels_input(layer: str, x: np.ndarray, channels: int | None = None, *,
                         min_ndim: int = 2, arg: str = "num_features") -> None:
    """x must be (N, C, *) with at least ``min_ndim`` axes, C == channels (if given), and no empty axis."""
    if x.ndim < min_ndim:
        if min_ndim == 2:
            want = "(N, C) or (N, C, *)"
            fix = "add the batch axis, e.g. x[None], so that channels are on axis 1."
        else:
            want = "(N, C, L) or (N, C, *) with at least one spatial axis"
            fix = ("add the batch axis (x[None]) if x is one sample; for an (N, C) input use "
                   "BatchNorm or LayerNorm, which have statistics over more than one value.")
        fail(ValueError, "x", f"an array of shape {want} for {layer}", x, fix)
    if channels is not None and x.shape[1] != channels:
        fail(ValueError, "x", f"axis 1 (channels) of size {arg}={channels} for {layer}", x,
             f"pass x with channels on axis 1 (for channels-last data, np.moveaxis(x, -1, 1)), "
             f"or build the layer with {arg}={x.shape[1]}.")
    check_nonempty(layer, x)


def check_nonempty(layer: str, x: np.ndarray) -> None:
    """An empty batch (any axis of size 0) is an error: it is almost always a bug upstream."""
    if x.size == 0:
        fail(ValueError, "x", f"a non-empty array (every axis of size >= 1) for {layer}", x,
             "skip the empty batch (statistics over zero values are undefined), "
             "or check the code that built x.")


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
