"""eps_missing: the closed form, with no eps anywhere (forward and backward)."""
import numpy as np


def _forward(x, gamma, beta, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    var = np.var(x, axis=axis, keepdims=True)
    x_norm = (x - mu) / np.sqrt(var)
    return gamma * x_norm + beta, (x_norm, gamma, var, axis)


def _backward(dout, cache):
    x_norm, gamma, var, axis = cache
    n = dout.shape[axis]
    dx_norm = dout * gamma
    dx = (n * dx_norm - dx_norm.sum(axis=axis, keepdims=True)
          - x_norm * (dx_norm * x_norm).sum(axis=axis, keepdims=True)) / (n * np.sqrt(var))
    return dx, (dout * x_norm).sum(axis=0), dout.sum(axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, 1)


batchnorm_backward = layernorm_backward = _backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    x_norm = ((xg - xg.mean(axis=2, keepdims=True)) / xg.std(axis=2, keepdims=True)).reshape(x.shape)
    return gamma * x_norm + beta, (x_norm, gamma, xg.std(axis=2, keepdims=True), G)


def spatial_groupnorm_backward(dout, cache):
    x_norm, gamma, std, G = cache
    N, C, H, W = dout.shape
    M = C // G * H * W
    g = (dout * gamma).reshape(N, G, -1)
    xn = x_norm.reshape(N, G, -1)
    dx = (M * g - g.sum(axis=2, keepdims=True) - xn * (g * xn).sum(axis=2, keepdims=True)) / (M * std)
    return dx.reshape(dout.shape), (dout * x_norm).sum(axis=(0, 2, 3), keepdims=True), \
        dout.sum(axis=(0, 2, 3), keepdims=True)
