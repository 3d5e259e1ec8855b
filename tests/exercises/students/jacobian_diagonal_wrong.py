"""The Jacobian's diagonal only, and that diagonal itself wrong: dx = gamma * (dx_hat_i/dx_i) * dout with
dsigma/dx_i = (2 x_i - mu) / (sqrt(N) sigma) (the right one is (x_i - mu) / (N sigma)); staged BatchNorm with a
tuple cache, LayerNorm in one line with keepdims statistics."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = x.mean(axis=0)
    sigma = np.sqrt(x.var(axis=0) + bn_param["eps"])
    x_hat = (x - mu) / sigma
    return gamma * x_hat + beta, (x, mu, sigma, gamma, x_hat)


def batchnorm_backward(dout, cache):
    x, mu, sigma, gamma, x_hat = cache
    N = x.shape[0]
    dsigma = (2 * x - mu) / (np.sqrt(N) * sigma)
    dxhat_dx = ((1 - 1 / N) * sigma - (x - mu) * dsigma) / sigma ** 2
    dx = gamma * dxhat_dx * dout
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    sigma = np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    return gamma * (x - mu) / sigma + beta, (x, mu, sigma, gamma)


def layernorm_backward(dout, cache):
    x, mu, sigma, gamma = cache
    D = x.shape[1]
    dx = gamma * dout * ((1 - 1 / D) / sigma - (x - mu) * (2 * x - mu) / (np.sqrt(D) * sigma ** 3))
    return dx, np.sum(dout * (x - mu) / sigma, axis=0), np.sum(dout, axis=0)
