"""groupnorm_per_position: the statistics over the group's channels at each (h, w), not over the whole group."""
import numpy as np


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G, H, W)
    mean = xg.mean(axis=2, keepdims=True)                       # (N, G, 1, H, W)
    var = xg.var(axis=2, keepdims=True)
    std = np.sqrt(var + gn_param["eps"])
    xhat = (xg - mean) / std
    out = gamma * xhat.reshape(x.shape) + beta
    return out, (xhat, std, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, std, gamma, G = cache
    N, C, H, W = dout.shape
    dxhat = (dout * gamma).reshape(xhat.shape)
    dx = (dxhat - dxhat.mean(axis=2, keepdims=True) - xhat * (dxhat * xhat).mean(axis=2, keepdims=True)) / std
    dgamma = np.sum(dout * xhat.reshape(dout.shape), axis=(0, 2, 3), keepdims=True)
    return dx.reshape(dout.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
