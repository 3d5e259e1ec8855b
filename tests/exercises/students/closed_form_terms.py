"""A closed form written term by term, with its x_hat term not divided by n (BatchNorm: N, LayerNorm: D): the
checker splits dx into the direct, mean and x_hat terms and points at the line of the one that is off."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = x.mean(axis=axis, keepdims=True)
    std = np.sqrt(x.var(axis=axis, keepdims=True) + eps)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std)


def _backward(dout, cache, axis):
    xhat, gamma, std = cache
    g = dout * gamma
    direct = g / std
    through_mean = -g.mean(axis=axis, keepdims=True) / std
    through_var = -xhat * (g * xhat).sum(axis=axis, keepdims=True) / std
    dx = direct + through_mean + through_var
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def batchnorm_backward(dout, cache):
    return _backward(dout, cache, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def layernorm_backward(dout, cache):
    return _backward(dout, cache, 1)
