"""An eps of its own in one term of the backward only: the path through the variance is written with
(var + 1e-5)^(-3/2), while the forward, and the rest of the backward, use the eps given (BatchNorm staged
with a tuple cache; LayerNorm closed form with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    sample_mean = x.mean(axis=0)
    sample_var = x.var(axis=0)
    std = np.sqrt(sample_var + eps)
    x_norm = (x - sample_mean) / std
    return gamma * x_norm + beta, (x, x_norm, sample_mean, sample_var, std, gamma)


def batchnorm_backward(dout, cache):
    x, x_norm, sample_mean, sample_var, std, gamma = cache
    N = float(x.shape[0])
    dx_norm = dout * gamma
    dvar = np.sum(dx_norm * (x - sample_mean), axis=0) * -0.5 * (sample_var + 1e-5) ** -1.5
    dmean = np.sum(-dx_norm / std, axis=0)
    dx = dx_norm / std + dvar * 2.0 * (x - sample_mean) / N + dmean / N
    return dx, np.sum(dout * x_norm, axis=0), np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = np.mean(x, axis=1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + ln_param["eps"])
    return gamma * (x - mu) * rstd + beta, {"x": x, "mu": mu, "var": var, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    x, mu, var, rstd, gamma = (cache[k] for k in ("x", "mu", "var", "rstd", "gamma"))
    g = dout * gamma
    xmu = x - mu
    through_var = xmu * np.mean(g * xmu, axis=1, keepdims=True) * np.power(var + 1e-5, -1.5)
    dx = rstd * (g - np.mean(g, axis=1, keepdims=True)) - through_var
    return dx, np.sum(dout * xmu * rstd, axis=0), np.sum(dout, axis=0)
