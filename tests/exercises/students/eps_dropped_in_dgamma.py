"""eps left out of dgamma alone: the backward rebuilds x_hat without eps for dgamma, while dx uses the cached
rstd, which has it (BatchNorm staged with a tuple cache; LayerNorm closed form with a dict cache)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    mean = x.mean(axis=0)
    var = x.var(axis=0)
    inv_std = 1.0 / np.sqrt(var + eps)
    x_hat = (x - mean) * inv_std
    return gamma * x_hat + beta, (x, mean, var, inv_std, gamma)


def batchnorm_backward(dout, cache):
    x, mean, var, inv_std, gamma = cache
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dx_hat * (x - mean), axis=0) * -0.5 * inv_std ** 3
    dmean = -np.sum(dx_hat, axis=0) * inv_std
    dx = dx_hat * inv_std + dvar * 2 * (x - mean) / N + dmean / N
    x_hat = (x - mean) / np.sqrt(var)
    dgamma = np.sum(dout * x_hat, axis=0)
    return dx, dgamma, np.sum(dout, axis=0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    rstd = (var + ln_param["eps"]) ** -0.5
    xn = (x - mu) * rstd
    return xn * gamma + beta, {"x": x, "mu": mu, "var": var, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dout, cache):
    x, mu, var, rstd, gamma = cache["x"], cache["mu"], cache["var"], cache["rstd"], cache["gamma"]
    g = dout * gamma
    xn = (x - mu) * rstd
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - xn * (g * xn).mean(axis=1, keepdims=True))
    dgamma = (dout * (x - mu) / np.sqrt(var)).sum(axis=0)
    return dx, dgamma, dout.sum(axis=0)
