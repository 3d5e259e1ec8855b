"""dbeta summed over axis 1 (the features) where it sums over axis 0 (the batch); everything else right."""
import numpy as np
from closed_form import batchnorm_forward, layernorm_forward  # noqa: F401


def batchnorm_backward(dout, cache):
    xhat, gamma, std = cache
    N = dout.shape[0]
    dx = gamma / (N * std) * (N * dout - dout.sum(axis=0) - xhat * (dout * xhat).sum(axis=0))
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=1)


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    g, D = dout * gamma, dout.shape[1]
    dx = (D * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=1)
