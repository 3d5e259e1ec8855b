r"""The statistics of every kernel: sums accumulated in float64, and the layout they are kept in.

Sums. Each function sums over one whole 1-D array (the caller slices: ``x[:k]``,
a row, a run of a channel), or, the ``row_`` ones, over row i of a 2-D array (LayerNorm's
and RMSNorm's kernels: below), and accumulates in float64, whatever the input dtype.
They are compiled with ``fastmath={"reassoc"}`` (``_jit.jit_sum``): LLVM may keep
several partial sums in SIMD lanes, in an order fixed by the compiled code, so
the bits do not depend on the data or the thread count, and NaN and Inf still
propagate. The loops run j over range(n) from 0 and index the array directly:
with an index known to be >= 0, numba's negative-index wraparound folds away and
the loop vectorizes (NOTES.md).

A function that returns two sums returns the plain one first:
(sum of g, sum of g (x - c)), (sum of dy, sum of dy (x - c)).

Column sums (BatchNorm on (N, C), the columns layout): one float64 sum per
column of a tile, rows [r0, r1) and columns [lo, lo + n) of a C-contiguous
(N, D) array, added row after row in order (a column's sum is sequential, so
no reassociation is needed: the lanes run across columns). They write into
caller arrays of n accumulators, the plain sum first as above. Each loop reads
four rows per sweep over the accumulators, which are then loaded and stored
once per four rows.

Layout. Kernels that keep statistics keep them as one float64 array of shape
(3, n), one row per statistic, one column per normalized group (a row of a
LayerNorm, a channel of a BatchNorm, a (sample, group) pair of a GroupNorm):

    stats[MEAN]  the mean (0 for the norms that do not centre)
    stats[VAR]   the mean square about it: the variance, or RMSNorm's ms
    stats[RSTD]  1 / sqrt(VAR + eps), or the eps placement's rstd (eps_modes.py)
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit, jit_inline, jit_sum

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
def sum_gx(dy, x, w):
    """sum of g_j x_j, g = dy w: a backward's row sum without a centre (the variants' RMSNorm; RMSNorm's
    own kernel: row_sum_gx), float64 throughout, as sum_g."""
    sgx = 0.0
    for j in range(x.shape[0]):
        sgx += np.float64(dy[j]) * np.float64(w[j]) * np.float64(x[j])
    return sgx


@jit_sum
def sum_g(dy, x, w, c):
    """(sum of g_j, sum of g_j (x_j - c)), g = dy w: a backward's row sums about a centre c (GroupNorm's
    runs, the variants' LayerNorm; LayerNorm's own kernel: row_sum_g). Float64 throughout: its callers
    compute dx in float64."""
    sg = 0.0
    sgx = 0.0
    for j in range(x.shape[0]):
        g = np.float64(dy[j]) * np.float64(w[j])
        sg += g
        sgx += g * (np.float64(x[j]) - c)
    return sg, sgx


@jit
def scaled_sum_sq_dev(x, c):
    """(sum of ((x_j - c) 2^-e)^2, e) for a row whose sum_sq_dev overflowed float64 (|x_j - c| beyond
    ~1e154): 2^-e brings max |x_j - c| into [0.5, 1), exactly (a power of two), so the sum is in
    [1/4, n) (eps_modes.py, "Rows beyond float64's square"). With an inf in the row, the plain sum
    (inf) and e = 0. Only such rows run it: no reassociation, no speed needed."""
    big = 0.0
    for j in range(x.shape[0]):
        big = max(big, abs(np.float64(x[j]) - c))
    if not big < np.inf:
        return sum_sq_dev(x, c), 0
    e = math.frexp(big)[1]
    scale = math.ldexp(1.0, -e)
    s = 0.0
    for j in range(x.shape[0]):
        v = (np.float64(x[j]) - c) * scale
        s += v * v
    return s, e


INSIDE, OUTSIDE, CLAMP = 0, 1, 2   # eps placements: positions in _checks.EPS_MODES


@jit
def huge_row_rstd(x, c, eps, mode):
    """rstd of a row x (m,) whose mean of (x - c)^2 overflowed float64 (|x - c| beyond ~1e154), from the
    row scaled by 2^-e (scaled_sum_sq_dev): eps_modes.rstd_of_huge_rows, which the kernels of
    RMSNorm, LayerNorm, GroupNorm and the gated RMSNorm call for such a row (the rest keep their bits)."""
    s, e = scaled_sum_sq_dev(x, c)
    ms = s / x.shape[0]                                # ms 4^-e
    if mode == INSIDE:
        return math.ldexp(1.0 / np.sqrt(ms + math.ldexp(eps, -2 * e)), -e)
    if mode == OUTSIDE:
        return math.ldexp(1.0 / (np.sqrt(ms) + math.ldexp(eps, -e)), -e)
    return math.ldexp(1.0 / np.sqrt(ms), -e)           # clamp: ms overflowed, so ms > eps


# -- row sums: over row i of a 2-D array, all d columns ------------------------------------------
# LayerNorm's and RMSNorm's kernels index the row, a[i, j], instead of passing the view a[i]: numba
# counts a reference for every view it makes, and where the row's loop branches (the float32 guards)
# it kept an atomic increment and decrement per view and row: RMSNorm's forward took 7.3-7.7 us
# with views where it takes 6.0 indexed at 64x512, and 184 where it takes 165 at 1024x1024 (NOTES.md,
# session 12). row_sum_dev, row_sum_sq and row_sum_sq_dev are the 1-D sums above them, read along row
# i, with the same bits; the backward's two take g as its elementwise loop does (below). Both are
# checked in tests/fast/test_row_sums.py.

@jit_sum
def row_sum_dev(a, i, c):
    """sum_dev of row i: sum of (a[i, j] - c)."""
    s = 0.0
    for j in range(a.shape[1]):
        s += np.float64(a[i, j]) - c
    return s


@jit_sum
def row_sum_sq(a, i):
    """sum_sq of row i: sum of a[i, j]^2."""
    s = 0.0
    for j in range(a.shape[1]):
        v = np.float64(a[i, j])
        s += v * v
    return s


@jit_sum
def row_sum_sq_dev(a, i, c):
    """sum_sq_dev of row i: sum of (a[i, j] - c)^2."""
    s = 0.0
    for j in range(a.shape[1]):
        v = np.float64(a[i, j]) - c
        s += v * v
    return s


# The backward's row sums take g = dy[i] w as the elementwise loop computes it, in x's dtype, and four
# times over: g4 = dy * w * 4 (the factor 4 is exact). A |g| past a quarter of the dtype's largest value
# makes g4 inf (two of opposite signs, NaN), and the sum with it, so the row's one guard
# (float32.dx_fits) sees it without a second sum of g^2 (NOTES.md, session 18: that sum cost 7-13% of
# the backward). The sum is scaled back by 1/4, exactly. With float64 x, g4 / 4 is the float64 product.

@jit_sum
def row_sum_gx(dy, x, w, i):
    """sum of g_j x[i, j], g = dy[i] w in x's dtype (RMSNorm's backward); inf or NaN when some
    |g_j| is past a quarter of that dtype's largest value (above)."""
    four = x.dtype.type(4.0)
    s = 0.0
    for j in range(x.shape[1]):
        s += np.float64(dy[i, j] * w[j] * four) * np.float64(x[i, j])
    return 0.25 * s


