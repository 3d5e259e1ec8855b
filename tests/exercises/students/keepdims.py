"""wrong_shape: right values, but dgamma and dbeta kept their reduced axis: (1, D) (GroupNorm: (C, 1, 1))."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0, keepdims=True)
    var = np.var(x, axis=0, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * x_hat + beta, (x_hat, gamma, 1 / np.sqrt(var + bn_param["eps"]))


def batchnorm_backward(dout, cache):
    x_hat, gamma, rstd = cache
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=0, keepdims=True) - x_hat * (g * x_hat).mean(axis=0, keepdims=True))
    return dx, np.sum(dout * x_hat, axis=0, keepdims=True), np.sum(dout, axis=0, keepdims=True)


def layernorm_forward(x, gamma, beta, ln_param):
    out, cache = batchnorm_forward(x.T, 1.0, 0.0, ln_param)
    return gamma * out.T + beta, (cache, out.T, gamma)


def layernorm_backward(dout, cache):
    cache_t, x_hat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, cache_t)
    return dx_t.T, np.sum(dout * x_hat, axis=0, keepdims=True), np.sum(dout, axis=0, keepdims=True)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    out, cache = batchnorm_forward(x.reshape(N * G, -1).T, 1.0, 0.0, gn_param)
    x_hat = out.T.reshape(x.shape)
    return gamma * x_hat + beta, (cache, x_hat, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    cache_t, x_hat, gamma, G = cache
    N = dout.shape[0]
    dx_t, _, _ = batchnorm_backward((dout * gamma).reshape(N * G, -1).T, cache_t)
    return dx_t.T.reshape(dout.shape), np.sum(dout * x_hat, axis=(0, 2, 3))[:, None, None], \
        np.sum(dout, axis=(0, 2, 3))[:, None, None]
