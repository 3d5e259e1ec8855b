r"""The three places to put eps, and their derivatives, in one place.

Let ``ms`` be the statistic under the root: the mean of squares for RMSNorm,
the variance for LayerNorm. The normalizer ``rstd`` (1 / "std") is

=========  ==========================  ==========================================
mode       rstd(ms)                    used by
=========  ==========================  ==========================================
inside     1 / sqrt(ms + eps)          PyTorch, LLaMA, HF, the paper's TF code
outside    1 / (sqrt(ms) + eps)        the paper's released PyTorch code
clamp      1 / sqrt(max(ms, eps))      the "ByteRMSNorm" explainer
=========  ==========================  ==========================================

They give different numbers: for ms = 1e-6 and eps = 1e-6, "inside" gives
1/sqrt(2e-6) = 707, "outside" gives 1/(1e-3 + 1e-6) = 999, "clamp" gives
1000.

Backward needs the derivatives of rstd. They are used, and returned here, as
derivatives of log(rstd), that is divided by rstd:

* inside:  d log rstd/d ms = -rstd^2 / 2;                    d log rstd/d eps = -rstd^2 / 2
* outside: d log rstd/d ms = -rstd / (2 sqrt(ms));           d log rstd/d eps = -rstd
* clamp:   d log rstd/d ms = -rstd^2 / 2 if ms > eps else 0;  d log rstd/d eps = -rstd^2 / 2 if eps >= ms else 0

Why the log: the backward multiplies d rstd/d ms by sum_j g_j x_j and by x_i,
two factors as large as x. Written with x_hat = x * rstd instead, the product
is (sum_j g_j x_hat_j) * (d log rstd/d ms) * x_i, whose factors stay in range:
with |x| ~ 1e104, rstd^3 ~ 1e-312 would already be a subnormal float64 and
lose digits, while rstd^2 ~ 1e-208 is fine.

Rows beyond float64's square. For |x| beyond ~1e154 the mean square (or the
variance) overflows to inf, though rstd ~ 1/|x| is an ordinary number: a
plain rstd_from_ms gives 0, and y = 0. ``rstd_of_huge_rows`` takes such a
row's statistic on the row scaled by the power of two 2^-e that brings
max|x| into [0.5, 1) (exact), where its mean square ms 4^-e is in
[1/(4k), 1), and scales back:

    inside   rstd = 2^-e / sqrt(ms 4^-e + eps 4^-e)
    outside  rstd = 2^-e / (sqrt(ms 4^-e) + eps 2^-e)
    clamp    rstd = 2^-e / sqrt(ms 4^-e)          (ms overflows, so ms > eps)

the same roundings as the plain formula, on numbers that fit. ms itself
stays inf in the cache (it is beyond float64); the derivatives above that
read it give their limit there: "outside"'s sqrt(ms) rstd is 1 - eps rstd.
Only rows whose ms overflowed while all their values are finite are redone:
the bits of every other row are those of the plain formula.

"outside" has a kink at ms = 0: sqrt is not differentiable there. We take
the derivative to be 0 at ms = 0, which is also what a central finite
difference gives (the statistic is even in x). The caller multiplies it by
sum(g * x_hat), which is 0 for an all-zero row anyway.
"""
from __future__ import annotations

import numpy as np


