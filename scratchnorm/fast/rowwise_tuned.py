r"""The row-wise kernel's tricks: the same computation as rowwise.py, faster, built from its pieces.

Each trick is a switch (tricks.py; NOTES.md has the measurements) and each is
tested against the readable kernel (tests/fast/test_tricks.py):

* ``f32_affine`` (``forward_row_tuned``): for float32 x, the forward's
  elementwise part y = x_hat * w + b runs in float32 from the float64
  statistics: twice the SIMD lanes and no conversions. Within a stated bound
  of the readable kernel (below), not bitwise.
* ``stream`` (``_stream.affine_row_streamed``; ``stream_row`` in the drivers): outputs
  that fill the last-level cache are written with non-temporal stores
  (_stream.py). Bitwise the same.
* ``paired_rows`` (``backward_two_rows``): the backward does two rows per pass,
  so dweight and dbias are read and written once for both. Bitwise the same.

The bound of ``f32_affine``. x_hat = ((x - hi) - lo) * rstd with hi + lo = mean,
both float32: x - hi is exact or rounded once (Sterbenz's lemma when |mean| >>
std); - lo, * rstd, * w and + b round once each. With u = 2^-24, y is within
about 7u |x_hat * w| + 2u |b| of the exact value, 3.5 float32 epsilons of
|x_hat * w| + |b| (the tests allow 4). A row runs the readable float64 loop
instead unless nothing can overflow or lose precision: rstd and lo fit float32
within one rounding (``float32.fits``), the deviation sqrt(m ms) is under a quarter of
float32's largest value, and ``float32.bounded`` (once per call: every feature feeds the
statistic, and sqrt(m) sum|w| + sum|b| is under a quarter of it). So pRMSNorm
(k < m) stays float64.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit_inline
from .float32 import row_fits
from ._stream import affine_row, affine_row_streamed
from .rowwise import forward_row, row_coefs, row_stats


@jit_inline
def forward_row_tuned(x, w, b, y, stats, center, k, eps, mode, is_bounded, stream):
    """rowwise.forward_row with the ``f32_affine`` trick (and ``stream`` on its float32 rows);
    the rows it cannot take safely (module docstring) run ``forward_row`` itself."""
    mean, ms, rstd = row_stats(x, center, k, eps, mode)
    T = x.dtype.type
    hi = T(mean)
    lo = mean - np.float64(hi)
    # |x - mean| <= sqrt(m ms) with centering (k = m): below a quarter of T's largest value,
    # x - hi cannot overflow; bounded covers x_hat * w + b
    m = x.shape[0]
    if is_bounded and row_fits(x, m, ms if center else 0.0, rstd, lo):
        if stream:
            affine_row_streamed(x, hi, T(lo), T(rstd), w, b, y)
        else:
            affine_row(x, hi, T(lo), T(rstd), w, b, y)
        stats[0] = mean
        stats[1] = ms
        stats[2] = rstd
    else:
        forward_row(x, w, b, y, stats, center, k, eps, mode)


# -- paired_rows ------------------------------------------------------------------------------
@jit_inline
def backward_two_rows(dy0, x0, stats0, dx0, dy1, x1, stats1, dx1, w, dw, db, center, k, eps, mode):
    """rowwise.backward_row for two rows with the same weight, one after the other, in one loop:
    dw and db are read and written once for both, and ``dw[j] + t0 + t1`` adds in the order of
    two backward_row calls, so the bits are theirs. Returns both d loss / d eps."""
    mean0, rstd0, mean_g0, a0, deps0 = row_coefs(dy0, x0, w, stats0, center, k, eps, mode)
    mean1, rstd1, mean_g1, a1, deps1 = row_coefs(dy1, x1, w, stats1, center, k, eps, mode)
    for j in range(x0.shape[0]):
        dyj0 = np.float64(dy0[j])
        dyj1 = np.float64(dy1[j])
        xh0 = (np.float64(x0[j]) - mean0) * rstd0
        xh1 = (np.float64(x1[j]) - mean1) * rstd1
        v0 = dyj0 * w[j] - mean_g0
        v1 = dyj1 * w[j] - mean_g1
        if j < k:
            v0 += a0 * xh0
            v1 += a1 * xh1
        dx0[j] = rstd0 * v0
        dx1[j] = rstd1 * v1
        dw[j] = dw[j] + dyj0 * xh0 + dyj1 * xh1
        db[j] = db[j] + dyj0 + dyj1
    return deps0, deps1
