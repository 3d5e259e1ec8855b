r"""The (N, C, *) layout as the channel kernels see it, and the elementwise bodies they share.

Every BatchNorm and GroupNorm kernel sees x as (N, D), D = C * S with S the
spatial size: channel c of sample n is the contiguous slab x[n, c*S : (c+1)*S].
Once a slab's statistics are known (mean, rstd: float64 scalars), its
elementwise work is

    forward   y  = (x - mean) * scale + b,                 scale = rstd * w
    backward  dx = a * dy - e - (x - mean) * cc,   g = dy * w,  x_hat = (x - mean) * rstd,
                   a = rstd * w,  e = rstd * mean(g),  cc = rstd^2 * mean(g * x_hat)

(the backward's derivation is in batchnorm_slabs.py; gm = mean(g) and gx =
mean(g * x_hat) are the set's, ``dx_scalars``). Where scale, a, cc or e
overflows float64 (a weight near float64's largest value, or a tiny eps on a
(nearly) constant set), that slab (a GroupNorm run: its group) is computed
unfolded instead, rstd and w applied one at a time as the reference does,
y = ((x - mean) * rstd) * w + b and dx = rstd * ((w dy - gm) - x_hat * gx)
(``y_unfused``, ``dx_unfused``): the folded line would give a constant channel
0 * inf = NaN where y = b, and inf - inf in dx. So is dx where cc's rstd^2 falls below
float64's normal range (``cc_underflows``: rstd < 1.5e-154, a set whose |x - mean| reaches
~1e154), where cc would lose the digits of the x_hat * gx term, or all of them. A slab is read slab by
slab from SLAB_MIN values on (64 bytes of float32); shorter slabs, such as the
S = 1 of (N, C) inputs, are read as columns (batchnorm_columns.py) or as one
run per group (groupnorm_kernels.py).

Precision. The statistics and the per-channel scalars (scale = rstd * w, a,
cc, e) are float64. For float32 x, in BatchNorm's training mode and in
GroupNorm, a slab's elementwise part runs in float32 from those scalars
rounded once, with the mean as hi + lo (float32.py):

    forward   y  = ((x - hi) - lo) * scale + b
    backward  dx = a * dy - e - ((x - hi) - lo) * cc

where the guards let it (for y, float32.row_fits for the set and ``affine_fits``
for the slab: every scalar fits float32 within one rounding, and no
intermediate can overflow); a slab that may not runs the same line in float64.
dx's guards (``dx_fits`` for the set and a fitting for the slab) check its
scalars only, before the line; whether an intermediate overflowed is read
after it, from the results: an overflow gives inf, and inf only ever becomes
inf or NaN in the rest of the line (inf - e, inf * cc, inf - inf, inf * 0), so
a slab whose dx is all finite had no overflow, and a slab with an inf or NaN
(``dx_slab``'s flag) is computed again in float64 (dx never shares memory with
dy or x: _buffers.writable_rows). The bounds below then hold for every slab
left in float32. Counting roundings (u = 2^-24, to first order), y's x_hat * w
term passes through 5 (x - hi, - lo, scale, the product, the sum) and b through
2 (its own, the sum):

    |y - y_exact|   <= u (5 |x_hat w| + 2 |b|)
    |dx - dx_exact| <= u (4 |a dy| + 3 |e| + 5 |(x - mean) cc|)

(a * dy: a, the product, two subtractions; e: its own, two subtractions;
(x - mean) cc: the two steps of x - mean, cc, the product, the last
subtraction), plus the low part of the mean rounded, u |lo| |scale| (or |cc|;
|lo| <= u |mean|), and at most 2^-150 for each product that falls below
float32's normal range (one in y, two in dx). dweight and dbias are float64
sums, as for float64 x. BatchNorm's columns layout (spatial sizes below
SLAB_MIN) computes y the same way, under the same guards per channel, and dx in
float64. float64 and float16 input, BatchNorm's eval mode, and GroupNorm's runs
(spatial sizes below SLAB_MIN) run in float64 and round once at the store. tests/fast/test_kernels_batch.py checks
the bounds element by element against the float64 reference.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit, jit_inline
from .float32 import fits, largest, quarter_of_largest, row_fits

SLAB_MIN = 16          # spatial size from which a channel is read slab by slab


def layout(shape: tuple) -> tuple[int, int, int]:
    """(N, C, S) of an (N, C, *) shape: samples, channels, spatial size (1 for (N, C))."""
    return shape[0], shape[1], math.prod(shape[2:])


@jit
def chunk_rows(k, rows, chunks):
    """Rows [r0, r1) of chunk k of ``chunks`` (``chunks.n_chunks``)."""
    return k * rows // chunks, (k + 1) * rows // chunks


@jit_inline
def y_value(x, hi, lo, scale, b):
    """y = ((x - hi) - lo) * scale + b, scale = rstd * w, the mean as hi + lo (float32.split_mean), in the
    operands' dtype; lo = 0.0 with hi the mean gives (x - mean) * scale + b, the same bits (x - 0.0 is x)."""
    return ((x - hi) - lo) * scale + b


@jit_inline
def dx_value(dy, x, hi, lo, a, cc, e):
    """dx = a * dy - e - ((x - hi) - lo) * cc (module docstring), as y_value."""
    return a * dy - e - ((x - hi) - lo) * cc


@jit_inline
def dx_scalars(rstd, w, gm, gx):
    """(a, cc, e) = (rstd * w, rstd^2 * gx, rstd * gm): dx_value's scalars from rstd, w and the means gm =
    mean(g), gx = mean(g * x_hat) of the set (module docstring)."""
    return rstd * w, rstd * rstd * gx, rstd * gm


