"""A staged BatchNorm backward with three slips, in names the course does not use: the variance's gradient
sums (x - mean) alone, without the upstream d_norm (a sum that gives 0 for every column: the path through
the variance is lost there, line `grad_v = ...`); d_norm is added to dx undivided by the spread; the mean's
share is not divided by N. The slip that loses the x_hat term is made at grad_v, before the line of dx."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param["eps"]
    centre = x.mean(axis=0)
    spread = x.var(axis=0)
    normed = (x - centre) / np.sqrt(spread + eps)
    return gamma * normed + beta, (x, normed, centre, spread, gamma, eps)


def batchnorm_backward(dout, cache):
    x, normed, centre, spread, gamma, eps = cache
    N = x.shape[0]
    d_norm = dout * gamma
    grad_c = np.sum(-d_norm / np.sqrt(spread + eps), axis=0)
    grad_v = np.sum(-0.5 * (x - centre) * (spread + eps) ** -1.5, axis=0)
    via_v = 2.0 * (x - centre) * grad_v / N
    via_c = np.ones_like(x) * grad_c
    dx = d_norm + via_v + via_c
    return dx, np.sum(dout * normed, axis=0), np.sum(dout, axis=0)
