"""A staged LayerNorm that divides the mean's and the variance's paths by the batch size N = x.shape[0], where
D = x.shape[1] belongs (a dict cache)."""
import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    mean = np.mean(x, axis=1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=1, keepdims=True)
    x_norm = (x - mean) / np.sqrt(var + ln_param["eps"])
    return x_norm * gamma + beta, {"x": x, "mean": mean, "var": var, "eps": ln_param["eps"], "gamma": gamma,
                                   "x_norm": x_norm}


def layernorm_backward(dout, cache):
    x, mean, var, eps = cache["x"], cache["mean"], cache["var"], cache["eps"]
    N = x.shape[0]
    dx_norm = dout * cache["gamma"]
    dvar = np.sum(dx_norm * (x - mean), axis=1, keepdims=True) * -0.5 * (var + eps) ** -1.5
    dmean = np.sum(-dx_norm / np.sqrt(var + eps), axis=1, keepdims=True)
    dx = dx_norm / np.sqrt(var + eps) + dvar * 2 * (x - mean) / N + dmean / N
    return dx, np.sum(dout * cache["x_norm"], axis=0), np.sum(dout, axis=0)
