r"""The Jacobians of RMSNorm and LayerNorm, and the paper's gradient analysis through R.

RMSNorm without affine maps a (d,) to x_hat = a * rstd with rstd = 1/sqrt(ms + eps),
ms = mean(a^2). Its Jacobian is

    J = d x_hat / d a = rstd * (I - rstd^2 * a a^T / d)

For eps = 0 this is the paper's R = (1/RMS(a)) (I - a a^T / (d RMS(a)^2)).
R is symmetric, R a = 0 (eps = 0): its null space is the direction of a, so
its rank is d - 1, and R(delta a) = R(a) / delta.

LayerNorm's Jacobian, with x_hat = (a - mu) * rstd:

    J = rstd * (I - 1 1^T / d - x_hat x_hat^T / d)

It removes both 1 and x_hat: rank d - 2.

``linear_rms_norm_dW_via_R`` computes dL/dW for v = RMSNorm(W x) * g + b the
way the paper writes it, summing x^T (x) (diag(g * dL/dv) R) over the cases,
one d x d matrix per case. It is slow on purpose: it is the formula, so it can
be compared with the fast path (Linear, then RMSNorm, then backward).
"""
from __future__ import annotations

import numpy as np

from ._checks import check_array_shape, check_eps, fail
from .dtypes import as_float_array


def _as_vector(a):
    a = as_float_array(a, "a").astype(np.float64)
    if a.ndim != 1:
        fail(ValueError, "a", "a 1-D vector (d,)", a, "pass one row, e.g. x[0].")
    return a


def rms_norm_jacobian(a, eps=0.0):
    """d x (a * rsqrt(mean(a^2) + eps)) / d a, a (d, d) float64 matrix."""
    a = _as_vector(a)
    eps = check_eps(eps, allow_zero=True)
    d = a.size
    rstd = 1.0 / np.sqrt(np.mean(a * a) + eps)
    return rstd * (np.eye(d) - rstd**2 * np.outer(a, a) / d)


def layer_norm_jacobian(a, eps=0.0):
    """d LayerNorm(a) / d a without affine, a (d, d) float64 matrix."""
    a = _as_vector(a)
    eps = check_eps(eps, allow_zero=True)
    d = a.size
    am = a - a.mean()
    rstd = 1.0 / np.sqrt(np.mean(am * am) + eps)
    x_hat = am * rstd
    return rstd * (np.eye(d) - np.ones((d, d)) / d - np.outer(x_hat, x_hat) / d)


def linear_rms_norm_dW_via_R(x, W, g, dv, eps=0.0):
    """dL/dW for v = RMSNorm(x W^T) * g + b, through the paper's R matrix.

    x: (N, in), W: (d, in), g: (d,), dv = dL/dv: (N, d). Returns (d, in).
    Per case: dL/da = R (g * dv) (R is symmetric), dL/dW += outer(dL/da, x).
    """
    x = as_float_array(x).astype(np.float64)
    W = as_float_array(W, "W").astype(np.float64)
    if x.ndim != 2 or W.ndim != 2 or x.shape[1] != W.shape[1]:
        fail(ValueError, "x, W", "x of shape (N, in) and W of shape (d, in)", (np.shape(x), np.shape(W)),
             "pass a 2-D batch and a weight matrix with matching in-features.")
    d = W.shape[0]
    check_array_shape("g", g, (d,))
    check_array_shape("dv", dv, (x.shape[0], d))
    dW = np.zeros_like(W)
    for x_n, dv_n in zip(x, dv):
        a = W @ x_n                                   # (d,)
        R = rms_norm_jacobian(a, eps)                 # (d, d)
        dW += np.outer(R @ (g * dv_n), x_n)           # (d, in)
    return dW
