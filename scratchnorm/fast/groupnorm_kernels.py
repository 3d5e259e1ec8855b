r"""GroupNorm's kernels (InstanceNorm is G = C): x (N, D), D = C * S, G groups of m = D / G values.

Group g of sample n is the contiguous run x[n, g*m : (g+1)*m]. Per (sample, group),
over its m values, in float64 (a float32 slab's elementwise line in float32:
channel_slabs.py):

    forward   mean = sum x / m,  var = sum (x - mean)^2 / m,  rstd = 1 / sqrt(var + eps)
              (var overflowed, |x - mean| beyond ~1e154: from the group scaled, variants.huge_row_rstd)
              y = (x - mean) * (rstd * w) + b                   (w, b per channel)
    backward  g = dy * w,  x_hat = (x - mean) * rstd
              dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
              dweight = sum over samples and positions of dy * x_hat,  dbias = sum of dy

dx simplifies as BatchNorm's does (batchnorm_slabs.py), with the means taken over
the group; since w varies along the group, mean(g) and mean(g * x_hat) are sums of
g itself, not dbias and dweight times w. In the channel_slabs.py form:
a = rstd * w, e = rstd * mean(g), cc = rstd^2 * mean(g * x_hat).

The forward is one task per (sample, group): the mean (``group_moments``: a
plain float64 sum for float32 x, of x - K for float64 x, K the group's first
value; either way a constant group has x_hat = 0 exactly), the variance about
it, the store; stats (3, N * G) gets column n * G + g. The backward's tasks are
(chunk of samples, group): dx of the group, and the chunk's dweight, dbias
partial sums, added in chunk order at the end (``add_pieces``): the bits do not
depend on the thread count.

For S >= SLAB_MIN the work goes slab by slab, and w, b and the partial sums are
per channel (C,); a float32 slab runs in float32 where the guards let it
(channel_slabs.py states the bound). The guards run once a (sample, group), not
once a slab: what they need of the slabs' w and b is read once a call
(``group_weights``), and the group goes to float32 or float64 whole; in the
backward, a slab whose float32 dx came out inf or NaN (an overflow the guards
do not bound: |a dy|) is then computed again in float64 (channel_slabs.dx_slab).
For shorter slabs
the group is one run of columns, in float64, and w, b and the sums are per
column (D,) (groupnorm.py spreads the weight and bias).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import jit, jit_inline, serial_and_prange
from .batchnorm_slabs import add_pieces
from .channel_slabs import (SLAB_MIN, cc_underflows, chunk_rows, dx_fits, dx_overflows, dx_scalars,
                            dx_slab, dx_slab_float64, dx_unfused, dx_value, normalize_slab, normalize_slab_float64,
                            scale_overflows, y_unfused, y_value)
from .float32 import fits, largest, quarter_of_largest, row_fits, split_mean
from .stats import MEAN, RSTD, VAR, sum_dev, sum_dy, sum_g, sum_of, sum_sq_dev
from .variants import INSIDE, huge_row_rstd


@jit
def group_max_abs(w, G):
    """(G,): the largest |w| of each group's part of w (per channel or per column): where rstd times it
    fits float64, so does every scale = rstd * w of the group (channel_slabs.y_unfused). The runs path
    (S < SLAB_MIN) reads it; the slab path checks each slab's own w."""
    n = w.shape[0] // G
    w_max = np.zeros(G)
    for g in range(G):
        for j in range(g * n, (g + 1) * n):
            w_max[g] = max(w_max[g], abs(w[j]))
    return w_max


