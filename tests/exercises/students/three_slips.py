"""Three slips: no eps in the forward (nor in the backward, which takes std from the cache), the path through
the mean left out of dx, and the x_hat term twice as large (a 2 kept from d(x^2)/dx)."""
import numpy as np


def _forward(x, gamma, beta, axis):
    mu, var = np.mean(x, axis=axis, keepdims=True), np.var(x, axis=axis, keepdims=True)
    std = np.sqrt(var)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std, axis)


def _dx(g, xhat, std, axis):
    return (g - 2 * xhat * (g * xhat).mean(axis=axis, keepdims=True)) / std


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, 1)


def batchnorm_backward(dout, cache):
    xhat, gamma, std, axis = cache
    return _dx(dout * gamma, xhat, std, axis), np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


layernorm_backward = batchnorm_backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N = x.shape[0]
    out, (xhat, _, std, _) = _forward(x.reshape(N, G, -1), 1.0, 0.0, 2)
    xhat = xhat.reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, std, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, std, G = cache
    N = dout.shape[0]
    dx = _dx((dout * gamma).reshape(N, G, -1), xhat.reshape(N, G, -1), std, 2)
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
