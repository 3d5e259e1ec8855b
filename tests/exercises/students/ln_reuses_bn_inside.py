"""A LayerNorm that reuses the learner's BatchNorm functions with the transposes at the calls, as the course hints;
the slip is inside the BatchNorm backward itself (its x_hat term's sum runs over axis 1), so BatchNorm is wrong
too: the fix belongs inside the function, not at the call."""
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
    N = dout.shape[0]
    dxhat = dout * gamma
    dx = (1. / N) * ivar * (N * dxhat - np.sum(dxhat, axis=0) - xhat * np.sum(dxhat * xhat, axis=1, keepdims=True))
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    out_t, cache_t = batchnorm_forward(x.T, 1.0, 0.0, ln_param)
    xhat = out_t.T
    return gamma * xhat + beta, (cache_t, xhat, gamma)


def layernorm_backward(dout, cache):
    cache_t, xhat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, cache_t)
    return dx_t.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)
