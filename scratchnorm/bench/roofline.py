"""The roofline: how fast this machine copies an array, the bound a kernel is measured against.

Three copies of an array of the shape at hand: ``np.copyto`` into a preallocated array, a
parallel numba loop (compiled on first use: importing this module imports no numba), and a
parallel numba copy that writes with non-temporal stores (``scratchnorm/fast/_stream.py``), as
the kernels do beyond the cache. "copy" is the faster of the first two; GB/s count the bytes
read plus the bytes written.
"""
from __future__ import annotations

import statistics

import numpy as np

from .timing import Budget, measure

_PARALLEL_COPY = None


prange = range   # replaced by numba.prange when the numba copy is first built


def _copy_flat(src, dst):
    """dst[i] = src[i], split over threads by numba's prange."""
    for i in prange(src.size):
        dst[i] = src[i]


COPY_CHUNKS = 64     # pieces of the streamed copy (each thread fences once a piece)


def parallel_copy():
    """The numba parallel copy, compiled on first use (numba is not imported before)."""
    global _PARALLEL_COPY, prange
    if _PARALLEL_COPY is None:
        import numba
        prange = numba.prange
        _PARALLEL_COPY = numba.njit(parallel=True, cache=True)(_copy_flat)
    return _PARALLEL_COPY


def median_copy(copies: list[dict]) -> dict:
    """One copy record from several measurements of the same shape: the median of each figure
    ("best" is the median of each measurement's faster copy), and how many there were."""
    med = {key: (None if any(c[key] is None for c in copies) else statistics.median(c[key] for c in copies))
           for key in ("numpy_gbs", "numba_gbs", "numba_stream_gbs", "best_gbs")}
    return {**copies[0], **med, "measurements": len(copies)}


def copy_arrays(shape, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) for copy_bandwidth: random values, and zeros (both touched, so paged in)."""
    src = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    return src, np.zeros_like(src)


def copy_bandwidth(shape, dtype, budget: Budget, use_numba: bool, arrays=None, warm_up: bool = True) -> dict:
    """GB/s of copying one array of ``shape``: bytes read + bytes written over the median time.
    ``arrays``: (src, dst) from copy_arrays, to reuse; made here if None."""
    src, dst = copy_arrays(shape, dtype) if arrays is None else arrays
    moved = 2 * src.nbytes
    rec = {"shape": list(shape), "dtype": np.dtype(dtype).name, "array_bytes": src.nbytes,
           "numpy_gbs": moved / measure(lambda: np.copyto(dst, src), budget, warm_up).median_s / 1e9,
           "numba_gbs": None, "numba_stream_gbs": None}
    if use_numba:
        from ..fast._stream import copy_streamed
        kernel, s, t = parallel_copy(), src.reshape(-1), dst.reshape(-1)
        rec["numba_gbs"] = moved / measure(lambda: kernel(s, t), budget, warm_up).median_s / 1e9
        rec["numba_stream_gbs"] = moved / measure(lambda: copy_streamed(t, s, COPY_CHUNKS), budget,
                                                  warm_up).median_s / 1e9
    rec["best_gbs"] = max(v for v in (rec["numpy_gbs"], rec["numba_gbs"]) if v is not None)
    return rec


def last_level_cache_bytes() -> int:
    """The kernels' own reading of the cache they may use (it decides where they stream, fast/_stream.py)."""
    from ..fast._stream import usable_cache_bytes
    return usable_cache_bytes()

