"""dweight_uses_x: dgamma = sum(dout * x), the input where x_hat belongs; dx is right."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = x.mean(0)
    var = x.var(0)
    xhat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * xhat + beta, (x, xhat, gamma, var + bn_param["eps"])


def batchnorm_backward(dout, cache):
    x, xhat, gamma, v = cache
    dxhat = dout * gamma
    dx = (dxhat - dxhat.mean(0) - xhat * (dxhat * xhat).mean(0)) / np.sqrt(v)
    dgamma = (dout * x).sum(0)
    return dx, dgamma, dout.sum(0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(1, keepdims=True)
    var = x.var(1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (x, xhat, gamma, var + ln_param["eps"])


def layernorm_backward(dout, cache):
    x, xhat, gamma, v = cache
    dxhat = dout * gamma
    dx = (dxhat - dxhat.mean(1, keepdims=True) - xhat * (dxhat * xhat).mean(1, keepdims=True)) / np.sqrt(v)
    return dx, (dout * x).sum(0), dout.sum(0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    v = xg.var(-1, keepdims=True) + gn_param["eps"]
    xhat = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(v)).reshape(x.shape)
    return gamma * xhat + beta, (x, xhat, gamma, v, G)


def spatial_groupnorm_backward(dout, cache):
    x, xhat, gamma, v, G = cache
    N = x.shape[0]
    g = (dout * gamma).reshape(N, G, -1)
    xh = xhat.reshape(g.shape)
    dx = (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True)) / np.sqrt(v)
    return dx.reshape(x.shape), (dout * x).sum((0, 2, 3), keepdims=True), dout.sum((0, 2, 3), keepdims=True)
