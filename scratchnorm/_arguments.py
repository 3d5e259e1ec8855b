"""The argument checks of every operation, in one place, for both backends.

Each ``*_args`` function below checks the arguments of one operation: the NumPy reference
(``layernorm.py``, ``rmsnorm.py``, ...) and the numba functions
(``fast/layernorm.py``, ``fast/rmsnorm.py``, ``fast/variants.py``, ``fast/batchnorm.py``, ...) call the
same one first, so a bad argument raises the same error, in the same order,
whichever backend runs. Each returns the cleaned values the operation goes on
with (x as a float array, eps as a float, ...). The single-argument checks they
combine, and the four-part error message, are in ``_checks.py``.
"""
from __future__ import annotations

import math

import numpy as np

from ._checks import (
    CASTS,
    EPS_MODES,
    check_affine,
    check_array_shape,
    check_bool,
    check_channels_input,
    check_choice,
    check_eps,
    check_groups,
    check_k,
    check_offset,
    fail,
)
from .dtypes import as_float_array


def _features(x, name: str) -> None:
    """A row-wise operation needs x of shape (..., d): at least one axis."""
    if x.ndim < 1:
        fail(ValueError, "x", f"an array of shape (..., d) for {name}", x,
             "pass at least a 1-D array whose last axis holds the features, e.g. np.atleast_1d(x).")


def layer_norm_args(x, weight, bias, eps):
    """layer_norm_forward: x (..., d) float; weight, bias (d,) or None; eps >= 0. Returns (x, eps)."""
    x = as_float_array(x)
    eps = check_eps(eps, allow_zero=True)
    _features(x, "layer_norm_forward")
    check_affine(weight, bias, x.shape[-1])
    return x, eps


def rms_norm_args(x, weight, bias, eps, eps_mode, k):
    """rms_norm_forward: as LayerNorm, plus eps_mode and the partial count k. Returns (x, eps, k)."""
    x = as_float_array(x)
    eps = check_eps(eps, allow_zero=True)
    check_choice("eps_mode", eps_mode, EPS_MODES)
    _features(x, "rms_norm_forward")
    k = check_k(k, x.shape[-1])
    check_affine(weight, bias, x.shape[-1])
    return x, eps, k


def group_rms_norm_args(x, weight, num_groups, eps, eps_mode):
    """group_rms_norm_forward: num_groups divides d; no bias. Returns (x, num_groups, eps)."""
    x = as_float_array(x)
    _features(x, "group_rms_norm_forward")
    d = x.shape[-1]
    G = check_groups(num_groups, d)
    check_affine(weight, None, d)
    eps = check_eps(eps, allow_zero=True)
    check_choice("eps_mode", eps_mode, EPS_MODES)
    return x, G, eps


def batch_norm_args(x, weight, bias, eps):
    """batch_norm_forward (training): x (N, C, *), non-empty; weight, bias (C,) or None. Returns (x, eps)."""
    x = as_float_array(x)
    eps = check_eps(eps, allow_zero=True)
    check_channels_input("batch_norm_forward", x)
    check_affine(weight, bias, x.shape[1])
    return x, eps


def batch_norm_eval_args(x, running_mean, running_var, weight, bias, eps):
    """batch_norm_eval_forward: as training, plus the running statistics (C,). Returns (x, eps, C)."""
    x = as_float_array(x)
    eps = check_eps(eps, allow_zero=True)
    check_channels_input("batch_norm_eval_forward", x)
    C = x.shape[1]
    check_array_shape("running_mean", running_mean, (C,))
    check_array_shape("running_var", running_var, (C,))
    check_affine(weight, bias, C)
    return x, eps, C


def group_norm_args(x, weight, bias, num_groups, eps):
    """group_norm_forward: x (N, C, *), num_groups divides C. Returns (x, num_groups, eps)."""
    x = as_float_array(x)
    check_channels_input("group_norm_forward", x)
    G = check_groups(num_groups, x.shape[1], of="C")
    check_affine(weight, bias, x.shape[1])
    eps = check_eps(eps, allow_zero=True)
    return x, G, eps


