"""missing_rstd: the closed form with the overall factor 1/std forgotten."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    std = np.sqrt(x.var(axis=0) + bn_param["eps"])
    x_hat = (x - x.mean(axis=0)) / std
    return gamma * x_hat + beta, (x_hat, gamma)


def batchnorm_backward(dout, cache):
    x_hat, gamma = cache
    dxh = dout * gamma
    dx = dxh - dxh.mean(axis=0) - x_hat * (dxh * x_hat).mean(axis=0)          # / std forgotten
    return dx, (dout * x_hat).sum(axis=0), dout.sum(axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    out_t, (x_hat_t, _) = batchnorm_forward(x.T, 1.0, 0.0, ln_param)
    return gamma * x_hat_t.T + beta, (x_hat_t.T, gamma)


def layernorm_backward(dout, cache):
    x_hat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, (x_hat.T, 1.0))
    return dx_t.T, (dout * x_hat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    _, (x_hat_t, _) = batchnorm_forward(x.reshape(N * G, -1).T, 1.0, 0.0, gn_param)
    x_hat = x_hat_t.T.reshape(x.shape)
    return gamma * x_hat + beta, (x_hat, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    x_hat, gamma, G = cache
    N = dout.shape[0]
    dx_t, _, _ = batchnorm_backward((dout * gamma).reshape(N * G, -1).T, (x_hat.reshape(N * G, -1).T, 1.0))
    return dx_t.T.reshape(dout.shape), (dout * x_hat).sum(axis=(0, 2, 3), keepdims=True), \
        dout.sum(axis=(0, 2, 3), keepdims=True)
