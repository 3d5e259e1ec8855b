r"""Conv1d, a 1-D convolution written out with its backward; Flatten; OverChannels, a norm over the channels
of a 1-D or 2-D convolution's output.

Shapes (channels first, as PyTorch's Conv1d and BatchNorm1d): x (N, C_in, L), weight (C_out, C_in, K),
bias (C_out,), y (N, C_out, L_out) with stride S, zero padding P on each side and

    L_out = (L + 2P - K) // S + 1.

Forward (a cross-correlation, as in every framework: the kernel is not flipped). With xp = x padded by P
zeros on each side of its length,

    y[n, o, t] = bias[o] + sum_{c, k} weight[o, c, k] xp[n, c, S t + k].

As one matrix product ("im2col"): gather the windows X[n, t, (k, c)] = xp[n, c, S t + k], (N L_out, K C_in),
and W[o, (k, c)] = weight[o, c, k], (C_out, K C_in); then Y = X W^T + bias, Y (N L_out, C_out) read as y. (The
columns run over the taps k first and the channels c within a tap: with x held channels last, (N, L + 2P, C_in),
one window is then K consecutive rows of channels, and the gather copies whole rows.)

Backward, with g = dL/dy (N, C_out, L_out) and G = g as (N L_out, C_out). y is linear in each of bias,
weight and x, so each derivative is the same sum with the other factor kept:

    dbias[o]         = sum_{n, t} g[n, o, t]                                   (G summed over rows)
    dweight[o, c, k] = sum_{n, t} g[n, o, t] xp[n, c, S t + k]                 (G^T X, reshaped)
    dxp[n, c, j]     = sum_{o, t, k: S t + k = j} g[n, o, t] weight[o, c, k]   (dX = G W, scattered back)
    dx               = dxp[:, :, P : P + L]                                    (the padding is no input: dropped)

Why dx simplifies to a scatter-add: the forward only *reads* xp through the gather X = xp[windows], so the
backward of the gather sends each entry of dX back to the position it was read from and adds up what
arrives at the same position ("col2im"): position j is read by every window t and tap k with S t + k = j.
For each tap k that is one strided slice, dxp[n, c, k + S t] += dX[n, t, (k, c)], so the loop runs over the
K taps, not over positions.

Flatten: (N, C, L) -> (N, C L) for the classifier on top; its backward reshapes back.

OverChannels(norm): a normalization applied over the channels of a convolution's output, (N, C, L) from
Conv1d or (N, C, H, W) from Conv2d (conv2d.py). A channels-first norm gets x as it is: BatchNorm normalizes
each channel over the batch and every position, GroupNorm each group of channels of one example over every
position (with one group: the whole example over (C, H, W); with C groups: each channel over (H, W)). A
row-wise norm (LayerNorm, RMSNorm, pRMSNorm: over the last axis) gets x with the channels moved last, so it
normalizes the C channels at each position, and its output is moved back.
"""
from __future__ import annotations

import numpy as np

from .._checks import check_int, fail
from ..dtypes import as_float_array
from ..layer import Layer
from .container import Container
from .norms import CHANNELS_FIRST, make_norm


def conv_out_length(L: int, K: int, stride: int, padding: int) -> int:
    """L_out = (L + 2 padding - K) // stride + 1, the number of windows."""
    return (L + 2 * padding - K) // stride + 1


def _windows(L_out: int, K: int, stride: int) -> np.ndarray:
    """(L_out, K) indices into the padded length: window t, tap k reads position stride t + k."""
    return stride * np.arange(L_out)[:, None] + np.arange(K)[None, :]


def conv1d_forward(x, weight, bias=None, *, stride: int = 1, padding: int = 0):
    """y[n, o, t] = bias[o] + sum_{c, k} weight[o, c, k] xp[n, c, stride t + k]. Returns ``(y, cache)``."""
    x = as_float_array(x)
    if x.ndim != 3:
        fail(ValueError, "x", "an (N, C_in, L) array", x, "pass a batch of 1-D signals, e.g. x[:, None, :] for one "
             "channel.")
    C_out, C_in, K = weight.shape
    N, C, L = x.shape
    if C != C_in:
        fail(ValueError, "x", f"{C_in} channels on axis 1 (weight is {weight.shape})", x,
             f"pass x of shape (N, {C_in}, L), or build Conv1d({C}, ...).")
    L_out = conv_out_length(L, K, stride, padding)
    if L_out < 1:
        fail(ValueError, "x", f"a length L with L + 2 * {padding} >= {K} (the kernel)", x,
             "pass longer signals, or use a smaller kernel or more padding.")
    xt = np.zeros((N, L + 2 * padding, C_in), dtype=x.dtype)                  # (N, L + 2P, C_in): padded,
    xt[:, padding:padding + L] = x.transpose(0, 2, 1)                          # channels last
    X = xt[:, _windows(L_out, K, stride)].reshape(N * L_out, K * C_in)        # (N L_out, K C_in), columns (k, c)
    W = weight.transpose(0, 2, 1).reshape(C_out, K * C_in)                    # (C_out, K C_in), columns (k, c)
    Y = X @ W.T                                                               # (N L_out, C_out)
    if bias is not None:
        Y = Y + bias
    y = Y.reshape(N, L_out, C_out).transpose(0, 2, 1)                         # (N, C_out, L_out)
    cache = {"X": X, "W": W, "weight": weight, "bias": bias, "shape": (N, L, L_out), "stride": stride,
             "padding": padding, "dtype": x.dtype}
    return np.ascontiguousarray(y, dtype=x.dtype), cache


