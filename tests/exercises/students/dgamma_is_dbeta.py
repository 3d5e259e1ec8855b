"""dgamma summed from dout alone, the same as dbeta: x_hat left out of it (BatchNorm staged with a tuple cache;
LayerNorm closed form with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    xmu = x - mu
    ivar = 1.0 / np.sqrt(np.mean(xmu ** 2, axis=0) + bn_param["eps"])
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, xmu, ivar, gamma)


def batchnorm_backward(dout, cache):
    xhat, xmu, ivar, gamma = cache
    N = dout.shape[0]
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(dout, axis=0)
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xmu, axis=0) * -0.5 * ivar ** 3
    dmu = -np.sum(dxhat * ivar, axis=0)
    dx = dxhat * ivar + dvar * 2 * xmu / N + dmu / N
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    return gamma * (x - mu) * rstd + beta, {"x_hat": (x - mu) * rstd, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - x_hat * (g * x_hat).mean(axis=1, keepdims=True))
    return dx, dout.sum(axis=0), dout.sum(axis=0)
