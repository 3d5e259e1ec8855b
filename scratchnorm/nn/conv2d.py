r"""Conv2d, a 2-D convolution written out with its backward, the image case of Conv1d (conv.py).

Shapes (channels first, as PyTorch's Conv2d and BatchNorm2d): x (N, C_in, H, W), weight (C_out, C_in, K, K),
bias (C_out,), y (N, C_out, H_out, W_out) with a square kernel K, one stride S and one zero padding P for
both axes, and

    H_out = (H + 2P - K) // S + 1,    W_out = (W + 2P - K) // S + 1.

Forward (a cross-correlation, as in every framework: the kernel is not flipped). With xp = x padded by P
zeros on each side of both spatial axes,

    y[n, o, i, j] = bias[o] + sum_{c, a, b} weight[o, c, a, b] xp[n, c, S i + a, S j + b]

(a runs over the kernel's rows, b over its columns). As one matrix product ("im2col"): gather the windows

    X[(n, i, j), (a, b, c)] = xp[n, c, S i + a, S j + b]         (N H_out W_out, K K C_in)
    Wmat[o, (a, b, c)]      = weight[o, c, a, b]                   (C_out, K K C_in)

then Y = X Wmat^T + bias, Y (N H_out W_out, C_out) read as y. As in Conv1d the columns run over the taps (a, b)
first and the channels c within a tap: with x held channels last, one tap of one window is C_in consecutive
numbers, and the gather copies whole rows of channels.

Backward, with g = dL/dy (N, C_out, H_out, W_out) and G = g as (N H_out W_out, C_out). y is linear in each of
bias, weight and x, so each derivative is the forward's sum with the other factor kept:

    dbias[o]            = sum_{n, i, j} g[n, o, i, j]                                      (G summed over rows)
    dweight[o, c, a, b] = sum_{n, i, j} g[n, o, i, j] xp[n, c, S i + a, S j + b]           (G^T X, reshaped)
    dxp[n, c, r, s]     = sum_{o, i, j, a, b: S i + a = r, S j + b = s} g[n, o, i, j] weight[o, c, a, b]
                                                                                          (dX = G Wmat, scattered)
    dx                  = dxp[:, :, P : P + H, P : P + W]           (the padding is no input: dropped)

Why dx is a scatter-add over the taps ("col2im"): the forward only *reads* xp, through the gather
X = xp[windows], and the backward of a gather sends each entry of dX back to the position it was read from,
adding what arrives at the same position. Position (r, s) is read by every window (i, j) and tap (a, b) with
S i + a = r and S j + b = s; for one tap (a, b) the positions (S i + a, S j + b) over all windows form one
strided block of the padded image, so

    dxp[n, c, a + S i, b + S j] += dX[(n, i, j), (a, b, c)]      for each of the K K taps,

a loop over the K^2 taps, each a vectorized addition over all windows, never over positions.

The code does both ends with one precomputed index per shape (``_taps``, made once): the gather is one
``np.take`` of each padded image's flat positions, and for float64 the scatter-add is one ``np.bincount`` over
the positions listed tap by tap, which adds what arrives at a position in the order of the loop above (taps
(a, b) in order, from 0), so it gives the loop's bits, in less time than the broadcast index and the tap loop
(lessons/NOTES.md, lesson 25's sizes). float32 keeps the tap loop, which adds in float32 as the dtype policy says.

The cost: X has K^2 C_in columns, K^2 times the input's numbers, and the product is (N H_out W_out) x
(K^2 C_in) x C_out multiply-adds, NumPy's BLAS. Matrix products have no numba kernel here.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._checks import fail
from ..dtypes import as_float_array
from .conv import ConvLayer, conv_out_length


def _windows(n_out: int, K: int, stride: int) -> np.ndarray:
    """(n_out, K) indices along one padded axis: window i, tap a reads position stride i + a."""
    return stride * np.arange(n_out)[:, None] + np.arange(K)[None, :]


@lru_cache(maxsize=32)
def _taps(Hp: int, Wp: int, C_in: int, K: int, stride: int, H_out: int, W_out: int):
    """(gather, scatter): flat positions into one padded image held channels last, (Hp Wp C_in,), of what window
    (i, j) reads at tap (a, b) and channel c, (S i + a) Wp C_in + (S j + b) C_in + c. gather in X's order
    (i, j, a, b, c), scatter tap by tap (a, b, i, j, c). Made once per shape, read-only."""
    rows, cols = _windows(H_out, K, stride), _windows(W_out, K, stride)               # (H_out, K), (W_out, K)
    at = (rows[:, None, :, None] * Wp + cols[None, :, None, :])[..., None] * C_in + np.arange(C_in)
    gather, scatter = at.reshape(-1), at.transpose(2, 3, 0, 1, 4).reshape(-1)        # (H_out W_out K K C_in,)
    gather.flags.writeable = scatter.flags.writeable = False
    return gather, scatter


def _check_input(x, weight, padding):
    """x as (N, C_in, H, W) that the kernel fits; returns (N, H, W, H_out, W_out)-ready shapes or raises."""
    C_out, C_in, K, K2 = weight.shape
    if x.ndim != 4:
        fail(ValueError, "x", "an (N, C_in, H, W) array", x, "pass a batch of images, e.g. x[:, None] for "
             "one channel, or x[None] for one image.")
    if x.shape[1] != C_in:
        fail(ValueError, "x", f"{C_in} channels on axis 1 (weight is {weight.shape})", x,
             f"pass x of shape (N, {C_in}, H, W), or build Conv2d({x.shape[1]}, ...).")
    if min(x.shape[2:]) + 2 * padding < K:
        fail(ValueError, "x", f"height and width H, W with H + 2 * {padding} >= {K} and W + 2 * {padding} >= {K} "
             "(the kernel)", x, "pass larger images, or use a smaller kernel or more padding.")


def conv2d_forward(x, weight, bias=None, *, stride: int = 1, padding: int = 0):
    """y[n, o, i, j] = bias[o] + sum_{c, a, b} weight[o, c, a, b] xp[n, c, S i + a, S j + b].
    Returns ``(y, cache)``."""
    x = as_float_array(x)
    weight = np.asarray(weight)
    if weight.ndim != 4 or weight.shape[2] != weight.shape[3]:
        fail(ValueError, "weight", "a (C_out, C_in, K, K) array: a square kernel", weight,
             "pass a kernel of shape (C_out, C_in, K, K).")
    _check_input(x, weight, padding)
    C_out, C_in, K, _ = weight.shape
    N, _, H, W = x.shape
    H_out, W_out = conv_out_length(H, K, stride, padding), conv_out_length(W, K, stride, padding)
    xt = np.zeros((N, H + 2 * padding, W + 2 * padding, C_in), dtype=x.dtype)         # (N, H + 2P, W + 2P, C_in)
    xt[:, padding:padding + H, padding:padding + W] = x.transpose(0, 2, 3, 1)         # padded, channels last
    gather, _ = _taps(H + 2 * padding, W + 2 * padding, C_in, K, stride, H_out, W_out)
    X = np.take(xt.reshape(N, -1), gather, axis=1)                                   # (N, H_out W_out K K C_in)
    X = X.reshape(N * H_out * W_out, K * K * C_in)                                    # columns (a, b, c)
    Wmat = weight.transpose(0, 2, 3, 1).reshape(C_out, K * K * C_in)                  # (C_out, K K C_in), as X
    Y = X @ Wmat.T                                                                    # (N H_out W_out, C_out)
    if bias is not None:
        Y = Y + bias
    y = Y.reshape(N, H_out, W_out, C_out).transpose(0, 3, 1, 2)                       # (N, C_out, H_out, W_out)
    cache = {"X": X, "Wmat": Wmat, "weight": weight, "bias": bias, "shape": (N, H, W, H_out, W_out),
             "stride": stride, "padding": padding, "dtype": x.dtype}
    return np.ascontiguousarray(y, dtype=x.dtype), cache


def conv2d_backward(dy, cache):
    """dbias = sum of g; dweight = G^T X; dx = the scatter-add of dX = G Wmat over the K^2 taps.
    Returns {"x", "weight", "bias"}."""
    dy = as_float_array(dy, "dy")
    X, Wmat, weight, bias = cache["X"], cache["Wmat"], cache["weight"], cache["bias"]
    (N, H, W, H_out, W_out), S, P = cache["shape"], cache["stride"], cache["padding"]
    C_out, C_in, K, _ = weight.shape
    G = dy.transpose(0, 2, 3, 1).reshape(N * H_out * W_out, C_out)                    # (N H_out W_out, C_out)
    dW = (G.T @ X).reshape(C_out, K, K, C_in)                                         # columns (a, b, c), as Wmat
    grads = {"weight": dW.transpose(0, 3, 1, 2).astype(weight.dtype)}                 # (C_out, C_in, K, K)
    if bias is not None:
        grads["bias"] = G.sum(axis=0).astype(bias.dtype, copy=False)
    dX = (G @ Wmat).reshape(N, H_out, W_out, K, K, C_in)                              # (N, H_out, W_out, K, K, C_in)
    Hp, Wp = H + 2 * P, W + 2 * P
    if dX.dtype == np.float64:                                                        # col2im, taps in order
        _, scatter = _taps(Hp, Wp, C_in, K, S, H_out, W_out)
        at = (np.arange(N)[:, None] * (Hp * Wp * C_in) + scatter).reshape(-1)         # (N K K H_out W_out C_in,)
        dxt = np.bincount(at, weights=dX.transpose(0, 3, 4, 1, 2, 5).reshape(-1), minlength=N * Hp * Wp * C_in)
        dxt = dxt.reshape(N, Hp, Wp, C_in)                                            # (N, H + 2P, W + 2P, C_in)
    else:
        dxt = np.zeros((N, Hp, Wp, C_in), dtype=dX.dtype)                             # (N, H + 2P, W + 2P, C_in)
        end_h, end_w = S * (H_out - 1) + 1, S * (W_out - 1) + 1
        for a in range(K):                                                            # col2im, one tap at a time
            for b in range(K):
                dxt[:, a:a + end_h:S, b:b + end_w:S] += dX[:, :, :, a, b]
    dx = dxt[:, P:P + H, P:P + W].transpose(0, 3, 1, 2)                               # (N, C_in, H, W)
    grads["x"] = np.ascontiguousarray(dx, dtype=cache["dtype"])
    return grads


class Conv2d(ConvLayer):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True): input (N, C_in, H, W).

    A square kernel, one stride and one padding for both axes. weight and bias ~ U(-1/sqrt(C_in K^2),
    1/sqrt(C_in K^2)), as PyTorch; ``seed`` makes them reproducible. Matrix products run in NumPy's BLAS.
    """

    SPATIAL = 2
    FORWARD, BACKWARD = staticmethod(conv2d_forward), staticmethod(conv2d_backward)

    def _check_input(self, x):
        _check_input(x, self.params["weight"], self.padding)
