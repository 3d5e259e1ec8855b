"""The dtype policy, in one place.

* Accepted inputs: float16, float32, float64 NumPy arrays (anything
  ``np.asarray`` turns into one of those). The output has the input's dtype.
* Integer, bool and complex inputs are **rejected** with a TypeError that
  names the fix (``x.astype(np.float32)``). A silent cast would hide a bug
  such as feeding token ids to a normalization. So is a float array in the
  other byte order (``>f8`` on a little-endian machine, as read from some
  files): the fix, ``x.astype(x.dtype.newbyteorder('='))``, keeps its values;
  accepted, it would come back as a ``>f8`` y, and the kernels would copy it.
* float64 inputs are computed in float64.
* float32 inputs: the statistics (mean, mean of squares, the sums of the
  backward) are accumulated in float64. The NumPy reference computes the
  normalized output in float64 too and rounds it to float32 once, when it is
  stored. The numba kernels of LayerNorm and RMSNorm compute their elementwise
  loops (y, and the backward's dx) in float32 from those float64 statistics
  (twice the SIMD lanes), within the bounds their module docstrings count
  (scratchnorm/fast/layernorm.py, rmsnorm.py); so do BatchNorm's (training
  mode) and GroupNorm's on spatial slabs of 16 values or more
  (scratchnorm/fast/channel_slabs.py); the variants' kernels do so for an
  uncentered y only (scratchnorm/fast/variants.py). The rest round a float64
  value once.
* float16 inputs are upcast to float32 when they enter the function (one
  copy; the numba backend widens them to float64, which is just as exact),
  handled as float32 inputs are by the reference, and the final output, *after*
  the weight and the bias are applied, is cast back to float16. So there is
  one float16 rounding per output element, and x^2 never overflows float16.
  (RMSNorm's ``cast=`` can put the roundings elsewhere, as other models do:
  casts.py.)
* bfloat16 inputs (the ``ml_dtypes`` package's dtype, as JAX uses; install it
  with the ``lessons`` extra) are handled exactly as float16 ones. The library
  never imports ml_dtypes: an array that has the dtype brings its casts along.
* Parameters (weight, bias, ...) have the layer's ``dtype`` (float64 unless
  the layer is built with ``dtype=np.float32``); their gradients have the
  parameter's dtype; ``dx`` has the dtype of ``x``.
"""
from __future__ import annotations

import numpy as np

from ._checks import fail

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_F16, _F32, _F64 = FLOAT_DTYPES


def is_bfloat16(dt) -> bool:
    """ml_dtypes' bfloat16 (recognized by name: the library does not import ml_dtypes)."""
    return dt.itemsize == 2 and dt.name == "bfloat16"      # (itemsize first: dt.name is a slow property)


def is_half(dt) -> bool:
    """float16 or bfloat16: the 2-byte dtypes, upcast on entry and rounded once at the end."""
    if dt is _F64 or dt is _F32:                # the common cases first: this runs on every call
        return False
    return dt is _F16 or dt == _F16 or is_bfloat16(dt)


def as_float_array(x, name: str = "x") -> np.ndarray:
    """Return ``x`` as a float16/32/64 or bfloat16 ndarray, or raise a TypeError.

    Never copies a float array; never casts silently.
    """
    if type(x) is np.ndarray:                   # the common case first: this runs on every call
        dt = x.dtype
        if dt is _F32 or dt is _F64 or dt is _F16:
            return x
    if isinstance(x, np.ma.MaskedArray):        # np.asarray would drop the mask and keep the garbage
        fail(TypeError, name, "a plain NumPy array (masked values would enter the statistics)",
             f"a masked array with {int(np.ma.count_masked(x))} masked values",
             f"fill the masked values first, e.g. np.ma.filled({name}, 0.0), or drop those rows.")
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and not arr.dtype.isnative:    # big-endian data (read from a file) on this machine
        native = arr.dtype.newbyteorder("=")
        fail(TypeError, name, f"a float array in this machine's byte order, such as {native.name}", arr,
             f"convert it to the native byte order, the same values: {name}.astype({name}.dtype.newbyteorder('=')) "
             f"(here {name}.astype(np.{native.name})).")
    if arr.dtype not in FLOAT_DTYPES and not is_bfloat16(arr.dtype):
        fail(TypeError, name, "a float16, bfloat16, float32 or float64 array", arr,
             f"cast it first, e.g. {name}.astype(np.float32).")
    return arr


def round_to(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` rounded once to ``dtype`` (a new array). NumPy rounds float64 to float32 or float16
    directly. ml_dtypes rounds float64 to bfloat16 through float32, which is two roundings: 0.18017578733
    becomes 0.18017578125 (a tie in bfloat16), then 0.1796875, where one rounding gives 0.1806640625
    (lesson 17 found it). So for bfloat16: float32 rounded to odd first (toward zero, then the last bit
    set if anything was dropped), which keeps the information a single rounding needs, then bfloat16."""
    if a.dtype != _F64 or not is_bfloat16(np.dtype(dtype)):
        return a.astype(dtype, copy=True)
    with np.errstate(over="ignore"):                     # beyond float32: inf, stepped back below
        t = a.astype(np.float32)
    t = np.where(np.abs(t.astype(np.float64)) > np.abs(a), np.nextafter(t, np.float32(0)), t)   # toward 0
    odd = t.view(np.uint32) | (t.astype(np.float64) != a).astype(np.uint32)                    # sticky bit
    return odd.view(np.float32).astype(dtype)


def upcast_half(x: np.ndarray) -> np.ndarray:
    """float16 and bfloat16 -> float32 at the entry of a function; other dtypes unchanged."""
    return x.astype(np.float32) if is_half(x.dtype) else x
