"""mutates_dy: g = dout; g *= gamma writes into the caller's dout (the gradients themselves are right)."""


def batchnorm_forward(x, gamma, beta, bn_param):
    mu = x.mean(axis=0)
    rstd = (x.var(axis=0) + bn_param["eps"]) ** -0.5
    xhat = (x - mu) * rstd
    return xhat * gamma + beta, (xhat, rstd, gamma)


def batchnorm_backward(dout, cache):
    xhat, rstd, gamma = cache
    dgamma, dbeta = (dout * xhat).sum(axis=0), dout.sum(axis=0)
    g = dout
    g *= gamma
    return rstd * (g - g.mean(axis=0) - xhat * (g * xhat).mean(axis=0)), dgamma, dbeta


def layernorm_forward(x, gamma, beta, ln_param):
    mu = x.mean(axis=1, keepdims=True)
    rstd = (x.var(axis=1, keepdims=True) + ln_param["eps"]) ** -0.5
    xhat = (x - mu) * rstd
    return xhat * gamma + beta, (xhat, rstd, gamma)


def layernorm_backward(dout, cache):
    xhat, rstd, gamma = cache
    dgamma, dbeta = (dout * xhat).sum(axis=0), dout.sum(axis=0)
    dout *= gamma
    return rstd * (dout - dout.mean(axis=1, keepdims=True) - xhat * (dout * xhat).mean(axis=1, keepdims=True)), \
        dgamma, dbeta


def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    rstd = (xg.var(axis=2, keepdims=True) + gn_param["eps"]) ** -0.5
    xhat = ((xg - xg.mean(axis=2, keepdims=True)) * rstd).reshape(x.shape)
    return xhat * gamma + beta, (xhat, rstd, gamma, G)


def spatial_groupnorm_backward(dout, cache):
    xhat, rstd, gamma, G = cache
    dgamma, dbeta = (dout * xhat).sum(axis=(0, 2, 3), keepdims=True), dout.sum(axis=(0, 2, 3), keepdims=True)
    dout *= gamma
    g = dout.reshape(dout.shape[0], G, -1)
    xh = xhat.reshape(g.shape)
    dx = rstd * (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True))
    return dx.reshape(dout.shape), dgamma, dbeta
