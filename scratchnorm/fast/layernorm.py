r"""LayerNorm's numba kernels: what ``scratchnorm.LayerNorm(d)`` runs by default.

For each row x of d features (layernorm.py derives the backward; the names are its):

    forward    mean  = sum(x) / d                         float64 (stats.row_mean)
               var   = sum((x - mean)^2) / d                  two passes, never E[x^2] - E[x]^2
               rstd  = 1 / sqrt(var + eps)
               y     = (x - mean) * rstd * weight + bias
    backward   g     = dy * weight,   x_hat = (x - mean) * rstd
               dx    = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
               dweight = sum over rows of dy * x_hat,   dbias = sum over rows of dy

The mean(g) term is the gradient through the mean; sum(x_hat) = 0 is why the
two paths through the statistics fold into one line (layernorm.py). The sums
are float64 (stats.py); dweight and dbias are summed per fixed chunk of rows
(in x's dtype over 16 rows at a time, then in float64) and the chunks added in
order, so the bits do not depend on the thread count.

The kernels are bench/naive.py's twenty-line kernels plus one guard a row
(float32.row_fits, float32.dx_fits): a row whose scalars would not survive x's
dtype runs the same line in float64, in a function of its own (a call, so that
the common row's loop is the only one inlined: NOTES.md, session 12). A row whose
variance overflows float64 (|x - mean| > ~1e154) is one of those: its rstd is
taken from the row scaled (stats.rstd_of_row).

Precision. For float32 x, the weight and bias (float32 or float64) are rounded to
float32 once per call (float32.narrowed; a weight float32 cannot hold sends every
row to float64 with the weight as given, as a row's guard sends one row), and
the elementwise loops run in float32 from the float64 row scalars
rounded once. The mean is split as mean = hi + lo, both float32, and x - mean
computed as (x - hi) - lo: x - hi is exact when x is near hi (Sterbenz), so a
large mean costs no precision. Counting roundings (u = 2^-24, to first order):
|y - y_exact| <= u (7 |x_hat * weight| + 2 |bias|), and in dx the g term passes
through 6 roundings, mean(g) through 5 and x_hat * mean(g x_hat) through 9:
|dx - dx_exact| <= u rstd (6 |g| + 5 |mean(g)| + 9 |x_hat * mean(g x_hat)|), plus
what the rounded g does to the two sums: g = dy * weight is summed as the loop
computes it, in float32 (the weight's rounding and the product's: 2u mean|g| and
2u mean|g x_hat|). dweight sums dy * x_hat with x_hat as the loop computed it in
float32 (4 roundings: lo, rstd, the subtraction of lo, the product), the product
rounded once more, and dbias sums dy, both in float32 over at most 16 rows at a
time (15 roundings of a running sum), each such partial sum added to its chunk's
float64 sum (chunks.py): |dweight_j - exact| <= 20u sum over rows of
|dy_ij x_hat_ij| and |dbias_j - exact| <= 15u sum over rows of |dy_ij| (to first
order). Where a product falls below float32's
normal range the error is absolute instead, of the order of 2^-149 times the
factors that follow. float64 and float16 input run in float64.
tests/fast/test_kernels.py checks these bounds element by element against the
float64 reference.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import layer_norm_args
from .variants import LAYER_NORM, prepare_backward
from .variants import layer_norm_forward as general_forward
from ._buffers import affine_grads, backward_rows, finish_rows, forward_rows, kernel_vector
from ._buffers import plain_output, plain_rows
from ._jit import jit, run_by_size, serial_and_prange
from .chunks import ROWS_PER_SUM, n_chunks
from ._stream import FORWARD_STREAMED, decide
from .float32 import bounded, dx_fits, narrowed, row_fits, split_mean
from .stats import MEAN, RSTD, VAR, add_chunks, add_partial, layer_norm_row_stats, row_sum_g, rstd_of_row, sum_g


def layer_norm_forward_kernel(x, weight, bias, eps, y, stats):
    """x, y: (N, d); weight, bias: (d,) float32 or float64; stats: (3, N) float64, kept for the backward."""
    N, d = x.shape
    (w, w_fits), (b, b_fits) = narrowed(weight, x), narrowed(bias, x)    # in x's dtype, once (float32.py)
    affine_fits = w_fits and b_fits and bounded(w.reshape((1, d)), b.reshape((1, d)), d)  # x_hat w + b fits
    for i in prange(N):
        mean, var, rstd = layer_norm_row_stats(x, i, eps, stats)             # float64 (stats.py)
        hi, lo = split_mean(mean, x)
        if affine_fits and row_fits(x, d, var, rstd, lo):                    # y in x's dtype (float32.py) ...
            T = x.dtype.type
            lo_x, r = T(lo), T(rstd)                                          # in x's dtype
            for j in range(d):
                y[i, j] = ((x[i, j] - hi) - lo_x) * r * w[j] + b[j]
        else:                                                                 # ... or in float64
            affine_row_float64(x, i, eps, weight, bias, y, stats)


@jit
def affine_row_float64(x, i, eps, weight, bias, y, stats):
    """y = (x - mean) * rstd * weight + bias along row i, in float64 (rstd from the row scaled where var
    overflowed)."""
    mean = stats[MEAN, i]
    rstd = rstd_of_row(x, i, mean, eps, stats)
    for j in range(x.shape[1]):
        y[i, j] = (x[i, j] - mean) * rstd * weight[j] + bias[j]


def layer_norm_backward_kernel(dy, x, weight, stats, dx, parts):
    """dy, x, dx: (N, d); weight: (d,) float32 or float64; stats: (3, N); parts: (chunks + 1, 2, d) float64.
    Row c < chunks gets chunk c's dweight and dbias; the last row their total, added in chunk order (the
    same bits on any thread count)."""
    N, d = x.shape
    chunks = parts.shape[0] - 1
    w, w_fits = narrowed(weight, x)                # the weight in x's dtype, once (float32.py)
    for c in prange(chunks):                       # fixed chunks of rows (chunks.py)
        part = parts[c]                            # (2, d): this chunk's dweight, dbias
        part[:] = 0.0
        dwb = np.zeros((2, d), x.dtype)            # in x's dtype: at most ROWS_PER_SUM rows (chunks.py)
        i0 = c * N // chunks
        for i in range(i0, (c + 1) * N // chunks):
            mean, rstd = stats[MEAN, i], stats[RSTD, i]
            sg, sgx = row_sum_g(dy, x, w, i, mean)
            mean_g, mean_gx = sg / d, sgx * rstd / d                     # mean(g), mean(g * x_hat)
            hi, lo = split_mean(mean, x)
            if w_fits and dx_fits(x, d, stats[VAR, i], rstd, lo, mean_g, mean_gx):  # dx in x's dtype ...
                T = x.dtype.type
                lo_x, r, a, k = T(lo), T(rstd), T(mean_g), T(mean_gx)      # in x's dtype
                for j in range(d):
                    x_hat = ((x[i, j] - hi) - lo_x) * r
                    dx[i, j] = r * (dy[i, j] * w[j] - a - x_hat * k)
                    dwb[0, j] += dy[i, j] * x_hat
                    dwb[1, j] += dy[i, j]
            else:                                                         # ... or in float64
                dx_row_float64(dy, x, i, weight, mean, rstd, dx, part)
            if (i - i0) % ROWS_PER_SUM == ROWS_PER_SUM - 1:
                add_partial(dwb.reshape(2 * d), part.reshape(2 * d))
        add_partial(dwb.reshape(2 * d), part.reshape(2 * d))
    d2 = 2 * d
    add_chunks(parts[:chunks].reshape((chunks, d2)), parts[chunks].reshape(d2))


@jit
def dx_row_float64(dy, x, i, weight, mean, rstd, dx, part):
    """Row i's dx in float64, its dweight and dbias terms added to ``part``; mean(g) and mean(g x_hat)
    summed again from g in float64 (the row's sums in x's dtype may have overflowed)."""
    d = x.shape[1]
    sg, sgx = sum_g(dy[i], x[i], weight, mean)
    mean_g, mean_gx = sg / d, sgx * rstd / d
    for j in range(d):
        x_hat = (x[i, j] - mean) * rstd
        dx[i, j] = rstd * (np.float64(dy[i, j]) * np.float64(weight[j]) - mean_g - x_hat * mean_gx)
        part[0, j] += np.float64(dy[i, j]) * x_hat
        part[1, j] += np.float64(dy[i, j])


LAYER_NORM_FORWARD = serial_and_prange(layer_norm_forward_kernel)      # (serial, prange) kernels (_jit.py)
LAYER_NORM_BACKWARD = serial_and_prange(layer_norm_backward_kernel)


def layer_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None, stream=None):
    """LayerNorm over the last axis, numba kernels. Same arguments and result as
    ``scratchnorm.layer_norm_forward``; the cache is this backend's. ``stream``: None or False writes y with
    plain stores, True with non-temporal ones (_stream.py: the same bits)."""
    xk = plain_rows(x, eps, weight, bias) if stream is None else None  # (N, d), or None: the long way
    y = None if xk is None else plain_output(xk, x, out)              # (N, d)
    if y is None:                                                     # the long way: the checks, then
        x, eps = layer_norm_args(x, weight, bias, eps)
        d = x.shape[-1]
        if x.size == 0:                                               # no kernel to run (variants.py)
            return general_forward(x, weight, bias, eps=eps, out=out, stream=stream)
        xk, y, y_new = forward_rows(x, out, x.size // d)              # (N, d)
        w, b = kernel_vector(weight, d, 1.0), kernel_vector(bias, d, -0.0)  # (d,) float32 or float64
    else:                                                             # (plain_rows checked them)
        d, y_new = xk.shape[1], out is None
        w = kernel_vector(None, d, 1.0) if weight is None else weight
        b = kernel_vector(None, d, -0.0) if bias is None else bias
    stats = np.empty((3, xk.shape[0]))                                # (3, N): MEAN, VAR, RSTD
    if decide(stream):
        run_by_size(FORWARD_STREAMED, xk.size, n_chunks(xk.shape[0]), xk, w, b, eps, y, stats, True)
    else:
        run_by_size(LAYER_NORM_FORWARD, xk.size, xk.shape[0], xk, w, b, eps, y, stats)
    cache = {"made_by": LAYER_NORM, "fast": "layernorm", "x": xk, "stats": stats,
             "weight": weight, "bias": bias, "w": w, "dtype": x.dtype, "shape": x.shape}
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
    chunks = n_chunks(N)
    parts = np.empty((chunks + 1, 2, d))                             # per chunk, then the total
    run_by_size(LAYER_NORM_BACKWARD, xk.size, chunks, dyk, xk, cache["w"], cache["stats"], dx, parts)
    grads = {"x": finish_rows(dx, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out")}
    grads.update(affine_grads(parts[chunks], cache))
    return grads
