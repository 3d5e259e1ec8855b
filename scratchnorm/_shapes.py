"""Normalization over several trailing axes: torch.nn's ``normalized_shape`` tuple (LayerNorm, RMSNorm).

``LayerNorm((H, dh))`` on x of shape (..., H, dh) takes its statistics over the last two axes together,
the H * dh values of each (..., :, :) block, as ``torch.nn.LayerNorm((H, dh))`` does; its weight and bias
have shape (H, dh), one entry per normalized value. Nothing new is derived: the block is one row of
d = H * dh features, so the layer reshapes x to (..., d), runs the row-wise forward and backward
(either backend), and reshapes y, dx and the parameter gradients back.

(Not the same thing: Cohere's q/k LayerNorm has an (H, dh) weight but takes its statistics per head,
over dh only; that is ``LayerNorm(dh)`` on (..., H, dh) with the weight (H, dh) applied afterwards.)
"""
from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from ._checks import check_int, fail


def check_normalized_shape(value, name: str = "d") -> tuple[int, ...]:
    """An int d (one axis) or a non-empty tuple of ints >= 1 (several trailing axes)."""
    if isinstance(value, Integral) and not isinstance(value, (bool, np.bool_)):
        return (check_int(name, value),)
    if not isinstance(value, (tuple, list)) or not value:
        fail(TypeError, name, "an integer >= 1 or a non-empty tuple of integers (torch's normalized_shape)", value,
             f"pass {name}=512 for the last axis, or {name}=(num_heads, head_dim) for the last two.")
    return tuple(check_int(f"{name}[{i}]", v) for i, v in enumerate(value))


def check_trailing_axes(layer: str, x: np.ndarray, shape: tuple[int, ...], arg: str = "d") -> None:
    """x must end with the axes ``shape``."""
    n = len(shape)
    if x.ndim < n or x.shape[x.ndim - n:] != shape:
        want = shape[0] if n == 1 else shape
        axes = ", ".join(map(str, shape))
        if x.ndim == 0:             # a scalar: no axis holds the features, and no d= would fit it
            last = f"1 axis, the last of size {want}" if n == 1 else f"{n} axes, the last {n} of shape {want}"
            fail(ValueError, "x", f"an array of shape (..., {axes}) for {layer}: at least {last}", x,
                 f"pass x with the features on its last {'axis' if n == 1 else f'{n} axes'}, shape (..., {axes}) "
                 f"(one row: shape ({axes}{',' if n == 1 else ''})); a 0-d scalar has no feature axis.")
        got = x.shape[-1] if n == 1 else x.shape[max(x.ndim - n, 0):]
        fail(ValueError, "x", f"trailing axes {shape} ({arg}={want}) for {layer}", x,
             f"pass x with shape (..., {axes}), or build the layer with {arg}={got}.")


def rows_of(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(..., *shape) -> (..., prod(shape)): each normalized block as one row (a view when it can be)."""
    if len(shape) == 1:                 # one trailing axis: the array is its own rows (this runs on every call)
        return a
    return a.reshape(a.shape[:a.ndim - len(shape)] + (math.prod(shape),))