@jit_sum
def row_sum_g(dy, x, w, i, c):
    """(sum of g_j, sum of g_j (x[i, j] - c)), g = dy[i] w in x's dtype (LayerNorm's backward); inf
    or NaN when some |g_j| is past a quarter of that dtype's largest value (above)."""
    four = x.dtype.type(4.0)
    sg = 0.0
    sgx = 0.0
    for j in range(x.shape[1]):
        g4 = np.float64(dy[i, j] * w[j] * four)
        sg += g4
        sgx += g4 * (np.float64(x[i, j]) - c)
    return 0.25 * sg, 0.25 * sgx


# -- a row's statistics, for LayerNorm's and RMSNorm's kernels (plain and streamed) --------------
@jit_sum
def row_sum(a, i):
    """sum of a[i, j]."""
    s = 0.0
    for j in range(a.shape[1]):
        s += np.float64(a[i, j])
    return s


@jit_inline
def row_mean(x, i):
    """The mean of row i, float64. float32 x: sum(x) / d. A constant row's mean is then exact: its
    partial sums are multiples of one float32 value, which float64's 53 bits hold exactly for
    d < 2^29 in any order, and (d c) / d rounds to c. float64 x: x_0 + sum(x - x_0) / d, about the
    row's first value, which makes a constant row's mean exact there (a plain sum may round)."""
    d = x.shape[1]
    if x.itemsize == 4:                            # (a constant: one branch is compiled)
        return row_sum(x, i) / d
    shift = np.float64(x[i, 0])
    return shift + row_sum_dev(x, i, shift) / d


