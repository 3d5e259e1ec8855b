"""BatchNorm on numba kernels: the reference's names, signatures and checks.

Each function checks its arguments with the helpers its NumPy reference
(batchnorm.py) uses, in the same order, so a bad argument raises the same
error. Then x is viewed as (N, C * S) and one pair of drivers does the work:
batchnorm_slabs.py for spatial sizes S >= SLAB_MIN (images; its docstring has
the formulas), batchnorm_columns.py for smaller ones, such as (N, C) inputs.
Training and eval mode share the drivers: in eval mode the statistics are
given and backward drops the two terms that come through them. The four
functions share the work around the drivers too: ``_prepare_forward`` (or
``_prepare_backward``) picks the driver and makes its arguments, the function
runs it (``run_by_size(*run)``), and ``finish()`` makes the result. Neither
helper is on the stack while the driver runs, so a layer reaches it in four
calls, as LayerNorm's kernels (tests/fast/test_chunks.py).

Cache (this backend's; the reference's has other keys):
    "x"      the input as the kernels read it, (N, C * S), float32 or float64: x
             itself (a reference, no copy; see "What a cache holds" in
             __init__.py), or the array the conversion to a kernel dtype made;
    "stats"  (3, C) float64: mean, var, rstd per channel (training) or running
             mean, running var, rstd (eval); the training cache also has the
             reference's "mean", "var" (biased) and "count" (M) for
             ``update_running_stats``;
    "w"      the weight as a float64 vector; "weight", "bias" as given.
"""
from __future__ import annotations

import numpy as np

from .._arguments import batch_norm_args, batch_norm_eval_args
from ._buffers import affine_grads, affine_vector, backward_rows, finish_rows, forward_rows
from ._jit import run_by_size, run_by_size_overflowing
from .chunks import n_chunks
from .batchnorm_columns import bn_backward_columns, bn_forward_columns, column_tasks
from .batchnorm_slabs import bn_backward_slabs, bn_forward_slabs, channel_block
from .channel_slabs import SLAB_MIN, layout
from .stats import MEAN, RSTD, VAR

_TRAIN, _EVAL = "batchnorm", "batchnorm_eval"
MADE_BY = {_TRAIN: "scratchnorm.fast.batch_norm_forward", _EVAL: "scratchnorm.fast.batch_norm_eval_forward"}


def _prepare_forward(x, weight, bias, out, stats, eps, kind):
    """The forward up to its driver: (run, finish). ``run``: the arguments of ``run_by_size`` for the
    slabs' or the columns' driver; ``finish()``, once it has run: (y, cache). ``stats`` (3, C) is filled
    (training) or given (eval)."""
    N, C, S = layout(x.shape)
    xk, y2, y_new = forward_rows(x, out, N)
    w, b = affine_vector(weight, C, 1.0), affine_vector(bias, C, -0.0)
    batch_stats = kind == _TRAIN
    if S >= SLAB_MIN:
        part = np.empty((n_chunks(N), 2, C))                   # per-chunk (mean, M2) of each channel
        run = (bn_forward_slabs, x.size, N * C, xk, w, b, y2, part, stats, eps, S, channel_block(S, C), batch_stats)
    else:
        part = np.empty((n_chunks(N), 2, C * S))               # per-chunk (mean, M2) of each column
        cols = np.empty((4, C * S))                            # mean, 0, rstd * w, b per column
        run = (bn_forward_columns, x.size, column_tasks(N, C * S), xk, w, b, y2, part, stats, cols, eps, S,
               batch_stats)
    cache = {"made_by": MADE_BY[kind], "fast": kind, "x": xk, "stats": stats, "w": w,
             "weight": weight, "bias": bias, "S": S, "dtype": x.dtype, "shape": x.shape}
    if batch_stats:
        cache.update(mean=stats[MEAN], var=stats[VAR], count=N * S)     # (views: filled by the driver)
    return run, lambda: (finish_rows(y2, y_new, x.shape, x.dtype, out), cache)


def _prepare_backward(dy, cache, dx_out, kind):
    """The backward up to its driver: (run, finish). ``run``: the arguments of ``run_by_size``;
    ``finish()``, once it has run: {"x", "weight", "bias"} (those that exist)."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, MADE_BY[kind])
    w, stats, S = cache["w"], cache["stats"], cache["S"]
    N, C = xk.shape[0], w.shape[0]
    coef = np.empty((5, C))                               # a, cc, e, gm, gx (batchnorm_slabs.dx_coefficients)
    dwb = np.empty((2, C))                                # dweight, dbias
    if S >= SLAB_MIN:
        part = np.empty((n_chunks(N), 2, C))              # per-chunk sums of dy * (x - mean) and dy
        run = (bn_backward_slabs, xk.size, N * C, dyk, xk, w, stats, dx2, part, dwb, coef, S, channel_block(S, C),
               kind == _TRAIN)
    else:
        part = np.empty((n_chunks(N), 2, C * S))          # their sums per chunk and column
        cols = np.empty((4, C * S))                       # mean and the coefficients per column
        run = (bn_backward_columns, xk.size, column_tasks(N, C * S), dyk, xk, w, stats, dx2, part, dwb, coef, cols,
               S, kind == _TRAIN)
    return run, lambda: {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
                         **affine_grads(dwb, cache)}


def batch_norm_forward(x, weight=None, bias=None, *, eps=1e-5, out=None):
    """BatchNorm with the batch's statistics (training mode), numba kernels. Same arguments and
    result as ``scratchnorm.batch_norm_forward``; the cache is this backend's (module docstring)."""
    x, eps = batch_norm_args(x, weight, bias, eps)
    run, finish = _prepare_forward(x, weight, bias, out, np.empty((3, x.shape[1])), eps, _TRAIN)
    run_by_size(*run)
    return finish()


def batch_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.batch_norm_backward``."""
    run, finish = _prepare_backward(dy, cache, dx_out, _TRAIN)
    run_by_size_overflowing(*run)                    # (a float32 slab's dx may overflow, then runs in float64)
    return finish()


def batch_norm_eval_forward(x, running_mean, running_var, weight=None, bias=None, *, eps=1e-5, out=None):
    """BatchNorm with fixed statistics (eval mode), numba kernels. Same arguments and result as
    ``scratchnorm.batch_norm_eval_forward``."""
    x, eps, C = batch_norm_eval_args(x, running_mean, running_var, weight, bias, eps)
    stats = np.empty((3, C))
    stats[MEAN] = running_mean
    stats[VAR] = running_var
    stats[RSTD] = 1.0 / np.sqrt(stats[VAR] + eps)           # as the reference: in float64
    run, finish = _prepare_forward(x, weight, bias, out, stats, eps, _EVAL)
    run_by_size(*run)
    return finish()


def batch_norm_eval_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.batch_norm_eval_backward``."""
    run, finish = _prepare_backward(dy, cache, dx_out, _EVAL)
    run_by_size(*run)
    return finish()
