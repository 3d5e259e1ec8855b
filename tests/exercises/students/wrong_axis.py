"""reduced_over_wrong_axis, one reduction at a time: LayerNorm's mean term summed over the batch; BatchNorm's
dvar summed over the features (axis=1) where it runs over the batch; GroupNorm's mean term over every group of
the example."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    ivar = 1 / np.sqrt(var + bn_param["eps"])
    xhat = xmu * ivar
    return gamma * xhat + beta, (xmu, ivar, xhat, gamma)


def batchnorm_backward(dout, cache):
    xmu, ivar, xhat, gamma = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xmu, axis=1, keepdims=True) * -0.5 * ivar ** 3      # axis=0 meant
    dmu = np.sum(-dxhat * ivar, axis=0)
    dx = dxhat * ivar + dvar * 2 * xmu / N + dmu / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = np.mean(x, axis=1, keepdims=True)
    ivar = 1 / np.sqrt(np.var(x, axis=1, keepdims=True) + ln_param["eps"])
    xhat = (x - mu) * ivar
    return gamma * xhat + beta, (ivar, xhat, gamma)


def layernorm_backward(dout, cache):
    ivar, xhat, gamma = cache
    D = dout.shape[1]
    dxhat = dout * gamma
    dx = ivar / D * (D * dxhat - np.sum(dxhat, axis=0) - xhat * np.sum(dxhat * xhat, axis=1, keepdims=True))
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G, H, W)
    ivar = 1 / np.sqrt(np.var(xg, axis=(2, 3, 4), keepdims=True) + gn_param["eps"])
    xhat = (xg - np.mean(xg, axis=(2, 3, 4), keepdims=True)) * ivar
    return gamma * xhat.reshape(x.shape) + beta, (ivar, xhat, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    ivar, xhat, gamma, G = cache
    N, C, H, W = dout.shape
    M = C // G * H * W
    dxhat = (dout * gamma).reshape(xhat.shape)
    dx = ivar / M * (M * dxhat - np.sum(dxhat, axis=(1, 2, 3, 4), keepdims=True)
                     - xhat * np.sum(dxhat * xhat, axis=(2, 3, 4), keepdims=True))
    return dx.reshape(dout.shape), np.sum(dout * xhat.reshape(dout.shape), axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
