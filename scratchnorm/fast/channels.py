r"""numba kernels for inputs laid out (N, C, *): BatchNorm and GroupNorm (InstanceNorm is G = C).

They mirror ``batchnorm.batch_norm_forward`` / ``batch_norm_backward`` (and the
eval pair) and ``groupnorm.group_norm_forward`` / ``group_norm_backward``. Per
channel (BatchNorm) or per sample and group (GroupNorm), all in float64:

    forward   mean, var = M2 / count, rstd = 1 / sqrt(var + eps)
              y = (x - mean) * (rstd * w) + b
    backward  g = dy * w,  x_hat = (x - mean) * rstd
              dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))    batch statistics
              dx = (rstd * w) * dy                                   BatchNorm eval
              dweight[c] = sum dy * x_hat,  dbias[c] = sum dy

Every kernel sees x as (N, D), D = C * S with S the spatial size: channel c of
sample n is the contiguous slab x[n, c*S : (c+1)*S].

Variance: never E[x^2] - E[x]^2. The values are cut into pieces that fit in
cache; each piece's mean and M2 = sum (x - mean)^2 take two passes, and pieces
merge with Chan, Golub & LeVeque's update (``_merge``):

    delta = mean_b - mean_a,   mean = mean_a + delta * n_b / n,   M2 = M2_a + M2_b + delta^2 n_a n_b / n

Nothing large is subtracted. Each piece takes the mean of x - K, K a value of
its channel, so that delta keeps its digits however far the data sit from 0.

BatchNorm: a channel is strided across the samples, which are cut into
``_jit.n_chunks(N)`` fixed chunks. For S >= SLAB_MIN (images) a task (chunk,
block of channels) walks its slabs in memory order, merging each into its
channel's (mean, M2) for that chunk; for small S ((N, C) inputs) a task (chunk,
block of columns) takes each column's moments in two passes. The pieces are
then merged channel by channel in chunk order, and the backward's sums go the
same way: the bits do not depend on the thread count.

GroupNorm: group g of sample n is contiguous, x[n, g*m : (g+1)*m]. The forward
is one task per (sample, group): the mean of x - K (K the group's first value,
so a constant group has x_hat = 0 exactly), the variance, the store. The backward's
dweight and dbias add samples in order per chunk, then the chunks in order.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ._jit import jit, jit_inline, jit_sum, serial_and_parallel

SLAB_MIN = 16          # spatial size from which a channel is read slab by slab (64 bytes of float32)
SPAN = 1 << 13         # BatchNorm slabs: values a task reads from one sample before the next sample
COLUMN_BLOCK = 4096    # columns per task in the columns layout
MEAN, VAR, RSTD = 0, 1, 2            # rows of BatchNorm's ``stats`` (3, C)


def layout(shape: tuple) -> tuple[int, int, int]:
    """(N, C, S) of an (N, C, *) shape: samples, channels, spatial size (1 for (N, C))."""
    return shape[0], shape[1], math.prod(shape[2:])


def channel_block(S: int) -> int:
    """BatchNorm slabs: channels per task, so that a task reads >= SPAN values of each sample."""
    return max(1, SPAN // S)


# -- sums over one contiguous run (float64 accumulators; see _jit.jit_sum) -------------------
# Loops index from 0 over whole arrays (slices made by the caller): with an index known
# to be >= 0 numba's negative-index wraparound folds away and the loop vectorizes.
@jit_sum
def _sum_dev(x, c):
    """sum of x_j - c: the first pass, about a shift c (0 for a plain sum)."""
    s = 0.0
    for j in range(x.shape[0]):
        s += np.float64(x[j]) - c
    return s


@jit_sum
def _sum_sq_dev(x, c):
    """sum of (x_j - c)^2: the second pass of a two-pass M2."""
    s = 0.0
    for j in range(x.shape[0]):
        v = np.float64(x[j]) - c
        s += v * v
    return s


@jit_sum
def _sum_dy(dy, x, c):
    """sum of dy_j * (x_j - c) and of dy_j."""
    sx = 0.0
    s = 0.0
    for j in range(x.shape[0]):
        d = np.float64(dy[j])
        sx += d * (np.float64(x[j]) - c)
        s += d
    return sx, s


@jit_sum
def _sum_g(dy, x, w, c):
    """sum of g_j * (x_j - c) and of g_j, with g = dy * w."""
    sgx = 0.0
    sg = 0.0
    for j in range(x.shape[0]):
        g = np.float64(dy[j]) * w[j]
        sgx += g * (np.float64(x[j]) - c)
        sg += g
    return sgx, sg


@jit
def _merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """(mean, M2) of pieces a (n_a values) and b (n_b) together. a may be empty (n_a = 0)."""
    if n_a == 0:
        return mean_b, m2_b
    n = n_a + n_b
    delta = mean_b - mean_a
    return mean_a + delta * (n_b / n), m2_a + m2_b + delta * delta * (n_a * n_b / n)


@jit
def _chunk_rows(k, rows, chunks):
    """Rows [r0, r1) of chunk k."""
    return k * rows // chunks, (k + 1) * rows // chunks


# -- elementwise bodies: one slab (scalar coefficients) or one tile row (vectors) -----------
@jit_inline
def _y_value(x, mean, scale, b):
    """y = (x - mean) * scale + b, scale = rstd * w."""
    return (x - mean) * scale + b


@jit_inline
def _dx_value(dy, x, mean, a, cc, e):
    """dx = a * dy - e - (x - mean) * cc, a = rstd * w, cc = rstd^2 * mean_gx, e = rstd * mean_g."""
    return a * dy - e - (x - mean) * cc


@jit_inline
def _normalize_slab(x, y, mean, scale, b):
    """y for one slab."""
    for j in range(x.shape[0]):
        y[j] = _y_value(np.float64(x[j]), mean, scale, b)


@jit_inline
def _dx_slab(dy, x, dx, mean, a, cc, e, center):
    """dx for one slab; without ``center`` (fixed statistics), dx = a * dy."""
    if center:
        for j in range(x.shape[0]):
            dx[j] = _dx_value(np.float64(dy[j]), np.float64(x[j]), mean, a, cc, e)
    else:
        for j in range(x.shape[0]):
            dx[j] = a * np.float64(dy[j])


# -- BatchNorm: pieces of one chunk, and their fixed-order totals ----------------------------
# -- BatchNorm columns layout: tiles of rows [r0, r1) and columns [lo, lo + n) ---------------
# Each loop reads four rows per sweep over the tile's per-column numbers (accumulators or
# coefficients), so those are loaded and stored once per four rows.
@jit_inline
def _four_rows(a, i, r1, lo, n):
    """Columns [lo, lo + n) of rows i .. i + 3 of a; rows past r1 - 1 are row r1 - 1 again
    (harmless where the rows are only written with values that do not depend on the row)."""
    return (a[i, lo:lo + n], a[min(i + 1, r1 - 1), lo:lo + n], a[min(i + 2, r1 - 1), lo:lo + n],
            a[min(i + 3, r1 - 1), lo:lo + n])


@jit_inline
def _column_sums(x, lo, r0, r1, shift, center, acc, square):
    """acc[j] = sum over rows i = r0, r0 + 1, ..., r1 - 1, in that order, of v = x[i, lo + j] - shift[j]
    (``square`` False) or of (v - center[j])^2 (``square`` True)."""
    n = acc.shape[0]
    acc[:] = 0.0
    i = r0
    while i < r1:
        if i + 4 <= r1:
            x0, x1, x2, x3 = _four_rows(x, i, r1, lo, n)
            if square:
                for j in range(n):
                    k, c = shift[j], center[j]
                    v0, v1 = (np.float64(x0[j]) - k) - c, (np.float64(x1[j]) - k) - c
                    v2, v3 = (np.float64(x2[j]) - k) - c, (np.float64(x3[j]) - k) - c
                    acc[j] = (((acc[j] + v0 * v0) + v1 * v1) + v2 * v2) + v3 * v3
            else:
                for j in range(n):
                    k = shift[j]
                    acc[j] = (((acc[j] + (np.float64(x0[j]) - k)) + (np.float64(x1[j]) - k))
                              + (np.float64(x2[j]) - k)) + (np.float64(x3[j]) - k)
            i += 4
        else:
            xi = x[i, lo:lo + n]
            if square:
                for j in range(n):
                    v = (np.float64(xi[j]) - shift[j]) - center[j]
                    acc[j] += v * v
            else:
                for j in range(n):
                    acc[j] += np.float64(xi[j]) - shift[j]
            i += 1


@jit_inline
def _column_moments(x, lo, r0, r1, shift, mean, m2):
    """mean of x - shift and M2 of each column of the tile: two passes (the second from cache)."""
    _column_sums(x, lo, r0, r1, shift, mean, mean, False)
    for j in range(mean.shape[0]):
        mean[j] /= r1 - r0
    _column_sums(x, lo, r0, r1, shift, mean, m2, True)


@jit_inline
def _column_dy_sums(dy, x, lo, r0, r1, mean, sx, s):
    """Column sums of dy * (x - mean) and of dy over rows r0, ..., r1 - 1 in order."""
    n = s.shape[0]
    sx[:] = 0.0
    s[:] = 0.0
    i = r0
    while i < r1:
        step = 4 if i + 4 <= r1 else 1
        d0, d1, d2, d3 = _four_rows(dy, i, i + step, lo, n)
        x0, x1, x2, x3 = _four_rows(x, i, i + step, lo, n)
        if step == 4:
            for j in range(n):
                m = mean[j]
                a0, a1, a2, a3 = np.float64(d0[j]), np.float64(d1[j]), np.float64(d2[j]), np.float64(d3[j])
                sx[j] = (((sx[j] + a0 * (np.float64(x0[j]) - m)) + a1 * (np.float64(x1[j]) - m))
                         + a2 * (np.float64(x2[j]) - m)) + a3 * (np.float64(x3[j]) - m)
                s[j] = (((s[j] + a0) + a1) + a2) + a3
        else:
            for j in range(n):
                a0 = np.float64(d0[j])
                sx[j] += a0 * (np.float64(x0[j]) - mean[j])
                s[j] += a0
        i += step


@jit_inline
def _normalize_columns(x, y, lo, r0, r1, mean, scale, b):
    """y = (x - mean) * scale + b with one coefficient per column, over the tile."""
    n = mean.shape[0]
    for i in range(r0, r1, 4):
        x0, x1, x2, x3 = _four_rows(x, i, r1, lo, n)
        y0, y1, y2, y3 = _four_rows(y, i, r1, lo, n)
        for j in range(n):
            m, sc, bj = mean[j], scale[j], b[j]
            y0[j] = _y_value(np.float64(x0[j]), m, sc, bj)
            y1[j] = _y_value(np.float64(x1[j]), m, sc, bj)
            y2[j] = _y_value(np.float64(x2[j]), m, sc, bj)
            y3[j] = _y_value(np.float64(x3[j]), m, sc, bj)


@jit_inline
def _dx_columns(dy, x, dx, lo, r0, r1, mean, a, cc, e, center):
    """_dx_slab with one coefficient per column, over the tile."""
    n = mean.shape[0]
    for i in range(r0, r1, 4):
        d0, d1, d2, d3 = _four_rows(dy, i, r1, lo, n)
        z0, z1, z2, z3 = _four_rows(dx, i, r1, lo, n)
        if center:
            x0, x1, x2, x3 = _four_rows(x, i, r1, lo, n)
            for j in range(n):
                m, aj, cj, ej = mean[j], a[j], cc[j], e[j]
                z0[j] = _dx_value(np.float64(d0[j]), np.float64(x0[j]), m, aj, cj, ej)
                z1[j] = _dx_value(np.float64(d1[j]), np.float64(x1[j]), m, aj, cj, ej)
                z2[j] = _dx_value(np.float64(d2[j]), np.float64(x2[j]), m, aj, cj, ej)
                z3[j] = _dx_value(np.float64(d3[j]), np.float64(x3[j]), m, aj, cj, ej)
        else:
            for j in range(n):
                aj = a[j]
                z0[j] = aj * np.float64(d0[j])
                z1[j] = aj * np.float64(d1[j])
                z2[j] = aj * np.float64(d2[j])
                z3[j] = aj * np.float64(d3[j])


@jit
def _channel_moments(part, rows, S, eps, shift, stats):
    """Merge the pieces in ``part`` (chunks, 2, C * P) into stats (3, C): mean, var, rstd.

    P = part.shape[2] // C pieces per channel and chunk (S in the columns
    layout, 1 in the slabs layout), each of (chunk rows) * S / P values; their
    means are those of x - shift[c].

    Every channel merges its pieces in the order chunk 0 (pieces in order), chunk 1, ...; the
    loop runs that order outside and the channels inside (contiguous in ``part``): a piece has
    the same count in every channel, so the count factors of ``_merge`` are computed once a step.
    """
    chunks = part.shape[0]
    C = stats.shape[1]
    P = part.shape[2] // C
    mean = np.empty(C)                              # the running (mean, M2) of every channel
    m2 = np.empty(C)
    n = 0
    for k in range(chunks):
        r0, r1 = _chunk_rows(k, rows, chunks)
        n_b = (r1 - r0) * S // P
        for q in range(P):
            if n == 0:                              # the first piece: _merge with an empty a
                for c in range(C):
                    mean[c] = part[k, 0, c * P + q]
                    m2[c] = part[k, 1, c * P + q]
            else:                                   # _merge(n, mean, m2, n_b, ...), same operations
                f_mean = n_b / (n + n_b)
                f_m2 = n * n_b / (n + n_b)
                for c in range(C):
                    delta = part[k, 0, c * P + q] - mean[c]
                    mean[c] = mean[c] + delta * f_mean
                    m2[c] = m2[c] + part[k, 1, c * P + q] + delta * delta * f_m2
            n += n_b
    for c in range(C):
        stats[MEAN, c] = shift[c] + mean[c]
        stats[VAR, c] = m2[c] / n
        stats[RSTD, c] = 1.0 / np.sqrt(m2[c] / n + eps)


@jit
def _add_pieces(part, dwb):
    """dwb[r, c] = sum of part[k, r, c * P + p] over chunks k, then pieces p, in that order.

    part (chunks, 2, C * P): per-chunk partial sums; P = 1 but for the columns layouts.
    """
    C = dwb.shape[1]
    P = part.shape[2] // C
    for c in range(C):
        for r in range(2):
            s = 0.0
            for k in range(part.shape[0]):
                for p in range(c * P, c * P + P):
                    s += part[k, r, p]
            dwb[r, c] = s


@jit
def _first_values(x, S, shift):
    """shift[c] = x[0, c * S]: each channel's first value, the shift of its pieces."""
    for c in range(shift.shape[0]):
        shift[c] = x[0, c * S]


