"""GroupNorm with G and C/G swapped in a reshape: x.reshape(N, C // G, -1) makes C // G groups of G channels;
the rest is right for those groups (a staged backward over the reshaped rows)."""
import numpy as np


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, C // G, -1)
    mean = np.mean(xg, axis=2, keepdims=True)
    var = np.var(xg, axis=2, keepdims=True)
    std = np.sqrt(var + gn_param["eps"])
    xhat = ((xg - mean) / std).reshape(x.shape)
    return xhat * gamma + beta, {"xg": xg, "mean": mean, "std": std, "xhat": xhat, "gamma": gamma, "G": G}


def spatial_groupnorm_backward(dout, cache):
    xg, mean, std, xhat, gamma = cache["xg"], cache["mean"], cache["std"], cache["xhat"], cache["gamma"]
    N, C, H, W = dout.shape
    m = xg.shape[2]
    dxhat = (dout * gamma).reshape(xg.shape)
    dstd = -np.sum(dxhat * (xg - mean), axis=2, keepdims=True) / std ** 2
    dvar = dstd / (2 * std)
    dmean = -np.sum(dxhat, axis=2, keepdims=True) / std
    dx = dxhat / std + dvar * 2 * (xg - mean) / m + dmean / m
    dgamma = np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True)
    return dx.reshape(dout.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
