r"""The DyT kernels (scratchnorm/dyt.py has the math): y = tanh(alpha x) w + b, elementwise.

Forward: one pass, in float64, rounded once at the store, as the reference.

Backward: t = tanh(alpha x) is computed again from x (the cache keeps x, not
t: one array less to hold, as the row-wise kernels keep only statistics). Per
element: dz = dy w (1 - t^2), dx = alpha dz. The three sums over rows (dweight:
dy t, dbias: dy, and dalpha: dz x) are kept per column in per-chunk partials
(``_jit.n_chunks``), which vectorize like the row-wise dweight; the chunks are
then added in a fixed order, and dalpha's columns summed in order, so the bits
do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._op_checks import dyt_args
from ._buffers import affine_vector, backward_rows, finish_rows, forward_rows, n_rows
from ._jit import n_chunks, run_twin, serial_and_parallel

_KIND = "dyt"


def _dyt_forward_rows(x, alpha, w, b, y):
    """y = tanh(alpha x) w + b; x, y (rows, d); w, b (d,) float64."""
    for r in prange(x.shape[0]):
        xr, yr = x[r], y[r]
        for j in range(xr.shape[0]):
            yr[j] = np.tanh(alpha * np.float64(xr[j])) * w[j] + b[j]


def _dyt_backward_rows(dy, x, alpha, w, dx, part, sums):
    """dx (rows, d); part (chunks, 3, d): per-chunk column sums of dy t, dy and dz x;
    sums (4, d): their totals over the chunks in order, then in sums[3, 0] dalpha."""
    rows, d = x.shape
    chunks = part.shape[0]
    for c in prange(chunks):
        dw, db, da = part[c, 0], part[c, 1], part[c, 2]
        dw[:] = 0.0
        db[:] = 0.0
        da[:] = 0.0
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            dyr, xr, dxr = dy[r], x[r], dx[r]
            for j in range(d):
                g = np.float64(dyr[j])
                xj = np.float64(xr[j])
                t = np.tanh(alpha * xj)
                dz = g * w[j] * (1.0 - t * t)
                dxr[j] = alpha * dz
                dw[j] += g * t
                db[j] += g
                da[j] += dz * xj
    for i in range(3):
        total = sums[i]
        total[:] = 0.0
        for c in range(chunks):                         # fixed order: chunk 0, 1, 2, ...
            total += part[c, i]
    dalpha = 0.0
    for j in range(d):
        dalpha += sums[2, j]
    sums[3, 0] = dalpha


_FORWARD = serial_and_parallel(_dyt_forward_rows)
_BACKWARD = serial_and_parallel(_dyt_backward_rows)


def dyt_forward(x, alpha, weight=None, bias=None, *, out=None):
    """y = tanh(alpha x) weight + bias, numba kernels. Same arguments and result as
    ``scratchnorm.dyt_forward``; the cache is this backend's."""
    x, a, alpha_like = dyt_args(x, alpha, weight, bias)
    d = x.shape[-1]
    rows = x.size // d if d else n_rows(x.shape)
    xk, y2, y_new = forward_rows(x, out, rows)
    if x.size:
        run_twin(_FORWARD, x.size, rows, xk, a, affine_vector(weight, d, 1.0), affine_vector(bias, d, -0.0), y2)
    cache = {"fast": _KIND, "x": xk, "alpha": a, "alpha_like": alpha_like, "weight": weight,
             "bias": bias, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y2, y_new, x.shape, x.dtype, out), cache


def dyt_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "alpha", "weight", "bias"} (those that exist), as ``scratchnorm.dyt_backward``."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, _KIND, "dyt_forward")
    rows, d = xk.shape
    chunks = n_chunks(rows) if rows else 1
    part = np.empty((chunks, 3, d))
    sums = np.zeros((4, max(d, 1)))                     # (with no element: all sums 0)
    if xk.size:
        with np.errstate(invalid="ignore"):      # (NUMBA_DISABLE_JIT: NumPy scalars warn at 0 * inf, as the
            run_twin(_BACKWARD, xk.size, rows, dyk, xk, cache["alpha"],       # reference's arrays would)
                     affine_vector(cache["weight"], d, 1.0), dx2, part, sums)
    shape, dtype = cache["alpha_like"]
    grads = {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
             "alpha": np.full(shape, sums[3, 0], dtype=dtype)}
    for i, name in enumerate(("weight", "bias")):
        if cache[name] is not None:
            grads[name] = sums[i, :d].astype(cache[name].dtype)
    return grads
