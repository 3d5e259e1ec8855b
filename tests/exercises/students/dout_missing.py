"""dout_missing: dxhat = gamma, the upstream gradient forgotten in dx (dgamma and dbeta have it)."""
import numpy as np
from closed_form import layernorm_forward, spatial_groupnorm_forward  # noqa: F401


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    D = dout.shape[1]
    dxhat = gamma * np.ones_like(dout)                              # dout * gamma
    dx = (D * dxhat - dxhat.sum(axis=1, keepdims=True) - xhat * (dxhat * xhat).sum(axis=1, keepdims=True)) / (D * std)
    return dx, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_backward(dout, cache):
    xhat, gamma, std, G = cache
    N = dout.shape[0]
    g = np.broadcast_to(gamma, dout.shape).reshape(N, G, -1)       # dout * gamma
    xh = xhat.reshape(N, G, -1)
    dx = (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True)) / std
    return dx.reshape(dout.shape), (dout * xhat).sum(axis=(0, 2, 3), keepdims=True), \
        dout.sum(axis=(0, 2, 3), keepdims=True)
