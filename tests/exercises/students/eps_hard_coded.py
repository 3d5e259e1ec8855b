"""eps_hard_coded: the forward sets eps = 1e-5 itself and never reads bn_param's (ln_param's, gn_param's)."""
import numpy as np
from closed_form import batchnorm_backward, layernorm_backward, spatial_groupnorm_backward  # noqa: F401


def batchnorm_forward(x, gamma, beta, bn_param, eps=1e-5):
    mu, var = x.mean(axis=0), x.var(axis=0)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + eps))


def layernorm_forward(x, gamma, beta, ln_param):
    eps = 1e-5
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + eps))


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    xg = x.reshape(x.shape[0], G, -1)
    std = np.sqrt(xg.var(axis=2, keepdims=True) + 1e-5)
    xhat = ((xg - xg.mean(axis=2, keepdims=True)) / std).reshape(x.shape)
    return gamma * xhat + beta, (xhat, gamma, std, G)
