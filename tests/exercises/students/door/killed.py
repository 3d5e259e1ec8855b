"""A backward that kills its own process with SIGKILL."""
import numpy as np
import os
import signal

def layernorm_forward(x, gamma, beta, ln_param):
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + ln_param["eps"]))


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    os.kill(os.getpid(), signal.SIGKILL)
    g, D = dout * gamma, dout.shape[1]
    dx = (D * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)
