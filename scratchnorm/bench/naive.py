"""The baseline the library's kernels must beat: RMSNorm and LayerNorm as a learner writes them in numba.

About twenty lines a function, a ``prange`` loop over rows, the row sums accumulated in float64
with ``fastmath={"reassoc"}`` (the library's own accuracy contract for statistics), y and dx computed in
the input's dtype, every output into a buffer allocated once. The benchmark times them as the "naive"
implementation beside the library's (``python -m scratchnorm.bench``): what a user would otherwise write.

Each kernel is one Python function compiled twice (``compile_twice``): ``SERIAL``, without ``parallel``
(``prange`` is then ``range``), the peer of the library's default serial build on one thread, and
``PRANGE``, with ``parallel=True``, the peer of the opt-in on numba's threads (threads.py picks one per
configuration). Both split the backward's dw (and db) sums into the same CHUNKS row blocks, added in
block order; the row sums may be vectorized apart (reassoc), so they agree to rounding (tests/bench).

    RMSNorm:    y = x rstd w,   rstd = 1 / sqrt(mean(x^2) + eps)
                dx = rstd (g - x_hat mean(g x_hat)),  g = dy w,  dw = sum over rows of dy x_hat
    LayerNorm:  y = (x - mean) rstd w + b
                dx = rstd (g - mean(g) - x_hat mean(g x_hat)),  dw = sum dy x_hat,  db = sum dy
"""
from __future__ import annotations

import inspect
import types
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._checks import check_choice
from ..layer import Layer
from ..layernorm import LayerNorm
from ..rmsnorm import RMSNorm
from .norms import Inputs, Norm

FAST = {"fastmath": {"reassoc"}, "cache": True}       # and parallel=True for the prange copy
CHUNKS = 16                                            # row blocks of the backward's dw, db sums
NAIVE = ("rmsnorm", "layernorm")                       # the norms the baseline covers


def rms_forward(x, w, eps, y, rstd):
    n, d = x.shape
    for i in prange(n):
        ms = 0.0
        for j in range(d):
            ms += np.float64(x[i, j]) * np.float64(x[i, j])
        rstd[i] = 1.0 / np.sqrt(ms / d + eps)          # rstd has x's dtype: the row's scale, rounded once
        for j in range(d):
            y[i, j] = x[i, j] * rstd[i] * w[j]


def rms_backward(dy, x, w, rstd, dx, dw_parts):
    n, d = x.shape
    chunks = dw_parts.shape[0]                         # row blocks, each summing its own share of dw
    for c in prange(chunks):
        dw_parts[c, :] = 0.0
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            gx = 0.0
            for j in range(d):
                gx += np.float64(dy[i, j] * w[j]) * np.float64(x[i, j] * rstd[i])
            k = rstd[i] * (gx / d)
            for j in range(d):
                dx[i, j] = rstd[i] * dy[i, j] * w[j] - k * x[i, j] * rstd[i]
                dw_parts[c, j] += np.float64(dy[i, j]) * np.float64(x[i, j] * rstd[i])


def ln_forward(x, w, b, eps, y, mean, rstd):
    n, d = x.shape
    for i in prange(n):
        s = 0.0
        for j in range(d):
            s += x[i, j]
        mu = s / d
        v = 0.0
        for j in range(d):
            v += (x[i, j] - mu) * (x[i, j] - mu)
        mean[i], rstd[i] = mu, 1.0 / np.sqrt(v / d + eps)
        for j in range(d):
            y[i, j] = (x[i, j] - mean[i]) * rstd[i] * w[j] + b[j]


def ln_backward(dy, x, w, mean, rstd, dx, dwb_parts):
    n, d = x.shape
    chunks = dwb_parts.shape[0]                        # row blocks: [c, 0] their dw, [c, 1] their db
    for c in prange(chunks):
        dwb_parts[c] = 0.0
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            g_sum, gx_sum = 0.0, 0.0
            for j in range(d):
                g = np.float64(dy[i, j] * w[j])
                g_sum += g
                gx_sum += g * np.float64((x[i, j] - mean[i]) * rstd[i])
            a, k = g_sum / d, gx_sum / d
            for j in range(d):
                x_hat = (x[i, j] - mean[i]) * rstd[i]
                dx[i, j] = rstd[i] * (dy[i, j] * w[j] - a - x_hat * k)
                dwb_parts[c, 0, j] += np.float64(dy[i, j]) * np.float64(x_hat)
                dwb_parts[c, 1, j] += dy[i, j]


class Kernels(NamedTuple):
    """The four kernels above, compiled one way."""
    rms_forward: object
    rms_backward: object
    ln_forward: object
    ln_backward: object


