r"""The numba kernels of every row-wise normalization: one forward, one backward.

LayerNorm, RMSNorm (eps inside, outside, clamped), pRMSNorm, SimpleRMSNorm,
RMSNorm with a bias or a learnable eps, and GroupRMSNorm are one computation
with four knobs: ``center`` (subtract the mean: LayerNorm), ``k`` (features
that feed the statistic: pRMSNorm), ``mode`` (where eps goes, eps_modes.py)
and the groups (GroupRMSNorm: x seen as (rows * G, m), kernel row r is group
r % G; the weight and bias as (G, m)). A missing weight is ones, a missing
bias -0.0. Read ``forward_group`` and ``backward_group``: they mirror
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
Statistics and the backward are float64, rounded once at the store. One
exception, for speed: for float32 x the forward's last two lines run in
float32 (``forward_group`` says when, and the error bound).

The rest is speed, each piece tested to give the same bits (NOTES.md has the
measurements): ``backward_two_groups`` does two rows per pass; the drivers
run the rows on numba's threads, with dweight and dbias summed per fixed chunk
of rows and the chunks added in order, so the bits do not depend on the thread
count; large outputs are written with non-temporal stores (_stream.py).
A cache keeps (mean, ms, rstd) per kernel row and a reference to x.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import jit, jit_inline, jit_sum, n_chunks, serial_and_parallel
from ._stream import LINE_BYTES, affine_line, line_start, store_fence, stream_row

INSIDE, OUTSIDE, CLAMP = 0, 1, 2   # positions in _checks.EPS_MODES
_n_chunks = jit(n_chunks)           # _jit.n_chunks, callable in the kernels
COLUMN_BLOCK = 512                  # columns per task when the partial sums are added


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


# -- sums over the first n features of a group (float64 accumulators; see _jit.jit_sum) ----
# Every loop runs j over range(n) from 0 and indexes a (row) array directly:
# with an index known to be >= 0, numba's negative-index wraparound folds away
# and the loop vectorizes (an index lo + j turns the loads into gathers, 5x slower).
@jit_sum
def _sum(x, n):
    s = 0.0
    for j in range(n):
        s += np.float64(x[j])
    return s


@jit_sum
def _sum_dev(x, n, c):
    """sum of (x_j - c): the first pass, about a shift c (forward_group: c = x_0)."""
    s = 0.0
    for j in range(n):
        s += np.float64(x[j]) - c
    return s


@jit_sum
def _sum_sq_dev(x, n, c):
    """sum of (x_j - c)^2: the second pass of a two-pass variance."""
    s = 0.0
    for j in range(n):
        v = np.float64(x[j]) - c
        s += v * v
    return s


@jit_sum
def _sum_sq(x, n):
    """sum of x_j^2: _sum_sq_dev without centering (a separate loop: c = 0 is not known when
    _sum_sq_dev is compiled, and "- 0.0" would stay in its loop)."""
    s = 0.0
    for j in range(n):
        v = np.float64(x[j])
        s += v * v
    return s


@jit_sum
def _sum_gx(dy, x, w, n):
    """sum of g_j * x_j, with g = dy * w: _sum_g without centering (no sum of g, no "- c")."""
    s = 0.0
    for j in range(n):
        s += np.float64(dy[j]) * np.float64(w[j]) * np.float64(x[j])
    return s


@jit_sum
def _sum_g(dy, x, w, n, c):
    """sum of g_j and of g_j * (x_j - c), with g = dy * w."""
    sg = 0.0
    sgx = 0.0
    for j in range(n):
        g = np.float64(dy[j]) * np.float64(w[j])
        sg += g
        sgx += g * (np.float64(x[j]) - c)
    return sg, sgx


# -- the forward's elementwise part: in the input's dtype (see the module docstring) ----------
@jit_inline
def _largest(like):
    """The largest finite number of like's dtype (float32 or float64)."""
    return 3.4028234663852886e38 if like.itemsize == 4 else 1.7976931348623157e308


