"""The variance as one scalar, in a staged graph with a tuple cache: var is the sum of squares over the whole
batch and all features, not divided by N; the backward sums dout * gamma over the batch first, so dxhat is
(D,), and the sums over axis 0 that follow run over the features."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.sum(xmu ** 2)
    std = np.sqrt(var + eps)
    xhat = xmu / std
    out = gamma * xhat + beta
    cache = (xhat, xmu, var, std, gamma, eps)
    return out, cache


def batchnorm_backward(dout, cache):
    xhat, xmu, var, std, gamma, eps = cache
    N = dout.shape[0]
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(dout * xhat, axis=0)
    dxhat = np.sum(dout * gamma, axis=0)
    dvar = np.sum(dxhat * xmu) * -0.5 * (var + eps) ** -1.5
    dxmu = dxhat / std + dvar * 2 * xmu
    dmu = np.sum(-dxhat / std, axis=0)
    dx = dxmu + dmu / N
    return dx, dgamma, dbeta