def compile_twice(fn) -> tuple:
    """(serial, prange): ``fn`` under numba.njit without and with ``parallel=True``, lazily. numba's disk
    cache keys an entry by the function's qualified name and not by its options, so each is a copy of
    ``fn`` (the same code object) under a name of its own, as scratchnorm.fast._jit.serial_and_prange does
    for the library's kernels (whose options differ: no fastmath, numba's error model)."""
    pair = []
    for parallel in (False, True):
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__ = f"{fn.__qualname__}_{'prange' if parallel else 'serial'}"
        pair.append(njit(parallel=parallel, **FAST)(copy))
    return tuple(pair)


SERIAL, PRANGE = (Kernels(*pair) for pair in zip(*map(compile_twice, (rms_forward, rms_backward, ln_forward,
                                                                     ln_backward))))


def kernels(parallel: bool) -> Kernels:
    """PRANGE (on numba's threads) or SERIAL."""
    return PRANGE if parallel else SERIAL


class NaiveNorm(Layer):
    """A learner's own layer around the prange kernels above, as their training script would hold it: buffers
    allocated at each call, a tuple for the cache, the row-block sums of dw (and db) added up at the end.
    The fresh-process bench trains it beside the library's layers (fresh.py, backend "naive"). eps is the
    library layer's default, so that the same seeded model trains to the same losses."""

    def __init__(self, norm: str, d: int):
        super().__init__(backend="numba")
        self.norm = check_choice("norm", norm, NAIVE)
        library = LayerNorm if norm == "layernorm" else RMSNorm
        self.eps = inspect.signature(library).parameters["eps"].default     # the library layer's default
        self._add_param("weight", np.ones(d))
        if norm == "layernorm":
            self._add_param("bias", np.zeros(d))

    def _forward(self, x):
        n = x.shape[0]
        y, mean, rstd = np.empty_like(x), np.empty(n, x.dtype), np.empty(n, x.dtype)
        if self.norm == "rmsnorm":
            PRANGE.rms_forward(x, self.params["weight"], self.eps, y, rstd)
        else:
            PRANGE.ln_forward(x, self.params["weight"], self.params["bias"], self.eps, y, mean, rstd)
        return y, (x, mean, rstd)

    def _backward(self, dy, cache):
        x, mean, rstd = cache
        dx, w = np.empty_like(x), self.params["weight"]
        if self.norm == "rmsnorm":
            parts = np.empty((CHUNKS, x.shape[1]))
            PRANGE.rms_backward(dy, x, w, rstd, dx, parts)
            return {"x": dx, "weight": parts.sum(0)}
        parts = np.empty((CHUNKS, 2, x.shape[1]))
        PRANGE.ln_backward(dy, x, w, mean, rstd, dx, parts)
        dw, db = parts.sum(0)
        return {"x": dx, "weight": dw, "bias": db}


def naive_steps(norm: Norm, inp: Inputs, parallel: bool = True) -> dict:
    """forward / backward / fwd+bwd of the naive kernels (the prange ones, or with ``parallel=False`` the
    serial ones), into buffers allocated once (LookupError for a norm they do not cover)."""
    if norm.name not in NAIVE:
        raise LookupError(f"no naive numba kernel for {norm.name} (only rmsnorm and layernorm)")
    x, dy = inp.x, inp.dy
    n = x.shape[0]
    w = inp.params["weight"]
    y, dx = np.empty_like(x), np.empty_like(x)
    mean, rstd = np.empty(n, x.dtype), np.empty(n, x.dtype)
    parts = np.empty((CHUNKS, 2 if norm.name == "layernorm" else 1, x.shape[1]))   # per row block: dw (, db)
    grads = {}
    k = kernels(parallel)
    if norm.name == "rmsnorm":
        def forward():
            k.rms_forward(x, w, norm.eps, y, rstd)

        def backward():
            k.rms_backward(dy, x, w, rstd, dx, parts[:, 0])      # a contiguous (CHUNKS, d) array
            grads.update(x=dx, weight=parts[:, 0].sum(0).astype(x.dtype))
    else:
        b = inp.params["bias"]

        def forward():
            k.ln_forward(x, w, b, norm.eps, y, mean, rstd)

        def backward():
            k.ln_backward(dy, x, w, mean, rstd, dx, parts)
            dwb = parts.sum(0).astype(x.dtype)
            grads.update(x=dx, weight=dwb[0], bias=dwb[1])
    forward()
    return {"forward": forward, "backward": backward, "fwd+bwd": lambda: (forward(), backward()),
            "y": y, "grads": grads}
