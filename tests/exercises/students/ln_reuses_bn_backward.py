"""A LayerNorm whose forward is right (statistics over the features, keepdims) and whose backward reuses the
learner's own staged BatchNorm backward on the same cache, without a transpose at the call: its sums run over
the batch, axis 0, where LayerNorm's run over the features; the BatchNorm functions themselves are right."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    sqrtvar = np.sqrt(var + eps)
    ivar = 1. / sqrtvar
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
    dsqrtvar = -1. / (sqrtvar ** 2) * divar
    dvar = 0.5 * 1. / np.sqrt(var + eps) * dsqrtvar
    dsq = 1. / N * np.ones((N, D)) * dvar
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dmu = -1 * np.sum(dx1, axis=0)
    dx2 = 1. / N * np.ones((N, D)) * dmu
    dx = dx1 + dx2
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    eps = ln_param.get("eps", 1e-5)
    mu = np.mean(x, axis=1, keepdims=True)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=1, keepdims=True)
    sqrtvar = np.sqrt(var + eps)
    ivar = 1. / sqrtvar
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar, sqrtvar, var, eps)


def layernorm_backward(dout, cache):
    dx, dgamma, dbeta = batchnorm_backward(dout, cache)
    return dx, dgamma, dbeta
