r"""When a row's elementwise part may run in float32: the guards, and the bound they give.

The statistics are float64 (stats.py). For float32 x, the kernels compute the
elementwise part (y from x_hat, and the backward's dx) in float32, from the
float64 row scalars rounded to float32: twice the SIMD lanes of float64 and no
conversions. A row does so only if nothing in its float32 arithmetic can
overflow or lose precision:

* ``fits(v, like)``: a float64 scalar (rstd, the low part of the mean, a
  backward coefficient) survives the trip to float32 within one rounding: not
  NaN, not beyond float32's largest value, not subnormal there;
* ``bounded(w, b)``, once per call: sqrt(d) * sum|w| + sum|b| is under a
  quarter of float32's largest value, so that x_hat * w + b (|x_hat| <= sqrt(d))
  cannot overflow whatever the row;
* for LayerNorm, the deviation sqrt(d * var) is under a quarter of it too, so
  that x - mean cannot overflow.

The mean enters as two float32 numbers, hi + lo (``split_mean``), and x - mean
as (x - hi) - lo: x - hi is exact for x near hi (Sterbenz), so a large mean
costs no precision.

A row that fails a guard runs the same loop with float64 scalars (numba then
computes it in float64). The bounds each kernel gets from this are stated in
its module docstring (layernorm.py, rmsnorm.py, channel_slabs.py) and tested
against the float64 reference.

The channel kernels (BatchNorm in training mode, GroupNorm) keep the same
guards per normalized set of M values (a channel of the batch, a group of a
sample): ``row_fits`` with d = M, since the set's deviation sqrt(M * var)
bounds every |x - mean| there as a row's does; and, per slab (a channel of a
sample), channel_slabs.affine_fits for y (``bounded``'s test for that
channel's weight and bias) and channel_slabs.dx_fits for dx, which checks the
scalars only: dx's overflow is read after the float32 line, from its results
(an inf or NaN there sends the slab to float64, channel_slabs.py), where a
bound of |a dy| before it took a third sum an element. BatchNorm's eval
mode has no such bound (x is normalized by running statistics it was not part
of) and stays float64.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline, jit_sum

FLOAT32_MAX = 3.4028234663852886e38


@jit_inline
def largest(like):
    """The largest finite number of like's dtype (float32 or float64)."""
    return FLOAT32_MAX if like.itemsize == 4 else 1.7976931348623157e308


@jit_inline
def fits(v, like):
    """Does float64 v survive a round trip through like's dtype within one rounding?"""
    if not abs(v) <= largest(like):           # NaN, Inf, overflow (checked first: a cast would warn)
        return False
    t = np.float64(like.dtype.type(v))
    return abs(t - v) <= 6.0e-8 * abs(v)      # 2**-24 = 5.96e-8: the relative rounding of float32


@jit_sum
def sum_abs(v):
    """sum of |v| over a (G, m) array (an upper bound of max |v| that vectorizes). Indexed row by row
    (NOTES.md: iterating ``v.ravel()`` did not vectorize)."""
    s = 0.0
    for g in range(v.shape[0]):
        row = v[g]
        for j in range(row.shape[0]):
            s += abs(np.float64(row[j]))
    return s


@jit
def bounded(w, b, k):
    """Can no intermediate of the float32 loop overflow, whatever the row? Over the (G, m) weight and
    bias; False for pRMSNorm (k < m: x_hat beyond the first k features is unbounded) and for NaN."""
    m = w.shape[1]
    if k != m:
        return False
    return np.sqrt(m) * sum_abs(w) + sum_abs(b) <= 0.25 * largest(w)


@jit_inline
def split_mean(mean, like):
    """mean = hi + lo: hi, the float64 mean rounded to like's dtype, and lo, the float64 rest. x - hi is
    exact for x near hi (Sterbenz), so (x - hi) - lo loses nothing to a large mean."""
    hi = like.dtype.type(mean)
    return hi, mean - np.float64(hi)


@jit_inline
def quarter_of_largest(v, like):
    """v <= a quarter of like's largest value (False for NaN): the margin every guard above keeps."""
    return v <= 0.25 * largest(like)


@jit_inline
def row_fits(x, d, var, rstd, lo):
    """May this row's elementwise part run in x's dtype? rstd and lo (the mean's low part) fit it
    within one rounding, and the deviation sqrt(d var), a bound of every |x - mean|, is under a
    quarter of its largest value, so that x - hi cannot overflow (var = 0 for RMSNorm)."""
    return fits(rstd, x) and fits(lo, x) and quarter_of_largest(np.sqrt(d * var), x)


@jit_inline
def dx_fits(x, d, var, rstd, lo, mean_g, mean_gx):
    """May a row's dx run in x's dtype? The forward's guard (row_fits), and the backward's coefficients
    mean(g) and mean(g x_hat) fit x's dtype within one rounding, with sqrt(d) |mean(g x_hat)|, a bound
    of every |x_hat mean(g x_hat)|, under a quarter of its largest value (RMSNorm: var = lo = mean_g =
    0). Every |g| is under a quarter of it too, and so |mean(g)|: the row sums took g four times over in
    x's dtype (stats.row_sum_g), so that a larger g made them, and a coefficient, inf or NaN, which
    ``fits`` refuses. g - mean(g) - x_hat mean(g x_hat) then stays under 3/4 of the largest value."""
    return (row_fits(x, d, var, rstd, lo) and fits(mean_g, x) and fits(mean_gx, x)
            and quarter_of_largest(np.sqrt(d) * abs(mean_gx), x))


@jit_inline
def narrowed(v, like):
    """(v in like's dtype, whether it fits there): a new vector, made once per call (LayerNorm's and RMSNorm's
    kernels take their weight and bias as float32 or float64, whatever x's dtype). It fits when sum |v| is
    within like's largest value (so is every |v|; a vectorized sum where a test of each value was not: 4 us
    a call at d = 4096, NOTES.md, session 18); where it does not (a weight of 1e39 for float32 x, a NaN, or
    thousands of weights near 1e35), the kernel runs every row in float64 with v itself, and the vector
    returned is not filled."""
    out = np.empty(v.shape[0], like.dtype)
    fits_like = sum_abs(v.reshape((1, v.shape[0]))) <= largest(like)
    if fits_like:
        for j in range(v.shape[0]):
            out[j] = v[j]
    return out, fits_like
