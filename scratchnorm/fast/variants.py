r"""The variants' numba kernels: every row-wise norm that LayerNorm's and RMSNorm's own kernels do not run.

RMSNorm with eps outside or clamped, pRMSNorm, SimpleRMSNorm, RMSNorm with a
bias or a learnable eps, GroupRMSNorm (and LayerNorm, when its own kernel
cannot take the call: fast/layernorm.py) are one computation with four knobs:
``center`` (subtract the mean: LayerNorm), ``k`` (the features that feed the
statistic: pRMSNorm), ``mode`` (where eps goes, eps_modes.py) and the groups
(GroupRMSNorm: x seen as (rows * G, m), kernel row r is group r % G; the
weight and bias as (G, m)). A missing weight is ones, a missing bias -0.0.
For one kernel row x (m,), ``forward_row`` and ``backward_row`` compute

    forward   mean  = x_0 + sum(x - x_0) / m  (0 without centering; exact for a constant row)
              ms    = sum((x - mean)^2 over the first k) / k      two passes
              rstd  = rstd_from_ms(ms, eps, mode)
              y     = (x - mean) * rstd * w + b
    backward  g = dy * w,   x_hat = (x - mean) * rstd,   gxh = sum(g * x_hat)
              a     = gxh * (d rstd / d ms) / rstd^3 * 2 / k
              dx    = rstd * (g - mean(g) [centered] + a * x_hat [first k only])
              dw   += dy * x_hat,   db += dy,   deps = gxh * d log(rstd) / d eps

For LayerNorm (inside, k = m) a = -mean(g * x_hat), layernorm.py's closed form;
for RMSNorm, rmsnorm.py's. ``a`` is written per rstd^3 (``drstd_dms_per_rstd3``)
so that nothing overflows when rstd is huge or tiny. The knobs are run-time
arguments: one compiled forward and backward per dtype serve every variant.

Precision. Sums and row scalars are float64 (stats.py), and so is every
elementwise loop, rounded once at the store, except one: for float32 x, an
uncentered row's y = x * rstd * w + b runs in float32 from rstd rounded once
(twice the SIMD lanes, no conversions) when nothing can overflow: rstd fits
float32 (``float32.fits``) and ``float32.bounded`` holds for the whole call
(every feature feeds the statistic, and sqrt(m) sum|w| + sum|b| is under a
quarter of float32's largest value; so pRMSNorm, k < m, stays float64). With
u = 2^-24, |x_hat * w| passes through 5 roundings (rstd and w to float32,
* rstd, * w, + b) and |b| through 2 (b to float32, + b): y is within
5u |x_hat * w| + 2u |b| of the exact value (tests/fast/test_kernels.py allows 8u
of both). A weight or bias that float32 cannot hold (> 3.4e38) makes the whole
call float64. The fused add (add_rmsnorm.py) runs the same ``forward_row``.

Threads and stores. The rows are cut into chunks fixed by their number
(``chunks.n_chunks``); the backward sums dweight and dbias per chunk and adds
the chunks in order, so the bits do not depend on the thread count. Each kernel
is compiled serial and with prange (``_jit.serial_and_prange``). A forward whose
arrays fill the usable cache (_stream.py) writes the rows it computes in x's
dtype with non-temporal stores: the same bits.

The functions at the end take the reference's names, signatures and checks
(layernorm.py, rmsnorm.py, group_rmsnorm.py: the same argument checks, _arguments.py,
so a bad argument raises the same error). Their cache keeps (mean, ms, rstd) of each
kernel row as a (3, rows) array (stats.py) and a reference to x, so it only
works with the backward of this backend.

Each of them, and fast/rmsnorm.py and fast/layernorm.py when they hand a call
here, runs the kernel itself, in three steps: ``prepare_forward`` (or
``prepare_backward``) makes the kernel's arguments and returns them, then
``run_by_size(*run)``, then ``finish()`` makes the result. The work is written
once, and neither helper is on the stack while the kernel runs: a layer's
forward or backward reaches the kernel in four calls, as LayerNorm's and
RMSNorm's own (layer.forward -> the layer's _forward -> the function ->
run_by_size -> the kernel: tests/fast/test_chunks.py).
"""
from __future__ import annotations


import numpy as np
from numba import prange

