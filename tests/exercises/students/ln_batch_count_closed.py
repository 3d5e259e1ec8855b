"""A LayerNorm written from BatchNorm's closed form, keeping N = dout.shape[0] (the batch) where D, the
features, belongs; the sums themselves run over the features."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    eps = ln_param.get("eps", 1e-5)
    mu = x.mean(axis=1, keepdims=True)
    std = np.sqrt(x.var(axis=1, keepdims=True) + eps)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, gamma, std)


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    dx = (1. / N) / std * (N * dxhat - np.sum(dxhat, axis=1, keepdims=True)
                           - xhat * np.sum(dxhat * xhat, axis=1, keepdims=True))
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)
