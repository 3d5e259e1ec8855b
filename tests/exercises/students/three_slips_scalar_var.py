"""Three slips, as a learner wrote them: the variance as one number for the whole batch (np.var(x) without
axis=), no eps, and a backward without the path through the mean."""
import numpy as np


def _forward(x, gamma, beta, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    std = np.sqrt(np.var(x))
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std, axis)


def _backward(dout, cache):
    xhat, gamma, std, axis = cache
    g = dout * gamma
    dx = (g - xhat * (g * xhat).mean(axis=axis, keepdims=True)) / std
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, 1)


batchnorm_backward = layernorm_backward = _backward
