"""eps_subtracted, in the backward only: the forward adds eps; the closed-form backward takes its own root of
var - eps for its 1/std, while x_hat comes from the forward's cache."""
import numpy as np


def _forward(x, gamma, beta, eps, axis):
    mu, var = x.mean(axis=axis, keepdims=True), x.var(axis=axis, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (xhat, gamma, var, eps, axis)


def _dx(g, xhat, var, eps, axis):
    n = np.prod([g.shape[a] for a in np.atleast_1d(axis)])
    return (n * g - g.sum(axis=axis, keepdims=True)
            - xhat * (g * xhat).sum(axis=axis, keepdims=True)) / (n * np.sqrt(var - eps))


def batchnorm_forward(x, gamma, beta, bn_param):
    return _forward(x, gamma, beta, bn_param["eps"], 0)


def layernorm_forward(x, gamma, beta, ln_param):
    return _forward(x, gamma, beta, ln_param["eps"], 1)


def batchnorm_backward(dout, cache):
    xhat, gamma, var, eps, axis = cache
    return _dx(dout * gamma, xhat, var, eps, axis), np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


layernorm_backward = batchnorm_backward


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N = x.shape[0]
    out, (xhat, _, var, eps, _) = _forward(x.reshape(N, G, -1), 1.0, 0.0, gn_param["eps"], 2)
    xhat = xhat.reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, var, eps, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, var, eps, G = cache
    N = dout.shape[0]
    dx = _dx((dout * gamma).reshape(N, G, -1), xhat.reshape(N, G, -1), var, eps, 2)
    return dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
