r"""The fused residual add + RMSNorm kernel (scratchnorm/add_rmsnorm.py has the math).

One pass per row: h = x + residual is computed in x's dtype and stored, then
the variants' forward row (variants.forward_row, RMSNorm's case) runs on h
while it is still in the L1 cache. So x and residual are read from
memory once and h and y written once: 4 arrays' worth of bytes, against 6 for
an add that writes h and a norm that reads it back (the benchmark counts them).
With stream=True (_stream.py) h is built in a row buffer and both outputs
are written with non-temporal stores, which skip the read that a plain store
of a line not in the cache costs; by default both are written plainly, which
measured as fast or faster on one thread (_stream.py).

The cache is the variants' RMSNorm cache (variants.norm_cache), on h, so the backward is RMSNorm's kernel
(variants.py) followed by dx += dh. That adds dh to the already rounded dx:
for float32, within one more float32 rounding of |dx| than the reference, which
rounds once. float16 (and bfloat16) input is added in its dtype by NumPy (so h has the
reference's bits) and normalized by the variants' kernel: it is not fused; nor is float32 input
with a weight float32 cannot hold (|weight| > 3.4e38: the norm then runs in float64, variants.py).

cast="llama" or "none" with float32 or half input: the kernel computes h and the statistics the
backward needs, and y is then recomputed with those roundings by casts.py, the NumPy code the
reference calls too (numba has no bfloat16), so both backends give the same bits.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._arguments import add_rms_norm_args
from .._checks import check_cache, check_dy
from ..casts import rms_norm_cast
from ..dtypes import as_float_array, is_half
from ._buffers import affine_vector, as_rows, finish_rows, n_rows, output_rows
from ._jit import run_by_size, serial_and_prange
from ._stream import decide, store_fence, stream_row
from .chunks import n_chunks
from .float32 import bounded
from .variants import INSIDE, RMS_NORM, forward_row, norm_cache, rms_norm_backward, rms_norm_forward

MADE_BY = "scratchnorm.fast.add_rms_norm_forward"     # the cache's tag (_checks.check_cache)


def _add_rms_rows(x, residual, w, b, h, y, stats, eps, stream):
    """h = x + residual, then y = RMSNorm(h), row by row (all (rows, d); w, b (d,) in x's dtype).
    ``stream``: each row's h goes to a small buffer first, y and h are written with non-temporal stores
    (_stream.py), and each chunk of rows ends with a fence."""
    rows, d = x.shape
    is_bounded = bounded(w.reshape(1, d), b.reshape(1, d), d)
    chunks = n_chunks(rows)
    for c in prange(chunks):
        buf = np.empty(d if stream else 0, x.dtype)        # h of one row, or unused
        for r in range(c * rows // chunks, (c + 1) * rows // chunks):
            xr, rr = x[r], residual[r]
            hr = buf if stream else h[r]
            for j in range(d):
                hr[j] = xr[j] + rr[j]                   # in the arrays' dtype: h as it is stored
            if stream:                                  # a constant at each call (variants.variants_forward_kernel)
                forward_row(hr, w, b, y[r], stats[:, r], False, d, eps, INSIDE, is_bounded, True)
                stream_row(h[r], buf)
            else:
                forward_row(hr, w, b, y[r], stats[:, r], False, d, eps, INSIDE, is_bounded, False)
        if stream:
            store_fence()


ADD_RMS_ROWS = serial_and_prange(_add_rms_rows)


def add_rms_norm_forward(x, residual, weight, eps=1e-6, *, cast="gemma", offset=0.0, out=None, h_out=None,
                         stream=None):
    """h = x + residual, y = RMSNorm(h) * (offset + weight), numba kernels. Same arguments and result as
    ``scratchnorm.add_rms_norm_forward``; the cache is this backend's. An out= or h_out= that
    overlaps x or residual (h_out=residual) is filled after the kernel, from a new array; out= and
    h_out= that overlap each other are rejected by the argument checks (_arguments.py), as by the reference.
    ``stream``: None or False writes y and h with plain stores, True with non-temporal ones (the same bits)."""
    x, residual, eps, offset = add_rms_norm_args(x, residual, weight, eps, cast, offset, out, h_out)
    scale = weight + offset if weight is not None and offset else weight         # (d,) in weight's dtype
    y, h, cache = _add_rms_norm(x, residual, scale, eps, out, h_out, decide(stream))
    if cast != "gemma" and x.dtype != np.float64:       # the other roundings (module docstring)
        y[...] = rms_norm_cast(h, weight, None, eps, "inside", x.shape[-1], cast, offset=offset)
    return y, h, cache


def _add_rms_norm(x, residual, weight, eps, out, h_out, stream):
    """The fused forward with the scale ``weight``: (y, h, cache); ``stream``: non-temporal stores."""
    d = x.shape[-1]
    w = None if is_half(x.dtype) else affine_vector(weight, d, 1.0, x.dtype)
    if w is None or w.dtype != x.dtype:                 # not fused (module docstring)
        h = np.add(x, residual)
        y, norm = rms_norm_forward(h, weight, eps=eps, out=out, stream=stream)
        return y, (h if h_out is None else finish_rows(h, True, x.shape, x.dtype, h_out, "h_out")), \
            {"made_by": MADE_BY, "norm": norm}
    rows = x.size // d if d else n_rows(x.shape)
    xk, _ = as_rows(x, rows)
    rk, _ = as_rows(residual, rows)
    h, h_new = output_rows(h_out, xk, x.shape, x.dtype, xk, rk)          # (rows, d)
    y, y_new = output_rows(out, xk, x.shape, x.dtype, xk, rk)           # (out and h_out never overlap: _arguments.py)
    stats = np.empty((3, rows))                         # mean (0), ms, rstd of each row (stats.py)
    b = affine_vector(None, d, -0.0, xk.dtype)
    if x.size:
        run_by_size(ADD_RMS_ROWS, x.size, n_chunks(rows), xk, rk, w, b, h, y, stats, eps, stream)
    else:
        stats.fill(np.nan)
    norm = norm_cache(RMS_NORM, h, stats, 1, weight, None, False, d, eps, INSIDE,
                      x.dtype, x.shape)                 # RMSNorm's cache of h: its backward takes it
    return (finish_rows(y, y_new, x.shape, x.dtype, out), finish_rows(h, h_new, x.shape, x.dtype, h_out, "h_out"),
            {"made_by": MADE_BY, "norm": norm})


def add_rms_norm_backward(dy, dh, cache):
    """Returns {"x", "residual", "weight"} as ``scratchnorm.add_rms_norm_backward``: RMSNorm's
    backward kernel on h, then dx += dh (module docstring)."""
    norm = check_cache(cache, MADE_BY)["norm"]
    dh = as_float_array(dh, "dh")
    check_dy(dh, norm["shape"], "dh")
    grads = rms_norm_backward(dy, norm)
    dx = grads.pop("x")
    np.add(dx, dh, out=dx, casting="same_kind")         # one more rounding (module docstring)
    grads.pop("eps")
    return {"x": dx, "residual": dx.copy(), **grads}