def add_rms_norm_args(x, residual, weight, eps, cast, offset, out=None, h_out=None):
    """add_rms_norm_forward: residual has x's shape and dtype (h = x + residual is stored in it); cast
    one of CASTS; offset finite; out and h_out (y's and h's arrays) share no memory. Returns (x,
    residual, eps, offset). (Either may overlap x or residual: h_out=residual updates the stream.)"""
    x = as_float_array(x)
    residual = as_float_array(residual, "residual")
    eps = check_eps(eps, allow_zero=True)
    check_choice("cast", cast, CASTS)
    offset = check_offset(offset)
    _features(x, "add_rms_norm_forward")
    if residual.shape != x.shape or residual.dtype != x.dtype:
        fail(ValueError, "residual", f"an array of x's shape {x.shape} and dtype {x.dtype}", residual,
             "pass the residual stream that x is added to; cast one of them first if the dtypes differ, "
             "e.g. residual.astype(x.dtype).")
    check_affine(weight, None, x.shape[-1])
    if isinstance(out, np.ndarray) and isinstance(h_out, np.ndarray) and np.shares_memory(out, h_out):
        fail(ValueError, "h_out", "an array that shares no memory with out (y and h are two results)",
             "an array that overlaps out", "pass two separate arrays, e.g. out=np.empty_like(x) and "
             "h_out=residual (the stream updated in place), or leave one of them None.")
    return x, residual, eps, offset


def gate_array(gate, call: str = "gated_rms_norm_forward(x, z)"):
    """The gate z of a gated RMSNorm as a float array; None (forgotten) is named as such, with ``call``, how
    the caller passes it. (np.asarray(None) would be an object array, and the message about its dtype.)"""
    if gate is None:
        fail(TypeError, "gate", "the gate z, a float array of x's shape (..., d)", None,
             f"pass the gate as the second argument, {call}: z is the gate projection of the same tokens "
             "(Mamba 2's z). For RMSNorm without a gate, use RMSNorm(d) or GroupRMSNorm.")
    return as_float_array(gate, "gate")


def gated_rms_norm_args(x, gate, weight, num_groups, eps, norm_before_gate):
    """gated_rms_norm_forward: gate has x's shape and dtype; num_groups divides d; weight (d,) or None.
    Returns (x, gate, num_groups, eps)."""
    x = as_float_array(x)
    gate = gate_array(gate)
    _features(x, "gated_rms_norm_forward")
    if gate.shape != x.shape or gate.dtype != x.dtype:
        fail(ValueError, "gate", f"an array of x's shape {x.shape} and dtype {x.dtype}", gate,
             "pass the gate projection of the same tokens (z in Mamba 2); cast it first if the dtypes differ, "
             "e.g. gate.astype(x.dtype).")
    G = check_groups(num_groups, x.shape[-1])
    check_affine(weight, None, x.shape[-1])
    eps = check_eps(eps, allow_zero=True)
    check_bool("norm_before_gate", norm_before_gate)
    return x, gate, G, eps


def dyt_args(x, alpha, weight, bias):
    """dyt_forward: x (..., d); alpha a finite real scalar (shape () or (1,)); weight, bias (d,) or None.
    Returns (x, alpha as a float, (shape, dtype) of alpha's gradient: alpha's own, float64 for a
    Python number or an integer)."""
    x = as_float_array(x)
    _features(x, "dyt_forward")
    a = np.asarray(alpha)
    if a.shape not in ((), (1,)) or a.dtype.kind not in "fiu":
        fail(TypeError, "alpha", "a real scalar, or a float array of shape () or (1,)", alpha,
             "pass alpha as a float such as 0.5 (DyT's params['alpha']).")
    like = (a.shape, a.dtype if a.dtype.kind == "f" else np.dtype(np.float64))
    value = float(a.reshape(()))
    if not math.isfinite(value):
        fail(ValueError, "alpha", "a finite number", value, "re-initialize alpha, e.g. to 0.5.")
    check_affine(weight, bias, x.shape[-1])
    return x, value, like
