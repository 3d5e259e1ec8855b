r"""RMSNorm's numba kernels: what ``scratchnorm.RMSNorm(d)`` runs by default.

For each row x of d features (rmsnorm.py derives the backward; the names are its):

    forward    rstd  = 1 / sqrt(sum(x^2) / d + eps)            float64 sum (stats.rms_row_stats)
               y     = x * rstd * weight
    backward   g     = dy * weight,   x_hat = x * rstd
               mean_gx = mean(g * x_hat) = rstd * sum(g * x) / d   float64 sum (stats.row_sum_gx)
               dx    = rstd * (g - x_hat * mean_gx)
               dweight = sum over rows of dy * x_hat             per fixed chunk of rows (chunks.py)

No mean is subtracted, so LayerNorm's mean(g) term is absent. ``mean_gx`` is a
mean of g * x_hat, not of g * x * rstd^3: x_hat stays of order one however large or
small rstd is, so nothing overflows (rmsnorm.py). The backward also returns
d loss / d eps = sum over rows of sum(g * x_hat) * d log(rstd) / d eps
= sum over rows of -d * mean_gx * rstd^2 / 2, as the reference does.

The kernels are bench/naive.py's twenty-line kernels plus one guard a row
(float32.row_fits, float32.dx_fits): a row whose scalars would not survive x's
dtype runs the same line in float64, in a function of its own (a call, so that
the common row's loop is the only one inlined: NOTES.md, session 12). A row
beyond float64's square (|x| > ~1e154) is one of those: its rstd is taken from
the row scaled (stats.rstd_of_row).

Precision. Sums are float64. For float32 x, the weight (float32 or float64) is
rounded to float32 once per call (float32.narrowed: a weight float32 cannot hold,
|w| > 3.4e38, sends every row to float64 with the weight as given; so does a
row's guard, one row), and the elementwise loops run in float32 from the float64 row
scalars rounded once. Counting roundings (u = 2^-24, to first order):
y = x * rstd * weight passes through 4 (rstd, x * rstd, the weight, * weight),
so |y - y_exact| <= 4u |y_exact|; in dx = rstd * (g - x_hat * mean_gx), the g
term passes through 5 and the x_hat * mean_gx term through 7, so
|dx - dx_exact| <= u rstd (5 |g| + 7 |x_hat * mean_gx|), plus what the rounded g
does to the sum in mean_gx: g = dy * weight is summed as the loop computes it, in
float32 (the weight's rounding and the product's, 2u mean|g x_hat| of it). dweight
sums dy * x_hat in float64 with x_hat as the loop computed it in float32 (2
roundings: rstd, x * rstd), so |dweight_j - exact| <= 2u sum over rows of
|dy_ij x_hat_ij| (to first order). Where a product falls below float32's normal
range (x_hat ~ 1e-40 beside a weight of 1e30) the error is absolute instead, of
the order of 2^-149 times the factors that follow. float64 and float16 input run
in float64 (float16 widened on entry and rounded once at the end).
tests/fast/test_kernels.py checks these bounds element by element against the
float64 reference.

The other RMSNorms (eps outside or clamped, pRMSNorm's k, a bias, a learnable
eps, GroupRMSNorm) run the variants' kernels (variants.py); stream=True runs
_stream.py's forward.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import rms_norm_args
from .._checks import EPS_MODES
from .variants import RMS_NORM, prepare_backward, prepare_forward
from .variants import rms_norm_forward as general_forward
from ._buffers import backward_rows, finish_rows, forward_rows, kernel_vector, plain_output, plain_rows
from ._jit import jit, run_by_size, serial_and_prange
from .chunks import ROWS_PER_SUM, n_chunks
from ._stream import FORWARD_STREAMED, decide
from .float32 import dx_fits, narrowed, row_fits
from .stats import RSTD, add_chunks, add_partial, rms_row_stats, row_sum_gx, rstd_of_row, sum_gx


def rms_norm_forward_kernel(x, weight, eps, y, stats):
    """x, y: (N, d); weight: (d,) float32 or float64; stats: (3, N) float64, kept for the backward."""
    N, d = x.shape
    w, w_fits = narrowed(weight, x)                  # the weight in x's dtype, once (float32.py)
    for i in prange(N):
        ms, rstd = rms_row_stats(x, i, eps, stats)   # float64 (stats.py)
        if w_fits and row_fits(x, d, ms, rstd, 0.0):  # y in x's dtype (float32.py) ...
            r = x.dtype.type(rstd)
            for j in range(d):
                y[i, j] = x[i, j] * r * w[j]
        else:                                        # ... or in float64
            scale_row_float64(x, i, eps, weight, y, stats)


@jit
def scale_row_float64(x, i, eps, weight, y, stats):
    """y = x * rstd * weight along row i, in float64 (rstd from the row scaled where ms overflowed)."""
    rstd = rstd_of_row(x, i, 0.0, eps, stats)
    for j in range(x.shape[1]):
        y[i, j] = x[i, j] * rstd * weight[j]


def rms_norm_backward_kernel(dy, x, weight, stats, dx, parts):
    """dy, x, dx: (N, d); weight: (d,) float32 or float64; stats: (3, N); parts: (chunks + 1, d + 1) float64.
    Row c < chunks gets chunk c's sums, dweight (its first d columns) and d loss / d eps (its last); the last
    row, their total, added in chunk order (the same bits on any thread count)."""
    N, d = x.shape
    chunks = parts.shape[0] - 1
    w, w_fits = narrowed(weight, x)                  # the weight in x's dtype, once (float32.py)
    for c in prange(chunks):                         # fixed chunks of rows (chunks.py)
        part = parts[c]                              # (d + 1,): this chunk's dweight, d loss / d eps
        part[:] = 0.0
        dweight = np.zeros(d, x.dtype)               # in x's dtype: at most ROWS_PER_SUM rows (chunks.py)
        i0 = c * N // chunks
        for i in range(i0, (c + 1) * N // chunks):
            rstd = stats[RSTD, i]
            mean_gx = rstd * row_sum_gx(dy, x, w, i) / d              # mean(g * x_hat)
            if w_fits and dx_fits(x, d, 0.0, rstd, 0.0, 0.0, mean_gx):  # dx in x's dtype (float32.py) ...
                T = x.dtype.type
                r, k = T(rstd), T(mean_gx)
                for j in range(d):
                    x_hat = x[i, j] * r
                    dx[i, j] = r * (dy[i, j] * w[j] - x_hat * k)
                    dweight[j] += dy[i, j] * x_hat
            else:                                                       # ... or in float64
                mean_gx = dx_row_float64(dy, x, i, weight, rstd, dx, part)
            part[d] += -0.5 * d * mean_gx * rstd * rstd                 # d loss / d eps
            if (i - i0) % ROWS_PER_SUM == ROWS_PER_SUM - 1:
                add_partial(dweight, part)
        add_partial(dweight, part)
    add_chunks(parts[:chunks], parts[chunks])


@jit
def dx_row_float64(dy, x, i, weight, rstd, dx, part):
    """Row i's dx in float64, its dweight terms added to ``part``; returns its mean(g * x_hat), summed
    again from g in float64 (the row's sum in x's dtype may have overflowed)."""
    d = x.shape[1]
    mean_gx = rstd * sum_gx(dy[i], x[i], weight) / d
    for j in range(d):
        x_hat = x[i, j] * rstd
        dx[i, j] = rstd * (np.float64(dy[i, j]) * np.float64(weight[j]) - x_hat * mean_gx)
        part[j] += np.float64(dy[i, j]) * x_hat
    return mean_gx


RMS_NORM_FORWARD = serial_and_prange(rms_norm_forward_kernel)      # (serial, prange) kernels (_jit.py)
RMS_NORM_BACKWARD = serial_and_prange(rms_norm_backward_kernel)


def rms_norm_forward(x, weight=None, bias=None, *, eps=1e-6, eps_mode="inside", k=None, out=None, stream=None):
    """RMSNorm over the last axis, numba kernels. Same arguments and result as
    ``scratchnorm.rms_norm_forward``; the cache is this backend's. ``stream``: None or False writes y with
    plain stores, True with non-temporal ones (_stream.py: the same bits)."""
    common = bias is None and k is None and eps_mode == "inside" and stream is None
    xk = plain_rows(x, eps, weight) if common else None              # (N, d), or None: the long way
    y = None if xk is None else plain_output(xk, x, out)             # (N, d)
    if y is None:                                                    # the long way: the checks, then
        x, eps, k = rms_norm_args(x, weight, bias, eps, eps_mode, k)
        d = x.shape[-1]
        if x.size == 0 or not (eps_mode == "inside" and k == d and bias is None):
            return _variants_forward(x, weight, bias, eps, eps_mode, k, out, stream)
        xk, y, y_new = forward_rows(x, out, x.size // d)            # (N, d)
        w = kernel_vector(weight, d, 1.0)                            # (d,) float32 or float64
    else:                                                            # (plain_rows checked the weight)
        d, y_new = xk.shape[1], out is None
        w = kernel_vector(None, d, 1.0) if weight is None else weight
    stats = np.empty((3, xk.shape[0]))                               # (3, N): MEAN (0), VAR (ms), RSTD
    if decide(stream):
        run_by_size(FORWARD_STREAMED, xk.size, n_chunks(xk.shape[0]), xk, w, kernel_vector(None, d, -0.0), eps, y,
                    stats, False)
    else:
        run_by_size(RMS_NORM_FORWARD, xk.size, xk.shape[0], xk, w, eps, y, stats)
    cache = {"made_by": RMS_NORM, "fast": "rmsnorm", "x": xk, "stats": stats,
             "weight": weight, "w": w, "eps": eps, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y, y_new, x.shape, x.dtype, out), cache


def _variants_forward(x, weight, bias, eps, eps_mode, k, out, stream):
    """The RMSNorms of other knobs, and an empty x: variants.py."""
    if x.size == 0:
        return general_forward(x, weight, bias, eps=eps, eps_mode=eps_mode, k=k, out=out, stream=stream)
    run, finish = prepare_forward(x, weight, bias, out, RMS_NORM, center=False, groups=1, k=k, eps=eps,
                                  mode=EPS_MODES.index(eps_mode), stream=stream)
    run_by_size(*run)
    return finish()


def rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias", "eps"} (those that exist), as ``scratchnorm.rms_norm_backward``."""
    if isinstance(cache, dict) and cache.get("fast") == "rowwise":   # a variant's forward: its kernel (variants.py)
        run, finish = prepare_backward(dy, cache, dx_out, RMS_NORM)
        if run is not None:
            run_by_size(*run)
        return finish()
    cache, dyk, xk, dx, dx_new = backward_rows(dy, cache, dx_out, RMS_NORM)
    N, d = xk.shape
    weight = cache["weight"]
    chunks = n_chunks(N)
    parts = np.empty((chunks + 1, d + 1))                            # per chunk, then the total
    run_by_size(RMS_NORM_BACKWARD, xk.size, chunks, dyk, xk, cache["w"], cache["stats"], dx, parts)
    grads = {"x": finish_rows(dx, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out")}
    if weight is not None:
        grads["weight"] = parts[chunks, :d].astype(weight.dtype, copy=False)    # (the call's own array)
    grads["eps"] = float(parts[chunks, d])
    return grads
