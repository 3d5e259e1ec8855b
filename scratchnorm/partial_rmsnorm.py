"""pRMSNorm: the RMS estimated from the first k = ceil(d * p) features.

    ms    = (1/k) sum_{j<k} x_j^2,   k = ceil(d * p), 1 <= k <= d
    y     = x * rstd(ms) * weight     (the *whole* row is divided)

The forward and backward are RMSNorm's (rmsnorm.py) with the partial count k:
only the first k features receive the gradient through ms.

How k is computed. The paper defines k = ceil(n * p). Its released PyTorch
code uses int(n * p), which truncates and reaches k = 0 for n * p < 1, a
division by zero. Floating point also pushes n * p just above an integer:
100 * 0.07 = 7.000000000000001, whose ceil is 8. This library rounds n * p to
9 decimals before the ceiling and clamps k to [1, d]: ``partial_count(100,
0.07) == 7``, ``partial_count(8, 0.01) == 1``.
"""
from __future__ import annotations

import math

import numpy as np

from ._checks import check_int, check_probability
from .rmsnorm import RMSNorm


def partial_count(d: int, p: float) -> int:
    """k = ceil(d * p), robust to float round-off, clamped to [1, d]."""
    d = check_int("d", d)
    p = check_probability("p", p)
    return min(d, max(1, math.ceil(round(d * p, 9))))


class PartialRMSNorm(RMSNorm):
    """PartialRMSNorm(d, p=0.0625, eps=1e-8, eps_mode="inside"): pRMSNorm with k = ceil(d * p)."""

    def __init__(self, d, p=0.0625, eps=1e-8, eps_mode="inside", elementwise_affine=True, *,
                 backend="numba", dtype=np.float64):
        k = partial_count(d, p)  # checks d and p first
        super().__init__(d, eps=eps, eps_mode=eps_mode, elementwise_affine=elementwise_affine,
                         backend=backend, dtype=dtype)
        self.p, self._k = float(p), k

    @property
    def k(self) -> int:
        return self._k

    def extra_repr(self):
        return f"{self.d}, p={self.p} (k={self.k}), eps={self.eps}, eps_mode={self.eps_mode!r}"
