"""whole_array_statistics: np.mean(x) and np.var(x) without axis=, and a backward that sums over everything."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x)
    var = np.var(x)
    xhat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * xhat + beta, (x - mu, var + bn_param["eps"], xhat, gamma)


def batchnorm_backward(dout, cache):
    xmu, v, xhat, gamma = cache
    M = xmu.size
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xmu) * -0.5 * v ** -1.5
    dxmu = dxhat / np.sqrt(v) + dvar * 2 * xmu / M
    dx = dxmu - np.sum(dxmu) / M
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    return batchnorm_forward(x, gamma, beta, ln_param)


def layernorm_backward(dout, cache):
    return batchnorm_backward(dout, cache)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    return batchnorm_forward(x, gamma, beta, gn_param)


def spatial_groupnorm_backward(dout, cache):
    dx, _, _ = batchnorm_backward(dout, cache)
    xhat = cache[2]
    return dx, np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), np.sum(dout, axis=(0, 2, 3), keepdims=True)