@jit
def group_weights(w, b, G, M, like):
    """Per group (G,), once a call, what the float32 guards need of its slabs' w and b (S >= SLAB_MIN):
    (w_min, w_max, y_ok): the smallest nonzero and the largest |w| (inf where a w is NaN or does not fit
    like's dtype), and whether every b fits it within one rounding and every sqrt(M) |w| + |b| is under
    a quarter of its largest value (channel_slabs.affine_fits, for every slab of the group at once)."""
    n = w.shape[0] // G
    w_min, w_max, y_ok = np.full(G, np.inf), np.zeros(G), np.ones(G, np.bool_)
    for g in range(G):
        for c in range(g * n, (g + 1) * n):
            aw = abs(w[c])
            if not aw <= largest(like):                  # NaN, or beyond like's dtype
                w_max[g] = np.inf
            elif aw > 0.0:
                w_min[g] = min(w_min[g], aw)
                w_max[g] = max(w_max[g], aw)
            y_ok[g] = y_ok[g] and fits(b[c], like) and quarter_of_largest(np.sqrt(M) * aw + abs(b[c]), like)
    return w_min, w_max, y_ok


@jit_inline
def scales_fit(rstd, w_min, w_max, like):
    """Does every rstd * w of a group, w_min <= |w| <= w_max or w = 0, fit like's dtype within one
    rounding (float32.fits)? Both ends inside its normal range: rounding is monotone, so every product
    between them is too. False for NaN."""
    return rstd * w_max <= largest(like) and (w_min == np.inf or rstd * w_min >= smallest_normal(like))


@jit_inline
def smallest_normal(like):
    """The smallest positive normal number of like's dtype (float32 or float64)."""
    return 1.1754943508222875e-38 if like.itemsize == 4 else 2.2250738585072014e-308


@jit_inline
def group_moments(xg):
    """(mean, var) of a group xg (m,), two passes in float64. float32 xg: mean = sum(x) / m, exact for a
    constant group (stats.row_mean's argument), one subtraction an element fewer than about a shift;
    float64 xg: about its first value K, mean = K + sum(x - K) / m, which makes a constant group's mean K."""
    m = xg.shape[0]
    if xg.itemsize == 4:                                 # (a constant: one branch is compiled)
        mean = sum_of(xg) / m
    else:
        shift = np.float64(xg[0])
        mean = shift + sum_dev(xg, shift) / m
    return mean, sum_sq_dev(xg, mean) / m


