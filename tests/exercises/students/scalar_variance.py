"""reduced_without_axis in the forward only: the variance as one number (np.var(x) without axis=); the backward
is right, and inherits the slip through the std in the cache."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = x.mean(axis=axis, keepdims=True)
    std = np.sqrt(np.var(x) + eps)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std, axis)


def _backward(dout, cache):
    xhat, gamma, std, axis = cache
    g, n = dout * gamma, dout.shape[axis]
    dx = (n * g - g.sum(axis=axis, keepdims=True) - xhat * (g * xhat).sum(axis=axis, keepdims=True)) / (n * std)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


batchnorm_backward = layernorm_backward = _backward
