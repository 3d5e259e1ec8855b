r"""BatchNorm's kernels for (N, C) inputs and short slabs (spatial size S < SLAB_MIN): the columns layout.

The formulas, their derivation and the merge of the pieces are batchnorm_slabs.py's.
Here x is (N, D), D = C * S, and channel c owns columns c*S .. (c+1)*S - 1. A
slab of fewer than SLAB_MIN values is too short to read alone, so the kernels
read row after row instead, and keep one number per column:

    forward   tile (rows of chunk k, block of columns): the mean of x - K and the M2
              of each column, in two passes (column_sum_dev, column_sum_sq_dev; the
              second from cache), one piece per column and chunk; channel_moments
              merges them in order into stats (3, C); then y, tile by tile.
    backward  tile by tile, the column sums of dy and dy * (x - mean) (column_sum_dy);
              add_pieces adds them in order into dweight, dbias (2, C); then dx.

The per-channel numbers are spread to per-column rows (``spread``: hi, lo, scale,
b; mean, a, cc, e), so every loop runs over a whole row of the tile. For float32 x
in training mode, y runs in float32 from the scalars batchnorm_slabs.affine_in_x
rounds once, with the slabs' guards and bound (channel_slabs.py); a channel they
turn away is redone in float64. dx, eval mode and float64 x stay float64. The tiles
are the fixed chunks of ``chunks.n_chunks(N)`` rows times blocks of COLUMN_BLOCK
columns, so the bits do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import jit, jit_inline, serial_and_prange
from .chunks import n_chunks
from .batchnorm_slabs import (A, CC, E, GM, GX, add_pieces, affine_in_x, channel_moments, dx_coefficients,
                              first_values)
from .channel_slabs import (chunk_rows, dx_overflows, dx_slab_float64, dx_value, normalize_slab_float64,
                            scale_overflows, y_value)
from .stats import MEAN, RSTD, four_rows, column_sum_dev, column_sum_dy, column_sum_sq_dev

COLUMN_BLOCK = 4096    # columns per task


def column_tasks(N: int, D: int) -> int:
    """The tasks of each prange loop below: chunks of rows times blocks of columns (``run_by_size``'s count)."""
    return n_chunks(N) * -(-D // COLUMN_BLOCK)


@jit
def spread(cols, values, S):
    """cols[j] = values[j // S]: per-channel numbers (C,) as per-column ones (C * S,)."""
    for c in range(values.shape[0]):
        cols[c * S:(c + 1) * S] = values[c]


@jit_inline
def _normalize_tile(x, y, col0, r0, r1, hi, lo, scale, b):
    """y = ((x - hi) - lo) * scale + b over the tile, with one hi, lo, scale, b per column (n,), in their
    dtype: float64 (hi the mean, lo = 0), or float32 from the float32 path's scalars (module docstring)."""
    n = hi.shape[0]
    for i in range(r0, r1, 4):
        x0, x1, x2, x3 = four_rows(x, i, r1, col0, n)
        y0, y1, y2, y3 = four_rows(y, i, r1, col0, n)
        for j in range(n):
            h, el, sc, bj = hi[j], lo[j], scale[j], b[j]
            y0[j] = y_value(x0[j], h, el, sc, bj)
            y1[j] = y_value(x1[j], h, el, sc, bj)
            y2[j] = y_value(x2[j], h, el, sc, bj)
            y3[j] = y_value(x3[j], h, el, sc, bj)


@jit_inline
def _dx_tile(dy, x, dx, lo, r0, r1, mean, a, cc, e, center):
    """dx over the tile with one mean, a, cc, e per column (n,); without ``center`` (eval), dx = a * dy."""
    n = mean.shape[0]
    for i in range(r0, r1, 4):
        d0, d1, d2, d3 = four_rows(dy, i, r1, lo, n)
        z0, z1, z2, z3 = four_rows(dx, i, r1, lo, n)
        if center:
            x0, x1, x2, x3 = four_rows(x, i, r1, lo, n)
            for j in range(n):
                m, aj, cj, ej = mean[j], a[j], cc[j], e[j]
                z0[j] = dx_value(np.float64(d0[j]), np.float64(x0[j]), m, 0.0, aj, cj, ej)
                z1[j] = dx_value(np.float64(d1[j]), np.float64(x1[j]), m, 0.0, aj, cj, ej)
                z2[j] = dx_value(np.float64(d2[j]), np.float64(x2[j]), m, 0.0, aj, cj, ej)
                z3[j] = dx_value(np.float64(d3[j]), np.float64(x3[j]), m, 0.0, aj, cj, ej)
        else:
            for j in range(n):
                aj = a[j]
                z0[j] = aj * np.float64(d0[j])
                z1[j] = aj * np.float64(d1[j])
                z2[j] = aj * np.float64(d2[j])
                z3[j] = aj * np.float64(d3[j])


# -- the drivers: x (N, D); in eval mode (batch_stats False) ``stats`` is given ---------------
def batch_norm_columns_forward_kernel(x, w, b, y, part, stats, cols, eps, S, batch_stats):
    """part (chunks, 2, D): per-chunk (mean, M2) of each column; stats (3, C); cols (4, D) scratch."""
    N, D = x.shape
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (D + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    if batch_stats:
        shift = stats[MEAN]                       # the shift K until channel_moments puts the mean there
        first_values(x, S, shift)
        spread(cols[0], shift, S)
        for t in prange(chunks * blocks):
            k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
            hi = min(D, lo + COLUMN_BLOCK)
            r0, r1 = chunk_rows(k, N, chunks)
            mean, m2 = part[k, 0, lo:hi], part[k, 1, lo:hi]              # (n,) this tile's piece
            column_sum_dev(x, lo, r0, r1, cols[0, lo:hi], mean)
            mean /= r1 - r0
            column_sum_sq_dev(x, lo, r0, r1, cols[0, lo:hi], mean, m2)
        channel_moments(part, N, S, eps, shift, stats)
    in_x, x_hi, x_lo, x_scale, x_b = affine_in_x(stats, w, b, N * S, x, batch_stats)
    narrow = x.itemsize == 4 and batch_stats      # float32 x in training mode: y in float32 (channel_slabs.py)
    tile = np.empty((4, D if narrow else 0), x.dtype)            # hi, lo, scale, b per column, in x's dtype
    if narrow:                                    # (zeros in a channel the guards turn away: redone below)
        for r, v in enumerate((x_hi, x_lo, x_scale, x_b)):
            spread(tile[r], v, S)
    else:                                         # in float64: the mean, 0, rstd * w, b per column
        spread(cols[0], stats[MEAN], S)
        cols[1] = 0.0
        spread(cols[2], stats[RSTD] * w, S)
        spread(cols[3], b, S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = chunk_rows(k, N, chunks)
        if narrow:
            _normalize_tile(x, y, lo, r0, r1, tile[0, lo:hi], tile[1, lo:hi], tile[2, lo:hi], tile[3, lo:hi])
        else:
            _normalize_tile(x, y, lo, r0, r1, cols[0, lo:hi], cols[1, lo:hi], cols[2, lo:hi], cols[3, lo:hi])
    for c in range(C):                            # a channel the float32 guards turned away, or whose scale
        if (not in_x[c]) if narrow else scale_overflows(stats[RSTD, c], w[c]):    # is past float64: again,
            for i in range(N):                                                   # in float64
                s = slice(c * S, (c + 1) * S)
                normalize_slab_float64(x[i, s], y[i, s], stats[MEAN, c], stats[RSTD, c], w[c], b[c])


def batch_norm_columns_backward_kernel(dy, x, w, stats, dx, part, dwb, coef, cols, S, center):
    """part (chunks, 2, D): per-chunk sums of dy * (x - mean) and of dy per column; dwb (2, C) gets
    dweight, dbias; coef (5, C) and cols (4, D) scratch."""
    N, D = x.shape
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (D + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    spread(cols[0], stats[MEAN], S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = chunk_rows(k, N, chunks)
        column_sum_dy(dy, x, lo, r0, r1, cols[0, lo:hi], part[k, 1, lo:hi], part[k, 0, lo:hi])
    add_pieces(part, dwb)
    dwb[0] *= stats[RSTD]                         # dweight = sum dy * x_hat = rstd * sum dy * (x - mean)
    dx_coefficients(stats, w, dwb, N * S, coef)
    for r in (A, CC, E):
        spread(cols[r + 1], coef[r], S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = chunk_rows(k, N, chunks)
        _dx_tile(dy, x, dx, lo, r0, r1, cols[0, lo:hi], cols[1, lo:hi], cols[2, lo:hi], cols[3, lo:hi], center)
    for c in range(C):                            # a, cc or e past float64 (channel_slabs.dx_unfused): again
        if dx_overflows(coef[A, c], coef[CC, c], coef[E, c], center):
            for i in range(N):
                s = slice(c * S, (c + 1) * S)
                dx_slab_float64(dy[i, s], x[i, s], dx[i, s], stats[MEAN, c], stats[RSTD, c], w[c], coef[GM, c],
                                coef[GX, c], center)


bn_forward_columns = serial_and_prange(batch_norm_columns_forward_kernel)
bn_backward_columns = serial_and_prange(batch_norm_columns_backward_kernel)
