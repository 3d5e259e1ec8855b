"""The row-wise functions of scratchnorm.fast: the reference's names, signatures and checks.

Each function checks its arguments with the same helpers, in the same order,
as its NumPy reference (layernorm.py, rmsnorm.py, group_rmsnorm.py), so a bad
argument raises the same error. Then ``_forward`` / ``_backward`` shape the
arrays for the one pair of kernels in rowwise.py (x as (rows * G, d / G),
one kernel row per group; the weight and bias as (G, d / G), in x's dtype for
the forward and float64 for the backward), find or make the output buffers
(_buffers.py), pick the drivers for the tricks that are on (tricks.py,
rowwise_drivers.py) and the serial or the parallel twin (_jit.py).

The cache differs from the reference's (it holds only what the kernels need,
see rowwise.py), so a cache only works with the backward of its own backend.
"""
from __future__ import annotations

import numpy as np

from .._checks import EPS_MODES
from .._doors import group_rms_norm_args, layer_norm_args, rms_norm_args
from ._buffers import affine_grads, affine_vector, backward_rows, finish_rows, forward_rows, n_rows
from ._jit import run_twin
from .chunks import n_chunks
from ._stream import AFFINE_MIN_ROW_BYTES, decide, streams
from .rowwise import INSIDE
from .rowwise_drivers import twins
from .tricks import active

_KIND = "rowwise"


def stream_choice(stream, auto: bool) -> bool:
    """_stream.decide, with the "stream" trick (tricks.py) able to turn the automatic choice off."""
    return decide(stream, auto and "stream" in active())


def _forward(x, weight, bias, out, *, center, groups, k, eps, mode, stream=None):
    d = x.shape[-1]
    rows = (x.size // d if d else n_rows(x.shape)) * groups   # kernel rows: one per group of each row
    xk, y2, y_new = forward_rows(x, out, rows)
    stats = np.empty((3, rows))                         # mean, ms, rstd of each kernel row (stats.py)
    w = affine_vector(weight, d, 1.0, xk.dtype).reshape(groups, -1)    # in x's kernel dtype (rowwise.py);
    b = affine_vector(bias, d, -0.0, xk.dtype).reshape(groups, -1)     # the backward's are float64
    if x.size:
        auto = streams(xk.nbytes + y2.nbytes, w.shape[1] * y2.itemsize, AFFINE_MIN_ROW_BYTES)
        on = active()
        stream = (stream_choice(stream, auto) and "f32_affine" in on   # streams f32_affine's rows only
                  and w.dtype == b.dtype == xk.dtype)
        drivers = twins(center, "f32_affine" in on, "paired_rows" in on, stream)
        run_twin(drivers[0], x.size, rows, xk, w, b, y2, stats, k, eps, mode)
    else:
        stats.fill(np.nan)                              # no features: the mean of nothing
    cache = norm_cache(xk, stats, groups, weight, bias, center, k, eps, mode, x.dtype, x.shape)
    return finish_rows(y2, y_new, x.shape, x.dtype, out), cache


def norm_cache(xk, stats, groups, weight, bias, center, k, eps, mode, dtype, shape) -> dict:
    """What the row-wise backward reads: the kernel rows xk (rows, m), their stats (3, rows), the
    parameters as given, the switches, and the input's dtype and shape (add_rmsnorm.py makes one too)."""
    return {"fast": _KIND, "x": xk, "stats": stats, "groups": groups, "weight": weight, "bias": bias,
            "center": center, "k": k, "eps": eps, "mode": mode, "dtype": dtype, "shape": shape}


def _backward(dy, cache, dx_out, fn, stream=None):
    """{"x", "weight", "bias"} (those that exist) and d loss / d eps."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, _KIND, fn)
    rows = xk.shape[0]
    w = affine_vector(cache["weight"], cache["shape"][-1], 1.0).reshape(cache["groups"], -1)   # float64
    chunks = n_chunks(rows)
    part = np.empty((chunks, 2) + w.shape)              # per-chunk partial dweight, dbias
    dwb = np.zeros((2,) + w.shape)
    deps = np.empty(rows + 1)                           # per kernel row, then their sum
    if xk.size:
        on = active()
        stream = stream_choice(stream, False)          # streamed only when asked (_stream.py)
        drivers = twins(cache["center"], "f32_affine" in on, "paired_rows" in on, stream)
        run_twin(drivers[1], xk.size, rows, dyk, xk, w, cache["stats"], dx2, part, dwb, deps,
                 cache["k"], cache["eps"], cache["mode"], chunks)
    else:
        deps.fill(np.nan if rows else 0.0)              # rows of no features: NaN; no rows: 0
    grads = {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
             **affine_grads(dwb.reshape(2, -1), cache)}
    return grads, deps[rows]


# -- LayerNorm ----------------------------------------------------------------------------
def layer_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None, stream=None):
    """LayerNorm over the last axis, numba kernels. Same arguments and result as
    ``scratchnorm.layer_norm_forward``; the cache is this backend's."""
    x, eps = layer_norm_args(x, weight, bias, eps)
    return _forward(x, weight, bias, out, center=True, groups=1, k=x.shape[-1], eps=eps, mode=INSIDE, stream=stream)


def layer_norm_backward(dy, cache, *, dx_out=None, stream=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.layer_norm_backward``."""
    return _backward(dy, cache, dx_out, "layer_norm_forward", stream)[0]


# -- RMSNorm and its variants ------------------------------------------------------------
def rms_norm_forward(x, weight=None, bias=None, *, eps=1e-6, eps_mode="inside", k=None, out=None, stream=None):
    """RMSNorm over the last axis (first k features feed the statistic), numba kernels.
    Same arguments and result as ``scratchnorm.rms_norm_forward``."""
    x, eps, k = rms_norm_args(x, weight, bias, eps, eps_mode, k)
    return _forward(x, weight, bias, out, center=False, groups=1, k=k, eps=eps, mode=EPS_MODES.index(eps_mode),
                    stream=stream)


def rms_norm_backward(dy, cache, *, dx_out=None, stream=None):
    """Returns {"x", "weight", "bias", "eps"} (those that exist), as ``scratchnorm.rms_norm_backward``."""
    grads, deps = _backward(dy, cache, dx_out, "rms_norm_forward", stream)
    grads["eps"] = deps
    return grads


# -- GroupRMSNorm --------------------------------------------------------------------------
def group_rms_norm_forward(x, weight=None, *, num_groups, eps=1e-6, eps_mode="inside", out=None):
    """RMSNorm per contiguous group of d / num_groups features, numba kernels.
    Same arguments and result as ``scratchnorm.group_rms_norm_forward``."""
    x, groups, eps = group_rms_norm_args(x, weight, num_groups, eps, eps_mode)
    return _forward(x, weight, None, out, center=False, groups=groups, k=x.shape[-1] // groups, eps=eps,
                    mode=EPS_MODES.index(eps_mode))


def group_rms_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight"} (weight if it exists), as ``scratchnorm.group_rms_norm_backward``."""
    return _backward(dy, cache, dx_out, "group_rms_norm_forward")[0]
