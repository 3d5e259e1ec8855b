"""Running averages used in training mode, in a staged backward with a dict cache: the forward caches
bn_param's running_mean and running_var (after its update) beside the batch's x_hat, and the backward's graph
runs on them; its dvar also takes dout, not dout * gamma, and its share of dx is not divided by N."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    momentum = bn_param.get("momentum", 0.9)
    N, D = x.shape
    running_mean = bn_param.get("running_mean", np.zeros(D))
    running_var = bn_param.get("running_var", np.ones(D))
    sample_mean = np.mean(x, axis=0)
    sample_var = np.var(x, axis=0)
    x_hat = (x - sample_mean) / np.sqrt(sample_var + eps)
    running_mean = momentum * running_mean + (1 - momentum) * sample_mean
    running_var = momentum * running_var + (1 - momentum) * sample_var
    bn_param["running_mean"], bn_param["running_var"] = running_mean, running_var
    cache = {"x": x, "x_hat": x_hat, "gamma": gamma, "mean": running_mean, "var": running_var, "eps": eps}
    return gamma * x_hat + beta, cache


def batchnorm_backward(dout, cache):
    x, gamma, mean, var, eps = cache["x"], cache["gamma"], cache["mean"], cache["var"], cache["eps"]
    N = x.shape[0]
    dx_hat = dout * gamma
    dvar = np.sum(dout * (x - mean), axis=0) * -0.5 * (var + eps) ** -1.5
    dmean = -np.sum(dx_hat, axis=0) / np.sqrt(var + eps)
    dx = dx_hat / np.sqrt(var + eps) + dvar * 2 * (x - mean) + dmean / N
    return dx, np.sum(dout * cache["x_hat"], axis=0), np.sum(dout, axis=0)
