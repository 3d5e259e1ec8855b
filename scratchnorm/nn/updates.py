r"""The optimizers' updates (optim.py derives them), one parameter at a time: the NumPy reference.

    sgd_update    v <- momentum v + g;  p <- p - lr v          (momentum = 0: p <- p - lr g)
    adam_update   m <- b1 m + (1 - b1) g;  s <- b2 s + (1 - b2) g^2
                  p <- p - lr (m / c1) / (sqrt(s / c2) + eps),   c1 = 1 - b1^t,  c2 = 1 - b2^t

p and g: (n,), one parameter and its gradient, flattened (p is a view: a layer's parameters are
C-contiguous, layer.py); v, m, s: (n,), the optimizer's float64 state. Each function updates p and the
state in place, in float64 (a float32 p is rounded once). numba's loops (scratchnorm/fast/updates.py) do
the same operations in the same order, so both backends give the same bits (tests/nn/test_nn.py).
"""
from __future__ import annotations

import numpy as np

from ..backend import register


def sgd_update(p, g, v, lr, momentum):
    """SGD's step on one flattened parameter; v is untouched when momentum is 0."""
    g = g.astype(np.float64, copy=False)                      # (n,)
    if momentum == 0.0:
        p -= lr * g
        return
    v *= momentum
    v += g
    p -= lr * v


def adam_update(p, g, m, s, lr, b1, b2, eps, c1, c2):
    """Adam's step on one flattened parameter, with the bias corrections c1 and c2 of this step."""
    g = g.astype(np.float64, copy=False)                      # (n,)
    m *= b1
    m += (1 - b1) * g
    s *= b2
    s += (1 - b2) * g * g
    p -= lr * ((m / c1) / (np.sqrt(s / c2) + eps))


register("numpy", {"sgd_update": sgd_update, "adam_update": adam_update})
