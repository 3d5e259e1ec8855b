r"""The DyT kernels (scratchnorm/dyt.py has the math): y = tanh(alpha x) w + b, elementwise.

Forward: one pass, in float64, rounded once at the store, as the reference.

Backward: t = tanh(alpha x) is computed again from x (the cache keeps x, not
t: one array less to hold, as the row-wise kernels keep only statistics). Per
element: dz = dy w (1 - t^2), dx = alpha dz. The three sums over rows (dweight:
dy t, dbias: dy, and dalpha: dz x) are kept per column in per-chunk partials
(``chunks.n_chunks``), which vectorize like the row-wise dweight; the chunks are
then added in a fixed order, and dalpha's columns summed in order, so the bits
do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import dyt_args
from ._buffers import affine_vector, backward_rows, finish_rows, forward_rows, n_rows
from ._jit import jit_inline, run_by_size, serial_and_prange
from .chunks import n_chunks

_KIND = "dyt"
MADE_BY = "scratchnorm.fast.dyt_forward"     # the cache's tag (_checks.check_cache)

# tanh, written so that LLVM vectorizes it (libm's tanh is one call per element, 17 ns here; this is
# 4-5 ns on 4 float64 lanes). |z| < 0.625: Cephes' rational approximation, z + z s P(s)/Q(s) with s = z^2;
# else (1 - e)/(1 + e), e = exp(-2|z|), |z| capped at 40 (e < 2^-115: tanh rounds to +-1). exp(t) for
# t in [-80, 0]: t = k ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series to r^13 (error below 2e-17),
# and 2^k by the bits of -k (7 exact halvings at most). Measured within 2 ulps of NumPy's tanh on 2
# million points from -45 to 45 (tests/fast/test_kernels_modern.py checks 1e-15).
_LN2_HI, _LN2_LO, _LOG2E = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.4426950408889634
_P0, _P1, _P2 = -9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3
_Q0, _Q1, _Q2 = 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3


@jit_inline
def _exp_nonpositive(t):
    """exp(t) for t in [-80, 0], in arithmetic LLVM can vectorize (see above)."""
    k = np.floor(t * _LOG2E + 0.5)
    r = (t - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0                        # 1/13!, then Horner down to 1/2!
    for f in (479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0, 24.0, 6.0, 2.0):
        p = p * r + 1.0 / f
    e = 1.0 + (p * r * r + r)                     # exp(r) = 1 + expm1(r)
    n, half, scale = -k, 0.5, 1.0                 # scale = 2^k = 2^-n, n in [0, 116]
    for _ in range(7):
        if n - 2.0 * np.floor(n * 0.5) > 0.5:
            scale *= half
        n = np.floor(n * 0.5)
        half *= half
    return e * scale


@jit_inline
def _tanh(z):
    """tanh(z) in float64 (see above); NaN stays NaN, +-inf gives +-1."""
    a = abs(z)
    s = z * z
    e = _exp_nonpositive(-2.0 * min(a, 40.0))
    small = a < 0.625
    q = ((z * s * ((_P0 * s + _P1) * s + _P2)) if small else 1.0 - e) / (
        ((((s + _Q0) * s + _Q1) * s + _Q2)) if small else 1.0 + e)
    if small:
        return z if a == 0.0 else z + q             # (z = -0.0 stays -0.0)
    return z if a != a else (q if z > 0 else -q)


def _dyt_forward_rows(x, alpha, w, b, y):
    """y = tanh(alpha x) w + b; x, y (rows, d); w, b (d,) float64."""
    for r in prange(x.shape[0]):
        xr, yr = x[r], y[r]
        for j in range(xr.shape[0]):
            yr[j] = _tanh(alpha * np.float64(xr[j])) * w[j] + b[j]


def _dyt_backward_rows(dy, x, alpha, w, dx, part, sums):
    """dx (rows, d); part (chunks, 3, d): per-chunk column sums of dy t, dy and dz x;
    sums (4, d): their totals over the chunks in order, then in sums[3, 0] dalpha."""
    rows, d = x.shape
    chunks = part.shape[0]
    for c in prange(chunks):
        dw, db, da = part[c, 0], part[c, 1], part[c, 2]
        dw[:] = 0.0
        db[:] = 0.0
        da[:] = 0.0
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            dyr, xr, dxr = dy[r], x[r], dx[r]
            for j in range(d):
                g = np.float64(dyr[j])
                xj = np.float64(xr[j])
                t = _tanh(alpha * xj)
                dz = g * w[j] * (1.0 - t * t)
                dxr[j] = alpha * dz
                dw[j] += g * t
                db[j] += g
                da[j] += dz * xj
    for i in range(3):
        total = sums[i]
        total[:] = 0.0
        for c in range(chunks):                         # fixed order: chunk 0, 1, 2, ...
            total += part[c, i]
    dalpha = 0.0
    for j in range(d):
        dalpha += sums[2, j]
    sums[3, 0] = dalpha


_FORWARD = serial_and_prange(_dyt_forward_rows)
_BACKWARD = serial_and_prange(_dyt_backward_rows)


def dyt_forward(x, alpha, weight=None, bias=None, *, out=None):
    """y = tanh(alpha x) weight + bias, numba kernels. Same arguments and result as
    ``scratchnorm.dyt_forward``; the cache is this backend's."""
    x, a, alpha_like = dyt_args(x, alpha, weight, bias)
    d = x.shape[-1]
    rows = x.size // d if d else n_rows(x.shape)
    xk, y2, y_new = forward_rows(x, out, rows)
    if x.size:
        with np.errstate(over="ignore", invalid="ignore"):      # (NUMBA_DISABLE_JIT: z^2 of the unused branch)
            run_by_size(_FORWARD, x.size, rows, xk, a, affine_vector(weight, d, 1.0), affine_vector(bias, d, -0.0), y2)
    cache = {"made_by": MADE_BY, "fast": _KIND, "x": xk, "alpha": a, "alpha_like": alpha_like,
             "weight": weight, "bias": bias, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y2, y_new, x.shape, x.dtype, out), cache


def dyt_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "alpha", "weight", "bias"} (those that exist), as ``scratchnorm.dyt_backward``."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, MADE_BY)
    rows, d = xk.shape
    chunks = n_chunks(rows) if rows else 1
    part = np.empty((chunks, 3, d))
    sums = np.zeros((4, max(d, 1)))                     # (with no element: all sums 0)
    if xk.size:
        with np.errstate(over="ignore", invalid="ignore"):   # (NUMBA_DISABLE_JIT: NumPy scalars warn, as the
            run_by_size(_BACKWARD, xk.size, n_chunks(rows), dyk, xk, cache["alpha"],       # reference's arrays would)
                     affine_vector(cache["weight"], d, 1.0), dx2, part, sums)
    shape, dtype = cache["alpha_like"]
    grads = {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
             "alpha": np.full(shape, sums[3, 0], dtype=dtype)}
    for i, name in enumerate(("weight", "bias")):
        if cache[name] is not None:
            grads[name] = sums[i, :d].astype(cache[name].dtype)
    return grads
