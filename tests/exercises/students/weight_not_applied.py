"""weight_not_applied: dxhat = dout, as if gamma were 1 (the forward is right)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mean = np.mean(x, axis=0)
    inv_std = 1.0 / np.sqrt(np.var(x, axis=0) + bn_param["eps"])
    x_norm = (x - mean) * inv_std
    return x_norm * gamma + beta, {"x_norm": x_norm, "inv_std": inv_std}


def batchnorm_backward(dout, cache):
    x_norm, inv_std = cache["x_norm"], cache["inv_std"]
    N = dout.shape[0]
    dx_norm = dout                                  # gamma forgotten
    dx = inv_std / N * (N * dx_norm - np.sum(dx_norm, axis=0) - x_norm * np.sum(dx_norm * x_norm, axis=0))
    return dx, np.sum(dout * x_norm, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mean = np.mean(x, axis=1, keepdims=True)
    inv_std = 1.0 / np.sqrt(np.var(x, axis=1, keepdims=True) + ln_param["eps"])
    x_norm = (x - mean) * inv_std
    return x_norm * gamma + beta, {"x_norm": x_norm, "inv_std": inv_std}


def layernorm_backward(dout, cache):
    x_norm, inv_std = cache["x_norm"], cache["inv_std"]
    D = dout.shape[1]
    dx = inv_std / D * (D * dout - np.sum(dout, axis=1, keepdims=True)
                        - x_norm * np.sum(dout * x_norm, axis=1, keepdims=True))
    return dx, np.sum(dout * x_norm, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    inv_std = 1.0 / np.sqrt(np.var(xg, axis=2, keepdims=True) + gn_param["eps"])
    x_norm = ((xg - np.mean(xg, axis=2, keepdims=True)) * inv_std).reshape(x.shape)
    return x_norm * gamma + beta, {"x_norm": x_norm, "inv_std": inv_std, "G": G}


def spatial_groupnorm_backward(dout, cache):
    N, C, H, W = dout.shape
    G = cache["G"]
    d = dout.reshape(N, G, -1)
    xn = cache["x_norm"].reshape(N, G, -1)
    M = d.shape[2]
    dx = cache["inv_std"] / M * (M * d - np.sum(d, axis=2, keepdims=True) - xn * np.sum(d * xn, axis=2, keepdims=True))
    return dx.reshape(dout.shape), np.sum(dout * cache["x_norm"], axis=(0, 2, 3), keepdims=True), \
        np.sum(dout, axis=(0, 2, 3), keepdims=True)