from .._arguments import group_rms_norm_args, layer_norm_args, rms_norm_args
from .._checks import EPS_MODES, fail
from ._buffers import affine_grads, affine_vector, backward_rows, finish_rows, forward_rows, n_rows
from ._jit import jit, jit_inline, run_by_size, serial_and_prange
from ._stream import affine_row_streamed, decide, store_fence
from .chunks import n_chunks
from .float32 import bounded, fits
from .stats import INSIDE, OUTSIDE, add_chunks, huge_row_rstd, sum_dev, sum_g, sum_gx, sum_of, sum_sq, sum_sq_dev

_KIND = "rowwise"                  # the cache's tag (layernorm.py, rmsnorm.py hand such a cache here)


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
    -1/2 inside, -(1/2) (sqrt(ms) + eps) / sqrt(ms) outside, -1/2 or 0 clamped. Where ms overflowed
    (huge_row_rstd), outside's sqrt(ms) rstd is 1 - eps rstd (eps_modes.py)."""
    if mode == INSIDE:
        return -0.5
    if mode == OUTSIDE:
        root = np.sqrt(ms)
        if root == np.inf:
            return -0.5 / (1.0 - eps * rstd)
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


# -- one row ----------------------------------------------------------------------------------
@jit_inline
def forward_row(x, w, b, y, stats, center, k, eps, mode, is_bounded, stream):
    """y = (x - mean) * rstd * w + b for one kernel row x (m,); stats (3,) gets (mean, ms, rstd).
    ``is_bounded``: float32.bounded for the call (module docstring, "Precision"). ``stream``: a row
    computed in x's dtype is written with non-temporal stores (_stream.affine_row_streamed, same bits)."""
    m = x.shape[0]
    if center:
        shift = np.float64(x[0])                      # a guess, corrected by the deviations' mean:
        mean = shift + sum_dev(x, shift) / m          # a constant row gives mean = x_0 exactly
        ms = sum_sq_dev(x[:k], mean) / k
    else:
        mean = 0.0
        ms = sum_sq(x[:k]) / k
    rstd = rstd_from_ms(ms, eps, mode)
    if ms == np.inf:                                  # beyond float64's square: on the row scaled
        rstd = huge_row_rstd(x[:k], mean, eps, mode)
    stats[0] = mean
    stats[1] = ms
    stats[2] = rstd
    if not center and is_bounded and fits(rstd, x):  # in x's dtype (float32.py) ...
        T = x.dtype.type
        rstd_x = T(rstd)
        if stream:
            affine_row_streamed(x, T(0.0), T(0.0), rstd_x, w, b, y)       # ((x - 0) - 0) * rstd * w + b
        else:
            for j in range(m):
                y[j] = x[j] * rstd_x * w[j] + b[j]
    else:                                             # ... or in float64
        for j in range(m):
            y[j] = (np.float64(x[j]) - mean) * rstd * np.float64(w[j]) + np.float64(b[j])


@jit_inline
def backward_row(dy, x, w, stats, dx, dw, db, center, k, eps, mode):
    """dx for one kernel row (m,), in float64 and rounded once at the store; adds dy * x_hat to dw and
    dy to db. Returns d loss / d eps."""
    m = x.shape[0]
    mean, ms, rstd = stats[0], stats[1], stats[2]
    if center:
        sg, sgx = sum_g(dy, x, w, mean)
        mean_g = sg / m
    else:
        sgx = sum_gx(dy, x, w)
        mean_g = 0.0
    gxh = sgx * rstd                                      # sum of g * x_hat
    a = gxh * drstd_dms_per_rstd3(ms, rstd, eps, mode) * (2.0 / k)
    for j in range(m):
        dyj = np.float64(dy[j])
        xh = (np.float64(x[j]) - mean) * rstd
        v = dyj * w[j] - mean_g
        if j < k:                                         # the path through the statistic
            v += a * xh
        dx[j] = rstd * v
        dw[j] += dyj * xh
        db[j] += dyj
    return gxh * dlog_rstd_deps(ms, rstd, eps, mode)


