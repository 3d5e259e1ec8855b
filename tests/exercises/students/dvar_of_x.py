"""The variance's path summed from x where x - mean belongs: dvar = sum(dx_hat * x) (BatchNorm staged with a
tuple cache; LayerNorm closed form with a dict cache; GroupNorm staged over the reshaped groups)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (x, mu, var, eps, xhat, gamma)


def batchnorm_backward(dout, cache):
    x, mu, var, eps, xhat, gamma = cache
    N = x.shape[0]
    dxhat = dout * gamma
    dvar = np.sum(dxhat * x, axis=0) * -0.5 * (var + eps) ** -1.5
    dmu = np.sum(-dxhat / np.sqrt(var + eps), axis=0) + dvar * np.mean(-2 * (x - mu), axis=0)
    dx = dxhat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmu / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + ln_param["eps"])
    return gamma * (x - mu) * rstd + beta, {"x": x, "mu": mu, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    x, mu, rstd, gamma = cache["x"], cache["mu"], cache["rstd"], cache["gamma"]
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=1, keepdims=True)) - (x - mu) * rstd ** 3 * (g * x).mean(axis=1, keepdims=True)
    return dx, (dout * (x - mu) * rstd).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mu = xg.mean(axis=2, keepdims=True)
    var = xg.var(axis=2, keepdims=True)
    xhat = ((xg - mu) / np.sqrt(var + gn_param["eps"])).reshape(x.shape)
    return gamma * xhat + beta, (xg, mu, var, gn_param["eps"], xhat, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xg, mu, var, eps, xhat, gamma, G = cache
    m = xg.shape[2]
    dxhat = (dout * gamma).reshape(xg.shape)
    dvar = np.sum(dxhat * xg, axis=2, keepdims=True) * -0.5 * (var + eps) ** -1.5
    dmu = -np.sum(dxhat, axis=2, keepdims=True) / np.sqrt(var + eps)
    dx = dxhat / np.sqrt(var + eps) + dvar * 2 * (xg - mu) / m + dmu / m
    return (dx.reshape(dout.shape), np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True),
            np.sum(dout, axis=(0, 2, 3), keepdims=True))