@jit_inline
def _fits(v, like):
    """Does float64 v survive a round trip through like's dtype within one rounding?
    (Not NaN, not beyond its largest value, not subnormal there.)"""
    if not abs(v) <= _largest(like):          # NaN, Inf, overflow (checked first: a cast would warn)
        return False
    t = np.float64(like.dtype.type(v))
    return abs(t - v) <= 6.0e-8 * abs(v)      # 2**-24 = 5.96e-8: the relative rounding of float32


@jit_inline
def _affine(x, w, b, y, hi, lo, rs):
    """y = x_hat * w + b with x_hat = ((x - hi) - lo) * rs, in the dtype of the scalars."""
    for j in range(x.shape[0]):
        y[j] = ((x[j] - hi) - lo) * rs * w[j] + b[j]


@jit_inline
def _affine_streamed(x, w, b, y, hi, lo, rs):
    """_affine with y written by non-temporal stores, a cache line at a time (_stream.py); the
    elements before y's first line boundary and after its last whole line by _affine itself."""
    m = x.shape[0]
    lanes = LINE_BYTES // y.itemsize
    head = line_start(y)
    body = head + (m - head) // lanes * lanes
    _affine(x[:head], w[:head], b[:head], y[:head], hi, lo, rs)
    for j in range(head, body, lanes):
        affine_line(x, w, b, y, j, hi, lo, rs)
    _affine(x[body:], w[body:], b[body:], y[body:], hi, lo, rs)


@jit_sum
def _sum_abs(v):
    """sum of |v| over a (G, m) array (an upper bound of max |v| that vectorizes). Indexed row
    by row: iterating ``v.ravel()`` instead did not vectorize, 0.6 ns an element (1 us of a
    64x512 forward, 39 us of a 1x32768 one)."""
    s = 0.0
    for g in range(v.shape[0]):
        row = v[g]
        for j in range(row.shape[0]):
            s += abs(np.float64(row[j]))
    return s


@jit
def _bounded(w, b, k):
    """Can no intermediate of the forward's T loop overflow, whatever the row? True when every
    feature feeds the statistic (k = m, so |x_hat| <= sqrt(m)) and sqrt(m) sum|w| + sum|b| (>=
    sqrt(m) max|w| + max|b|) is under a quarter of T's largest value; x - mean is bounded per
    row (forward_group). Once per call, over the (G, m) weight and bias; a NaN gives False."""
    m = w.shape[1]
    if k != m:                                # pRMSNorm: x_hat beyond the first k is unbounded
        return False
    return np.sqrt(m) * _sum_abs(w) + _sum_abs(b) <= 0.25 * _largest(w)


@jit_inline
def forward_group(x, w, b, y, stats, center, k, eps, mode, bounded, stream):
    """y = x_hat * w + b for one group x (m,); stats (3,) gets (mean, ms, rstd). Mirrors the
    reference forwards (layernorm.py, rmsnorm.py).

    For float32 x (T below) the elementwise part runs in T: x_hat = ((x - hi) - lo) * rstd with
    hi + lo = mean both in T, then * w + b. x - hi is exact or rounded once (Sterbenz's lemma
    when |mean| >> std); - lo, * rstd, * w and + b round once each: with u = 2^-24, y is within
    about 7u |x_hat * w| + 2u |b| of the exact value (3.5 float32 epsilons of |x_hat * w| + |b|;
    the tests allow 4). The row runs in float64 instead unless nothing can overflow or lose
    precision: rstd and lo fit T within one rounding (``_fits``), the deviation sqrt(m ms) is
    under a quarter of T's largest value, and ``bounded`` (``_bounded``, once per call: k = m
    and sqrt(m) sum|w| + sum|b| under a quarter of it). So pRMSNorm (k < m) stays float64.
    ``stream``: write y with non-temporal stores (_stream.py; a float64 row is written plainly)."""
    m = x.shape[0]
    if center:                                            # a constant: numba compiles one branch
        shift = np.float64(x[0])                          # a guess, corrected by the deviations' mean:
        mean = shift + _sum_dev(x, m, shift) / m          # a constant row gives mean = x_0 exactly
        ms = _sum_sq_dev(x, k, mean) / k
    else:
        mean = 0.0
        ms = _sum_sq(x, k) / k
    rstd = rstd_from_ms(ms, eps, mode)
    T = x.dtype.type
    hi = T(mean)
    lo = mean - np.float64(hi)
    # |x - mean| <= sqrt(m ms) with centering (k = m): below a quarter of T's largest value,
    # x - hi cannot overflow; _bounded covers x_hat * w + b
    small_deviation = not center or m * ms <= 0.0625 * _largest(x) * _largest(x)
    if bounded and _fits(rstd, x) and _fits(lo, x) and small_deviation:
        if stream:
            _affine_streamed(x, w, b, y, hi, T(lo), T(rstd))
        else:
            _affine(x, w, b, y, hi, T(lo), T(rstd))
    else:
        _affine(x, w, b, y, mean, 0.0, rstd)              # the row in float64 (module docstring)
    stats[0] = mean
    stats[1] = ms
    stats[2] = rstd


