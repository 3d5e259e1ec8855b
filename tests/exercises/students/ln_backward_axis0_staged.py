"""A LayerNorm backward copied from BatchNorm's graph, node by node: dvar and dmean summed over axis 0 (the
batch) and divided by N, where axis 1 and D belong (a dict cache)."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    mean = np.mean(x, axis=1, keepdims=True)
    var = np.var(x, axis=1, keepdims=True)
    ivar = 1.0 / np.sqrt(var + ln_param["eps"])
    x_norm = (x - mean) * ivar
    return x_norm * gamma + beta, {"xmu": x - mean, "ivar": ivar, "var": var, "eps": ln_param["eps"],
                                   "gamma": gamma, "x_norm": x_norm}


def layernorm_backward(dout, cache):
    xmu, ivar, var, eps, gamma = (cache[k] for k in ("xmu", "ivar", "var", "eps", "gamma"))
    N = dout.shape[0]
    dx_norm = dout * gamma
    dvar = np.sum(dx_norm * xmu, axis=0) * -0.5 * (var + eps) ** -1.5
    dmean = np.sum(-dx_norm * ivar, axis=0)
    dx = dx_norm * ivar + dvar * 2 * xmu / N + dmean / N
    return dx, np.sum(dout * cache["x_norm"], axis=0), np.sum(dout, axis=0)
