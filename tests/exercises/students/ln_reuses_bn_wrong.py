"""A LayerNorm whose forward is right and whose backward reuses the learner's BatchNorm backward on the same
cache, without a transpose at the call; but that BatchNorm backward is wrong for BatchNorm too (it divides by
D, dout.shape[1], where N belongs): transposing at the call would not make dx right, so the slip is not only the
call's."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    ivar = 1. / np.sqrt(var + eps)
    xhat = (x - mu) * ivar
    return gamma * xhat + beta, (xhat, gamma, ivar)


def batchnorm_backward(dout, cache):
    xhat, gamma, ivar = cache
    N = dout.shape[1]
    dxhat = dout * gamma
    dx = (1. / N) * ivar * (N * dxhat - np.sum(dxhat, axis=0) - xhat * np.sum(dxhat * xhat, axis=0))
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    eps = ln_param.get("eps", 1e-5)
    mu = np.mean(x, axis=1, keepdims=True)
    var = np.var(x, axis=1, keepdims=True)
    ivar = 1. / np.sqrt(var + eps)
    xhat = (x - mu) * ivar
    return gamma * xhat + beta, (xhat, gamma, ivar)


def layernorm_backward(dout, cache):
    dx, dgamma, dbeta = batchnorm_backward(dout, cache)
    return dx, dgamma, dbeta