@jit_inline
def rms_row_stats(x, i, eps, stats):
    """RMSNorm's statistics of row i into stats[:, i] = (0, ms, rstd), float64, and returned as (ms, rstd):
    ms = sum(x^2) / d, rstd = 1 / sqrt(ms + eps). A row beyond float64's square (|x| > ~1e154) gets
    ms = inf and rstd = 0, which the kernels' guard (float32.row_fits) sends to their float64 row, where
    ``rstd_of_row`` takes rstd from the row scaled."""
    ms = row_sum_sq(x, i) / x.shape[1]
    rstd = 1.0 / np.sqrt(ms + eps)
    stats[MEAN, i], stats[VAR, i], stats[RSTD, i] = 0.0, ms, rstd
    return ms, rstd


@jit_inline
def layer_norm_row_stats(x, i, eps, stats):
    """LayerNorm's statistics of row i into stats[:, i] = (mean, var, rstd), float64, and returned.
    Two passes (row_mean, then sum((x - mean)^2) / d), never E[x^2] - E[x]^2. A row whose var overflows
    float64 (|x - mean| > ~1e154) gets rstd = 0 here, and its rstd from the row scaled in the kernels'
    float64 row (``rstd_of_row``)."""
    mean = row_mean(x, i)
    var = row_sum_sq_dev(x, i, mean) / x.shape[1]
    rstd = 1.0 / np.sqrt(var + eps)
    stats[MEAN, i], stats[VAR, i], stats[RSTD, i] = mean, var, rstd
    return mean, var, rstd


@jit
def rstd_of_row(x, i, c, eps, stats):
    """Row i's rstd, stats[RSTD, i]; where its mean square about c overflowed float64 (stats[VAR, i] = inf),
    taken again from the row scaled (huge_row_rstd) and stored. For the kernels' float64 rows: a call,
    outside the common row's path (a view of the row made there, or a call of this in an inlined helper,
    cost the forward about 35 ns a row in reference counts: NOTES.md, session 18)."""
    if stats[VAR, i] == np.inf:
        stats[RSTD, i] = huge_row_rstd(x[i], c, eps, INSIDE)
    return stats[RSTD, i]


@jit_inline
def add_partial(partial, total):
    """total += partial, then partial = 0, element by element: a partial sum of at most ROWS_PER_SUM rows,
    in x's dtype, joins its chunk's float64 sum (chunks.py). ``total`` may be longer: its first elements."""
    for j in range(partial.shape[0]):
        total[j] += np.float64(partial[j])
        partial[j] = 0.0


@jit_inline
def add_chunks(parts, total):
    """total = the per-chunk partial sums parts (chunks, n) added in chunk order: the same bits for
    any thread count (the chunks depend on the rows only, chunks.n_chunks)."""
    for j in range(total.shape[0]):                 # (a loop: numba spent 1.9 s compiling the error message
        total[j] = parts[0, j]                      # of a slice assignment's shape check, NOTES.md)
    for c in range(1, parts.shape[0]):
        for j in range(total.shape[0]):
            total[j] += parts[c, j]


@jit_sum
def sum_dy(dy, x, c):
    """(sum of dy_j, sum of dy_j (x_j - c)): dbias and, times rstd, dweight of one run."""
    s = 0.0
    sx = 0.0
    for j in range(x.shape[0]):
        d = np.float64(dy[j])
        s += d
        sx += d * (np.float64(x[j]) - c)
    return s, sx


