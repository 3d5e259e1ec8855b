"""sign_error: the closed form, einsum style, with + where the x_hat term is subtracted."""
import numpy as np


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = np.einsum("nd->d", x) / x.shape[0]
    xc = x - mu
    rstd = 1 / np.sqrt(np.einsum("nd,nd->d", xc, xc) / x.shape[0] + bn_param["eps"])
    xn = xc * rstd
    return xn * gamma + beta, (xn, rstd, gamma)


def batchnorm_backward(dout, cache):
    xn, rstd, gamma = cache
    N = dout.shape[0]
    g = dout * gamma
    dx = rstd * (g - np.einsum("nd->d", g) / N + xn * np.einsum("nd,nd->d", g, xn) / N)
    return dx, np.einsum("nd,nd->d", dout, xn), np.einsum("nd->d", dout)


def layernorm_forward(x, gamma, beta, ln_param):
    xn_t, cache_t = batchnorm_forward(x.T, 1.0, 0.0, ln_param)
    return xn_t.T * gamma + beta, (cache_t, xn_t.T, gamma)


def layernorm_backward(dout, cache):
    cache_t, xn, gamma = cache
    return batchnorm_backward((dout * gamma).T, cache_t)[0].T, np.einsum("nd,nd->d", dout, xn), \
        np.einsum("nd->d", dout)


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mu = np.einsum("ngm->ng", xg)[..., None] / xg.shape[2]
    xc = xg - mu
    rstd = 1 / np.sqrt(np.einsum("ngm,ngm->ng", xc, xc)[..., None] / xg.shape[2] + gn_param["eps"])
    xn = (xc * rstd).reshape(x.shape)
    return xn * gamma + beta, (xn, rstd, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xn, rstd, gamma, G = cache
    N = dout.shape[0]
    g = (dout * gamma).reshape(N, G, -1)
    xg = xn.reshape(g.shape)
    M = g.shape[2]
    dx = rstd * (g - np.einsum("ngm->ng", g)[..., None] / M + xg * np.einsum("ngm,ngm->ng", g, xg)[..., None] / M)
    return dx.reshape(dout.shape), np.einsum("nchw,nchw->c", dout, xn).reshape(1, -1, 1, 1), \
        np.einsum("nchw->c", dout).reshape(1, -1, 1, 1)
