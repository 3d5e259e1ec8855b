"""dmean divided by N where it is bound and again where it is added to dx, the rest right: the advised fix (divide
once) is applied to the backward and seen to work (BatchNorm with a tuple cache; LayerNorm with a dict cache and
keepdims)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    x_hat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * x_hat + beta, (x, x_hat, mu, var, gamma, bn_param["eps"])


def batchnorm_backward(dout, cache):
    x, x_hat, mu, var, gamma, eps = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mu), axis=0) * -0.5 * (var + eps) ** -1.5
    dmu = np.sum(-dx_hat / np.sqrt(var + eps), axis=0) / N
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmu / N
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    x_hat = (x - mean) / np.sqrt(var + ln_param["eps"])
    return gamma * x_hat + beta, {"x": x, "mean": mean, "var": var, "gamma": gamma, "eps": ln_param["eps"]}


def layernorm_backward(dout, cache):
    x, mean, var, gamma, eps = (cache[k] for k in ("x", "mean", "var", "gamma", "eps"))
    D = x.shape[1]
    istd = 1.0 / np.sqrt(var + eps)
    dxhat = dout * gamma
    dvar = -0.5 * np.sum(dxhat * (x - mean), axis=1, keepdims=True) * istd ** 3
    dmean = -np.sum(dxhat, axis=1, keepdims=True) * istd / D
    dx = dxhat * istd + dvar * 2.0 * (x - mean) / D + dmean / D
    x_hat = (x - mean) * istd
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)