@jit_inline
def scale_overflows(rstd, w):
    """Does y_value's scale = rstd * w overflow float64? Then y_unfused."""
    return np.isinf(rstd * w)


@jit_inline
def dx_overflows(a, cc, e, center):
    """Does dx_value's a, cc or e overflow float64 (only a without ``center``)? Then dx_unfused."""
    return np.isinf(a) or (center and (np.isinf(cc) or np.isinf(e)))


@jit_inline
def cc_underflows(rstd):
    """Is cc = rstd^2 * gx's rstd^2 below float64's normal range (rstd < 1.5e-154)? Then dx_unfused, whose
    x_hat * gx keeps its digits (module docstring)."""
    return rstd * rstd < 2.2250738585072014e-308


@jit_inline
def y_unfused(x, mean, rstd, w, b):
    """y = ((x - mean) * rstd) * w + b, float64, in the reference's order: where scale = rstd * w overflows
    (scale_overflows), (x - mean) * scale would give a constant channel 0 * inf = NaN instead of b."""
    return ((x - mean) * rstd) * w + b


@jit_inline
def dx_unfused(dy, x, mean, rstd, w, gm, gx, center):
    """dx = rstd * ((w dy - gm) - x_hat gx), x_hat = (x - mean) * rstd, float64, rstd applied last as in
    the reference (without ``center``, BatchNorm's eval mode: (w dy) rstd, the reference's order): where
    a, cc or e overflows (dx_overflows), a * dy - e would give inf - inf = NaN."""
    if not center:
        return (w * dy) * rstd
    return rstd * ((w * dy - gm) - ((x - mean) * rstd) * gx)


@jit_inline
def normalize_slab(x, y, hi, lo, scale, b):
    """y_value over one slab (S,), in the scalars' dtype: x's, with hi + lo the mean, or float64, with hi
    the mean and lo = 0.0."""
    for j in range(x.shape[0]):
        y[j] = y_value(x[j], hi, lo, scale, b)


@jit
def normalize_slab_float64(x, y, mean, rstd, w, b):
    """normalize_slab in float64: a call, not inlined, so that the float32 loop stays the only one in
    the caller's loop nest (as LayerNorm's affine_other_row). Where scale = rstd * w overflows (a weight
    near float64's largest value, or rstd near it from a tiny eps), the reference's order, y_unfused."""
    if scale_overflows(rstd, w):
        for j in range(x.shape[0]):
            y[j] = y_unfused(np.float64(x[j]), mean, rstd, w, b)
    else:
        normalize_slab(x, y, mean, 0.0, rstd * w, b)


@jit_inline
def dx_slab(dy, x, dx, hi, lo, a, cc, e):
    """dx_value over one slab (S,), in the scalars' dtype, as normalize_slab. Returns whether every dx it
    stored is finite: an intermediate past the dtype's largest value leaves its dx inf or NaN (module
    docstring), so the float32 path reads this to send the slab to float64 (one compare and one AND an
    element, in SIMD lanes, against the largest value in dx's dtype: against a float64 constant each float32
    v was converted, 7-10% of GroupNorm's backward, NOTES.md session 20; the float64 path ignores it)."""
    finite = True
    top = dx.dtype.type(largest(dx))
    for j in range(x.shape[0]):
        v = dx_value(dy[j], x[j], hi, lo, a, cc, e)
        dx[j] = v
        finite &= abs(v) <= top
    return finite


@jit
def dx_slab_float64(dy, x, dx, mean, rstd, w, gm, gx, center):
    """dx_slab in float64 (a call, as normalize_slab_float64), from a slab's rstd, w and the means gm =
    mean(g), gx = mean(g * x_hat) (module docstring); without ``center`` (BatchNorm's eval mode, fixed
    statistics), dx = a * dy. Where a, cc or e overflows, or cc underflows, the reference's order, dx_unfused."""
    a, cc, e = dx_scalars(rstd, w, gm, gx)
    if dx_overflows(a, cc, e, center) or (center and cc_underflows(rstd)):
        for j in range(x.shape[0]):
            dx[j] = dx_unfused(np.float64(dy[j]), np.float64(x[j]), mean, rstd, w, gm, gx, center)
    elif center:
        dx_slab(dy, x, dx, mean, 0.0, a, cc, e)
    else:
        for j in range(x.shape[0]):
            dx[j] = a * np.float64(dy[j])


@jit_inline
def affine_fits(like, M, scale, w, b):
    """May a slab's y run in like's dtype (float32.py), its set's guard (float32.row_fits) passed? scale =
    rstd * w and b fit it within one rounding, and sqrt(M) |w| + |b|, a bound of every |y| in a set of M
    values, is under a quarter of its largest value."""
    return fits(scale, like) and fits(b, like) and quarter_of_largest(np.sqrt(M) * abs(w) + abs(b), like)


@jit_inline
def dx_fits(like, M, var, rstd, lo, cc, e):
    """May the dx of a set's slabs be tried in like's dtype (float32.py), each slab's a fitting it too?
    The set's guard (float32.row_fits) holds and cc and e fit within one rounding. Nothing here bounds
    |a dy| (that took a third sum, of dy^2, an element): an overflow is caught after the fact instead,
    by dx_slab's finite test, and the slab computed again in float64 (module docstring)."""
    return row_fits(like, M, var, rstd, lo) and fits(cc, like) and fits(e, like)
