"""reduced_without_axis: dvar summed with np.sum and no axis=: one number for the whole batch."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    xmu = x - mu
    ivar = 1 / np.sqrt(np.mean(xmu ** 2, axis=axis, keepdims=True) + eps)
    return gamma * xmu * ivar + beta, (xmu, ivar, gamma, axis)


def _backward(dxhat, cache):
    xmu, ivar, gamma, axis = cache
    n = np.prod([dxhat.shape[a] for a in np.atleast_1d(axis)])
    dvar = np.sum(dxhat * xmu) * -0.5 * ivar ** 3                   # axis= forgotten
    dmu = np.sum(-dxhat * ivar, axis=axis, keepdims=True)
    return dxhat * ivar + dvar * 2 * xmu / n + dmu / n


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def batchnorm_backward(dout, cache):
    xmu, ivar, gamma, _ = cache
    return _backward(dout * gamma, cache), np.sum(dout * xmu * ivar, axis=0), np.sum(dout, axis=0)


layernorm_backward = batchnorm_backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    out, cache = _forward(x.reshape(N, G, -1), 1.0, 0.0, gn_param["eps"], 2)
    xhat = out.reshape(x.shape)
    return gamma * xhat + beta, (cache, xhat, gamma)


def spatial_groupnorm_backward(dout, cache):
    inner, xhat, gamma = cache
    dx = _backward((dout * gamma).reshape(inner[0].shape), inner)
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
