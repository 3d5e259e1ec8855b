"""missing_mean_term: loops over the features (BatchNorm) and rows (LayerNorm), the -mean(g) term forgotten."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    eps = bn_param.get("eps", 1e-5)
    out, cache = np.empty_like(x), []
    for j in range(x.shape[1]):
        col = x[:, j]
        m = sum(col) / len(col)
        v = sum((c - m) ** 2 for c in col) / len(col)
        xh = (col - m) / np.sqrt(v + eps)
        out[:, j] = gamma[j] * xh + beta[j]
        cache.append((xh, 1 / np.sqrt(v + eps), gamma[j]))
    return out, cache


def batchnorm_backward(dout, cache):
    dx, dgamma, dbeta = np.empty_like(dout), np.empty(dout.shape[1]), np.empty(dout.shape[1])
    for j, (xh, r, gam) in enumerate(cache):
        g = dout[:, j] * gam
        dx[:, j] = r * (g - xh * np.mean(g * xh))
        dgamma[j] = np.dot(dout[:, j], xh)
        dbeta[j] = dout[:, j].sum()
    return dx, dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    out_t, cache = batchnorm_forward(x.T, np.ones(x.shape[0]), np.zeros(x.shape[0]), ln_param)
    return out_t.T * gamma + beta, (cache, out_t.T, gamma)


def layernorm_backward(dout, cache):
    rows, xhat, gamma = cache
    dx_t, _, _ = batchnorm_backward((dout * gamma).T, rows)
    return dx_t.T, (dout * xhat).sum(axis=0), dout.sum(axis=0)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mu = xg.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(xg.var(axis=-1, keepdims=True) + gn_param["eps"])
    xhat = ((xg - mu) * rstd).reshape(x.shape)
    return xhat * gamma + beta, (xhat, rstd, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, rstd, gamma, G = cache
    N = dout.shape[0]
    g = (dout * gamma).reshape(N, G, -1)
    xh = xhat.reshape(N, G, -1)
    dx = rstd * (g - xh * (g * xh).mean(axis=-1, keepdims=True))
    return dx.reshape(dout.shape), (dout * xhat).sum(axis=(0, 2, 3), keepdims=True), \
        dout.sum(axis=(0, 2, 3), keepdims=True)
