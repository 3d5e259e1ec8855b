"""eps_hard_coded in the backward only: the forward reads eps from bn_param (ln_param), the backward takes its
own root of the cached variance with eps = 1e-5 written in (staged for BatchNorm, closed form for LayerNorm)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * x_hat + beta, (x, mu, var, gamma)


def batchnorm_backward(dout, cache):
    x, mu, var, gamma = cache
    N = x.shape[0]
    std = np.sqrt(var + 1e-5)
    x_hat = (x - mu) / std
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mu), axis=0) * -0.5 * std ** -3
    dmu = np.sum(-dx_hat / std, axis=0) + dvar * np.mean(-2 * (x - mu), axis=0)
    dx = dx_hat / std + dvar * 2 * (x - mu) / N + dmu / N
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    eps = ln_param.get("eps", 1e-5)
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * x_hat + beta, {"x": x, "mu": mu, "var": var, "gamma": gamma}


def layernorm_backward(dout, cache):
    x, mu, var, gamma = cache["x"], cache["mu"], cache["var"], cache["gamma"]
    D = x.shape[1]
    inv = 1.0 / np.sqrt(var + 1e-5)
    x_hat = (x - mu) * inv
    g = dout * gamma
    dx = inv / D * (D * g - g.sum(axis=1, keepdims=True) - x_hat * (g * x_hat).sum(axis=1, keepdims=True))
    return dx, (dout * x_hat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    eps = gn_param.get("eps", 1e-5)
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G, H, W)
    mu = xg.mean(axis=(2, 3, 4), keepdims=True)
    var = xg.var(axis=(2, 3, 4), keepdims=True)
    x_hat = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    return gamma * x_hat + beta, (xg, mu, var, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xg, mu, var, gamma, G = cache
    N, C, H, W = dout.shape
    M = C // G * H * W
    inv = 1.0 / np.sqrt(var + 1e-5)
    x_hat = (xg - mu) * inv
    g = (dout * gamma).reshape(xg.shape)
    dx = inv / M * (M * g - g.sum(axis=(2, 3, 4), keepdims=True)
                    - x_hat * (g * x_hat).sum(axis=(2, 3, 4), keepdims=True))
    return dx.reshape(dout.shape), np.sum(dout * x_hat.reshape(dout.shape), axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
