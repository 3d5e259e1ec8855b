"""A right solution with explicit loops: over the features (BatchNorm), the rows (LayerNorm), and the examples
and groups (GroupNorm), one scalar formula at a time."""
import math

import numpy as np


def _norm(values, eps):
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n
    rstd = 1 / math.sqrt(var + eps)
    return [(v - mean) * rstd for v in values], rstd


def _norm_backward(g, xhat, rstd):
    n = len(g)
    g_mean = sum(g) / n
    gx_mean = sum(a * b for a, b in zip(g, xhat)) / n
    return [rstd * (a - g_mean - b * gx_mean) for a, b in zip(g, xhat)]


def batchnorm_forward(x, gamma, beta, bn_param):
    out, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty(x.shape[1])
    for j in range(x.shape[1]):
        col, rstd[j] = _norm(list(x[:, j]), bn_param["eps"])
        xhat[:, j] = col
        out[:, j] = [gamma[j] * v + beta[j] for v in col]
    return out, (xhat, rstd, gamma)


def batchnorm_backward(dout, cache):
    xhat, rstd, gamma = cache
    dx = np.empty_like(dout)
    for j in range(dout.shape[1]):
        dx[:, j] = _norm_backward(list(dout[:, j] * gamma[j]), list(xhat[:, j]), rstd[j])
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    out, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty(x.shape[0])
    for i in range(x.shape[0]):
        row, rstd[i] = _norm(list(x[i]), ln_param["eps"])
        xhat[i] = row
        out[i] = gamma * np.array(row) + beta
    return out, (xhat, rstd, gamma)


def layernorm_backward(dout, cache):
    xhat, rstd, gamma = cache
    dx = np.empty_like(dout)
    for i in range(dout.shape[0]):
        dx[i] = _norm_backward(list(dout[i] * gamma), list(xhat[i]), rstd[i])
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xhat, rstd = np.empty_like(x), np.empty((N, G))
    for n in range(N):
        for k in range(G):
            block = x[n, k * C // G:(k + 1) * C // G]
            values, rstd[n, k] = _norm(list(block.ravel()), gn_param["eps"])
            xhat[n, k * C // G:(k + 1) * C // G] = np.reshape(values, block.shape)
    return gamma * xhat + beta, (xhat, rstd, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, rstd, gamma, G = cache
    N, C, H, W = dout.shape
    dx, g = np.empty_like(dout), dout * gamma
    for n in range(N):
        for k in range(G):
            part = slice(k * C // G, (k + 1) * C // G)
            values = _norm_backward(list(g[n, part].ravel()), list(xhat[n, part].ravel()), rstd[n, k])
            dx[n, part] = np.reshape(values, g[n, part].shape)
    return dx, (dout * xhat).sum(axis=(0, 2, 3), keepdims=True), dout.sum(axis=(0, 2, 3), keepdims=True)