# -- all rows -------------------------------------------------------------------------------
def variants_forward_kernel(x, w, b, y, stats, center, k, eps, mode, stream):
    """x, y: (rows * G, m); w, b: (G, m) in x's dtype; stats: (3, rows * G). ``stream``: y is written
    with non-temporal stores, the rows in chunks, each ending with a fence.

    ``center`` and ``stream`` reach the inlined ``forward_row`` as constants (True or False at each
    of its four calls), so each compiled copy holds only its own branches: as run-time values inside
    the row they made GroupRMSNorm's forward, rows of 64 features, 1.3-1.6x slower (NOTES.md)."""
    rows = x.shape[0]
    G = w.shape[0]
    is_bounded = bounded(w, b, k)
    if not stream:
        for r in prange(rows):
            g = r % G
            if center:
                forward_row(x[r], w[g], b[g], y[r], stats[:, r], True, k, eps, mode, is_bounded, False)
            else:
                forward_row(x[r], w[g], b[g], y[r], stats[:, r], False, k, eps, mode, is_bounded, False)
        return
    chunks = n_chunks(rows)
    for c in prange(chunks):
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            g = r % G
            if center:
                forward_row(x[r], w[g], b[g], y[r], stats[:, r], True, k, eps, mode, is_bounded, True)
            else:
                forward_row(x[r], w[g], b[g], y[r], stats[:, r], False, k, eps, mode, is_bounded, True)
        store_fence()                              # this chunk's streamed rows are visible


def variants_backward_kernel(dy, x, w, stats, dx, part, dwb, deps, center, k, eps, mode):
    """part (chunks, 2 * G * m): per-chunk partial sums of dweight, dbias; dwb (2 * G * m,) gets their
    sum; deps (rows + 1,): d loss / d eps per kernel row, then their sum."""
    rows = x.shape[0]
    G, m = w.shape
    chunks = part.shape[0]
    for c in prange(chunks):
        dwb_c = part[c].reshape((2, G, m))
        dwb_c[:] = 0.0
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            g = r % G
            deps[r] = backward_row(dy[r], x[r], w[g], stats[:, r], dx[r], dwb_c[0, g], dwb_c[1, g],
                                   center, k, eps, mode)
    add_chunks(part, dwb)                                  # in chunk order
    deps[rows] = sum_of(deps[:rows])


FORWARD_ROWS = serial_and_prange(variants_forward_kernel)
BACKWARD_ROWS = serial_and_prange(variants_backward_kernel)


# -- the functions ---------------------------------------------------------------------------
LAYER_NORM = "scratchnorm.fast.layer_norm_forward"          # the forwards that make a cache (_checks.check_cache)
RMS_NORM = "scratchnorm.fast.rms_norm_forward"
GROUP_RMS_NORM = "scratchnorm.fast.group_rms_norm_forward"


