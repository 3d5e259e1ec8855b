"""Two slips in a staged backward: the path through the variance left out of dx (the line after dx_hat), and
dgamma not summed over the batch."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mu = np.mean(x, axis=0)
    xmu = x - mu
    var = np.mean(xmu ** 2, axis=0)
    ivar = 1.0 / np.sqrt(var + eps)
    x_hat = xmu * ivar
    out = gamma * x_hat + beta
    return out, (x_hat, xmu, ivar, gamma)


def batchnorm_backward(dout, cache):
    x_hat, xmu, ivar, gamma = cache
    N = dout.shape[0]
    dbeta = np.sum(dout, axis=0)
    dgamma = dout * x_hat
    dx_hat = dout * gamma
    dxmu = dx_hat * ivar - np.sum(dx_hat * ivar, axis=0) / N
    dx = dxmu
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    mu = np.mean(x, axis=1, keepdims=True)
    xmu = x - mu
    ivar = 1.0 / np.sqrt(np.mean(xmu ** 2, axis=1, keepdims=True) + ln_param["eps"])
    x_hat = xmu * ivar
    return gamma * x_hat + beta, (x_hat, xmu, ivar, gamma)


def layernorm_backward(dout, cache):
    x_hat, xmu, ivar, gamma = cache
    D = dout.shape[1]
    dbeta = np.sum(dout, axis=0)
    dgamma = dout * x_hat
    dx_hat = dout * gamma
    dx = dx_hat * ivar - np.sum(dx_hat * ivar, axis=1, keepdims=True) / D
    return dx, dgamma, dbeta
