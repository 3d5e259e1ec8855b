"""eps_missing, the forward only: it divides by sqrt(var) with no eps, while the backward adds eps wherever it
takes a root itself and keeps the forward's x_hat (without eps) from the cache. The report must not also say
eps_dropped_in_backward ("the forward adds eps"): it does not."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    var = np.var(x, axis=axis, keepdims=True)
    xhat = (x - mu) / np.sqrt(var)
    return gamma * xhat + beta, (xhat, gamma, var, eps, axis)


def _backward(dout, cache):
    xhat, gamma, var, eps, axis = cache
    n = np.prod([dout.shape[a] for a in np.atleast_1d(axis)])
    dxhat = dout * gamma
    dx = (n * dxhat - dxhat.sum(axis=axis, keepdims=True)
          - xhat * (dxhat * xhat).sum(axis=axis, keepdims=True)) / (n * np.sqrt(var + eps))
    return dx, dxhat, dout


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def batchnorm_backward(dout, cache):
    dx, _, _ = _backward(dout, cache)
    xhat = cache[0]
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


layernorm_backward = batchnorm_backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    out, cache = _forward(x.reshape(N, G, -1), 1.0, 0.0, gn_param["eps"], 2)
    xhat = out.reshape(x.shape)
    return gamma * xhat + beta, (cache, xhat, gamma)


def spatial_groupnorm_backward(dout, cache):
    (xhat_g, _, var, eps, axis), xhat, gamma = cache
    g = (dout * gamma).reshape(xhat_g.shape)
    dx, _, _ = _backward(g, (xhat_g, 1.0, var, eps, axis))
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
