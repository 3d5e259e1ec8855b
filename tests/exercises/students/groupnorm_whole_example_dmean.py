"""Two slips in a GroupNorm: its statistics per example over all channels (a LayerNorm over (C, H, W)), and its
backward, right for those statistics but for the mean's path added to dx without / n."""
import numpy as np


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xf = x.reshape(N, -1)
    mean = xf.mean(axis=1, keepdims=True)
    var = xf.var(axis=1, keepdims=True)
    xhat = ((xf - mean) / np.sqrt(var + gn_param["eps"])).reshape(x.shape)
    return gamma * xhat + beta, (xf, mean, var, gn_param["eps"], xhat, gamma)


def spatial_groupnorm_backward(dout, cache):
    xf, mean, var, eps, xhat, gamma = cache
    m = xf.shape[1]
    dxhat = (dout * gamma).reshape(xf.shape)
    dvar = np.sum(dxhat * (xf - mean), axis=1, keepdims=True) * -0.5 * (var + eps) ** -1.5
    dmean = -np.sum(dxhat, axis=1, keepdims=True) / np.sqrt(var + eps)
    dx = dxhat / np.sqrt(var + eps) + dvar * 2 * (xf - mean) / m + dmean
    dgamma = np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True)
    return dx.reshape(dout.shape), dgamma, np.sum(dout, axis=(0, 2, 3), keepdims=True)
