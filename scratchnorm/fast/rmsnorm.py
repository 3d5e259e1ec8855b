r"""RMSNorm's numba kernels: what ``scratchnorm.RMSNorm(d)`` runs by default.

For each row x of d features (rmsnorm.py derives the backward; the names are its):

    forward    rstd  = 1 / sqrt(sum(x^2) / d + eps)            float64 sum (stats.row_sum_sq)
               y     = x * rstd * weight
               (a row whose sum of squares overflows, |x| beyond ~1e154: rstd from the row
               scaled by a power of two, variants.huge_row_rstd; ms stays inf)
    backward   g     = dy * weight,   x_hat = x * rstd
               mean_gx = mean(g * x_hat) = rstd * sum(g * x) / d   float64 sum (stats.py)
               dx    = rstd * (g - x_hat * mean_gx)
               dweight = sum over rows of dy * x_hat             float64, per fixed chunk of rows

No mean is subtracted, so LayerNorm's mean(g) term is absent. ``mean_gx`` is a
mean of g * x_hat, not of g * x * rstd^3: x_hat stays of order one however large or
small rstd is, so nothing overflows (rmsnorm.py). The backward also returns
d loss / d eps = sum over rows of sum(g * x_hat) * d log(rstd) / d eps, as the
reference does.

Precision. Sums are float64. For float32 x, the weight is rounded to float32
once per call, and the elementwise loops run in float32 from the float64 row
scalars rounded once (float32.py says when a row may; a row that may not runs
in float64, with that same weight). Counting roundings (u = 2^-24, to first
order): y = x * rstd * weight passes through 4 (rstd, x * rstd, the weight,
* weight), so |y - y_exact| <= 4u |y_exact|; in dx = rstd * (g - x_hat * mean_gx),
the g term passes through 5 and the x_hat * mean_gx term through 7, so
|dx - dx_exact| <= u rstd (5 |g| + 7 |x_hat * mean_gx|), plus what the rounded
weight does to the sum in mean_gx (u mean|g x_hat| of it). dweight sums dy * x_hat
in float64 with x_hat as the loop computed it in float32 (2 roundings: rstd, x * rstd),
so |dweight_j - exact| <= 2u sum over rows of |dy_ij x_hat_ij| (to first order). Where a product
falls below float32's normal range (x_hat ~ 1e-40 beside a weight of 1e30) the
error is absolute instead, of the order of 2^-149 times the factors that
follow. float64 and float16 input run in float64 (float16 widened on entry and
rounded once at the end). tests/fast/test_kernels.py checks these bounds
element by element against the float64 reference.

The other RMSNorms (eps outside or clamped, pRMSNorm's k, a bias, a learnable
eps, GroupRMSNorm) have knobs these kernels do not: ``rms_norm_forward`` and
``rms_norm_backward`` run the variants' kernels for them (variants.py: prepared
there, run from here, so that a layer reaches them in four calls as it does
these).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import rms_norm_args
from .._checks import EPS_MODES
from .variants import INSIDE, RMS_NORM, huge_row_rstd, prepare_backward, prepare_forward
from .variants import rms_norm_forward as general_forward
from ._buffers import affine_vector, backward_rows, finish_rows, forward_rows, plain_output, plain_rows
from ._jit import jit, jit_inline, run_by_size, serial_and_prange
from .chunks import n_chunks
from ._stream import affine_row_streamed, decide, store_fence
from .float32 import fits, quarter_of_largest
from .stats import RSTD, VAR, add_chunks, row_sum_gx, row_sum_sq, sum_of


def rms_norm_forward_kernel(x, weight, eps, y, ms, rstd, stream, no_bias):
    """x, y: (N, d); weight: (d,); ms, rstd: (N,) float64, kept for the backward. ``stream``: y is written
    with non-temporal stores (_stream.py: x * rstd * weight + no_bias, no_bias = -0.0, the same bits),
    a fence ending each chunk of rows."""
    N, d = x.shape
    chunks = n_chunks(N)
    for c in prange(chunks):                       # fixed chunks of rows (chunks.py)
        for i in range(c * N // chunks, (c + 1) * N // chunks):
            ms[i] = row_sum_sq(x, i) / d
            rstd[i] = 1.0 / np.sqrt(ms[i] + eps)
            if ms[i] == np.inf:                    # beyond float64's square (|x| > ~1e154): on the row
                rstd[i] = huge_row_rstd(x[i], 0.0, eps, INSIDE)      # scaled (variants.py)
            if fits(rstd[i], x) and not stream:    # y = x * rstd * weight in x's dtype (float32.py) ...
                scale_row(x, i, x.dtype.type(rstd[i]), weight, y)
            else:                                  # ... or streamed, or in float64
                scale_other_row(x, i, rstd[i], weight, y, stream, no_bias)
        if stream:
            store_fence()                          # this chunk's streamed rows are visible


@jit_inline
def scale_row(x, i, rstd, weight, y):
    """y = x * rstd * weight along row i (affine_row with no mean and no bias: one operation fewer an
    element), in rstd's dtype."""
    for j in range(x.shape[1]):
        y[i, j] = x[i, j] * rstd * weight[j]


@jit
def scale_other_row(x, i, rstd, weight, y, stream, no_bias):
    """Row i when it is not the kernel's common case (in x's dtype and not streamed): streamed in x's
    dtype when rstd fits it, or in float64. A call, not inlined: with these loops inlined beside the
    common one, RMSNorm's forward took 7.3-7.7 us at 64x512 instead of 6.0, and 184 instead of 165 at
    1024x1024 (one thread, rows indexed in both; with row views as well, 8.1 and 217: NOTES.md, session 12)."""
    if stream and fits(rstd, x):
        T = x.dtype.type
        affine_row_streamed(x[i], T(0.0), T(0.0), T(rstd), weight, no_bias, y[i])
    else:
        scale_row(x, i, rstd, weight, y)


