"""A layernorm backward that divides by zero (N - N, a slip for N - 1): NaN and Inf in dx."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (x - mu, var + ln_param["eps"], xhat, gamma)


def layernorm_backward(dout, cache):
    xmu, v, xhat, gamma = cache
    N, D = dout.shape
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xmu, axis=1, keepdims=True) * -0.5 * v ** -1.5
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = dxhat / np.sqrt(v) + dvar * 2 * xmu / (N - N) - np.mean(dxhat / np.sqrt(v), axis=1, keepdims=True)
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)
