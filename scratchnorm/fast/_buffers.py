"""Arrays in the form the kernels take: C-contiguous, float32 or float64, (rows, features).

The kernels are compiled for float32 and float64 only. float16 is widened to
float64 on entry: the widening is exact, so the values are those of the dtype
policy's float32 upcast, and since every statistic is float64 anyway the
output is then rounded once, from float64 to float16, as in the reference.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._results import store
from .._checks import check_cache, check_dy
from ..dtypes import as_float_array
from ._jit import jit
from .float32 import narrowed

KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT32, FLOAT64 = KERNEL_DTYPES


def as_rows(a: np.ndarray, rows: int, dtype=None) -> tuple[np.ndarray, bool]:
    """``a`` as a C-contiguous (rows, a.size // rows) array of a kernel dtype, and whether that is a
    new array. Never copies a C-contiguous float32/float64 array of the right dtype.
    """
    if dtype is None:
        dtype = a.dtype if a.dtype in KERNEL_DTYPES else FLOAT64
    new = not (a.dtype == dtype and a.flags.c_contiguous)
    if new:
        a = np.ascontiguousarray(a, dtype=dtype)
    shape = _rows_shape(a, rows)
    return (a if a.shape == shape else a.reshape(shape)), new     # (this runs on every call)


def _rows_shape(a: np.ndarray, rows: int) -> tuple[int, int]:
    """(rows, a.size // rows); with no rows, (0, the last axis): reshape(0, -1) is ambiguous."""
    return (rows, a.size // rows) if rows else (0, a.shape[-1] if a.ndim else 0)


def n_rows(shape: tuple) -> int:
    """Rows of an (..., d) array: the product of the leading axes (1 for a vector)."""
    return math.prod(shape[:-1])


def writable_rows(buf, shape: tuple, dtype, rows: int, *inputs) -> np.ndarray | None:
    """``buf`` (an out= or dx_out= argument) as a (rows, -1) view the kernel can write into, or None.

    None when ``buf`` is None, is not a C-contiguous array of ``shape`` and
    ``dtype``, or overlaps one of ``inputs``. Then the kernel writes a new array,
    and ``_results.store`` checks ``buf`` (raising the library's error if it does not
    fit) and copies the result into it.
    """
    if buf is None or not isinstance(buf, np.ndarray) or buf.dtype != dtype or buf.shape != shape:
        return None
    flags = buf.flags
    if not (flags.c_contiguous and flags.writeable):
        return None
    for a in inputs:                    # (a loop, not any(): this runs on every call)
        if np.may_share_memory(buf, a):
            return None
    return buf.reshape(_rows_shape(buf, rows))


def output_rows(buf, like: np.ndarray, shape: tuple, dtype, *inputs) -> tuple[np.ndarray, bool]:
    """Where a kernel writes a result shaped like its (rows, d) input ``like``, and whether it is new.

    ``buf`` itself (see ``writable_rows``) when ``dtype`` is ``like``'s dtype and
    ``buf`` fits; else a new array of ``like``'s shape and dtype, which
    ``finish_rows`` then rounds into ``buf`` (or returns).
    """
    if buf is None:                     # the common case, first: this runs on every call
        return np.empty_like(like), True
    view = writable_rows(buf, shape, dtype, like.shape[0], *inputs) if like.dtype == dtype else None
    return (np.empty_like(like), True) if view is None else (view, False)


def finish_rows(result: np.ndarray, new: bool, shape: tuple, dtype, buf, name: str = "out") -> np.ndarray:
    """The caller's array from ``output_rows``' pair: ``buf`` if the kernel wrote into it; ``result``
    itself, reshaped, if it already has ``dtype`` and there is no ``buf`` (it is new and nothing
    else holds it); else ``result`` stored (one rounding to ``dtype``; into ``buf`` when given)."""
    if not new:
        return buf
    if buf is None and result.dtype == dtype:
        return result if result.shape == shape else result.reshape(shape)
    return store(result.reshape(shape), dtype, buf, name)


def plain_rows(x, eps, weight, bias=None):
    """The door's first test: x as (rows, d) kernel rows when a call is the common case, else None.

    The common case: x a C-contiguous float32 or float64 ndarray with at least one axis and one element;
    eps a float in [0, inf); weight and bias None or C-contiguous (d,) float32 or float64 vectors (the
    kernels round them to x's dtype: float32.narrowed). Every
    argument check would pass on such a call, and nothing needs converting, so the functions skip
    both; any other call takes the long way (the checks of _arguments.py, with their messages, then
    ``forward_rows`` and ``affine_vector``). The caller adds its own conditions (RMSNorm: no bias, ...)
    and asks ``plain_output`` where y goes.
    """
    if not (type(x) is np.ndarray and (x.dtype is FLOAT32 or x.dtype is FLOAT64) and x.ndim
            and x.size and x.flags.c_contiguous and type(eps) is float and 0.0 <= eps < math.inf):
        return None
    d = x.shape[-1]
    for v in (weight, bias):            # (a loop, not all(): this runs on every call)
        if v is not None and not (type(v) is np.ndarray and (v.dtype is FLOAT32 or v.dtype is FLOAT64)
                                  and v.shape == (d,) and v.flags.c_contiguous):
            return None
    return x if x.ndim == 2 else x.reshape(x.size // d, d)


def plain_output(xk: np.ndarray, x: np.ndarray, out):
    """Where a door call (``plain_rows``) writes y: a new array, or ``out`` itself as (rows, d) when it is
    a writable C-contiguous array of x's shape and dtype that shares no memory with x (``writable_rows``).
    None sends the call the long way (an in-place out=x, say, which needs a copy of x)."""
    if out is None:
        return np.empty_like(xk)
    return writable_rows(out, x.shape, x.dtype, xk.shape[0], x)


def forward_rows(x: np.ndarray, out, rows: int):
    """What a forward kernel takes: (xk, y, y_new).

    xk: x as (rows, d) kernel rows (``as_rows``: x itself when it already is a
    C-contiguous float32/float64 array), which the cache keeps for the backward.
    y, y_new: ``output_rows``' pair for ``out``. When ``out`` overlaps x (an
    in-place call, out=x), xk is a copy, so the backward still sees the input.
    """
    if (x.dtype is FLOAT32 or x.dtype is FLOAT64) and x.flags.c_contiguous:     # the common cases first:
        xk = x.reshape(_rows_shape(x, rows))                                     # this runs on every call
        if out is None:
            return xk, np.empty_like(xk), True
        view = writable_rows(out, x.shape, x.dtype, rows, x)
        if view is not None:
            return xk, view, False
    xk, private = as_rows(x, rows)
    if out is not None and not private and np.may_share_memory(out, xk):
        xk = xk.copy()
    y, y_new = output_rows(out, xk, x.shape, x.dtype, xk)
    return xk, y, y_new


@lru_cache(maxsize=32)
def _identity(d: int, value: float, dtype) -> np.ndarray:
    return np.full(d, value, dtype)


@jit
def _narrowed(wide, like):
    """float32.narrowed called from Python: (wide in like's dtype, whether it fits there), by the one rule
    the kernels of LayerNorm and RMSNorm apply inside (sum |wide| within like's largest value)."""
    return narrowed(wide, like)


_FLOAT32_LIKE = np.empty(0, FLOAT32)      # the dtype to narrow to, as ``narrowed`` takes it


def affine_vector(param, d: int, identity: float, dtype=FLOAT64) -> np.ndarray:
    """A weight or bias as a C-contiguous (d,) vector of ``dtype`` (float64 or the kernel dtype of x);
    None gives ``identity`` (1.0 or -0.0). Never copies a vector that already is one. A vector
    that float32 cannot hold stays float64, by float32.narrowed's rule (sum |w| past 3.4e38, a NaN or an
    inf): the kernel then computes in float64."""
    if param is None:
        return _identity(d, identity, dtype)
    param = param if isinstance(param, np.ndarray) else np.asarray(param)
    if param.dtype == dtype and param.flags.c_contiguous and param.ndim == 1:
        return param
    if dtype == FLOAT32 and param.dtype == FLOAT64:                # narrowing: it may overflow
        wide = np.ascontiguousarray(param).reshape(d)
        narrow, fits = _narrowed(wide, _FLOAT32_LIKE)
        return narrow if fits else wide
    return param.astype(dtype).reshape(d)          # astype: half the time of ascontiguousarray


def kernel_vector(param, d: int, identity: float) -> np.ndarray:
    """A weight or bias as LayerNorm's and RMSNorm's kernels take it: a C-contiguous (d,) float32 or
    float64 vector, never copied when it is one (the kernels round it to x's dtype once per call:
    float32.narrowed); anything else through ``affine_vector`` (float64; None gives ``identity``)."""
    if type(param) is np.ndarray and (param.dtype is FLOAT32 or param.dtype is FLOAT64) and param.ndim == 1 \
            and param.flags.c_contiguous:
        return param
    return affine_vector(param, d, identity)


def backward_rows(dy, cache, dx_out, made_by: str):
    """What a backward kernel takes, checked: (cache, dy, x, dx, dx_new).

    ``cache`` must come from the forward ``made_by`` ("scratchnorm.fast.rms_norm_forward":
    _checks.check_cache) and hold the kept input as cache["x"] (rows, d), and "shape" and
    "dtype"; dy must have that shape. dy and x are returned as (rows, d) arrays of one kernel dtype
    (never narrowing dy: float16 + float32 -> float32), dx as ``output_rows`` gives it.
    """
    cache = check_cache(cache, made_by)
    xk, shape = cache["x"], cache["shape"]
    if (type(dy) is np.ndarray and dy.dtype is xk.dtype and dy.shape == shape
            and dy.flags.c_contiguous):                 # the common cases, first: this runs on every call
        if dx_out is None:
            return cache, dy.reshape(xk.shape), xk, np.empty_like(xk), True
        view = writable_rows(dx_out, shape, xk.dtype, xk.shape[0], dy, xk) if cache["dtype"] is xk.dtype else None
        if view is not None:
            return cache, dy.reshape(xk.shape), xk, view, False
    dy = as_float_array(dy, "dy")
    check_dy(dy, shape)
    kd = np.promote_types(xk.dtype, dy.dtype)
    xk = xk.astype(kd, copy=False)
    dyk, _ = as_rows(dy, xk.shape[0], kd)
    dx2, dx_new = output_rows(dx_out, xk, shape, cache["dtype"], dy, xk)
    return cache, dyk, xk, dx2, dx_new


def affine_grads(dwb: np.ndarray, cache: dict) -> dict:
    """{"weight": dwb[0], "bias": dwb[1]} for the parameters in the cache that are not None,
    each in its parameter's dtype (one conversion for both when they share it: the layers' case). ``dwb``
    is the call's own new array: where the dtype is already right the gradients are views of it."""
    weight, bias = cache["weight"], cache["bias"]
    if weight is not None and bias is not None and weight.dtype == bias.dtype:
        both = dwb.astype(weight.dtype, copy=False)     # (2, d)
        return {"weight": both[0], "bias": both[1]}
    return {name: dwb[i].astype(cache[name].dtype, copy=False) for i, name in enumerate(("weight", "bias"))
            if cache[name] is not None}
