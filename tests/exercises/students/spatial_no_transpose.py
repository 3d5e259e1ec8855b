"""Spatial BatchNorm flattened without moving the channels last: x.reshape(-1, C) mixes channels and
positions (a classic slip), in the forward and the backward alike."""
from staged import batchnorm_backward, batchnorm_forward


def spatial_batchnorm_forward(x, gamma, beta, bn_param):
    out, cache = batchnorm_forward(x.reshape(-1, x.shape[1]), gamma, beta, bn_param)
    return out.reshape(x.shape), cache


def spatial_batchnorm_backward(dout, cache):
    dx, dgamma, dbeta = batchnorm_backward(dout.reshape(-1, dout.shape[1]), cache)
    return dx.reshape(dout.shape), dgamma, dbeta