def group_norm_forward_kernel(x, w, b, y, stats, eps, S):
    """stats (3, N * G): mean, var, rstd of every (sample, group)."""
    N, D = x.shape
    G = stats.shape[1] // N
    m = D // G
    w_max = group_max_abs(w, G)
    w_lo, w_hi, y_ok = group_weights(w, b, G, m, x)      # (G,) each: read by the slab path
    for t in prange(N * G):
        i, g = t // G, t % G
        j0 = g * m
        xg = x[i, j0:j0 + m]                             # (m,) group g of sample i
        mean, var = group_moments(xg)
        rstd = 1.0 / np.sqrt(var + eps)
        if var == np.inf:                                # beyond float64's square: on the group scaled
            rstd = huge_row_rstd(xg, mean, eps, INSIDE)  # (variants.py)
        if S >= SLAB_MIN:
            T = x.dtype.type
            hi, lo = split_mean(mean, x)
            # the group's one guard (channel_slabs.py): row_fits, and affine_fits for every slab at once
            in_x = y_ok[g] and row_fits(x, m, var, rstd, lo) and scales_fit(rstd, w_lo[g], w_hi[g], x)
            for c in range(j0 // S, (j0 + m) // S):
                s = slice(c * S, (c + 1) * S)
                if in_x:
                    normalize_slab(x[i, s], y[i, s], hi, T(lo), T(rstd * w[c]), T(b[c]))
                else:
                    normalize_slab_float64(x[i, s], y[i, s], mean, rstd, w[c], b[c])
        else:
            yg, wg, bg = y[i, j0:j0 + m], w[j0:j0 + m], b[j0:j0 + m]
            if scale_overflows(rstd, w_max[g]):            # a scale past float64: the reference's order
                for j in range(m):
                    yg[j] = y_unfused(np.float64(xg[j]), mean, rstd, wg[j], bg[j])
            else:
                for j in range(m):
                    yg[j] = y_value(np.float64(xg[j]), mean, 0.0, rstd * wg[j], bg[j])
        stats[MEAN, t] = mean
        stats[VAR, t] = var
        stats[RSTD, t] = rstd


def group_norm_backward_kernel(dy, x, w, stats, dx, part, dwb, S):
    """part (chunks, 2, len(w)): per-chunk dweight, dbias of each channel (or column);
    dwb (2, C) gets their totals in chunk order."""
    N, D = x.shape
    G = stats.shape[1] // N
    m = D // G
    w_max = group_max_abs(w, G)
    w_lo, w_hi, _ = group_weights(w, w, G, m, x)         # (G,) the slab path's w range (b unused here)
    chunks = part.shape[0]
    for t in prange(chunks * G):
        k, g = t // G, t % G
        r0, r1 = chunk_rows(k, N, chunks)
        j0 = g * m
        wlo, whi = (j0 // S, (j0 + m) // S) if S >= SLAB_MIN else (j0, j0 + m)
        pw, pb = part[k, 0, wlo:whi], part[k, 1, wlo:whi]
        pw[:] = 0.0
        pb[:] = 0.0
        for i in range(r0, r1):
            mean, var, rstd = stats[MEAN, i * G + g], stats[VAR, i * G + g], stats[RSTD, i * G + g]
            if S >= SLAB_MIN:
                sg, sgx = 0.0, 0.0                  # sums of g and g * (x - mean) over the group
                for c in range(wlo, whi):
                    s = slice(c * S, (c + 1) * S)
                    sd, sx = sum_dy(dy[i, s], x[i, s], mean)
                    pw[c - wlo] += sx * rstd
                    pb[c - wlo] += sd
                    sgx += sx * w[c]
                    sg += sd * w[c]
                gm, gx = sg / m, sgx * rstd / m             # mean(g), mean(g * x_hat) over the group
                _, cc, e = dx_scalars(rstd, 1.0, gm, gx)
                T = x.dtype.type
                hi, lo = split_mean(mean, x)
                # the group's one guard (channel_slabs.py), and every slab's a = rstd * w fitting; a slab
                # whose float32 dx is not all finite (an overflow: dx_slab) is computed again in float64
                in_x = dx_fits(x, m, var, rstd, lo, cc, e) and scales_fit(rstd, w_lo[g], w_hi[g], x)
                for c in range(wlo, whi):
                    s = slice(c * S, (c + 1) * S)
                    if not (in_x and dx_slab(dy[i, s], x[i, s], dx[i, s], hi, T(lo), T(rstd * w[c]), T(cc), T(e))):
                        dx_slab_float64(dy[i, s], x[i, s], dx[i, s], mean, rstd, w[c], gm, gx, True)
            else:
                dyg, xg, dxg, wg = dy[i, j0:j0 + m], x[i, j0:j0 + m], dx[i, j0:j0 + m], w[j0:j0 + m]
                sg, sgx = sum_g(dyg, xg, wg, mean)
                gm, gx = sg / m, sgx * rstd / m
                a_max, cc, e = dx_scalars(rstd, w_max[g], gm, gx)
                for j in range(m):
                    d, xj = np.float64(dyg[j]), np.float64(xg[j])
                    dxg[j] = dx_value(d, xj, mean, 0.0, rstd * wg[j], cc, e)
                    pw[j] += d * ((xj - mean) * rstd)
                    pb[j] += d
                if dx_overflows(a_max, cc, e, True) or cc_underflows(rstd):   # past float64: again, in the
                                                                                  # reference's order
                    for j in range(m):
                        dxg[j] = dx_unfused(np.float64(dyg[j]), np.float64(xg[j]), mean, rstd, wg[j], gm, gx, True)
    add_pieces(part, dwb)


gn_forward = serial_and_prange(group_norm_forward_kernel)
gn_backward = serial_and_prange(group_norm_backward_kernel)
