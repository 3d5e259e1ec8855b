"""A BatchNorm closed form that divides by the number of features D = x.shape[1] where the batch size N
belongs (the sums themselves run over the batch)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = x.mean(axis=0)
    inv_std = 1.0 / np.sqrt(x.var(axis=0) + eps)
    x_hat = (x - mu) * inv_std
    return gamma * x_hat + beta, (x_hat, inv_std, gamma)


def batchnorm_backward(dout, cache):
    x_hat, inv_std, gamma = cache
    D = x_hat.shape[1]
    g = dout * gamma
    dx = inv_std * (g - g.sum(axis=0) / D - x_hat * (g * x_hat).sum(axis=0) / D)
    return dx, (dout * x_hat).sum(axis=0), dout.sum(axis=0)
