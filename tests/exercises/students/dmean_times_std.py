"""Two slips in the backward: dmean multiplied by std where it must divide by it, and dvar from var^-1.5
without eps (the forward adds eps); staged BatchNorm with a tuple cache, LayerNorm in two lines."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mean = x.mean(axis=0)
    var = x.var(axis=0)
    std = np.sqrt(var + eps)
    x_hat = (x - mean) / std
    return gamma * x_hat + beta, (x, mean, var, std, gamma, x_hat)


def batchnorm_backward(dout, cache):
    x, mean, var, std, gamma, x_hat = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mean), axis=0) * -0.5 * var ** -1.5
    dmean = -np.sum(dx_hat, axis=0) * std
    dx = dx_hat / std + dvar * 2 * (x - mean) / N + dmean / N
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    std = np.sqrt(var + ln_param["eps"])
    return gamma * (x - mean) / std + beta, (x, mean, var, std, gamma)


def layernorm_backward(dout, cache):
    x, mean, var, std, gamma = cache
    g = dout * gamma
    dx = g / std - np.mean(g, axis=1, keepdims=True) * std \
        - (x - mean) * np.mean(g * (x - mean), axis=1, keepdims=True) * var ** -1.5
    return dx, np.sum(dout * (x - mean) / std, axis=0), np.sum(dout, axis=0)
