"""The mean's path added to dx without its 1/n: dmean where dmean / N belongs (BatchNorm staged with a tuple
cache), a sum where a mean belongs (LayerNorm closed form with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    x_hat = (x - mu) / np.sqrt(var + bn_param["eps"])
    return gamma * x_hat + beta, (x, mu, var, bn_param["eps"], gamma, x_hat)


def batchnorm_backward(dout, cache):
    x, mu, var, eps, gamma, x_hat = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mu), axis=0) * -0.5 * (var + eps) ** -1.5
    dmean = np.sum(-dx_hat / np.sqrt(var + eps), axis=0)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmean
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = (x.var(axis=1, keepdims=True) + ln_param["eps"]) ** -0.5
    xn = (x - mu) * rstd
    return gamma * xn + beta, {"xn": xn, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    xn, rstd, gamma = cache["xn"], cache["rstd"], cache["gamma"]
    g = dout * gamma
    dx = rstd * (g - g.sum(axis=1, keepdims=True) - xn * (g * xn).mean(axis=1, keepdims=True))
    return dx, (dout * xn).sum(axis=0), dout.sum(axis=0)
