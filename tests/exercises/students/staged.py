"""A right solution, node by node through the computational graph (the course's way), for the three norms."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mode = bn_param["mode"]
    eps = bn_param.get("eps", 1e-5)
    momentum = bn_param.get("momentum", 0.9)
    N, D = x.shape
    running_mean = bn_param.get("running_mean", np.zeros(D, dtype=x.dtype))
    running_var = bn_param.get("running_var", np.zeros(D, dtype=x.dtype))
    out, cache = None, None
    if mode == "train":
        mu = 1.0 / N * np.sum(x, axis=0)
        xmu = x - mu
        sq = xmu ** 2
        var = 1.0 / N * np.sum(sq, axis=0)
        sqrtvar = np.sqrt(var + eps)
        ivar = 1.0 / sqrtvar
        xhat = xmu * ivar
        gammax = gamma * xhat
        out = gammax + beta
        cache = (xhat, gamma, xmu, ivar, sqrtvar, var, eps)
        running_mean = momentum * running_mean + (1 - momentum) * mu
        running_var = momentum * running_var + (1 - momentum) * var
    elif mode == "test":
        out = (x - running_mean) / np.sqrt(running_var + eps) * gamma + beta
    else:
        raise ValueError('Invalid forward batchnorm mode "%s"' % mode)
    bn_param["running_mean"] = running_mean
    bn_param["running_var"] = running_var
    return out, cache


def batchnorm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    N, D = dout.shape
    dbeta = np.sum(dout, axis=0)
    dgammax = dout
    dgamma = np.sum(dgammax * xhat, axis=0)
    dxhat = dgammax * gamma
    divar = np.sum(dxhat * xmu, axis=0)
    dxmu1 = dxhat * ivar
    dsqrtvar = -1.0 / (sqrtvar ** 2) * divar
    dvar = 0.5 * 1.0 / np.sqrt(var + eps) * dsqrtvar
    dsq = 1.0 / N * np.ones((N, D)) * dvar
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dmu = -1 * np.sum(dx1, axis=0)
    dx2 = 1.0 / N * np.ones((N, D)) * dmu
    dx = dx1 + dx2
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    """The course's hint: LayerNorm is BatchNorm of the transposed input, with the affine outside."""
    eps = ln_param.get("eps", 1e-5)
    xhat_t, cache_t = batchnorm_forward(x.T, np.ones(x.shape[0]), np.zeros(x.shape[0]),
                                        {"mode": "train", "eps": eps})
    xhat = xhat_t.T
    return gamma * xhat + beta, (cache_t, xhat, gamma)


def layernorm_backward(dout, cache):
    cache_t, xhat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, cache_t)
    return dx_t.T, np.sum(dout * xhat, axis=0), np.sum(dout, axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    eps = gn_param.get("eps", 1e-5)
    N, C, H, W = x.shape
    xg = x.reshape(N, G, C // G, H, W)
    mean = np.mean(xg, axis=(2, 3, 4), keepdims=True)
    xm = xg - mean
    var = np.mean(xm ** 2, axis=(2, 3, 4), keepdims=True)
    std = np.sqrt(var + eps)
    xhat = (xm / std).reshape(N, C, H, W)
    out = gamma * xhat + beta
    cache = (G, xm, std, xhat, gamma)
    return out, cache


def spatial_groupnorm_backward(dout, cache):
    G, xm, std, xhat, gamma = cache
    N, C, H, W = dout.shape
    M = C // G * H * W
    dbeta = np.sum(dout, axis=(0, 2, 3), keepdims=True)
    dgamma = np.sum(dout * xhat, axis=(0, 2, 3), keepdims=True)
    dxhat = (dout * gamma).reshape(N, G, C // G, H, W)
    dstd = -np.sum(dxhat * xm, axis=(2, 3, 4), keepdims=True) / std ** 2
    dvar = dstd / (2 * std)
    dxm = dxhat / std + 2 * xm * dvar / M
    dmean = -np.sum(dxm, axis=(2, 3, 4), keepdims=True)
    dx = dxm + dmean / M
    return dx.reshape(N, C, H, W), dgamma, dbeta
