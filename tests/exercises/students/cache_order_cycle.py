"""cache_unpacked_in_another_order, three items round: the forward packs (xhat, gamma, std, xmu), the closed-form
backward unpacks (xhat, xmu, gamma, std): its xmu is gamma (D,), its gamma the std (one per row or example),
its std x - mean (N, D). Every one broadcasts, so nothing raises."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = x.mean(axis=axis, keepdims=True)
    std = np.sqrt(x.var(axis=axis, keepdims=True) + eps)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std, x - mu)


def _backward(dout, cache, axis):
    xhat, xmu, gamma, std = cache
    g, n = dout * gamma, dout.shape[axis]
    dx = (n * g - g.sum(axis=axis, keepdims=True) - xhat * (g * xhat).sum(axis=axis, keepdims=True)) / (n * std)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def batchnorm_backward(dout, cache):
    return _backward(dout, cache, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def layernorm_backward(dout, cache):
    return _backward(dout, cache, 1)
