"""A LayerNorm that normalizes each feature over the batch, as BatchNorm does: every statistic and sum over
axis 0, in the forward and in its staged backward (a tuple cache)."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    mean = np.mean(x, axis=0)
    xmu = x - mean
    var = np.mean(xmu ** 2, axis=0)
    sqrtvar = np.sqrt(var + ln_param["eps"])
    xhat = xmu / sqrtvar
    return gamma * xhat + beta, (xhat, xmu, sqrtvar, gamma)


def layernorm_backward(dout, cache):
    xhat, xmu, sqrtvar, gamma = cache
    N = dout.shape[0]
    dxhat = dout * gamma
    dsqrtvar = -np.sum(dxhat * xmu, axis=0) / sqrtvar ** 2
    dvar = 0.5 * dsqrtvar / sqrtvar
    dxmu = dxhat / sqrtvar + 2 * xmu * dvar / N
    dx = dxmu - np.sum(dxmu, axis=0) / N
    return dx, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)
