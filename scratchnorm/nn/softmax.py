r"""Softmax over the last axis, its backward, and a stable log-sum-exp.

Forward
    m   = max_j z_j                       taken out so that no exp overflows
    e_j = exp(z_j - m)                    <= 1, and 1 at the maximum
    p_i = e_i / sum_j e_j                 = exp(z_i - lse), lse = m + log sum_j e_j (log-sum-exp)

Entries equal to -inf (masked attention scores) give p_i = 0 exactly, as
long as the row has one finite entry, which sets m.

Backward
    dz_i = p_i (dp_i - sum_j dp_j p_j)

Derivation: dp_j/dz_i = p_j (delta_ij - p_i), so
dz_i = sum_j dp_j p_j (delta_ij - p_i) = p_i dp_i - p_i sum_j dp_j p_j.
Where p_i = 0 (a masked entry) dz_i = 0: no gradient reaches a masked score.
Adding a constant to every z_i leaves p unchanged, and indeed sum_i dz_i = 0.
"""
from __future__ import annotations

import numpy as np


def logsumexp(z):
    """log sum_j exp(z_j) over the last axis, keepdims; never overflows for finite z."""
    m = z.max(axis=-1, keepdims=True)                         # (..., 1)
    return m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def softmax_forward(z):
    """p = exp(z - m) / sum(exp(z - m)) over the last axis, m the row's maximum. Returns ``(p, cache)``;
    p is also the cache."""
    p = np.exp(z - z.max(axis=-1, keepdims=True))             # (..., C), one exp an entry
    p /= p.sum(axis=-1, keepdims=True)
    return p, p


def softmax_backward(dp, p):
    """dz = p * (dp - sum(dp * p)) over the last axis."""
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))
