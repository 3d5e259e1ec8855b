"""How the NumPy functions take an upstream gradient and hand back their results.

``upstream`` checks dy (or another upstream gradient) and widens it to float64; ``store`` rounds a
float64 result to the caller's dtype once, into out= when given; ``sum_rows`` sums a parameter's
gradient over every row. The numba functions hand their results back through ``store`` too
(fast/_buffers.py).
"""
from __future__ import annotations

import numpy as np

from ._checks import check_dy, fail
from .dtypes import as_float_array, is_bfloat16, round_to


def store(result: np.ndarray, dtype, out=None, name: str = "out", *, owned: bool = False) -> np.ndarray:
    """Round the float64 ``result`` to ``dtype`` once; write into ``out`` when given.

    A new array (or ``out``): ``result`` may be an array the cache keeps, such as
    x_hat, and a caller writing into y must not change what backward uses.
    ``owned=True`` says nothing else holds ``result`` (a temporary of the caller's
    expression): then it is returned as it is when it already has ``dtype``, not copied.
    """
    if out is None:
        if owned and result.dtype == dtype:
            return result
        return round_to(result, dtype)
    if not isinstance(out, np.ndarray) or out.shape != result.shape or out.dtype != dtype:
        fail(ValueError, name, f"an array of shape {result.shape} and dtype {np.dtype(dtype)}", out,
             f"allocate {name} with np.empty_like(x), or leave it None.")
    if not out.flags.writeable:
        fail(ValueError, name, "a writeable array", "a read-only array",
             f"allocate {name} with np.empty_like(x), or leave it None.")
    np.copyto(out, round_to(result, dtype) if is_bfloat16(np.dtype(dtype)) else result, casting="unsafe")
    return out


def sum_rows(a: np.ndarray) -> np.ndarray:
    """Sum over every axis but the last: (..., d) -> (d,)."""
    return a.reshape(-1, a.shape[-1]).sum(axis=0)


def upstream(dy, shape: tuple, name: str = "dy") -> np.ndarray:
    """dy (or another upstream gradient, ``name``) checked: a float array of the forward output's
    ``shape``; widened to float64."""
    dy = as_float_array(dy, name)
    check_dy(dy, shape, name)
    return dy.astype(np.float64)
