"""Small statistics shared by the lessons: RMS, a power-law slope, normalizing over axes, a best affine fit."""
from __future__ import annotations

import numpy as np


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def fit_slope(sizes, values, smallest):
    keep = sizes >= smallest
    slope, intercept = np.polyfit(np.log(sizes[keep]), np.log(values[keep]), 1)
    return float(slope), float(np.exp(intercept))


def normalize_over(x, axes, eps=1e-5):
    """The definition, written out: (x - mean) / sqrt(var + eps) with the statistics over `axes`."""
    xm = x - x.mean(axis=axes, keepdims=True)
    return xm / np.sqrt((xm * xm).mean(axis=axes, keepdims=True) + eps)


def channel_affine_residual(x_hat, y):
    """How far y (N, C, L) is from the closest per-channel affine map of x_hat, a_c x_hat + b_c (least
    squares per channel): the RMS of the residual over the RMS of y."""
    n, C, L = x_hat.shape
    resid = []
    for c in range(C):
        A = np.c_[x_hat[:, c].ravel(), np.ones(n * L)]
        coef = np.linalg.lstsq(A, y[:, c].ravel(), rcond=None)[0]
        resid.append(y[:, c].ravel() - A @ coef)
    return rms(np.array(resid)) / rms(y)
