"""A right solution: the one-line closed form of each backward (from the paper's derivation, simplified)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu, var = x.mean(axis=0), x.var(axis=0)
    xhat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + bn_param["eps"]))


def batchnorm_backward(dout, cache):
    xhat, gamma, std = cache
    N = dout.shape[0]
    dx = gamma / (N * std) * (N * dout - dout.sum(axis=0) - xhat * (dout * xhat).sum(axis=0))
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + ln_param["eps"]))


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    g, D = dout * gamma, dout.shape[1]
    dx = (D * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    xg = x.reshape(x.shape[0], G, -1)
    std = np.sqrt(xg.var(axis=2, keepdims=True) + gn_param["eps"])
    xhat = ((xg - xg.mean(axis=2, keepdims=True)) / std).reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, std, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, std, G = cache
    g, xh = (a.reshape(dout.shape[0], G, -1) for a in (dout * gamma, xhat))
    dx = (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True)) / std
    return dx.reshape(dout.shape), (dout * xhat).sum(axis=(0, 2, 3), keepdims=True), \
        dout.sum(axis=(0, 2, 3), keepdims=True)
