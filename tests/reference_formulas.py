"""Plain formulas for the row-wise family, in extended precision (np.longdouble).

These are written independently of the library: no shared code, the textbook
expressions, evaluated in 80-bit extended precision on x86 (64-bit mantissa),
so that they are a better reference than float64 for float64 inputs.
"""
from __future__ import annotations

import numpy as np

LD = np.longdouble


def _rstd(ms, eps, mode):
    if mode == "inside":
        return 1 / np.sqrt(ms + LD(eps))
    if mode == "outside":
        return 1 / (np.sqrt(ms) + LD(eps))
    return 1 / np.sqrt(np.maximum(ms, LD(eps)))


def _drstd_dms(ms, r, eps, mode):
    if mode == "inside":
        return -r**3 / 2
    if mode == "outside":
        root = np.sqrt(ms)
        return np.where(root > 0, -r**2 / (2 * np.where(root > 0, root, 1)), 0)
    return np.where(ms > LD(eps), -r**3 / 2, 0)


def rms_norm(x, w, b, dy, *, eps, mode="inside", k=None):
    """y = x * rstd(mean(x[:k]^2)) * w + b and its gradients, in long double (see _pack)."""
    x, dy = x.astype(LD), dy.astype(LD)
    d = x.shape[-1]
    k = d if k is None else k
    w = np.ones(d, LD) if w is None else w.astype(LD)
    b = np.zeros(d, LD) if b is None else b.astype(LD)
    ms = np.mean(x[..., :k] ** 2, axis=-1, keepdims=True)
    r = _rstd(ms, eps, mode)
    x_hat = x * r
    y = x_hat * w + b
    g = dy * w
    dx = r * g
    dx[..., :k] += (2 / LD(k)) * np.sum(g * x, -1, keepdims=True) * _drstd_dms(ms, r, eps, mode) * x[..., :k]
    return _pack(y, dx, dy, x_hat, r * np.abs(g))


def layer_norm(x, w, b, dy, *, eps):
    """LayerNorm and its gradients, in long double (see _pack)."""
    x, dy = x.astype(LD), dy.astype(LD)
    d = x.shape[-1]
    w = np.ones(d, LD) if w is None else w.astype(LD)
    b = np.zeros(d, LD) if b is None else b.astype(LD)
    mu = np.mean(x, -1, keepdims=True)
    var = np.mean((x - mu) ** 2, -1, keepdims=True)
    r = 1 / np.sqrt(var + LD(eps))
    x_hat = (x - mu) * r
    g = dy * w
    dx = r * (g - np.mean(g, -1, keepdims=True) - x_hat * np.mean(g * x_hat, -1, keepdims=True))
    return _pack(x_hat * w + b, dx, dy, x_hat, r * np.abs(g))


def _pack(y, dx, dy, x_hat, direct):
    """The results, and the scales their errors are measured against: for a sum over
    rows, the sum of the absolute values of its terms, where x_hat counts at least 1 (its
    natural unit: a constant row has x_hat = 0 exactly, but float64 can only get it to
    within eps * |mean| * rstd). dx is measured against its direct term rstd * |g|: dx is a
    difference of terms of that size, and can be far smaller than them (d = 1)."""
    lead = tuple(range(y.ndim - 1))
    return {"y": y, "x": dx, "scale_x": np.full(dx.shape, max(np.max(direct, initial=0), np.max(np.abs(dx), initial=0))), "weight": np.sum(dy * x_hat, axis=lead), "bias": np.sum(dy, axis=lead),
            "scale_weight": np.sum(np.abs(dy) * (np.abs(x_hat) + 1), axis=lead), "scale_bias": np.sum(np.abs(dy), axis=lead)}
