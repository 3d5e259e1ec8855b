"""running_stats_in_training: the train-mode forward normalizes with bn_param's running averages (as test mode
does) and then updates them; the backward is consistent with it (the statistics taken as constants)."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mode = bn_param["mode"]
    eps = bn_param.get("eps", 1e-5)
    momentum = bn_param.get("momentum", 0.9)
    running_mean = bn_param.get("running_mean", np.zeros(x.shape[1]))
    running_var = bn_param.get("running_var", np.ones(x.shape[1]))
    x_hat = (x - running_mean) / np.sqrt(running_var + eps)
    out = gamma * x_hat + beta
    if mode == "train":
        bn_param["running_mean"] = momentum * running_mean + (1 - momentum) * x.mean(axis=0)
        bn_param["running_var"] = momentum * running_var + (1 - momentum) * x.var(axis=0)
    return out, (x_hat, gamma, running_var + eps)


def batchnorm_backward(dout, cache):
    x_hat, gamma, v = cache
    return dout * gamma / np.sqrt(v), np.sum(dout * x_hat, axis=0), np.sum(dout, axis=0)