@jit_inline
def _group_coefs(dy, x, w, stats, center, k, eps, mode):
    """The per-group scalars of the backward, float64: (mean, rstd, mean(g), a, d loss / d eps),
    with dx = rstd * (g - mean(g) + a * x_hat) on the first k features."""
    m = x.shape[0]
    mean, ms, rstd = (stats[0] if center else 0.0), stats[1], stats[2]   # 0.0: a constant LLVM folds
    if center:
        sg, sgx = _sum_g(dy, x, w, m, mean)
        mean_g = sg / m
    else:
        sgx = _sum_gx(dy, x, w, m)
        mean_g = 0.0
    gxh = sgx * rstd                                      # sum of g * x_hat
    a = gxh * drstd_dms_per_rstd3(ms, rstd, eps, mode) * (2.0 / k)
    return mean, rstd, mean_g, a, gxh * dlog_rstd_deps(ms, rstd, eps, mode)


@jit_inline
def _dx(dy, x, w, dx, dw, db, k, mean, rstd, mean_g, a):
    """dx for one group, in float64 (rounded once at the store); adds dy * x_hat to dw and dy to db."""
    for j in range(x.shape[0]):
        dyj = np.float64(dy[j])
        xh = (np.float64(x[j]) - mean) * rstd
        v = dyj * w[j] - mean_g
        if j < k:                                         # the path through the statistic
            v += a * xh
        dx[j] = rstd * v
        dw[j] += dyj * xh
        db[j] += dyj


@jit_inline
def backward_group(dy, x, w, stats, dx, dw, db, center, k, eps, mode):
    """dx for one group (m,); adds dy * x_hat to dw and dy to db. Returns d loss / d eps.
    Mirrors ``layernorm.layer_norm_backward`` and ``rmsnorm.rms_norm_backward``: the per-row
    scalars (mean(g), a) in ``_group_coefs``, then dx = rstd * (g - mean(g) + a * x_hat) in ``_dx``."""
    mean, rstd, mean_g, a, deps = _group_coefs(dy, x, w, stats, center, k, eps, mode)
    _dx(dy, x, w, dx, dw, db, k, mean, rstd, mean_g, a)
    return deps


@jit_inline
def backward_two_groups(dy0, x0, stats0, dx0, dy1, x1, stats1, dx1, w, dw, db, center, k, eps, mode):
    """backward_group for two groups with the same weight, one after the other, in one loop:
    dw and db are read and written once for both, and ``dw[j] + t0 + t1`` adds in the
    order of two backward_group calls, so the bits are theirs. Returns both d loss / d eps."""
    mean0, rstd0, mean_g0, a0, deps0 = _group_coefs(dy0, x0, w, stats0, center, k, eps, mode)
    mean1, rstd1, mean_g1, a1, deps1 = _group_coefs(dy1, x1, w, stats1, center, k, eps, mode)
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


