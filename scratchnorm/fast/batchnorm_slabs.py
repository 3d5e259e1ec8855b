r"""BatchNorm's kernels for images (spatial size S >= SLAB_MIN), and the steps both layouts share.

Per channel c, over the M = N * S values of that channel in the batch, in float64 (a
float32 slab's elementwise line in float32 in training mode: channel_slabs.py):

    forward   mean = sum x / M,  var = sum (x - mean)^2 / M,  rstd = 1 / sqrt(var + eps)
              y = (x - mean) * (rstd * w) + b
    backward  g = dy * w,  x_hat = (x - mean) * rstd
              dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))      training (batch statistics)
              dx = (rstd * w) * dy                                     eval (fixed statistics)
              dweight = sum dy * x_hat,  dbias = sum dy

Why the training dx simplifies: mean and rstd depend on every x of the
channel. The mean's path subtracts the average of the gradient, mean(g); the
variance's path removes the gradient's component along x_hat, x_hat * mean(g *
x_hat). Both means are taken from the dweight and dbias sums (times w / M), so
the backward needs one pass for the sums and one for dx:

    dx = a * dy - e - (x - mean) * cc,   a = rstd * w,  e = rstd * w * dbias / M,
                                         cc = rstd^2 * w * dweight / M      (``dx_coefficients``)

Variance: never E[x^2] - E[x]^2. The values are cut into pieces that fit in
cache; each piece's mean and M2 = sum (x - mean)^2 take two passes, and pieces
merge with Chan, Golub & LeVeque's update (``merge``):

    delta = mean_b - mean_a,   mean = mean_a + delta * n_b / n,   M2 = M2_a + M2_b + delta^2 n_a n_b / n

Nothing large is subtracted: each piece takes the mean of x - K, K the
channel's first value, so delta keeps its digits however far the data sit from 0.

Threads. A channel is strided across the samples, which are cut into
``chunks.n_chunks(N)`` fixed chunks. Here a task (chunk, block of channels) walks
its slabs in memory order, merging each into its channel's (mean, M2) for that
chunk; the chunks' pieces are then merged channel by channel in chunk order
(``channel_moments``), and the backward's sums are added the same way
(``add_pieces``): the bits do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import jit, serial_and_prange
from .channel_slabs import (affine_fits, chunk_rows, dx_fits, dx_scalars, dx_slab, dx_slab_float64, normalize_slab,
                            normalize_slab_float64)
from .float32 import fits, row_fits, split_mean
from .stats import MEAN, RSTD, VAR, sum_dev, sum_dy, sum_sq_dev

SPAN = 1 << 13         # values a task reads from one sample before the next sample
A, CC, E, GM, GX = range(5)   # the rows of dx_coefficients' coef


def channel_block(S: int, C: int) -> int:
    """Channels per task: enough that a task reads >= SPAN values of each sample, but no more than a
    quarter of the C channels, so that a small batch (one chunk of samples) still gives a second thread
    work: at 8x32x16x16, 32 channels a task made the statistics one task (NOTES.md, session 13)."""
    return max(1, min(SPAN // S, C // 4))


# -- between the passes: pieces to per-channel numbers (both layouts) --------------------------
@jit
def merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """(mean, M2) of pieces a (n_a values) and b (n_b) together. a may be empty (n_a = 0)."""
    if n_a == 0:
        return mean_b, m2_b
    n = n_a + n_b
    delta = mean_b - mean_a
    return mean_a + delta * (n_b / n), m2_a + m2_b + delta * delta * (n_a * n_b / n)


@jit
def channel_moments(part, rows, S, eps, shift, stats):
    """Merge the pieces in ``part`` (chunks, 2, C * P) into stats (3, C): mean, var, rstd.

    P = part.shape[2] // C pieces per channel and chunk (S in the columns
    layout, 1 here), each of (chunk rows) * S / P values; their means are those
    of x - shift[c]. Every channel merges its pieces in the order chunk 0
    (pieces in order), chunk 1, ...; the loop runs that order outside and the
    channels inside (contiguous in ``part``): a piece has the same count in
    every channel, so ``merge``'s count factors are computed once a step.
    """
    chunks = part.shape[0]
    C = stats.shape[1]
    P = part.shape[2] // C
    mean = np.empty(C)                              # (C,) the running (mean, M2) of every channel
    m2 = np.empty(C)
    n = 0
    for k in range(chunks):
        r0, r1 = chunk_rows(k, rows, chunks)
        n_b = (r1 - r0) * S // P
        for q in range(P):
            if n == 0:                              # the first piece: merge with an empty a
                for c in range(C):
                    mean[c] = part[k, 0, c * P + q]
                    m2[c] = part[k, 1, c * P + q]
            else:                                   # merge(n, mean, m2, n_b, ...), same operations
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
def add_pieces(part, dwb):
    """dwb[r, c] = sum of part[k, r, c * P + p] over chunks k, then pieces p, in that order.

    part (chunks, R, C * P): per-chunk partial sums of R quantities (dweight and dbias); P = 1 but in
    the columns layout with S > 1. The chunks run outside and the channels inside, reading ``part`` in
    memory order; every channel still adds in the order above.
    """
    C = dwb.shape[1]
    P = part.shape[2] // C
    dwb[:] = 0.0
    for k in range(part.shape[0]):
        for r in range(part.shape[1]):
            piece, total = part[k, r], dwb[r]       # (C * P,), (C,)
            if P == 1:
                for c in range(C):
                    total[c] += piece[c]
            else:
                for c in range(C):
                    s = total[c]
                    for p in range(c * P, c * P + P):
                        s += piece[p]
                    total[c] = s


@jit
def first_values(x, S, shift):
    """shift[c] = x[0, c * S]: each channel's first value, the shift K of its pieces."""
    for c in range(shift.shape[0]):
        shift[c] = x[0, c * S]


