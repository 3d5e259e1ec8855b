"""A staged backward (the course's graph, node by node) with one slip: dsqrtvar without its minus sign, so
dvar and everything after it is wrong while dxhat and divar are right (sign_error; the report points at the
dsqrtvar line)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    sqrtvar = np.sqrt(var + eps)
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar, sqrtvar, var, eps)


def batchnorm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    N, D = dout.shape
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(dout * xhat, axis=0)
    dxhat = dout * gamma
    divar = np.sum(dxhat * xmu, axis=0)
    dxmu1 = dxhat * ivar
    dsqrtvar = 1.0 / (sqrtvar ** 2) * divar
    dvar = 0.5 / np.sqrt(var + eps) * dsqrtvar
    dxmu2 = 2 * xmu * np.ones((N, D)) * dvar / N
    dmu = -np.sum(dxmu1 + dxmu2, axis=0)
    dx = dxmu1 + dxmu2 + np.ones((N, D)) * dmu / N
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    xhat_t, cache_t = batchnorm_forward(x.T, np.ones(x.shape[0]), np.zeros(x.shape[0]), ln_param)
    return gamma * xhat_t.T + beta, (cache_t, xhat_t.T, gamma)


def layernorm_backward(dout, cache):
    cache_t, xhat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, cache_t)
    return dx_t.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)