# -- column sums over a tile: rows [r0, r1), columns [lo, lo + n) -----------------------------
@jit_inline
def four_rows(a, i, r1, lo, n):
    """Columns [lo, lo + n) of rows i .. i + 3 of a; rows past r1 - 1 are row r1 - 1 again
    (harmless where the rows are only written with values that do not depend on the row)."""
    return (a[i, lo:lo + n], a[min(i + 1, r1 - 1), lo:lo + n], a[min(i + 2, r1 - 1), lo:lo + n],
            a[min(i + 3, r1 - 1), lo:lo + n])


@jit_inline
def column_sum_dev(x, lo, r0, r1, c, acc):
    """acc[j] = sum over rows i of (x[i, lo + j] - c[j]): a first pass about shifts c (n,)."""
    n = acc.shape[0]
    acc[:] = 0.0
    tail = r0 + (r1 - r0) // 4 * 4                  # rows [tail, r1) one at a time
    for i in range(r0, tail, 4):
        x0, x1, x2, x3 = four_rows(x, i, r1, lo, n)
        for j in range(n):
            k = c[j]
            acc[j] = (((acc[j] + (np.float64(x0[j]) - k)) + (np.float64(x1[j]) - k))
                      + (np.float64(x2[j]) - k)) + (np.float64(x3[j]) - k)
    for i in range(tail, r1):
        xi = x[i, lo:lo + n]
        for j in range(n):
            acc[j] += np.float64(xi[j]) - c[j]


@jit_inline
def column_sum_sq_dev(x, lo, r0, r1, c, mean, acc):
    """acc[j] = sum over rows i of ((x[i, lo + j] - c[j]) - mean[j])^2: the second pass of a
    two-pass M2, mean (n,) being the mean of x - c."""
    n = acc.shape[0]
    acc[:] = 0.0
    tail = r0 + (r1 - r0) // 4 * 4                  # rows [tail, r1) one at a time
    for i in range(r0, tail, 4):
        x0, x1, x2, x3 = four_rows(x, i, r1, lo, n)
        for j in range(n):
            k, m = c[j], mean[j]
            v0, v1 = (np.float64(x0[j]) - k) - m, (np.float64(x1[j]) - k) - m
            v2, v3 = (np.float64(x2[j]) - k) - m, (np.float64(x3[j]) - k) - m
            acc[j] = (((acc[j] + v0 * v0) + v1 * v1) + v2 * v2) + v3 * v3
    for i in range(tail, r1):
        xi = x[i, lo:lo + n]
        for j in range(n):
            v = (np.float64(xi[j]) - c[j]) - mean[j]
            acc[j] += v * v


@jit_inline
def column_sum_dy(dy, x, lo, r0, r1, c, s, sx):
    """s[j] = sum over rows i of dy[i, lo + j], sx[j] = that of dy[i, lo + j] (x[i, lo + j] - c[j])."""
    n = s.shape[0]
    s[:] = 0.0
    sx[:] = 0.0
    tail = r0 + (r1 - r0) // 4 * 4                  # rows [tail, r1) one at a time
    for i in range(r0, tail, 4):
        d0, d1, d2, d3 = four_rows(dy, i, r1, lo, n)
        x0, x1, x2, x3 = four_rows(x, i, r1, lo, n)
        for j in range(n):
            m = c[j]
            a0, a1, a2, a3 = np.float64(d0[j]), np.float64(d1[j]), np.float64(d2[j]), np.float64(d3[j])
            s[j] = (((s[j] + a0) + a1) + a2) + a3
            sx[j] = (((sx[j] + a0 * (np.float64(x0[j]) - m)) + a1 * (np.float64(x1[j]) - m))
                     + a2 * (np.float64(x2[j]) - m)) + a3 * (np.float64(x3[j]) - m)
    for i in range(tail, r1):
        di, xi = dy[i, lo:lo + n], x[i, lo:lo + n]
        for j in range(n):
            a0 = np.float64(di[j])
            s[j] += a0
            sx[j] += a0 * (np.float64(xi[j]) - c[j])