@jit
def _spread(cols, values, S):
    """cols[j] = values[j // S]: per-channel numbers as per-column ones."""
    for c in range(values.shape[0]):
        cols[c * S:(c + 1) * S] = values[c]


@jit
def _dx_coefficients(stats, w, dwb, M, coef):
    """coef (3, C): a = rstd * w, cc = rstd^2 * mean_gx, e = rstd * mean_g, from dwb (dweight, dbias)."""
    for c in range(w.shape[0]):
        rstd = stats[RSTD, c]
        coef[0, c] = rstd * w[c]
        coef[1, c] = rstd * rstd * (w[c] * dwb[0, c] / M)
        coef[2, c] = rstd * (w[c] * dwb[1, c] / M)


# -- BatchNorm drivers: x (N, D); with batch_stats False (eval), ``stats`` is given ----------
def _bn_forward_slabs(x, w, b, y, part, stats, eps, S, cb, batch_stats):
    """part (chunks, 2, C): per-chunk (mean, M2); stats (3, C); cb channels per task."""
    N = x.shape[0]
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (C + cb - 1) // cb
    if batch_stats:
        shift = stats[MEAN]                       # the shift until _channel_moments puts the mean there
        _first_values(x, S, shift)
        for t in prange(chunks * blocks):
            k, c0 = t // blocks, (t % blocks) * cb
            r0, r1 = _chunk_rows(k, N, chunks)
            for i in range(r0, r1):
                for c in range(c0, min(C, c0 + cb)):
                    xs = x[i, c * S:(c + 1) * S]
                    mu = _sum_dev(xs, shift[c]) / S
                    mean, m2 = _merge((i - r0) * S, part[k, 0, c], part[k, 1, c], S, mu,
                                      _sum_sq_dev(xs, shift[c] + mu))
                    part[k, 0, c] = mean
                    part[k, 1, c] = m2
        _channel_moments(part, N, S, eps, shift, stats)
    for t in prange(N * C):
        i, c = t // C, t % C
        s = slice(c * S, (c + 1) * S)
        _normalize_slab(x[i, s], y[i, s], stats[MEAN, c], stats[RSTD, c] * w[c], b[c])


