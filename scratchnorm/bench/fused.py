"""The residual add fused with RMSNorm against the two calls it replaces (fast/add_rmsnorm.py).

Both forward, numba kernels, allocating, float32 weight (as inference runs them):

* fused: ``add_rms_norm_forward(x, residual, w)`` reads x and residual, writes h and y: 4 arrays;
* unfused: ``h = x + residual`` (NumPy), then ``rms_norm_forward(h, w)``: reads x and residual,
  writes h, reads h back, writes y: 6 arrays (h is read from the cache when it fits).

Timed in interleaved rounds with the copy (runner.in_rounds); "% copy" counts each
path's own bytes against the same run's copy bandwidth.
"""
from __future__ import annotations

import numpy as np

FUSED_ARRAYS, UNFUSED_ARRAYS = 4, 6


def fused_calls(shape, dtype, seed: int = 3) -> dict:
    """{"fused": f, "unfused": g}: the two forward paths on the same inputs."""
    from ..fast import add_rms_norm_forward, rms_norm_forward

    rng = np.random.default_rng(seed)
    x, residual = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    w = rng.standard_normal(shape[-1]).astype(dtype)
    return {"fused": lambda: add_rms_norm_forward(x, residual, w),
            "unfused": lambda: rms_norm_forward(x + residual, w)}


def fused_record(shape, dtype, timings: dict, copy_gbs: float) -> dict:
    """One row of report["fused"]: each path's time, bytes, GB/s and % of copy; unfused / fused."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    row = {"shape": list(shape), "dtype": np.dtype(dtype).name, "copy_gbs": copy_gbs}
    for name, arrays in (("fused", FUSED_ARRAYS), ("unfused", UNFUSED_ARRAYS)):
        t = timings[name].median_s
        gbs = arrays * nbytes / t / 1e9
        row[name] = {"median_s": t, "bytes": arrays * nbytes, "gbs": gbs,
                     "pct_copy": 100 * gbs / copy_gbs if copy_gbs else None}
    row["speedup"] = row["unfused"]["median_s"] / row["fused"]["median_s"]
    return row

