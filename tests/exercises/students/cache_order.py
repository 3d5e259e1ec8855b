"""cache_unpacked_in_another_order: the forward packs (xhat, gamma, ivar, std), the backward unpacks
(xhat, gamma, std, ivar): its "ivar" is the forward's std."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu, var = x.mean(axis=axis, keepdims=True), x.var(axis=axis, keepdims=True)
    std = np.sqrt(var + eps)
    ivar = 1 / std
    xhat = (x - mu) * ivar
    return gamma * xhat + beta, (xhat, gamma, ivar, std)


def _dx(dxhat, cache, axis):
    xhat, gamma, std, ivar = cache                      # packed as (xhat, gamma, ivar, std)
    n = np.prod([dxhat.shape[a] for a in np.atleast_1d(axis)])
    return ivar / n * (n * dxhat - dxhat.sum(axis=axis, keepdims=True)
                       - xhat * (dxhat * xhat).sum(axis=axis, keepdims=True))


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def batchnorm_backward(dout, cache):
    xhat = cache[0]
    return _dx(dout * cache[1], cache, 0), np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def layernorm_backward(dout, cache):
    xhat = cache[0]
    return _dx(dout * cache[1], cache, 1), np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    xg = x.reshape(x.shape[0], G, -1)
    out, (xhat, _, ivar, std) = _forward(xg, 1.0, 0.0, gn_param["eps"], 2)
    xhat = xhat.reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, ivar, std, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, ivar, std, G = cache
    N = dout.shape[0]
    dxhat = (dout * gamma).reshape(N, G, -1)
    dx = _dx(dxhat, (xhat.reshape(N, G, -1), gamma, ivar, std), 2)
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
