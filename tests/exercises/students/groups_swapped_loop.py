"""GroupNorm with G and C/G swapped: a loop over C // G slices of G channels each, right within a slice
(statistics over the slice's channels and positions; the backward LayerNorm's closed form per slice)."""
import numpy as np


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    eps = gn_param.get("eps", 1e-5)
    N, C, H, W = x.shape
    x_hat = np.zeros_like(x)
    rstds = []
    for i in range(C // G):
        xs = x[:, i * G:(i + 1) * G]
        mu = xs.mean(axis=(1, 2, 3), keepdims=True)
        rstd = 1.0 / np.sqrt(xs.var(axis=(1, 2, 3), keepdims=True) + eps)
        x_hat[:, i * G:(i + 1) * G] = (xs - mu) * rstd
        rstds.append(rstd)
    return gamma * x_hat + beta, (x_hat, rstds, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    x_hat, rstds, gamma, G = cache
    C = dout.shape[1]
    g = dout * gamma
    dx = np.zeros_like(dout)
    for i in range(C // G):
        gs, xs = g[:, i * G:(i + 1) * G], x_hat[:, i * G:(i + 1) * G]
        dx[:, i * G:(i + 1) * G] = rstds[i] * (gs - gs.mean(axis=(1, 2, 3), keepdims=True)
                                               - xs * (gs * xs).mean(axis=(1, 2, 3), keepdims=True))
    return dx, np.sum(dout * x_hat, axis=(0, 2, 3), keepdims=True), np.sum(dout, axis=(0, 2, 3), keepdims=True)
