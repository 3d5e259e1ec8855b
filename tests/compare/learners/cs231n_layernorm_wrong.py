"""A CS231n learner's LayerNorm, with one slip: the forward caches its intermediates in a tuple and the backward
walks the computational graph back node by node (features on axis 1), but stops before the mean's node."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    out, cache = None, None
    eps = ln_param.get("eps", 1e-5)
    N, D = x.shape
    mu = 1.0 / D * np.sum(x, axis=1, keepdims=True)
    xmu = x - mu
    sq = xmu ** 2
    var = 1.0 / D * np.sum(sq, axis=1, keepdims=True)
    sqrtvar = np.sqrt(var + eps)
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    out = gamma * xhat + beta
    cache = (xhat, gamma, xmu, ivar, sqrtvar, var, eps)
    return out, cache


def layernorm_backward(dout, cache):
    dx, dgamma, dbeta = None, None, None
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    N, D = dout.shape
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(dout * xhat, axis=0)
    dxhat = dout * gamma
    divar = np.sum(dxhat * xmu, axis=1, keepdims=True)
    dxmu1 = dxhat * ivar
    dsqrtvar = -1.0 / (sqrtvar ** 2) * divar
    dvar = 0.5 * 1.0 / np.sqrt(var + eps) * dsqrtvar
    dsq = 1.0 / D * np.ones((N, D)) * dvar
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dx = dx1
    return dx, dgamma, dbeta
