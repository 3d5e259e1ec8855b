"""The Jacobian's diagonal only: dx_i = gamma_i * dout_i * dx_hat_i/dx_i, each x_i's own entry and none of the
others (the mean and the variance every x_hat_j shares); the diagonal itself is right (staged BatchNorm,
closed-form LayerNorm with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    sigma = np.sqrt(var + eps)
    x_hat = xmu / sigma
    return gamma * x_hat + beta, (xmu, sigma, gamma, x_hat)


def batchnorm_backward(dout, cache):
    xmu, sigma, gamma, x_hat = cache
    N = xmu.shape[0]
    dsigma_dx = xmu / (N * sigma)
    dxhat_dx = ((1 - 1 / N) * sigma - xmu * dsigma_dx) / sigma ** 2
    dx_hat = dout * gamma
    dx = dx_hat * dxhat_dx
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    x_hat = (x - mean) * rstd
    return gamma * x_hat + beta, {"x_hat": x_hat, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    x_hat, rstd, gamma = cache["x_hat"], cache["rstd"], cache["gamma"]
    D = x_hat.shape[1]
    return dout * gamma * rstd * (1 - 1 / D - x_hat ** 2 / D), (dout * x_hat).sum(axis=0), dout.sum(axis=0)
