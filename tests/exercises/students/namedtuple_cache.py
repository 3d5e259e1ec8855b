"""A cache that is a namedtuple: LayerNorm whose backward leaves out the mean term; BatchNorm whose backward
unpacks two fields the wrong way round (x_hat and x - mu, of one shape)."""
from collections import namedtuple

import numpy as np

LNCache = namedtuple("LNCache", "x_hat rstd gamma")
BNCache = namedtuple("BNCache", "x_hat xmu rstd gamma")


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=1, keepdims=True) + ln_param["eps"])
    x_hat = (x - mu) * rstd
    return gamma * x_hat + beta, LNCache(x_hat, rstd, gamma)


def layernorm_backward(dout, cache):
    g = dout * cache.gamma
    dx = cache.rstd * (g - cache.x_hat * (g * cache.x_hat).mean(axis=1, keepdims=True))
    return dx, (dout * cache.x_hat).sum(axis=0), dout.sum(axis=0)


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = x.mean(axis=0)
    rstd = 1.0 / np.sqrt(x.var(axis=0) + bn_param["eps"])
    x_hat = (x - mu) * rstd
    return gamma * x_hat + beta, BNCache(x_hat, x - mu, rstd, gamma)


def batchnorm_backward(dout, cache):
    xmu, x_hat, rstd, gamma = cache
    g = dout * gamma
    dx = rstd * (g - g.mean(axis=0) - x_hat * (g * x_hat).mean(axis=0))
    return dx, (dout * x_hat).sum(axis=0), dout.sum(axis=0)
