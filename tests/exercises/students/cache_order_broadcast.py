"""cache_unpacked_in_another_order, with items of other shapes: the forward packs (x, x_hat, mu, xmu, gamma, var,
eps), the staged backward unpacks (x, x_hat, mu, gamma, xmu, var, eps): its "gamma" is x - mu, an (N, D)
array that broadcasts against dout, and its "xmu" is gamma, a (D,) one. Nothing raises."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=axis, keepdims=True)
    x_hat = xmu / np.sqrt(var + eps)
    out = gamma * x_hat + beta
    cache = (x, x_hat, mu, xmu, gamma, var, eps)
    return out, cache


def _backward(dout, cache, axis):
    x, x_hat, mu, gamma, xmu, var, eps = cache
    n = x.shape[axis]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * xmu, axis=axis, keepdims=True) * -0.5 * (var + eps) ** -1.5
    dmu = np.sum(-dx_hat / np.sqrt(var + eps), axis=axis, keepdims=True)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * xmu / n + dmu / n
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def batchnorm_backward(dout, cache):
    return _backward(dout, cache, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def layernorm_backward(dout, cache):
    return _backward(dout, cache, 1)
