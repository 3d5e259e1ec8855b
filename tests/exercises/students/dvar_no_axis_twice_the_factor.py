"""dvar summed without an axis, and on the same line -1.0 where -0.5 belongs: the axis fix, written into the line
as the advice says, leaves the factor, so it is not enough alone (BatchNorm node by node, a tuple cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    x_hat = (x - mu) / np.sqrt(var + eps)
    return gamma * x_hat + beta, (x, x_hat, mu, var, gamma, eps)


def batchnorm_backward(dout, cache):
    x, x_hat, mu, var, gamma, eps = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mu) * -1.0 * (var + eps) ** -1.5)
    dmu = np.sum(-dx_hat / np.sqrt(var + eps), axis=0) + dvar * np.mean(-2 * (x - mu), axis=0)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mu) / N + dmu / N
    return dx, np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)
