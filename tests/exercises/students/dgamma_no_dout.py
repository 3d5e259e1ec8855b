"""dout missing from dgamma: dgamma = sum(x_hat) over the batch; dx and dbeta right (staged BatchNorm with a
tuple cache, closed-form LayerNorm with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    sqrtvar = np.sqrt(var + bn_param["eps"])
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar, sqrtvar)


def batchnorm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar = cache
    N, D = dout.shape
    dbeta = np.sum(dout, axis=0)
    dgamma = np.sum(xhat, axis=0)
    dxhat = dout * gamma
    divar = np.sum(dxhat * xmu, axis=0)
    dxmu1 = dxhat * ivar
    dsqrtvar = -1.0 / (sqrtvar ** 2) * divar
    dvar = 0.5 * ivar * dsqrtvar
    dxmu2 = 2 * xmu * dvar / N
    dmu = -np.sum(dxmu1 + dxmu2, axis=0)
    dx = dxmu1 + dxmu2 + dmu / N
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    std = np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    xhat = (x - mu) / std
    return gamma * xhat + beta, {"xhat": xhat, "gamma": gamma, "std": std}


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache["xhat"], cache["gamma"], cache["std"]
    g, D = dout * gamma, dout.shape[1]
    dx = (D * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, xhat.sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G * H * W)
    mean = xg.mean(axis=2, keepdims=True)
    std = np.sqrt(((xg - mean) ** 2).mean(axis=2, keepdims=True) + gn_param["eps"])
    xhat = ((xg - mean) / std).reshape(N, C, H, W)
    return gamma * xhat + beta, (xhat, gamma, std, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, std, G = cache
    N = dout.shape[0]
    g, xh = (a.reshape(N, G, -1) for a in (dout * gamma, xhat))
    dx = (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True)) / std
    dgamma = np.sum(xhat, axis=(0, 2, 3), keepdims=True)
    return dx.reshape(dout.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
