r"""LayerNorm's numba kernels: what ``scratchnorm.LayerNorm(d)`` runs by default.

For each row x of d features (layernorm.py derives the backward; the names are its):

    forward    mean  = x_0 + sum(x - x_0) / d                 exact for a constant row
               var   = sum((x - mean)^2) / d                  two passes, never E[x^2] - E[x]^2
               rstd  = 1 / sqrt(var + eps)                 (var overflowed, |x - mean| beyond ~1e154:
                                                         from the row scaled, variants.huge_row_rstd)
               y     = (x - mean) * rstd * weight + bias
    backward   g     = dy * weight,   x_hat = (x - mean) * rstd
               dx    = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
               dweight = sum over rows of dy * x_hat,   dbias = sum over rows of dy

The mean(g) term is the gradient through the mean; sum(x_hat) = 0 is why the
two paths through the statistics fold into one line (layernorm.py). The sums
are float64 (stats.py); dweight and dbias are summed per fixed chunk of rows
and the chunks added in order, so the bits do not depend on the thread count.

Precision. For float32 x, the weight and bias are rounded to float32 once per
call, and the elementwise loops run in float32 from the float64 row scalars
rounded once (float32.py says when a row may; a row that may not runs in
float64, with those same parameters). The mean is split as mean = hi + lo, both
float32, and x - mean computed as (x - hi) - lo: x - hi is exact when x is near
hi (Sterbenz), so a large mean costs no precision. Counting roundings (u = 2^-24,
to first order): |y - y_exact| <= u (7 |x_hat * weight| + 2 |bias|), and in dx
the g term passes through 6 roundings, mean(g) through 5 and x_hat * mean(g x_hat)
through 9: |dx - dx_exact| <= u rstd (6 |g| + 5 |mean(g)| + 9 |x_hat * mean(g x_hat)|),
plus what the rounded weight does to the two sums (u mean|g| and u mean|g x_hat|).
dweight sums dy * x_hat in float64 with x_hat as the loop computed it in float32 (4
roundings: lo, rstd, the subtraction of lo, the product), so |dweight_j - exact| <=
4u sum over rows of |dy_ij x_hat_ij| (to first order); dbias sums dy in float64.
Where a product falls below float32's normal range the error is absolute
instead, of the order of 2^-149 times the factors that follow. float64 and
float16 input run in float64. tests/fast/test_kernels.py checks these bounds
element by element against the float64 reference.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import layer_norm_args
from .variants import INSIDE, LAYER_NORM, huge_row_rstd, prepare_backward, prepare_forward
from .variants import layer_norm_forward as general_forward
from ._buffers import affine_vector, backward_rows, finish_rows, forward_rows, plain_output, plain_rows
from ._jit import jit, jit_inline, run_by_size, serial_and_prange
from .chunks import n_chunks
from ._stream import affine_row_streamed, decide, store_fence
from .float32 import bounded, fits, quarter_of_largest, row_fits, split_mean
from .stats import MEAN, RSTD, VAR, add_chunks, row_sum_dev, row_sum_g, row_sum_sq_dev


def layer_norm_forward_kernel(x, weight, bias, eps, y, mean, var, rstd, stream):
    """x, y: (N, d); weight, bias: (d,); mean, var, rstd: (N,) float64, kept for the backward. ``stream``:
    y is written with non-temporal stores (_stream.py), a fence ending each chunk of rows."""
    N, d = x.shape
    in_x_dtype = bounded(weight.reshape((1, d)), bias.reshape((1, d)), d)    # x_hat * w + b cannot overflow
    chunks = n_chunks(N)
    for c in prange(chunks):                       # fixed chunks of rows (chunks.py)
        for i in range(c * N // chunks, (c + 1) * N // chunks):
            shift = np.float64(x[i, 0])
            mean[i] = shift + row_sum_dev(x, i, shift) / d
            var[i] = row_sum_sq_dev(x, i, mean[i]) / d
            rstd[i] = 1.0 / np.sqrt(var[i] + eps)
            if var[i] == np.inf:                   # beyond float64's square (|x - mean| > ~1e154): on
                rstd[i] = huge_row_rstd(x[i], mean[i], eps, INSIDE)  # the row scaled (variants.py)
            T = x.dtype.type
            hi, lo = split_mean(mean[i], x)
            # y = ((x - hi) - lo) * rstd * weight + bias (_stream.py), in x's dtype (float32.py) ...
            in_x = in_x_dtype and row_fits(x, d, var[i], rstd[i], lo)
            if in_x and not stream:
                affine_row(x, i, hi, T(lo), T(rstd[i]), weight, bias, y)
            else:                                  # ... or streamed, or in float64
                affine_other_row(x, i, mean[i], rstd[i], weight, bias, y, in_x, stream)
        if stream:
            store_fence()                          # this chunk's streamed rows are visible


@jit_inline
def affine_row(x, i, hi, lo, rstd, weight, bias, y):
    """LayerNorm's forward line: y = ((x - hi) - lo) * rstd * weight + bias along row i, in the scalars'
    dtype (hi + lo = the mean). _stream.affine_row_streamed writes the same line with non-temporal stores."""
    for j in range(x.shape[1]):
        y[i, j] = ((x[i, j] - hi) - lo) * rstd * weight[j] + bias[j]


@jit
def affine_other_row(x, i, mean, rstd, weight, bias, y, in_x, stream):
    """Row i when it is not the kernel's common case (in x's dtype, ``in_x``, and not streamed): streamed
    in x's dtype, or in float64. A call, not inlined: with these loops inlined beside the common one,
    and row views instead of (x, i), LayerNorm's forward took 14.3 us at 64x512 where it now takes 12.2,
    and 369 where it takes 352 at 1024x1024 (one thread; NOTES.md, session 12)."""
    if stream and in_x:
        T = x.dtype.type
        hi, lo = split_mean(mean, x)
        affine_row_streamed(x[i], hi, T(lo), T(rstd), weight, bias, y[i])
    else:
        affine_row(x, i, mean, 0.0, rstd, weight, bias, y)


def layer_norm_backward_kernel(dy, x, weight, mean, var, rstd, dx, dwb, dwb_parts):
    """dy, x, dx: (N, d); weight: (d,); mean, var, rstd: (N,); dwb: (2, d) float64, dweight and dbias;
    dwb_parts: (chunks, 2, d) float64, their sums over each chunk of rows, added in chunk order at the end."""
    N, d = x.shape
    chunks = dwb_parts.shape[0]
    for c in prange(chunks):                       # fixed chunks of rows (chunks.py)
        dwb_c = dwb_parts[c]                       # this chunk's share of dweight, dbias
        dwb_c[:] = 0.0
        for i in range(c * N // chunks, (c + 1) * N // chunks):
            mean_g, mean_gx, in_x = row_coefficients(dy, x, weight, mean, var, rstd, i)
            if in_x:                               # dx in x's dtype (float32.py) ...
                T = x.dtype.type
                hi, lo = split_mean(mean[i], x)
                dx_row(dy, x, i, weight, hi, T(lo), T(rstd[i]), T(mean_g), T(mean_gx), dx, dwb_c, T)
            else:                                  # ... or in float64
                dx_row_float64(dy, x, i, weight, mean[i], rstd[i], mean_g, mean_gx, dx, dwb_c)
    add_chunks(dwb_parts.reshape((chunks, 2 * d)), dwb.reshape(2 * d))    # in chunk order: same bits


@jit_inline
def row_coefficients(dy, x, weight, mean, var, rstd, i):
    """Row i's (mean(g), mean(g * x_hat)), float64, and whether its dx may run in x's dtype (float32.py)."""
    d = x.shape[1]
    sg, sgx, sgg = row_sum_g(dy, x, weight, i, mean[i])
    mean_g = sg / d
    mean_gx = sgx * rstd[i] / d                    # mean(g * x_hat)
    lo = split_mean(mean[i], x)[1]
    in_x = (row_fits(x, d, var[i], rstd[i], lo) and fits(mean_g, x) and fits(mean_gx, x)
            and quarter_of_largest(np.sqrt(sgg), x))     # every |g| <= sqrt(sum g^2) (float32.py)
    return mean_g, mean_gx, in_x


@jit_inline
def dx_row(dy, x, i, weight, hi, lo, rstd, mean_g, mean_gx, dx, dwb, T):
    """dx of row i, computed in the type T (x's dtype, or float64); its dweight and dbias terms added."""
    for j in range(x.shape[1]):
        x_hat = ((T(x[i, j]) - hi) - lo) * rstd
        dx[i, j] = rstd * (T(dy[i, j]) * T(weight[j]) - mean_g - x_hat * mean_gx)
        dwb[0, j] += np.float64(dy[i, j]) * np.float64(x_hat)
        dwb[1, j] += np.float64(dy[i, j])


@jit
def dx_row_float64(dy, x, i, weight, mean, rstd, mean_g, mean_gx, dx, dwb):
    """dx_row in float64, for the rows the float32 guards turn away: a call, not inlined (as
    affine_other_row: the common row's loop stays the only one inlined)."""
    dx_row(dy, x, i, weight, mean, 0.0, rstd, mean_g, mean_gx, dx, dwb, np.float64)


LAYER_NORM_FORWARD = serial_and_prange(layer_norm_forward_kernel)      # (serial, prange) kernels (_jit.py)
LAYER_NORM_BACKWARD = serial_and_prange(layer_norm_backward_kernel)


def layer_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None, stream=None):
    """LayerNorm over the last axis, numba kernels. Same arguments and result as
    ``scratchnorm.layer_norm_forward``; the cache is this backend's. ``stream``: None or False writes y with
    plain stores, True with non-temporal ones (_stream.py: the same bits)."""
    xk = plain_rows(x, eps, weight, bias)                             # (N, d), or None: the long way
    y = None if xk is None else plain_output(xk, x, out)              # (N, d)
    if y is not None:
        d = xk.shape[1]
        y_new = out is None
        w, b = affine_vector(weight, d, 1.0, xk.dtype), affine_vector(bias, d, -0.0, xk.dtype)
    else:
        x, eps = layer_norm_args(x, weight, bias, eps)
        d = x.shape[-1]
        if x.size == 0:                                              # no kernel to run (variants.py)
            return general_forward(x, weight, bias, eps=eps, out=out, stream=stream)
        xk, y, y_new = forward_rows(x, out, x.size // d)             # (N, d)
        w, b = affine_vector(weight, d, 1.0, xk.dtype), affine_vector(bias, d, -0.0, xk.dtype)
        if not w.dtype == b.dtype == xk.dtype:                       # a weight float32 cannot hold (> 3.4e38):
            run, finish = prepare_forward(x, weight, bias, out, LAYER_NORM, center=True, groups=1, k=d, eps=eps,
                                          mode=INSIDE, stream=stream)
            run_by_size(*run)                                        # the variants' kernel (variants.py)
            return finish()
    stats = np.empty((3, xk.shape[0]))                               # (3, N): MEAN, VAR, RSTD
    stream = decide(stream)
    run_by_size(LAYER_NORM_FORWARD, xk.size, n_chunks(xk.shape[0]), xk, w, b, eps, y, stats[MEAN], stats[VAR],
                stats[RSTD], stream)
    cache = {"made_by": LAYER_NORM, "fast": "layernorm", "x": xk, "stats": stats,
             "weight": weight, "bias": bias, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y, y_new, x.shape, x.dtype, out), cache


def layer_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.layer_norm_backward``."""
    if isinstance(cache, dict) and cache.get("fast") == "rowwise":   # the variants' forward: their kernel
        run, finish = prepare_backward(dy, cache, dx_out, LAYER_NORM)
        if run is not None:
            run_by_size(*run)
        return finish()
    cache, dyk, xk, dx, dx_new = backward_rows(dy, cache, dx_out, LAYER_NORM)
    N, d = xk.shape
    stats = cache["stats"]
    dwb = np.empty((2, d))
    chunks = n_chunks(N)
    run_by_size(LAYER_NORM_BACKWARD, xk.size, chunks, dyk, xk, affine_vector(cache["weight"], d, 1.0, xk.dtype),
                stats[MEAN], stats[VAR], stats[RSTD], dx, dwb, np.empty((chunks, 2, d)))
    grads = {"x": finish_rows(dx, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out")}
    for i, name in enumerate(("weight", "bias")):
        if cache[name] is not None:
            grads[name] = dwb[i].astype(cache[name].dtype)
    return grads