def prepare_forward(x, weight, bias, out, made_by, *, center, groups, k, eps, mode, stream=None):
    """The forward up to its kernel: (run, finish). ``run``: the arguments of ``run_by_size`` for
    FORWARD_ROWS, or None for an empty x (no kernel row has a feature to read: the stats are NaN);
    ``finish()``, once the kernel has run: (y, cache). The caller runs the kernel itself (module docstring)."""
    d = x.shape[-1]
    rows = (x.size // d if d else n_rows(x.shape)) * groups   # kernel rows: one per group of each row
    xk, y2, y_new = forward_rows(x, out, rows)
    stats = np.empty((3, rows))                         # mean, ms, rstd of each kernel row (stats.py)
    w = affine_vector(weight, d, 1.0, xk.dtype).reshape(groups, -1)    # in x's kernel dtype;
    b = affine_vector(bias, d, -0.0, xk.dtype).reshape(groups, -1)     # the backward's are float64
    if not w.dtype == b.dtype == xk.dtype:              # a parameter float32 cannot hold (> 3.4e38):
        xk, y2, y_new = xk.astype(np.float64), np.empty(xk.shape), True     # the call runs in float64
        w, b = w.astype(np.float64), b.astype(np.float64)
    run = None
    if x.size:
        stream = decide(stream)
        loop = n_chunks(rows) if stream else rows                  # what its prange runs over
        run = (FORWARD_ROWS, x.size, loop, xk, w, b, y2, stats, center, k, eps, mode, stream)
    else:
        stats.fill(np.nan)                              # no features: the mean of nothing
    cache = norm_cache(made_by, xk, stats, groups, weight, bias, center, k, eps, mode, x.dtype, x.shape)
    return run, lambda: (finish_rows(y2, y_new, x.shape, x.dtype, out), cache)


def norm_cache(made_by, xk, stats, groups, weight, bias, center, k, eps, mode, dtype, shape) -> dict:
    """What the backward reads: the forward that made it (_checks.check_cache), the kernel rows xk
    (rows, m), their stats (3, rows), the parameters as given, the knobs, and the input's dtype and
    shape (add_rmsnorm.py makes one too)."""
    return {"made_by": made_by, "fast": _KIND, "x": xk, "stats": stats, "groups": groups, "weight": weight,
            "bias": bias, "center": center, "k": k, "eps": eps, "mode": mode, "dtype": dtype, "shape": shape}


def prepare_backward(dy, cache, dx_out, made_by):
    """The backward up to its kernel: (run, finish). ``run``: the arguments of ``run_by_size`` for
    BACKWARD_ROWS, or None for an empty x; ``finish()``, once the kernel has run: {"x", "weight", "bias"}
    (those that exist), and "eps", d loss / d eps, for RMSNorm's forward (``made_by`` RMS_NORM)."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, made_by)
    if cache.get("fast") != "rowwise":      # the plain kernels' cache (same made_by): their backward reads it
        fail(TypeError, "cache", "a cache of these kernels' forward (scratchnorm.fast.variants)",
             f"the cache of {made_by}'s own kernels", f"pass it to {made_by.replace('_forward', '_backward')}, "
             "which reads both.")
    rows = xk.shape[0]
    w = affine_vector(cache["weight"], cache["shape"][-1], 1.0).reshape(cache["groups"], -1)   # float64
    part = np.empty((n_chunks(rows), 2 * w.size))       # per-chunk partial dweight, dbias
    dwb = np.zeros(2 * w.size)
    deps = np.empty(rows + 1)                           # per kernel row, then their sum
    run = None
    if xk.size:
        run = (BACKWARD_ROWS, xk.size, n_chunks(rows), dyk, xk, w, cache["stats"], dx2, part, dwb, deps,
               cache["center"], cache["k"], cache["eps"], cache["mode"])
    else:
        deps.fill(np.nan if rows else 0.0)              # rows of no features: NaN; no rows: 0

    def finish():
        grads = {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
                 **affine_grads(dwb.reshape(2, -1), cache)}
        if made_by == RMS_NORM:
            grads["eps"] = deps[rows]
        return grads
    return run, finish


def layer_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None, stream=None):
    """LayerNorm over the last axis. Same arguments and result as ``scratchnorm.layer_norm_forward``."""
    x, eps = layer_norm_args(x, weight, bias, eps)
    run, finish = prepare_forward(x, weight, bias, out, LAYER_NORM, center=True, groups=1, k=x.shape[-1], eps=eps,
                                  mode=INSIDE, stream=stream)
    if run is not None:
        run_by_size(*run)
    return finish()


def layer_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.layer_norm_backward``."""
    run, finish = prepare_backward(dy, cache, dx_out, LAYER_NORM)
    if run is not None:
        run_by_size(*run)
    return finish()


def rms_norm_forward(x, weight=None, bias=None, *, eps=1e-6, eps_mode="inside", k=None, out=None, stream=None):
    """RMSNorm over the last axis (the first k features feed the statistic). Same arguments and result
    as ``scratchnorm.rms_norm_forward``."""
    x, eps, k = rms_norm_args(x, weight, bias, eps, eps_mode, k)
    run, finish = prepare_forward(x, weight, bias, out, RMS_NORM, center=False, groups=1, k=k, eps=eps,
                                  mode=EPS_MODES.index(eps_mode), stream=stream)
    if run is not None:
        run_by_size(*run)
    return finish()


def rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias", "eps"} (those that exist), as ``scratchnorm.rms_norm_backward``."""
    run, finish = prepare_backward(dy, cache, dx_out, RMS_NORM)
    if run is not None:
        run_by_size(*run)
    return finish()


def group_rms_norm_forward(x, weight=None, *, num_groups, eps=1e-6, eps_mode="inside", out=None):
    """RMSNorm per contiguous group of d / num_groups features. Same arguments and result as
    ``scratchnorm.group_rms_norm_forward``."""
    x, groups, eps = group_rms_norm_args(x, weight, num_groups, eps, eps_mode)
    run, finish = prepare_forward(x, weight, None, out, GROUP_RMS_NORM, center=False, groups=groups,
                                  k=x.shape[-1] // groups, eps=eps, mode=EPS_MODES.index(eps_mode))
    if run is not None:
        run_by_size(*run)
    return finish()


def group_rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight"} (weight if it exists), as ``scratchnorm.group_rms_norm_backward``."""
    run, finish = prepare_backward(dy, cache, dx_out, GROUP_RMS_NORM)
    if run is not None:
        run_by_size(*run)
    return finish()
