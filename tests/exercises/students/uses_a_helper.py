"""A layernorm whose forward raises inside another of the learner's modules (and inside NumPy), while its
backward, written independently, is right."""
import numpy as np
from norm_helpers import centred, variance


def layernorm_forward(x, gamma, beta, ln_param):
    xhat = centred(x, 1) / np.sqrt(variance(x, 1) + ln_param["eps"])
    return gamma * xhat + beta, (x, gamma, ln_param["eps"])


def layernorm_backward(dout, cache):
    x, gamma, eps = cache
    xhat = centred(x, 1) / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    g = dout * gamma
    dx = (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True)) \
        / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)