def _bn_forward_columns(x, w, b, y, part, stats, cols, eps, S, batch_stats):
    """part (chunks, 2, D): per-chunk (mean, M2) of each column; cols (3, D) scratch."""
    N, D = x.shape
    chunks = part.shape[0]
    blocks = (D + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    if batch_stats:
        shift = stats[MEAN]                       # the shift until _channel_moments puts the mean there
        _first_values(x, S, shift)
        _spread(cols[0], shift, S)
        for t in prange(chunks * blocks):
            k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
            hi = min(D, lo + COLUMN_BLOCK)
            r0, r1 = _chunk_rows(k, N, chunks)
            _column_moments(x, lo, r0, r1, cols[0, lo:hi], part[k, 0, lo:hi], part[k, 1, lo:hi])
        _channel_moments(part, N, S, eps, shift, stats)
    _spread(cols[0], stats[MEAN], S)
    _spread(cols[1], stats[RSTD] * w, S)
    _spread(cols[2], b, S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = _chunk_rows(k, N, chunks)
        _normalize_columns(x, y, lo, r0, r1, cols[0, lo:hi], cols[1, lo:hi], cols[2, lo:hi])


def _bn_backward_slabs(dy, x, w, stats, dx, part, dwb, coef, S, cb, center):
    """part (chunks, 2, C): per-chunk sums of dy * (x - mean) and dy; dwb (2, C) gets dweight,
    dbias; coef (3, C) scratch."""
    N = x.shape[0]
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (C + cb - 1) // cb
    for t in prange(chunks * blocks):
        k, c0 = t // blocks, (t % blocks) * cb
        c1 = min(C, c0 + cb)
        r0, r1 = _chunk_rows(k, N, chunks)
        part[k, :, c0:c1] = 0.0
        for i in range(r0, r1):
            for c in range(c0, c1):
                s = slice(c * S, (c + 1) * S)
                sx, sd = _sum_dy(dy[i, s], x[i, s], stats[MEAN, c])
                part[k, 0, c] += sx
                part[k, 1, c] += sd
    _add_pieces(part, dwb)
    dwb[0] *= stats[RSTD]                         # sum dy * x_hat = rstd * sum dy * (x - mean)
    _dx_coefficients(stats, w, dwb, N * S, coef)
    for t in prange(N * C):
        i, c = t // C, t % C
        s = slice(c * S, (c + 1) * S)
        _dx_slab(dy[i, s], x[i, s], dx[i, s], stats[MEAN, c], coef[0, c], coef[1, c], coef[2, c], center)


def _bn_backward_columns(dy, x, w, stats, dx, part, dwb, coef, cols, S, center):
    """part (chunks, 2, D); coef (3, C) and cols (4, D) scratch."""
    N, D = x.shape
    chunks = part.shape[0]
    blocks = (D + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    _spread(cols[0], stats[MEAN], S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = _chunk_rows(k, N, chunks)
        _column_dy_sums(dy, x, lo, r0, r1, cols[0, lo:hi], part[k, 0, lo:hi], part[k, 1, lo:hi])
    _add_pieces(part, dwb)
    dwb[0] *= stats[RSTD]
    _dx_coefficients(stats, w, dwb, N * S, coef)
    for r in range(3):
        _spread(cols[r + 1], coef[r], S)
    for t in prange(chunks * blocks):
        k, lo = t // blocks, (t % blocks) * COLUMN_BLOCK
        hi = min(D, lo + COLUMN_BLOCK)
        r0, r1 = _chunk_rows(k, N, chunks)
        _dx_columns(dy, x, dx, lo, r0, r1, cols[0, lo:hi], cols[1, lo:hi], cols[2, lo:hi], cols[3, lo:hi], center)


# -- GroupNorm drivers: x (N, D), G groups of m = D / G values ---------------------------------
# For S >= SLAB_MIN the work goes channel slab by channel slab, and ``w``, ``b`` and ``part``
# are per channel (C,); for shorter slabs the group is one run of columns, and they are per
# column (D,) (groupnorm.py spreads the weight and bias).
def _gn_forward(x, w, b, y, stats, eps, S):
    """stats (N, G, 2): mean, rstd per sample and group."""
    N, D = x.shape
    G = stats.shape[1]
    m = D // G
    for t in prange(N * G):
        i, g = t // G, t % G
        lo = g * m
        xg = x[i, lo:lo + m]
        shift = np.float64(xg[0])                        # K: a constant group gives mean = K exactly
        mean = shift + _sum_dev(xg, shift) / m
        rstd = 1.0 / np.sqrt(_sum_sq_dev(xg, mean) / m + eps)
        if S >= SLAB_MIN:
            for c in range(lo // S, (lo + m) // S):
                s = slice(c * S, (c + 1) * S)
                _normalize_slab(x[i, s], y[i, s], mean, rstd * w[c], b[c])
        else:
            yg, wg, bg = y[i, lo:lo + m], w[lo:lo + m], b[lo:lo + m]
            for j in range(m):
                yg[j] = _y_value(np.float64(xg[j]), mean, rstd * wg[j], bg[j])
        stats[i, g, 0] = mean
        stats[i, g, 1] = rstd


def _gn_backward(dy, x, w, stats, dx, part, dwb, S):
    """part (chunks, 2, len(w)): per-chunk dweight, dbias of each channel (or column);
    dwb (2, C) gets their totals in chunk order."""
    N, D = x.shape
    G = stats.shape[1]
    m = D // G
    chunks = part.shape[0]
    for t in prange(chunks * G):
        k, g = t // G, t % G
        r0, r1 = _chunk_rows(k, N, chunks)
        lo = g * m
        wlo, whi = (lo // S, (lo + m) // S) if S >= SLAB_MIN else (lo, lo + m)
        pw, pb = part[k, 0, wlo:whi], part[k, 1, wlo:whi]
        pw[:] = 0.0
        pb[:] = 0.0
        for i in range(r0, r1):
            mean, rstd = stats[i, g, 0], stats[i, g, 1]
            if S >= SLAB_MIN:
                sgx, sg = 0.0, 0.0                # sums of g * (x - mean) and g over the group
                for c in range(wlo, whi):
                    s = slice(c * S, (c + 1) * S)
                    sx, sd = _sum_dy(dy[i, s], x[i, s], mean)
                    pw[c - wlo] += sx * rstd
                    pb[c - wlo] += sd
                    sgx += sx * w[c]
                    sg += sd * w[c]
                cc, e = rstd * rstd * (sgx * rstd / m), rstd * (sg / m)
                for c in range(wlo, whi):
                    s = slice(c * S, (c + 1) * S)
                    _dx_slab(dy[i, s], x[i, s], dx[i, s], mean, rstd * w[c], cc, e, True)
            else:
                dyg, xg, dxg, wg = dy[i, lo:lo + m], x[i, lo:lo + m], dx[i, lo:lo + m], w[lo:lo + m]
                sgx, sg = _sum_g(dyg, xg, wg, mean)
                cc, e = rstd * rstd * (sgx * rstd / m), rstd * (sg / m)
                for j in range(m):
                    d, xj = np.float64(dyg[j]), np.float64(xg[j])
                    dxg[j] = _dx_value(d, xj, mean, rstd * wg[j], cc, e)
                    pw[j] += d * ((xj - mean) * rstd)
                    pb[j] += d
    _add_pieces(part, dwb)


bn_forward_slabs = serial_and_parallel(_bn_forward_slabs)
bn_forward_columns = serial_and_parallel(_bn_forward_columns)
bn_backward_slabs = serial_and_parallel(_bn_backward_slabs)
bn_backward_columns = serial_and_parallel(_bn_backward_columns)
gn_forward = serial_and_parallel(_gn_forward)
gn_backward = serial_and_parallel(_gn_backward)
