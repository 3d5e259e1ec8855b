"""Spatial BatchNorm flattened with x.reshape(N * H * W, C), no transpose, its closed-form backward written in
place (a dict cache): each column mixes channels and positions, in the forward and the backward alike."""
import numpy as np


def spatial_batchnorm_forward(x, gamma, beta, bn_param):
    N, C, H, W = x.shape
    flat = x.reshape(N * H * W, C)
    mu = flat.mean(axis=0)
    inv = 1.0 / np.sqrt(flat.var(axis=0) + bn_param["eps"])
    xhat = (flat - mu) * inv
    return (gamma * xhat + beta).reshape(N, C, H, W), {"xhat": xhat, "inv": inv, "gamma": gamma}


def spatial_batchnorm_backward(dout, cache):
    N, C, H, W = dout.shape
    d = dout.reshape(N * H * W, C)
    xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
    m = d.shape[0]
    g = d * gamma
    dx = inv / m * (m * g - g.sum(axis=0) - xhat * (g * xhat).sum(axis=0))
    return dx.reshape(N, C, H, W), (d * xhat).sum(axis=0), d.sum(axis=0)