@jit
def dx_coefficients(stats, w, dwb, M, coef):
    """coef (5, C): a, cc, e (channel_slabs.dx_scalars) and the means they come from, gm = mean(g) =
    w * dbias / M and gx = mean(g * x_hat) = w * dweight / M, from dwb (2, C) = (dweight, dbias)
    (module docstring)."""
    for c in range(w.shape[0]):
        gm, gx = w[c] * dwb[1, c] / M, w[c] * dwb[0, c] / M
        coef[A, c], coef[CC, c], coef[E, c] = dx_scalars(stats[RSTD, c], w[c], gm, gx)
        coef[GM, c], coef[GX, c] = gm, gx


@jit
def affine_in_x(stats, w, b, M, like, batch_stats):
    """Per channel, whether its y may run in like's dtype (float32.row_fits, channel_slabs.affine_fits)
    and the scalars it then takes, in that dtype: (in_x, hi, lo, scale, bias), each (C,). Never in eval
    mode (``batch_stats`` False): there x_hat has no bound (float32.py)."""
    C = w.shape[0]
    T = like.dtype.type
    in_x = np.zeros(C, np.bool_)
    hi, lo, scale, bias = (np.zeros(C, like.dtype), np.zeros(C, like.dtype), np.zeros(C, like.dtype),
                           np.zeros(C, like.dtype))
    for c in range(C if batch_stats else 0):
        mean, rstd = stats[MEAN, c], stats[RSTD, c]
        h, rest = split_mean(mean, like)
        sc = rstd * w[c]
        in_x[c] = row_fits(like, M, stats[VAR, c], rstd, rest) and affine_fits(like, M, sc, w[c], b[c])
        if in_x[c]:                                   # (a cast of a value that does not fit would warn)
            hi[c], lo[c], scale[c], bias[c] = h, T(rest), T(sc), T(b[c])
    return in_x, hi, lo, scale, bias


@jit
def dx_in_x(stats, coef, M, like, center):
    """Per channel, whether its dx may be tried in like's dtype (channel_slabs.dx_fits, and a fits) and
    the scalars it then takes, in that dtype: (in_x, hi, lo, a, cc, e), each (C,), from coef
    (dx_coefficients: a, cc, e). A slab whose dx then comes out inf or NaN goes to float64 after all
    (channel_slabs.dx_slab). Never in eval mode (``center`` False), as affine_in_x."""
    C = coef.shape[1]
    T = like.dtype.type
    in_x = np.zeros(C, np.bool_)
    hi, lo, a, cc, e = (np.zeros(C, like.dtype), np.zeros(C, like.dtype), np.zeros(C, like.dtype),
                        np.zeros(C, like.dtype), np.zeros(C, like.dtype))
    for c in range(C if center else 0):
        h, rest = split_mean(stats[MEAN, c], like)
        ac = coef[A, c]
        in_x[c] = fits(ac, like) and dx_fits(like, M, stats[VAR, c], stats[RSTD, c], rest, coef[CC, c], coef[E, c])
        if in_x[c]:                                   # (a cast of a value that does not fit would warn)
            hi[c], lo[c], a[c], cc[c], e[c] = h, T(rest), T(ac), T(coef[CC, c]), T(coef[E, c])
    return in_x, hi, lo, a, cc, e