def rstd_from_ms(ms: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """rstd for each row, from the mean-square (or variance) ``ms``."""
    if mode == "inside":
        return 1.0 / np.sqrt(ms + eps)
    if mode == "outside":
        return 1.0 / (np.sqrt(ms) + eps)
    if mode == "clamp":
        return 1.0 / np.sqrt(np.maximum(ms, eps))
    raise ValueError(f"eps_mode: expected 'inside', 'outside' or 'clamp'; received {mode!r}.")


def rstd_of_huge_rows(dev: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """rstd (n, 1) of rows dev (n, k) whose mean square overflows float64 though every value is finite
    (the deviations from the mean for LayerNorm): on the rows scaled by 2^-e (module docstring)."""
    e = np.frexp(np.max(np.abs(dev), axis=-1, keepdims=True))[1]     # max|dev| = f 2^e, f in [0.5, 1)
    ms = (np.ldexp(dev, -e) ** 2).mean(axis=-1, keepdims=True)       # ms 4^-e, in [1/(4k), 1)
    if mode == "inside":
        return np.ldexp(1.0 / np.sqrt(ms + np.ldexp(eps, -2 * e)), -e)
    if mode == "outside":
        return np.ldexp(1.0 / (np.sqrt(ms) + np.ldexp(eps, -e)), -e)
    if mode == "clamp":
        return np.ldexp(1.0 / np.sqrt(ms), -e)
    raise ValueError(f"eps_mode: expected 'inside', 'outside' or 'clamp'; received {mode!r}.")


def rescue_huge_rows(rstd: np.ndarray, ms: np.ndarray, dev: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """rstd (..., 1) with the rows whose ms (..., 1) overflowed to inf while every value of the row dev
    (..., k) is finite recomputed by ``rstd_of_huge_rows``, in place; the other rows untouched. Compute
    ms under np.errstate(over="ignore"): its overflow is handled here."""
    over = np.isinf(ms[..., 0])
    if over.any():                                   # (the common case costs one pass over ms)
        over &= np.isfinite(dev).all(axis=-1)
        rstd[over] = rstd_of_huge_rows(dev[over], eps, mode)
    return rstd


def dlog_rstd_dms(ms: np.ndarray, rstd: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """(d rstd / d ms) / rstd, elementwise (see the module docstring)."""
    if mode == "inside":
        return -0.5 * rstd**2
    if mode == "outside":
        root = np.sqrt(ms)
        safe = np.where(root > 0, root, 1.0)
        return np.where(root > 0, -0.5 * rstd / safe, 0.0)
    if mode == "clamp":
        return np.where(ms > eps, -0.5 * rstd**2, 0.0)
    raise ValueError(f"eps_mode: expected 'inside', 'outside' or 'clamp'; received {mode!r}.")


def drstd_dms_per_rstd3(ms: np.ndarray, rstd: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """(d rstd / d ms) / rstd^3, elementwise: -1/2 inside, -(sqrt(ms) + eps) / (2 sqrt(ms)) outside
    (0 at ms = 0), -1/2 or 0 clamped. Finite where rstd^2 or rstd^3 would overflow (rstd > 1e154,
    from ms + eps < 1e-308) or underflow (|x| > 1e104): the backward multiplies it by
    sum(g * x_hat) and x_hat, which stay of order one."""
    if mode == "inside":
        return np.full_like(rstd, -0.5)
    if mode == "outside":
        root = np.sqrt(ms)
        scaled = rstd * root                             # sqrt(ms) / (sqrt(ms) + eps), in [0, 1]
        scaled = np.where(np.isinf(root), 1.0 - eps * rstd, scaled)   # ms overflowed: its limit (docstring)
        safe = np.where(root > 0, scaled, 1.0)
        return np.where(root > 0, -0.5 / safe, 0.0)
    if mode == "clamp":
        return np.where(ms > eps, -0.5, 0.0)
    raise ValueError(f"eps_mode: expected 'inside', 'outside' or 'clamp'; received {mode!r}.")


def dlog_rstd_deps(ms: np.ndarray, rstd: np.ndarray, eps: float, mode: str) -> np.ndarray:
    """(d rstd / d eps) / rstd, elementwise; used by RMSNormLearnableEps."""
    if mode == "inside":
        return -0.5 * rstd**2
    if mode == "outside":
        return -rstd
    if mode == "clamp":
        return np.where(eps >= ms, -0.5 * rstd**2, 0.0)
    raise ValueError(f"eps_mode: expected 'inside', 'outside' or 'clamp'; received {mode!r}.")
