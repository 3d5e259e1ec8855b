"""dx as the direct path alone, and without gamma: dx = dout / std (BatchNorm, a tuple cache) or dout * rstd
(LayerNorm, a dict cache). It is elementwise in dout, like the Jacobian's diagonal, but it is two slips of
the catalogue together."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mean = np.mean(x, axis=0)
    std = np.sqrt(np.var(x, axis=0) + eps)
    x_norm = (x - mean) / std
    return gamma * x_norm + beta, (x_norm, std, gamma)


def batchnorm_backward(dout, cache):
    x_norm, std, gamma = cache
    dx = dout / std
    return dx, np.sum(dout * x_norm, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    xhat = (x - mu) * rstd
    return xhat * gamma + beta, {"xhat": xhat, "rstd": rstd}


def layernorm_backward(dout, cache):
    xhat, rstd = cache["xhat"], cache["rstd"]
    return dout * rstd, (dout * xhat).sum(axis=0), dout.sum(axis=0)
