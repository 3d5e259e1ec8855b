"""The course's two BatchNorm backwards in one file: node by node (right), and simplified on paper
(batchnorm_backward_alt) with the term along x_hat left out."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = x.mean(axis=0)
    xmu = x - mu
    var = (xmu ** 2).mean(axis=0)
    ivar = 1.0 / np.sqrt(var + eps)
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar)


def batchnorm_backward(dout, cache):
    xhat, gamma, xmu, ivar = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    divar = np.sum(dxhat * xmu, axis=0)
    dsqrtvar = -divar * ivar ** 2
    dvar = 0.5 * ivar * dsqrtvar
    dsq = dvar * np.ones_like(dout) / N
    dxmu = dxhat * ivar + 2 * xmu * dsq
    dmu = -np.sum(dxmu, axis=0)
    dx = dxmu + dmu / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def batchnorm_backward_alt(dout, cache):
    xhat, gamma, xmu, ivar = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    dx = ivar / N * (N * dxhat - dxhat.sum(axis=0))
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)
