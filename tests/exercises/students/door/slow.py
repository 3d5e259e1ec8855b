"""Slow but right: Python loops over every element (and every pair of elements in a row for dx)."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    N, D = x.shape
    out, xhat, std = np.empty_like(x), np.empty_like(x), np.empty(N)
    for i in range(N):
        mu = 0.0
        for j in range(D):
            mu += x[i, j] / D
        var = 0.0
        for j in range(D):
            var += (x[i, j] - mu) ** 2 / D
        std[i] = (var + ln_param["eps"]) ** 0.5
        for j in range(D):
            xhat[i, j] = (x[i, j] - mu) / std[i]
            out[i, j] = gamma[j] * xhat[i, j] + beta[j]
    return out, (xhat, gamma, std)


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    N, D = dout.shape
    dx, dgamma, dbeta = np.zeros_like(dout), np.zeros(D), np.zeros(D)
    for i in range(N):
        for j in range(D):
            dgamma[j] += dout[i, j] * xhat[i, j]
            dbeta[j] += dout[i, j]
            for k in range(D):      # the Jacobian, element by element
                J = ((j == k) * D - 1 - xhat[i, j] * xhat[i, k]) / (D * std[i])
                dx[i, j] += J * gamma[k] * dout[i, k]
    return dx, dgamma, dbeta
