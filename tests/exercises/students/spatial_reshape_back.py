"""Spatial BatchNorm through a (N*H*W, C) view, whose backward turns dx back with reshape(N, C, H, W) where the
inverse transpose belongs: the right numbers in the wrong places (the forward undoes its transpose right)."""
import numpy as np


def _bn(x2, gamma, beta, eps):
    mu = x2.mean(axis=0)
    inv_std = 1.0 / np.sqrt(x2.var(axis=0) + eps)
    x_hat = (x2 - mu) * inv_std
    return gamma * x_hat + beta, (x_hat, inv_std, gamma)


def spatial_batchnorm_forward(x, gamma, beta, bn_param):
    N, C, H, W = x.shape
    out, cache = _bn(x.transpose(0, 2, 3, 1).reshape(-1, C), gamma, beta, bn_param["eps"])
    return out.reshape(N, H, W, C).transpose(0, 3, 1, 2), cache


def spatial_batchnorm_backward(dout, cache):
    x_hat, inv_std, gamma = cache
    N, C, H, W = dout.shape
    d2 = dout.transpose(0, 2, 3, 1).reshape(-1, C)
    g = d2 * gamma
    dx = inv_std * (g - g.mean(axis=0) - x_hat * (g * x_hat).mean(axis=0))
    return dx.reshape(N, C, H, W), (d2 * x_hat).sum(axis=0), d2.sum(axis=0)
