"""unbiased_variance: np.var(..., ddof=1) in the forward, and N - 1 in dvar, consistently."""
import numpy as np


def _forward(xg, axes, eps):
    M = np.prod([xg.shape[a] for a in axes])
    mu = xg.mean(axis=axes, keepdims=True)
    var = np.sum((xg - mu) ** 2, axis=axes, keepdims=True) / (M - 1)
    return (xg - mu) / np.sqrt(var + eps), (xg - mu, var + eps, axes, M)


def _backward(dxhat, c):
    xmu, v, axes, M = c
    dvar = np.sum(dxhat * xmu, axis=axes, keepdims=True) * -0.5 * v ** -1.5
    dxmu = dxhat / np.sqrt(v) + dvar * 2 * xmu / (M - 1)
    return dxmu - np.sum(dxmu, axis=axes, keepdims=True) / M


def batchnorm_forward(x, gamma, beta, bn_param):
    xhat, c = _forward(x, (0,), bn_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, c)


def batchnorm_backward(dout, cache):
    xhat, gamma, c = cache
    return _backward(dout * gamma, c), (dout * xhat).sum(0), dout.sum(0)


def layernorm_forward(x, gamma, beta, ln_param):
    xhat, c = _forward(x, (1,), ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, c)


layernorm_backward = batchnorm_backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xhat, c = _forward(x.reshape(N, G, C // G, H, W), (2, 3, 4), gn_param["eps"])
    return gamma * xhat.reshape(x.shape) + beta, (xhat.reshape(x.shape), gamma, c)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, c = cache
    dx = _backward((dout * gamma).reshape(c[0].shape), c)
    return dx.reshape(dout.shape), (dout * xhat).sum((0, 2, 3), keepdims=True), dout.sum((0, 2, 3), keepdims=True)
