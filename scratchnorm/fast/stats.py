r"""The statistics of every kernel: sums accumulated in float64, and the layout they are kept in.

Sums. Each function sums over one whole 1-D array (the caller slices: ``x[:k]``,
a row, a run of a channel) and accumulates in float64, whatever the input dtype.
They are compiled with ``fastmath={"reassoc"}`` (``_jit.jit_sum``): LLVM may keep
several partial sums in SIMD lanes, in an order fixed by the compiled code, so
the bits do not depend on the data or the thread count, and NaN and Inf still
propagate. The loops run j over range(n) from 0 and index the array directly:
with an index known to be >= 0, numba's negative-index wraparound folds away and
the loop vectorizes (NOTES.md).

A function that returns two sums returns the plain one first:
(sum of g, sum of g (x - c)), (sum of dy, sum of dy (x - c)).

Layout. Kernels that keep statistics keep them as one float64 array of shape
(3, n), one row per statistic, one column per normalized group (a row of a
LayerNorm, a channel of a BatchNorm, a (sample, group) pair of a GroupNorm):

    stats[MEAN]  the mean (0 for the norms that do not centre)
    stats[VAR]   the mean square about it: the variance, or RMSNorm's ms
    stats[RSTD]  1 / sqrt(VAR + eps), or the eps placement's rstd (eps_modes.py)
"""
from __future__ import annotations

import numpy as np

from ._jit import jit_inline, jit_sum

MEAN, VAR, RSTD = 0, 1, 2       # the rows of a (3, n) stats array


@jit_sum
def sum_of(x):
    """sum of x_j."""
    s = 0.0
    for j in range(x.shape[0]):
        s += np.float64(x[j])
    return s


@jit_sum
def sum_dev(x, c):
    """sum of (x_j - c): a first pass about a shift c."""
    s = 0.0
    for j in range(x.shape[0]):
        s += np.float64(x[j]) - c
    return s


@jit_sum
def sum_sq(x):
    """sum of x_j^2 (sum_sq_dev without a centre: a loop of its own, since "- 0.0" would stay
    in sum_sq_dev's loop when c is not known at compile time)."""
    s = 0.0
    for j in range(x.shape[0]):
        v = np.float64(x[j])
        s += v * v
    return s


@jit_sum
def sum_sq_dev(x, c):
    """sum of (x_j - c)^2: the second pass of a two-pass variance."""
    s = 0.0
    for j in range(x.shape[0]):
        v = np.float64(x[j]) - c
        s += v * v
    return s


@jit_sum
def sums_for_rms_backward(dy, x, w):
    """(sum of g_j x_j, sum of g_j^2), g = dy w: RMSNorm's backward row sums (LayerNorm's without a
    centre and without the sum of g). The sum of g^2 bounds every |g_j| (float32.py)."""
    sgx = 0.0
    sgg = 0.0
    for j in range(x.shape[0]):
        g = np.float64(dy[j]) * np.float64(w[j])
        sgx += g * np.float64(x[j])
        sgg += g * g
    return sgx, sgg


@jit_sum
def sums_for_layer_norm_backward(dy, x, w, c):
    """(sum of g_j, sum of g_j (x_j - c), sum of g_j^2), g = dy w: LayerNorm's backward row sums."""
    sg = 0.0
    sgx = 0.0
    sgg = 0.0
    for j in range(x.shape[0]):
        g = np.float64(dy[j]) * np.float64(w[j])
        sg += g
        sgx += g * (np.float64(x[j]) - c)
        sgg += g * g
    return sg, sgx, sgg


@jit_sum
def sum_gx(dy, x, w):
    """sum of g_j x_j with g = dy w (sum_g without a centre and without the sum of g)."""
    s = 0.0
    for j in range(x.shape[0]):
        s += np.float64(dy[j]) * np.float64(w[j]) * np.float64(x[j])
    return s


@jit_sum
def sum_g(dy, x, w, c):
    """(sum of g_j, sum of g_j (x_j - c)), with g = dy w."""
    sg = 0.0
    sgx = 0.0
    for j in range(x.shape[0]):
        g = np.float64(dy[j]) * np.float64(w[j])
        sg += g
        sgx += g * (np.float64(x[j]) - c)
    return sg, sgx


@jit_inline
def add_chunks(parts, total):
    """total = the per-chunk partial sums parts (chunks, n) added in chunk order: the same bits for
    any thread count (the chunks depend on the rows only, _jit.n_chunks)."""
    total[:] = parts[0]
    for c in range(1, parts.shape[0]):
        for j in range(total.shape[0]):
            total[j] += parts[c, j]
