r"""The row-wise drivers: all groups of all rows, on numba's threads, with the tricks that are on.

The arrays come as (rows * G, m): kernel row r is group r % G of row r // G, and
the weight, bias and partial sums as (G, m). The backward sums dweight and dbias
per fixed chunk of rows (``chunks.n_chunks``) and adds the chunks in order, so the
bits do not depend on the thread count.

``center`` and the tricks are closure constants: numba compiles one pair of
drivers per combination, each only when first called (``twins``). Without
centering the mean is the constant 0 and LLVM drops every "- mean", "- mean(g)"
and the sum of g from RMSNorm's loops; without a trick, none of its code is
compiled in (NOTES.md has what a run-time branch cost). With no trick on, the drivers run the readable
``forward_row`` and ``backward_row`` of rowwise.py.
"""
from __future__ import annotations

from functools import cache

import numpy as np
from numba import prange

from ._jit import serial_and_parallel
from .chunks import n_chunks
from ._stream import store_fence, stream_row
from .rowwise import backward_row, forward_row
from .stats import sum_of
from .float32 import bounded
from .rowwise_tuned import backward_two_rows, forward_row_tuned

COLUMN_BLOCK = 512                  # columns per task when the partial sums are added


def _drivers(center, f32_affine, paired_rows, stream):
    def _forward_rows(x, w, b, y, stats, k, eps, mode):
        """``stream`` (with ``f32_affine`` only): the rows go in the backward's chunks, so that each
        worker fences once a chunk (a fence waits until the streamed lines have reached memory;
        NOTES.md has what a fence a row cost)."""
        rows = x.shape[0]
        G = w.shape[0]
        if stream:
            is_bounded = bounded(w, b, k)
            chunks = n_chunks(rows)
            for c in prange(chunks):
                for r in range(c * rows // chunks, (c + 1) * rows // chunks):
                    g = r % G
                    forward_row_tuned(x[r], w[g], b[g], y[r], stats[:, r], center, k, eps, mode, is_bounded, True)
                store_fence()
        elif f32_affine:
            is_bounded = bounded(w, b, k)
            for r in prange(rows):
                g = r % G
                forward_row_tuned(x[r], w[g], b[g], y[r], stats[:, r], center, k, eps, mode, is_bounded, False)
        else:
            for r in prange(rows):
                g = r % G
                forward_row(x[r], w[g], b[g], y[r], stats[:, r], center, k, eps, mode)

    def _backward_rows(dy, x, w, stats, dx, part, dwb, deps, k, eps, mode, chunks):
        """part (chunks, 2, G, m): per-chunk partial sums; dwb (2, G, m) gets dweight, dbias;
        deps (rows + 1,): d loss / d eps per kernel row, then their sum. ``stream``: each row of dx
        is computed into ``buf`` first, then written with non-temporal stores."""
        rows = x.shape[0]
        G = w.shape[0]
        for c in prange(chunks):
            part[c] = 0.0
            buf = np.empty((2, x.shape[1] if stream else 0), dx.dtype)   # (2, m) or unused
            lo = c * rows // chunks
            hi = (c + 1) * rows // chunks
            if paired_rows and G == 1:
                for r in range(lo, hi - 1, 2):
                    deps[r], deps[r + 1] = backward_two_rows(
                        dy[r], x[r], stats[:, r], buf[0] if stream else dx[r],
                        dy[r + 1], x[r + 1], stats[:, r + 1], buf[1] if stream else dx[r + 1],
                        w[0], part[c, 0, 0], part[c, 1, 0], center, k, eps, mode)
                    if stream:
                        stream_row(dx[r], buf[0])
                        stream_row(dx[r + 1], buf[1])
                lo = hi - 1 if (hi - lo) % 2 == 1 else hi       # the last row of an odd count
            for r in range(lo, hi):
                g = r % G
                deps[r] = backward_row(dy[r], x[r], w[g], stats[:, r], buf[0] if stream else dx[r],
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
        deps[rows] = sum_of(deps[:rows])

    return serial_and_parallel(_forward_rows), serial_and_parallel(_backward_rows)


@cache
def twins(center: bool, f32_affine: bool, paired_rows: bool, stream: bool):
    """((forward serial, parallel), (backward serial, parallel)) for these switches (_jit.py)."""
    return _drivers(center, f32_affine, paired_rows, stream)
