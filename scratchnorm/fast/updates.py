"""The optimizers' updates as numba loops: scratchnorm/nn/updates.py (the NumPy reference, with the
formulas) element by element, the same operations in the same order. A model has dozens of small
parameters; the reference's NumPy expressions make a pass and a temporary each, and cost Adam 10-20% of a
training lesson's time (NOTES.md). Here one call walks a parameter once."""
from __future__ import annotations

import numpy as np

from ._jit import jit


def sgd_update(p, g, v, lr, momentum):
    """As scratchnorm.nn.updates.sgd_update. p, g, v: (n,)."""
    sgd_loop(p, g, v, float(lr), float(momentum))


def adam_update(p, g, m, s, lr, b1, b2, eps, c1, c2):
    """As scratchnorm.nn.updates.adam_update. p, g, m, s: (n,)."""
    adam_loop(p, g, m, s, float(lr), float(b1), float(b2), float(eps), float(c1), float(c2))


@jit
def sgd_loop(p, g, v, lr, momentum):
    for i in range(p.shape[0]):
        if momentum == 0.0:
            p[i] -= lr * np.float64(g[i])
        else:
            v[i] = momentum * v[i] + np.float64(g[i])
            p[i] -= lr * v[i]


@jit
def adam_loop(p, g, m, s, lr, b1, b2, eps, c1, c2):
    for i in range(p.shape[0]):
        gi = np.float64(g[i])
        m[i] = b1 * m[i] + (1 - b1) * gi
        s[i] = b2 * s[i] + (1 - b2) * gi * gi
        p[i] -= lr * ((m[i] / c1) / (np.sqrt(s[i] / c2) + eps))
