"""Spatial BatchNorm the course's way: the channels moved last, the rest flattened, and one's own batchnorm
(from staged.py) reused."""
from staged import batchnorm_backward, batchnorm_forward


def spatial_batchnorm_forward(x, gamma, beta, bn_param):
    N, C, H, W = x.shape
    out, cache = batchnorm_forward(x.transpose(0, 2, 3, 1).reshape(-1, C), gamma, beta, bn_param)
    return out.reshape(N, H, W, C).transpose(0, 3, 1, 2), cache


def spatial_batchnorm_backward(dout, cache):
    N, C, H, W = dout.shape
    dx, dgamma, dbeta = batchnorm_backward(dout.transpose(0, 2, 3, 1).reshape(-1, C), cache)
    return dx.reshape(N, H, W, C).transpose(0, 3, 1, 2), dgamma, dbeta
