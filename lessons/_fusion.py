"""Lesson 18's harness: the timing of its "why" cell, what numba compiled, and dweight's sums in chunk order.

The lesson's own kernels (add_rows, norm_rows, fused_rows) and its experiments stay on its page.
"""
from __future__ import annotations

import re
from unittest import mock

import numba
import numpy as np

from scratchnorm import fast
from scratchnorm.fast import _jit as fast_jit
from scratchnorm.fast.chunks import ROWS_PER_SUM
from scratchnorm.fast.float32 import bounded
from lessons._common import check
from lessons._speed import regime
from lessons._training import interleaved_medians, report


def why(lesson, rng, shape, own, fused_arrays):
    """Median times of the library's paths, lesson 18's own kernels (``own``: add_rows, norm_rows, fused_rows),
    and both library paths on one row. ``fused_arrays``: the fused call's arrays of traffic."""
    add_rows, norm_rows, fused_rows = own
    x, r = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    w, b = rng.standard_normal(shape[1]).astype(np.float32), np.full(shape[1], -0.0, np.float32)
    h, y, stats, hb = np.empty_like(x), np.empty_like(x), np.empty((3, shape[0])), np.add(x, r)
    ok = bounded(w.reshape(1, -1), b.reshape(1, -1), shape[1])
    fused_rows(x, r, w, b, h, y, stats, 1e-6, ok)
    check(np.array_equal(y, fast.add_rms_norm_forward(x, r, w)[0]), "the lesson's fused loop gives the library's bits")
    one = [a[:1].copy() for a in (x, r, h, y)]                   # one row, in arrays of its own
    t = interleaved_medians({
        "library fused": lambda: fast.add_rms_norm_forward(x, r, w, out=y, h_out=h),
        "library add, then norm": lambda: fast.rms_norm_forward(np.add(x, r, out=h), w, out=y),
        "own fused": lambda: fused_rows(x, r, w, b, h, y, stats, 1e-6, ok),
        "own add": lambda: add_rows(x, r, h),
        "own norm": lambda: norm_rows(hb, w, b, y, stats, 1e-6, ok)},
        lesson.pick(40, max(20, min(400, int(1e8 / x.nbytes)))))
    t.update(interleaved_medians({                                # timed apart: after a large call a small one
        "library fused, one row": lambda: fast.add_rms_norm_forward(*one[:2], w, out=one[3], h_out=one[2]),
        "library add, then norm, one row": lambda: fast.rms_norm_forward(np.add(*one[:2], out=one[2]), w,
                                                                         out=one[3])}, 200))   # pays extra
    report(lesson, f"  {shape}, {regime(fused_arrays * x.nbytes)}: "
           + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in t.items()))
    return shape, t


def compiled(kernel):
    """(loops vectorized, stack loads and stores) in what numba compiled for ``kernel``'s first signature:
    ``vector.body`` blocks of its LLVM IR, and moves to or from an offset of %rsp in its machine code (counted
    in the code, not as executed)."""
    sig = kernel.signatures[0]
    ir, asm = kernel.inspect_llvm(sig), kernel.inspect_asm(sig)
    return (len(re.findall(r"^vector\.body[\w.]*:", ir, re.MULTILINE)),
            len(re.findall(r"\tv?mov\w*\s[^\n]*\(%rsp\)", asm)))


def library_dweight(x, dy, w):
    """The library's dweight on 1 and 2 threads ({threads: (d,)}), and the forward's cache."""
    grads = {}
    with mock.patch.object(fast_jit, "PARALLEL_MIN", 0):    # the prange kernel at this size, on 2 threads
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            cache = fast.rms_norm_forward(x, w)[1]
            grads[threads] = fast.rms_norm_backward(dy, cache)["weight"]
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return grads, cache


def chunk_partials(x, dy, rstd, chunks):
    """(chunks, d) float64: each chunk's sum of dy * x_hat as the kernel makes it (scratchnorm/fast/chunks.py):
    x_hat = x * rstd and dy * x_hat in x's dtype, summed in x's dtype over at most ROWS_PER_SUM rows at a
    time, each such sum added to the chunk's float64 sum."""
    x_hat = x * rstd.astype(x.dtype)[:, None]                              # (rows, d), in x's dtype
    contrib = dy * x_hat                                                    # (rows, d): dy x_hat, in x's dtype
    part = np.zeros((chunks, x.shape[1]))
    for c in range(chunks):
        first = c * len(x) // chunks
        partial = np.zeros(x.shape[1], x.dtype)
        for i in range(first, (c + 1) * len(x) // chunks):
            partial += contrib[i]
            if (i - first) % ROWS_PER_SUM == ROWS_PER_SUM - 1:
                part[c] += partial
                partial[:] = 0
        part[c] += partial
    return part


def added_in(part, order):
    """The partials added in ``order``, in float64: (d,)."""
    total = part[order[0]].copy()
    for c in order[1:]:
        total += part[c]
    return total