def conv1d_backward(dy, cache):
    """dbias = sum of g; dweight = G^T X; dx = the scatter-add of dX = G W over the windows. Returns
    {"x", "weight", "bias"}."""
    dy = as_float_array(dy, "dy")
    X, W, weight, bias, (N, L, L_out) = cache["X"], cache["W"], cache["weight"], cache["bias"], cache["shape"]
    stride, padding = cache["stride"], cache["padding"]
    C_out, C_in, K = weight.shape
    G = dy.transpose(0, 2, 1).reshape(N * L_out, C_out)                       # (N L_out, C_out)
    dW = (G.T @ X).reshape(C_out, K, C_in)                                    # columns (k, c), as W
    grads = {"weight": dW.transpose(0, 2, 1).astype(weight.dtype)}            # (C_out, C_in, K)
    if bias is not None:
        grads["bias"] = G.sum(axis=0).astype(bias.dtype, copy=False)
    dX = (G @ W).reshape(N, L_out, K, C_in)                                   # (N, L_out, K, C_in)
    dxt = np.zeros((N, L + 2 * padding, C_in), dtype=dX.dtype)                # (N, L + 2P, C_in)
    end = stride * (L_out - 1) + 1
    for k in range(K):                                                        # col2im, one tap at a time
        dxt[:, k:k + end:stride] += dX[:, :, k]
    grads["x"] = np.ascontiguousarray(dxt[:, padding:padding + L].transpose(0, 2, 1), dtype=cache["dtype"])
    return grads


class ConvLayer(Layer):
    """A convolution over ``SPATIAL`` axes (Conv1d: 1, conv2d.Conv2d: 2), the functions ``FORWARD`` and
    ``BACKWARD`` doing the work: a square kernel of ``kernel_size`` taps along each axis, one stride and one
    padding. weight (C_out, C_in, K, ...) and bias (C_out,) ~ U(-1/sqrt(C_in K^SPATIAL), +that), as PyTorch;
    ``seed`` makes them reproducible. Matrix products have no numba kernel: the im2col product runs in
    NumPy's BLAS."""

    SPATIAL = 1
    FORWARD = BACKWARD = None          # set by each subclass: staticmethod(conv1d_forward), ...

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, *, seed=0,
                 backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.in_channels = check_int("in_channels", in_channels)
        self.out_channels = check_int("out_channels", out_channels)
        self.kernel_size = check_int("kernel_size", kernel_size)
        self.stride = check_int("stride", stride)
        self.padding = check_int("padding", padding, minimum=0)
        rng = np.random.default_rng(seed)
        taps = (self.kernel_size,) * self.SPATIAL
        bound = 1.0 / np.sqrt(self.in_channels * self.kernel_size ** self.SPATIAL)
        self._add_param("weight", rng.uniform(-bound, bound, (self.out_channels, self.in_channels, *taps)))
        if bias:
            self._add_param("bias", rng.uniform(-bound, bound, self.out_channels))

    def _forward(self, x):
        return self.FORWARD(x, self.params["weight"], self.params.get("bias"), stride=self.stride,
                            padding=self.padding)

    def _backward(self, dy, cache):
        return self.BACKWARD(dy, cache)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, bias={'bias' in self.params}")


class Conv1d(ConvLayer):
    """Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True): input (N, C_in, L)
    (ConvLayer has the rest)."""

    SPATIAL = 1
    FORWARD, BACKWARD = staticmethod(conv1d_forward), staticmethod(conv1d_backward)


class Flatten(Layer):
    """Flatten(): (N, ...) -> (N, prod(...)); the backward reshapes the gradient back."""

    def _forward(self, x):
        return x.reshape(x.shape[0], -1), x.shape

    def _backward(self, dy, shape):
        return {"x": dy.reshape(shape)}


class OverChannels(Container):
    """OverChannels(norm, channels): the normalization ``norm`` (a name or factory, see norms.py) over the
    channels of (N, C, *spatial): a channels-first norm (BatchNorm, GroupNorm) as it is, a row-wise norm at
    each position with the channels moved last. Its parameters are "norm.weight" (and "norm.bias")."""

    def __init__(self, norm, channels, *, backend="numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.channels = check_int("channels", channels)
        layer = make_norm(norm, self.channels, backend=backend, dtype=dtype)
        if layer is None:
            fail(ValueError, "norm", "a normalization (a name other than 'none', or a factory)", norm,
                 "leave the OverChannels layer out for no normalization.")
        self.add("norm", layer)
        self.channels_first = isinstance(layer, CHANNELS_FIRST)

    def _check_input(self, x):
        if x.ndim < 3 or x.shape[1] != self.channels:
            fail(ValueError, "x", f"an (N, {self.channels}, *spatial) array: channels on axis 1, at least one "
                 "spatial axis", x, "pass a convolution's output, (N, C, L) or (N, C, H, W).")

    def _forward(self, x):
        norm = self.children["norm"]
        if self.channels_first:
            return norm.forward(x), ()
        y = norm.forward(np.ascontiguousarray(np.moveaxis(x, 1, -1)))           # (N, *spatial, C): channels last
        return np.ascontiguousarray(np.moveaxis(y, -1, 1)), ()

    def _backward(self, dy, cache):
        norm = self.children["norm"]
        if self.channels_first:
            return self._with_child_grads(norm.backward(dy))
        dx = norm.backward(np.ascontiguousarray(np.moveaxis(dy, 1, -1)))
        return self._with_child_grads(np.ascontiguousarray(np.moveaxis(dx, -1, 1)))