# -- drivers: all groups of all rows, compiled serial and parallel ---------------------------
# The arrays come as (rows * G, m): kernel row r is group r % G of row r // G, and the
# weight, bias and partial sums as (G, m). ``center`` and ``stream`` are closure constants,
# so numba compiles one pair of drivers per value (each only when first called): without
# centering the mean is the constant 0 and LLVM drops every "- mean", "- mean(g)" and the
# sum of g from RMSNorm's loops; without streaming no streamed path is compiled in (as a
# branch taken at run time it made the plain forward a third slower at 64x512).
def _drivers(center, stream):
    def _forward_rows(x, w, b, y, stats, k, eps, mode):
        """``stream``: write y with non-temporal stores (_stream.py), the rows in the backward's
        chunks, so that each worker fences once a chunk (a fence waits until the streamed lines
        have reached memory: once a row, it cost 1.3x at 4096x1024)."""
        rows = x.shape[0]
        G = w.shape[0]
        bounded = _bounded(w, b, k)
        if stream:
            chunks = _n_chunks(rows)
            for c in prange(chunks):
                for r in range(c * rows // chunks, (c + 1) * rows // chunks):
                    g = r % G
                    forward_group(x[r], w[g], b[g], y[r], stats[r], center, k, eps, mode, bounded, True)
                store_fence()
        else:
            for r in prange(rows):
                g = r % G
                forward_group(x[r], w[g], b[g], y[r], stats[r], center, k, eps, mode, bounded, False)

    def _backward_rows(dy, x, w, stats, dx, part, dwb, deps, k, eps, mode, chunks):
        """part (chunks, 2, G, m): per-chunk partial sums; dwb (2, G, m) gets dweight, dbias;
        deps (rows + 1,): d loss / d eps per kernel row, then their sum. ``stream``: write dx
        with non-temporal stores, each row computed into ``buf`` first (_stream.py)."""
        rows = x.shape[0]
        G = w.shape[0]
        for c in prange(chunks):
            part[c] = 0.0
            buf = np.empty((2, x.shape[1] if stream else 0), dx.dtype)   # (2, m) or unused
            lo = c * rows // chunks
            hi = (c + 1) * rows // chunks
            if G == 1:                                    # rows in pairs (backward_two_groups)
                for r in range(lo, hi - 1, 2):
                    deps[r], deps[r + 1] = backward_two_groups(
                        dy[r], x[r], stats[r], buf[0] if stream else dx[r],
                        dy[r + 1], x[r + 1], stats[r + 1], buf[1] if stream else dx[r + 1],
                        w[0], part[c, 0, 0], part[c, 1, 0], center, k, eps, mode)
                    if stream:
                        stream_row(dx[r], buf[0])
                        stream_row(dx[r + 1], buf[1])
                if (hi - lo) % 2 == 1:
                    lo = hi - 1                           # the last row of an odd count
                else:
                    lo = hi
            for r in range(lo, hi):
                g = r % G
                deps[r] = backward_group(dy[r], x[r], w[g], stats[r], buf[0] if stream else dx[r],
                                         part[c, 0, g], part[c, 1, g], center, k, eps, mode)
                if stream:
                    stream_row(dx[r], buf[0])
            if stream:
                store_fence()
        flat = part.reshape(chunks, -1)
        total = dwb.reshape(-1)
        n = total.shape[0]
        for blk in prange((n + COLUMN_BLOCK - 1) // COLUMN_BLOCK):
            lo = blk * COLUMN_BLOCK
            hi = min(n, lo + COLUMN_BLOCK)
            block = total[lo:hi]
            block[:] = 0.0
            for c in range(chunks):                       # fixed order: chunk 0, 1, 2, ...
                src = flat[c, lo:hi]
                for j in range(hi - lo):
                    block[j] += src[j]
        deps[rows] = _sum(deps, rows)

    return serial_and_parallel(_forward_rows), serial_and_parallel(_backward_rows)


# TWINS[center, stream] = (forward (serial, parallel), backward (serial, parallel)); see _jit.py.
TWINS = {(center, stream): _drivers(center, stream) for center in (False, True) for stream in (False, True)}
