r"""The readable numba kernel of every row-wise normalization: one forward, one backward.

LayerNorm, RMSNorm (eps inside, outside, clamped), pRMSNorm, SimpleRMSNorm,
RMSNorm with a bias or a learnable eps, and GroupRMSNorm are one computation
with four knobs: ``center`` (subtract the mean: LayerNorm), ``k`` (features
that feed the statistic: pRMSNorm), ``mode`` (where eps goes, eps_modes.py)
and the groups (GroupRMSNorm: x seen as (rows * G, m), kernel row r is group
r % G; the weight and bias as (G, m)). A missing weight is ones, a missing
bias -0.0. ``forward_row`` and ``backward_row`` below mirror
``layernorm.layer_norm_forward`` / ``layer_norm_backward`` and
``rmsnorm.rms_norm_forward`` / ``rms_norm_backward``, for one kernel row x (m,):

    forward   mean  = x_0 + sum(x - x_0) / m  (0 without centering; exact for a constant row)
              ms    = sum((x - mean)^2 over the first k) / k      two passes
              rstd  = rstd_from_ms(ms, eps, mode)
              y     = (x - mean) * rstd * w + b
    backward  g = dy * w,   x_hat = (x - mean) * rstd,   gxh = sum(g * x_hat)
              a     = gxh * (d rstd / d ms) / rstd^3 * 2 / k
              dx    = rstd * (g - mean(g) [centered] + a * x_hat [first k only])
              dw   += dy * x_hat,   db += dy,   deps = gxh * d log(rstd) / d eps

For LayerNorm (inside, k = m) a = -mean(g * x_hat), the closed form of
layernorm.py; for RMSNorm, rmsnorm.py's. ``a`` is written per rstd^3
(``drstd_dms_per_rstd3``) so that nothing overflows when rstd is huge or tiny.
Everything is float64, rounded once at the store.

This file is the readable kernel: run it with ``scratchnorm.fast.kernel("readable")``
(``python -m scratchnorm.bench --kernel readable``). The kernel the library runs
by default adds the tricks of rowwise_tuned.py, each tested against this one
(tricks.py lists them and what each buys); rowwise_drivers.py runs the rows on
numba's threads. A cache keeps (mean, ms, rstd) of each kernel row, as a (3, rows) array
(stats.py), and a reference to x.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline
from .stats import sum_dev, sum_g, sum_gx, sum_sq, sum_sq_dev

INSIDE, OUTSIDE, CLAMP = 0, 1, 2   # positions in _checks.EPS_MODES


# -- eps placements: scalar mirrors of eps_modes.py ------------------------------------
@jit
def rstd_from_ms(ms, eps, mode):
    if mode == INSIDE:
        return 1.0 / np.sqrt(ms + eps)
    if mode == OUTSIDE:
        return 1.0 / (np.sqrt(ms) + eps)
    return 1.0 / np.sqrt(eps if ms < eps else ms)      # np.maximum: a NaN ms stays NaN


@jit
def drstd_dms_per_rstd3(ms, rstd, eps, mode):
    """(d rstd / d ms) / rstd^3, finite where rstd^3 would overflow or underflow:
    -1/2 inside, -(1/2) (sqrt(ms) + eps) / sqrt(ms) outside, -1/2 or 0 clamped."""
    if mode == INSIDE:
        return -0.5
    if mode == OUTSIDE:
        root = np.sqrt(ms)
        return -0.5 / (rstd * root) if root > 0 else 0.0
    return -0.5 if ms > eps else 0.0


@jit
def dlog_rstd_deps(ms, rstd, eps, mode):
    """(d rstd / d eps) / rstd."""
    if mode == INSIDE:
        return -0.5 * rstd * rstd
    if mode == OUTSIDE:
        return -rstd
    return -0.5 * rstd * rstd if eps >= ms else 0.0


# -- the forward ------------------------------------------------------------------------------
@jit_inline
def row_stats(x, center, k, eps, mode):
    """(mean, ms, rstd) of one kernel row x (m,), float64, two passes. ``center`` is a constant,
    so numba compiles one branch: without it the mean is 0 and no "- mean" is left in the loop."""
    m = x.shape[0]
    if center:
        shift = np.float64(x[0])                          # a guess, corrected by the deviations' mean:
        mean = shift + sum_dev(x, shift) / m          # a constant row gives mean = x_0 exactly
        ms = sum_sq_dev(x[:k], mean) / k
    else:
        mean = 0.0
        ms = sum_sq(x[:k]) / k
    return mean, ms, rstd_from_ms(ms, eps, mode)


@jit_inline
def forward_row(x, w, b, y, stats, center, k, eps, mode):
    """y = (x - mean) * rstd * w + b for one kernel row x (m,), in float64; stats (3,) gets
    (mean, ms, rstd). Mirrors ``layer_norm_forward`` / ``rms_norm_forward``."""
    mean, ms, rstd = row_stats(x, center, k, eps, mode)
    for j in range(x.shape[0]):
        y[j] = (np.float64(x[j]) - mean) * rstd * np.float64(w[j]) + np.float64(b[j])
    stats[0] = mean
    stats[1] = ms
    stats[2] = rstd


# -- the backward -----------------------------------------------------------------------------
@jit_inline
def row_coefs(dy, x, w, stats, center, k, eps, mode):
    """The per-row scalars of the backward, float64: (mean, rstd, mean(g), a, d loss / d eps),
    with dx = rstd * (g - mean(g) + a * x_hat) on the first k features."""
    m = x.shape[0]
    mean, ms, rstd = (stats[0] if center else 0.0), stats[1], stats[2]   # 0.0: a constant LLVM folds
    if center:
        sg, sgx, _ = sum_g(dy, x, w, mean)
        mean_g = sg / m
    else:
        sgx, _ = sum_gx(dy, x, w)
        mean_g = 0.0
    gxh = sgx * rstd                                      # sum of g * x_hat
    a = gxh * drstd_dms_per_rstd3(ms, rstd, eps, mode) * (2.0 / k)
    return mean, rstd, mean_g, a, gxh * dlog_rstd_deps(ms, rstd, eps, mode)


@jit_inline
def backward_row(dy, x, w, stats, dx, dw, db, center, k, eps, mode):
    """dx for one kernel row (m,); adds dy * x_hat to dw and dy to db. Returns d loss / d eps.
    Mirrors ``layer_norm_backward`` / ``rms_norm_backward``: the row's scalars in ``row_coefs``,
    then dx = rstd * (g - mean(g) + a * x_hat), in float64 and rounded once at the store."""
    mean, rstd, mean_g, a, deps = row_coefs(dy, x, w, stats, center, k, eps, mode)
    for j in range(x.shape[0]):
        dyj = np.float64(dy[j])
        xh = (np.float64(x[j]) - mean) * rstd
        v = dyj * w[j] - mean_g
        if j < k:                                         # the path through the statistic
            v += a * xh
        dx[j] = rstd * v
        dw[j] += dyj * xh
        db[j] += dyj
    return deps