# -- the slab drivers: x (N, C * S); in eval mode (batch_stats False) ``stats`` is given ---------
def batch_norm_slabs_forward_kernel(x, w, b, y, part, stats, eps, S, cb, batch_stats):
    """part (chunks, 2, C): per-chunk (mean, M2) of each channel; stats (3, C); cb channels per task."""
    N = x.shape[0]
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (C + cb - 1) // cb
    if batch_stats:
        shift = stats[MEAN]                       # the shift K until channel_moments puts the mean there
        first_values(x, S, shift)
        for t in prange(chunks * blocks):
            k, c0 = t // blocks, (t % blocks) * cb
            r0, r1 = chunk_rows(k, N, chunks)
            for i in range(r0, r1):
                for c in range(c0, min(C, c0 + cb)):
                    xs = x[i, c * S:(c + 1) * S]                  # (S,) slab of sample i, channel c
                    mu = sum_dev(xs, shift[c]) / S
                    mean, m2 = merge((i - r0) * S, part[k, 0, c], part[k, 1, c], S, mu,
                                     sum_sq_dev(xs, shift[c] + mu))
                    part[k, 0, c] = mean
                    part[k, 1, c] = m2
        channel_moments(part, N, S, eps, shift, stats)
    in_x, hi, lo, scale, bias = affine_in_x(stats, w, b, N * S, x, batch_stats)
    for t in prange(N * C):
        i, c = t // C, t % C
        s = slice(c * S, (c + 1) * S)
        if in_x[c]:
            normalize_slab(x[i, s], y[i, s], hi[c], lo[c], scale[c], bias[c])
        else:
            normalize_slab_float64(x[i, s], y[i, s], stats[MEAN, c], stats[RSTD, c], w[c], b[c])


def batch_norm_slabs_backward_kernel(dy, x, w, stats, dx, part, dwb, coef, S, cb, center):
    """part (chunks, 2, C): per-chunk sums of dy * (x - mean) and of dy; dwb (2, C) gets their totals
    (dweight, dbias); coef (5, C) scratch for dx_coefficients."""
    N = x.shape[0]
    C = w.shape[0]
    chunks = part.shape[0]
    blocks = (C + cb - 1) // cb
    for t in prange(chunks * blocks):
        k, c0 = t // blocks, (t % blocks) * cb
        c1 = min(C, c0 + cb)
        r0, r1 = chunk_rows(k, N, chunks)
        part[k, :, c0:c1] = 0.0
        for i in range(r0, r1):
            for c in range(c0, c1):
                s = slice(c * S, (c + 1) * S)
                sd, sx = sum_dy(dy[i, s], x[i, s], stats[MEAN, c])
                part[k, 0, c] += sx
                part[k, 1, c] += sd
    add_pieces(part, dwb)
    dwb[0] *= stats[RSTD]                         # dweight = sum dy * x_hat = rstd * sum dy * (x - mean)
    dx_coefficients(stats, w, dwb, N * S, coef)
    in_x, hi, lo, a, cc, e = dx_in_x(stats, coef, N * S, x, center)
    for t in prange(N * C):
        i, c = t // C, t % C
        s = slice(c * S, (c + 1) * S)
        if not (in_x[c] and dx_slab(dy[i, s], x[i, s], dx[i, s], hi[c], lo[c], a[c], cc[c], e[c])):
            dx_slab_float64(dy[i, s], x[i, s], dx[i, s], stats[MEAN, c], stats[RSTD, c], w[c], coef[GM, c],
                            coef[GX, c], center)


bn_forward_slabs = serial_and_prange(batch_norm_slabs_forward_kernel)
bn_backward_slabs = serial_and_prange(batch_norm_slabs_backward_kernel)
