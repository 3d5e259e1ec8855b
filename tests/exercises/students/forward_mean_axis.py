"""The forward's mean taken over the other axis, the rest right (its backward too, on that mean: dvar, then dmean
with rstd inside its sum and the dvar term, then dx): BatchNorm's mean per example, LayerNorm's per feature."""
import numpy as np


def _norm(x, gamma, beta, eps, mean_axis, var_axis):
    mean = x.mean(axis=mean_axis, keepdims=True)
    xc = x - mean
    var = (xc ** 2).mean(axis=var_axis, keepdims=True)
    ivar = 1.0 / np.sqrt(var + eps)
    return gamma * xc * ivar + beta, (xc, ivar, gamma, var_axis)


def batchnorm_forward(x, gamma, beta, bn_param):
    return _norm(x, gamma, beta, bn_param["eps"], 1, 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _norm(x, gamma, beta, ln_param["eps"], 0, 1)


def _backward(dout, cache):
    xc, ivar, gamma, axis = cache
    n = dout.shape[axis]
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xc, axis=axis, keepdims=True) * -0.5 * ivar ** 3
    dmean = -np.sum(dxhat * ivar, axis=axis, keepdims=True) + dvar * np.mean(-2 * xc, axis=axis, keepdims=True)
    dx = dxhat * ivar + dvar * 2 * xc / n + dmean / n
    return dx, np.sum(dout * xc * ivar, axis=0), np.sum(dout, axis=0)


batchnorm_backward = layernorm_backward = _backward
