"""dgamma from the wrong array: sum(dout * (x - mean)), x - mean in place of x_hat; dx and dbeta right (staged
BatchNorm, closed-form LayerNorm with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    ivar = 1.0 / np.sqrt(var + bn_param["eps"])
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar)


def batchnorm_backward(dout, cache):
    xhat, gamma, xmu, ivar = cache
    N = dout.shape[0]
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(dout * xmu, axis=0)
    dxhat = dout * gamma
    dvar = np.sum(dxhat * xmu, axis=0) * -0.5 * ivar ** 3
    dmu = -np.sum(dxhat * ivar, axis=0)
    dx = dxhat * ivar + dvar * 2 * xmu / N + dmu / N
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    std = np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    return gamma * (x - mu) / std + beta, {"xmu": x - mu, "gamma": gamma, "std": std}


def layernorm_backward(dout, cache):
    xmu, gamma, std = cache["xmu"], cache["gamma"], cache["std"]
    xhat = xmu / std
    g, D = dout * gamma, dout.shape[1]
    dx = (D * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, (dout * xmu).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    xmu = xg - xg.mean(axis=2, keepdims=True)
    std = np.sqrt((xmu ** 2).mean(axis=2, keepdims=True) + gn_param["eps"])
    return gamma * (xmu / std).reshape(x.shape) + beta, (xmu, std, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xmu, std, gamma, G = cache
    N = dout.shape[0]
    xh = xmu / std
    g = (dout * gamma).reshape(N, G, -1)
    dx = (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True)) / std
    dgamma = np.sum(dout * xmu.reshape(dout.shape), axis=(0, 2, 3), keepdims=True)
    return dx.reshape(dout.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
