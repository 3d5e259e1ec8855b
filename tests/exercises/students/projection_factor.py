"""projection_factor: dvar without the 1/2 of d/dv v^(-1/2) (the x_hat term twice too large)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    sample_mean = x.mean(axis=0)
    sample_var = x.var(axis=0)
    x_hat = (x - sample_mean) / np.sqrt(sample_var + eps)
    return gamma * x_hat + beta, (x, sample_mean, sample_var, eps, gamma, x_hat)


def batchnorm_backward(dout, cache):
    x, mean, var, eps, gamma, x_hat = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mean), axis=0) * -1 * (var + eps) ** -1.5          # the 0.5 is missing
    dmean = -np.sum(dx_hat, axis=0) / np.sqrt(var + eps)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mean) / N + dmean / N
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    x_hat_t, cache_t = batchnorm_forward(x.T, 1.0, 0.0, ln_param)
    return gamma * x_hat_t.T + beta, (cache_t, x_hat_t.T, gamma)


def layernorm_backward(dout, cache):
    cache_t, x_hat, gamma = cache
    return batchnorm_backward((dout * gamma).T, cache_t)[0].T, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mean, var = xg.mean(axis=2, keepdims=True), xg.var(axis=2, keepdims=True)
    x_hat = ((xg - mean) / np.sqrt(var + gn_param["eps"])).reshape(x.shape)
    return gamma * x_hat + beta, (xg, mean, var, gn_param["eps"], gamma, x_hat)


def spatial_groupnorm_backward(dout, cache):
    xg, mean, var, eps, gamma, x_hat = cache
    M = xg.shape[2]
    dx_hat = (dout * gamma).reshape(xg.shape)
    dvar = np.sum(dx_hat * (xg - mean), axis=2, keepdims=True) * -1 * (var + eps) ** -1.5
    dmean = -np.sum(dx_hat, axis=2, keepdims=True) / np.sqrt(var + eps)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (xg - mean) / M + dmean / M
    return dx.reshape(dout.shape), np.sum(dout * x_hat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
