"""missing_projection_term: the staged graph with the branch through the variance (dvar) dropped."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    N, D = x.shape
    mu = 1.0 / N * np.sum(x, axis=0)
    xmu = x - mu
    var = 1.0 / N * np.sum(xmu ** 2, axis=0)
    sqrtvar = np.sqrt(var + bn_param["eps"])
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, ivar)


def batchnorm_backward(dout, cache):
    xhat, gamma, ivar = cache
    N, D = dout.shape
    dxhat = dout * gamma
    dxmu1 = dxhat * ivar
    dx1 = dxmu1                                   # the path through var left out
    dmu = -1 * np.sum(dx1, axis=0)
    dx2 = 1.0 / N * np.ones((N, D)) * dmu
    return dx1 + dx2, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    D = x.shape[1]
    mu = 1.0 / D * np.sum(x, axis=1, keepdims=True)
    xmu = x - mu
    ivar = 1.0 / np.sqrt(1.0 / D * np.sum(xmu ** 2, axis=1, keepdims=True) + ln_param["eps"])
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, ivar)


def layernorm_backward(dout, cache):
    xhat, gamma, ivar = cache
    dxmu = dout * gamma * ivar
    dx = dxmu - np.mean(dxmu, axis=1, keepdims=True)
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G, H, W)
    xmu = xg - xg.mean(axis=(2, 3, 4), keepdims=True)
    ivar = 1.0 / np.sqrt(np.mean(xmu ** 2, axis=(2, 3, 4), keepdims=True) + gn_param["eps"])
    xhat = (xmu * ivar).reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, ivar, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, ivar, G = cache
    N, C, H, W = dout.shape
    dxmu = (dout * gamma).reshape(N, G, C // G, H, W) * ivar
    dx = dxmu - np.mean(dxmu, axis=(2, 3, 4), keepdims=True)
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