def rms_norm_backward_kernel(dy, x, weight, rstd, dx, dweight, dweight_parts, deps_rows):
    """dy, x, dx: (N, d); weight: (d,); rstd: (N,); dweight: (d,) float64; dweight_parts: (chunks, d)
    float64, the sum of dy * x_hat over each chunk of rows; deps_rows: (N,). Returns d loss / d eps."""
    N, d = x.shape
    chunks = dweight_parts.shape[0]
    for c in prange(chunks):                       # fixed chunks of rows (chunks.py)
        dweight_c = dweight_parts[c]               # this chunk's share of dweight
        dweight_c[:] = 0.0
        for i in range(c * N // chunks, (c + 1) * N // chunks):
            sgx, sgg = row_sum_gx(dy, x, weight, i)
            mean_gx = rstd[i] * sgx / d            # mean(g * x_hat)
            deps_rows[i] = -0.5 * d * mean_gx * rstd[i] * rstd[i]   # sum(g x_hat) * d log(rstd)/d eps
            if fits(rstd[i], x) and fits(mean_gx, x) and quarter_of_largest(np.sqrt(sgg), x):   # float32.py
                T = x.dtype.type
                dx_row(dy, x, i, weight, T(rstd[i]), T(mean_gx), dx, dweight_c, T)
            else:
                dx_row_float64(dy, x, i, weight, rstd[i], mean_gx, dx, dweight_c)
    add_chunks(dweight_parts, dweight)             # in chunk order: the same bits on any thread count
    return sum_of(deps_rows)


@jit_inline
def dx_row(dy, x, i, weight, rstd, mean_gx, dx, dweight, T):
    """dx of row i, computed in the type T (x's dtype, or float64)."""
    for j in range(x.shape[1]):
        x_hat = T(x[i, j]) * rstd
        dx[i, j] = rstd * (T(dy[i, j]) * T(weight[j]) - x_hat * mean_gx)
        dweight[j] += np.float64(dy[i, j]) * np.float64(x_hat)


@jit
def dx_row_float64(dy, x, i, weight, rstd, mean_gx, dx, dweight):
    """dx_row in float64, for the rows the float32 guards turn away: a call, not inlined (as
    scale_other_row: the common row's loop stays the only one inlined)."""
    dx_row(dy, x, i, weight, rstd, mean_gx, dx, dweight, np.float64)


RMS_NORM_FORWARD = serial_and_prange(rms_norm_forward_kernel)      # (serial, prange) kernels (_jit.py)
RMS_NORM_BACKWARD = serial_and_prange(rms_norm_backward_kernel)


def rms_norm_forward(x, weight=None, bias=None, *, eps=1e-6, eps_mode="inside", k=None, out=None, stream=None):
    """RMSNorm over the last axis, numba kernels. Same arguments and result as
    ``scratchnorm.rms_norm_forward``; the cache is this backend's. ``stream``: None or False writes y with
    plain stores, True with non-temporal ones (_stream.py: the same bits)."""
    common = bias is None and k is None and eps_mode == "inside"
    xk = plain_rows(x, eps, weight) if common else None               # (N, d), or None: the long way
    y = None if xk is None else plain_output(xk, x, out)              # (N, d)
    if y is not None:
        d = xk.shape[1]
        y_new, w = out is None, affine_vector(weight, d, 1.0, xk.dtype)
    else:
        x, eps, k = rms_norm_args(x, weight, bias, eps, eps_mode, k)
        d = x.shape[-1]
        if x.size == 0:                                              # no kernel to run (variants.py)
            return general_forward(x, weight, bias, eps=eps, eps_mode=eps_mode, k=k, out=out, stream=stream)
        plain = eps_mode == "inside" and k == d and bias is None     # RMSNorm's own knobs
        if plain:
            xk, y, y_new = forward_rows(x, out, x.size // d)         # (N, d)
            w = affine_vector(weight, d, 1.0, xk.dtype)
            plain = w.dtype == xk.dtype                              # else a weight float32 cannot hold (> 3.4e38)
        if not plain:                                                # the variants' kernel (variants.py)
            run, finish = prepare_forward(x, weight, bias, out, RMS_NORM, center=False, groups=1, k=k, eps=eps,
                                          mode=EPS_MODES.index(eps_mode), stream=stream)
            run_by_size(*run)
            return finish()
    stats = np.zeros((3, xk.shape[0]))                               # (3, N): MEAN stays 0
    stream = decide(stream)
    run_by_size(RMS_NORM_FORWARD, xk.size, n_chunks(xk.shape[0]), xk, w, eps, y, stats[VAR], stats[RSTD],
                stream, affine_vector(None, d, -0.0, xk.dtype))
    cache = {"made_by": RMS_NORM, "fast": "rmsnorm", "x": xk, "stats": stats,
             "weight": weight, "eps": eps, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y, y_new, x.shape, x.dtype, out), cache


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
    dweight = np.empty(d)
    chunks = n_chunks(N)
    deps = run_by_size(RMS_NORM_BACKWARD, xk.size, chunks, dyk, xk, affine_vector(weight, d, 1.0, xk.dtype),
                       cache["stats"][RSTD], dx, dweight, np.empty((chunks, d)), np.empty(N))
    grads = {"x": finish_rows(dx, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out")}
    if weight is not None:
        grads["weight"] = dweight.astype(weight.dtype)
    grads["eps"] = deps
    return grads
