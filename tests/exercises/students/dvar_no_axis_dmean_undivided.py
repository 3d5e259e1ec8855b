"""Two slips in one staged backward, so that either fix alone leaves dx wrong: dvar summed without an axis (one
number for every feature), and dmean added to dx without its 1/n (BatchNorm with a tuple cache; LayerNorm with a
dict cache and keepdims)."""
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
    dvar = np.sum(dx_hat * (x - mu)) * -0.5 * (var + eps) ** -1.5
    dmu = np.sum(-dx_hat / np.sqrt(var + eps), axis=0)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmu
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
    dvar = -0.5 * np.sum(dxhat * (x - mean)) * istd ** 3
    dmean = -np.sum(dxhat, axis=1, keepdims=True) * istd
    dx = dxhat * istd + dvar * 2.0 * (x - mean) / D + dmean
    x_hat = (x - mean) * istd
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)
