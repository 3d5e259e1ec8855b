"""eps_subtracted: staged, sqrt(var - eps) in the forward, and the graph differentiated faithfully."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mu = x.mean(axis=0)
    xmu = x - mu
    var = (xmu ** 2).mean(axis=0)
    sqrtvar = np.sqrt(var - eps)
    xhat = xmu / sqrtvar
    return gamma * xhat + beta, (xmu, sqrtvar, xhat, gamma)


def batchnorm_backward(dout, cache):
    xmu, sqrtvar, xhat, gamma = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    dsqrtvar = -np.sum(dxhat * xmu, axis=0) / sqrtvar ** 2
    dvar = dsqrtvar / (2 * sqrtvar)
    dxmu = dxhat / sqrtvar + 2 * xmu * dvar / N
    dx = dxmu - np.sum(dxmu, axis=0) / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    out_t, cache_t = batchnorm_forward(x.T, np.ones(x.shape[0]), np.zeros(x.shape[0]), ln_param)
    return gamma * out_t.T + beta, (cache_t, out_t.T, gamma)


def layernorm_backward(dout, cache):
    cache_t, xhat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, cache_t)
    return dx_t.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N * G, -1)
    xhat_t, cache_t = batchnorm_forward(xg.T, np.ones(N * G), np.zeros(N * G), gn_param)
    xhat = xhat_t.T.reshape(x.shape)
    return gamma * xhat + beta, (cache_t, xhat, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    cache_t, xhat, gamma, G = cache
    N = dout.shape[0]
    dx_t, _, _ = batchnorm_backward((dout * gamma).reshape(N * G, -1).T, cache_t)
    return dx_t.T.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
