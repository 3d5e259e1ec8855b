"""eps_dropped_in_backward: eps right in every forward; each backward leaves it out of another place."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (x, mu, var, eps, xhat, gamma)


def batchnorm_backward(dout, cache):
    """dvar without eps: (var)^(-3/2)."""
    x, mu, var, eps, xhat, gamma = cache
    N = x.shape[0]
    dxhat = dout * gamma
    dvar = np.sum(dxhat * (x - mu), axis=0) * -0.5 * var ** -1.5
    dmu = np.sum(-dxhat / np.sqrt(var + eps), axis=0) + dvar * np.mean(-2 * (x - mu), axis=0)
    dx = dxhat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmu / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    eps = ln_param.get("eps", 1e-5)
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (x, mu, var, xhat, gamma)


def layernorm_backward(dout, cache):
    """The final 1/std without eps (the cached xhat has it)."""
    x, mu, var, xhat, gamma = cache
    D = x.shape[1]
    std = np.sqrt(var)
    dxhat = dout * gamma
    dx = (D * dxhat - dxhat.sum(axis=1, keepdims=True) - xhat * (dxhat * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mean = xg.mean(axis=2, keepdims=True)
    var = xg.var(axis=2, keepdims=True)
    xhat = ((xg - mean) / np.sqrt(var + gn_param["eps"])).reshape(x.shape)
    return gamma * xhat + beta, (x, G, mean, var, gamma)


def spatial_groupnorm_backward(dout, cache):
    """Recomputes std and xhat from the cache, all without eps."""
    x, G, mean, var, gamma = cache
    N, C, H, W = x.shape
    std = np.sqrt(var)
    xhat = (x.reshape(N, G, -1) - mean) / std
    g = (dout * gamma).reshape(N, G, -1)
    dx = (g - g.mean(axis=2, keepdims=True) - xhat * (g * xhat).mean(axis=2, keepdims=True)) / std
    dgamma = np.sum(dout * xhat.reshape(x.shape), axis=(0, 2, 3), keepdims=True)
    return dx.reshape(x.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
