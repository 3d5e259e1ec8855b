"""Spatial BatchNorm whose forward reads x in (N, C, H, W) order as (N, H, W, C) with a reshape, then transposes:
its statistics are right per channel, its out holds the right numbers in other places; the backward, written
with the right transposes, is right."""
import numpy as np


def spatial_batchnorm_forward(x, gamma, beta, bn_param):
    N, C, H, W = x.shape
    xt = x.transpose(0, 2, 3, 1)                                   # (N, H, W, C)
    mean = xt.mean(axis=(0, 1, 2))
    var = xt.var(axis=(0, 1, 2))
    xhat = (xt - mean) / np.sqrt(var + bn_param["eps"])
    out = (gamma * xhat + beta).reshape(N, C, H, W)
    return out, (xhat, mean, var, bn_param["eps"], gamma)


def spatial_batchnorm_backward(dout, cache):
    xhat, mean, var, eps, gamma = cache
    m = xhat.shape[0] * xhat.shape[1] * xhat.shape[2]
    dt = dout.transpose(0, 2, 3, 1)
    dxhat = dt * gamma
    std = np.sqrt(var + eps)
    dx = (m * dxhat - dxhat.sum(axis=(0, 1, 2)) - xhat * (dxhat * xhat).sum(axis=(0, 1, 2))) / (m * std)
    return dx.transpose(0, 3, 1, 2), (dt * xhat).sum(axis=(0, 1, 2)), dt.sum(axis=(0, 1, 2))
