"""GroupNorm on the numba kernels of groupnorm_kernels.py: the reference's names, signatures and checks.

InstanceNorm calls these with num_groups = C, so it runs on them too.

Each function checks its arguments with the helpers its NumPy reference
(groupnorm.py, then layernorm.py for eps) uses, in the same order. x is viewed
as (N, C * S); the forward's tasks are the (sample, group) pairs, the
backward's the (sample chunk, group) pairs (groupnorm_kernels.py).

Cache (this backend's): "x" the input as the kernels read it (x itself, no copy:
see batchnorm.py), "stats" (3, N * G) float64: rows MEAN, VAR, RSTD (stats.py),
column n * G + g for sample n and group g; "w" the weight as a float64 vector (per channel, or per column for spatial
sizes below SLAB_MIN), "S" the spatial size, "weight", "bias" as given.
"""
from __future__ import annotations

import numpy as np

from .._arguments import group_norm_args
from ._buffers import affine_grads, affine_vector, backward_rows, finish_rows, forward_rows
from ._jit import run_by_size, run_by_size_overflowing
from .chunks import n_chunks
from .channel_slabs import SLAB_MIN, layout
from .groupnorm_kernels import gn_backward, gn_forward

_KIND = "groupnorm"
MADE_BY = "scratchnorm.fast.group_norm_forward"     # the cache's tag (_checks.check_cache)


def sample_chunks(N: int, S: int) -> int:
    """Chunks of samples for the backward's per-channel sums, from the shape only.

    One per sample when a channel slab has S >= SLAB_MIN values: the partial
    sums (N, 2, C) are then at most a quarter of a float32 x, and a small
    batch still gives N * G tasks. Shorter slabs: ``chunks.n_chunks(N)``.
    """
    return N if S >= SLAB_MIN else n_chunks(N)


def _affine(weight, bias, C: int, S: int):
    """Weight and bias as float64 vectors: per channel for slabs (S >= SLAB_MIN), else per column."""
    w, b = affine_vector(weight, C, 1.0), affine_vector(bias, C, -0.0)
    return (w, b) if S >= SLAB_MIN else (np.repeat(w, S), np.repeat(b, S))


def group_norm_forward(x, weight=None, bias=None, *, num_groups, eps=1e-5, out=None):
    """GroupNorm forward, numba kernels. Same arguments and result as
    ``scratchnorm.group_norm_forward``; the cache is this backend's."""
    x, G, eps = group_norm_args(x, weight, bias, num_groups, eps)
    N, C, S = layout(x.shape)
    xk, y2, y_new = forward_rows(x, out, N)
    w, b = _affine(weight, bias, C, S)
    stats = np.empty((3, N * G))                                 # mean, var, rstd per (sample, group)
    run_by_size(gn_forward, x.size, N * G, xk, w, b, y2, stats, eps, S)
    cache = {"made_by": MADE_BY, "fast": _KIND, "x": xk, "stats": stats, "w": w,
             "weight": weight, "bias": bias, "S": S, "dtype": x.dtype, "shape": x.shape}
    return finish_rows(y2, y_new, x.shape, x.dtype, out), cache


def group_norm_backward(dy, cache, *, dx_out=None):
    """Returns {"x", "weight", "bias"} (those that exist), as ``scratchnorm.group_norm_backward``."""
    cache, dyk, xk, dx2, dx_new = backward_rows(dy, cache, dx_out, MADE_BY)
    w, stats, S = cache["w"], cache["stats"], cache["S"]
    N = xk.shape[0]
    G = stats.shape[1] // N
    chunks = sample_chunks(N, S)
    part = np.empty((chunks, 2, w.shape[0]))                     # per-chunk dweight, dbias
    dwb = np.empty((2, cache["shape"][1]))
    run_by_size_overflowing(gn_backward, xk.size, chunks * G, dyk, xk, w, stats, dx2, part, dwb, S)
    return {"x": finish_rows(dx2, dx_new, cache["shape"], cache["dtype"], dx_out, "dx_out"),
            **affine_grads(dwb, cache)}
