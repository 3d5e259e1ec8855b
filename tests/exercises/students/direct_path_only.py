"""direct_path_only: dx = dout * gamma / std, the diagonal of the Jacobian (mu and var taken as constants)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    std = np.sqrt(x.var(axis=0) + bn_param["eps"])
    xhat = (x - x.mean(axis=0)) / std
    return gamma * xhat + beta, (xhat, std, gamma)


def batchnorm_backward(dout, cache):
    xhat, std, gamma = cache
    return dout * gamma / std, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


layernorm_backward = batchnorm_backward


def layernorm_forward(x, gamma, beta, ln_param):
    std = np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    xhat = (x - x.mean(axis=1, keepdims=True)) / std
    return gamma * xhat + beta, (xhat, std, gamma)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    std = np.sqrt(xg.var(axis=2, keepdims=True) + gn_param["eps"])
    xhat = ((xg - xg.mean(axis=2, keepdims=True)) / std).reshape(x.shape)
    return gamma * xhat + beta, (xhat, std, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, std, gamma, G = cache
    N = dout.shape[0]
    dx = (dout * gamma).reshape(N, G, -1) / std
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
