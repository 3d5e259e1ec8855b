"""Running averages used in training mode, in the backward: the forward normalizes with the batch's statistics
(right) but caches bn_param's running_mean and running_var (after its update), and the backward uses them in
place of the batch's; its x_hat term also lacks gamma and 1/N (closed form with a tuple cache; staged with a
dict cache)."""
import numpy as np


def _statistics(x, bn_param):
    eps, momentum = bn_param.get("eps", 1e-5), bn_param.get("momentum", 0.9)
    mu, var = x.mean(axis=0), x.var(axis=0)
    running_mean = bn_param.get("running_mean", np.zeros(x.shape[1]))
    running_var = bn_param.get("running_var", np.ones(x.shape[1]))
    bn_param["running_mean"] = momentum * running_mean + (1 - momentum) * mu
    bn_param["running_var"] = momentum * running_var + (1 - momentum) * var
    return mu, var, eps


def batchnorm_forward(x, gamma, beta, bn_param):
    mu, var, eps = _statistics(x, bn_param)
    x_hat = (x - mu) / np.sqrt(var + eps)
    cache = (x, x_hat, gamma, bn_param["running_mean"], bn_param["running_var"], eps)
    return gamma * x_hat + beta, cache


def batchnorm_backward(dout, cache):
    x, x_hat, gamma, running_mean, running_var, eps = cache
    N = x.shape[0]
    std = np.sqrt(running_var + eps)
    xr = (x - running_mean) / std
    g = dout * gamma
    dx = (g - g.sum(axis=0) / N - xr * np.sum(dout * xr, axis=0)) / std
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)
