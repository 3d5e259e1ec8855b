"""Students' solutions, written by hand and independently of the checker: right ones in several styles,
and wrong ones, for the tests of scratchnorm.exercises."""
from __future__ import annotations

import numpy as np


# -- LayerNorm, the closed form ------------------------------------------------------------------------------
def ln_forward(x, weight, bias, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def ln_backward(dy, x, weight, eps):
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    x_hat = (x - mu) * rstd
    g = dy * weight
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    axes = tuple(range(x.ndim - 1))
    return {"x": dx, "weight": (dy * x_hat).sum(axes), "bias": dy.sum(axes)}


def ln_backward_staged(dy, x, weight, eps):
    """Node by node through the graph, without the simplification sum(x - mu) = 0."""
    d = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    xm = x - mu
    var = (xm ** 2).mean(-1, keepdims=True)
    rstd = (var + eps) ** -0.5
    x_hat = xm * rstd
    g = dy * weight
    d_rstd = (g * xm).sum(-1, keepdims=True)
    d_var = d_rstd * -0.5 * (var + eps) ** -1.5
    d_xm = g * rstd + d_var * 2 * xm / d
    d_mu = -d_xm.sum(-1, keepdims=True) + d_var * (-2 * xm.sum(-1, keepdims=True) / d)
    dx = d_xm + d_mu / d
    axes = tuple(range(x.ndim - 1))
    return {"x": dx, "weight": (dy * x_hat).sum(axes), "bias": dy.sum(axes)}


def ln_backward_einsum(dy, x, weight, eps):
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(x2.shape)
    d = x2.shape[1]
    mu = np.einsum("nd->n", x2) / d
    xm = x2 - mu[:, None]
    rstd = 1 / np.sqrt(np.einsum("nd,nd->n", xm, xm) / d + eps)
    x_hat = xm * rstd[:, None]
    g = dy2 * weight
    dx = rstd[:, None] * (g - np.einsum("nd->n", g)[:, None] / d
                          - x_hat * np.einsum("nd,nd->n", g, x_hat)[:, None] / d)
    return {"x": dx.reshape(x.shape), "weight": np.einsum("nd,nd->d", dy2, x_hat), "bias": np.einsum("nd->d", dy2)}


def ln_backward_loop(dy, x, weight, eps):
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, x.shape[-1])
    dx, dw, db = np.zeros_like(x2), np.zeros(x.shape[-1]), np.zeros(x.shape[-1])
    for r in range(len(x2)):
        row, d_row = x2[r], dy2[r]
        mu = sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        rstd = 1 / np.sqrt(var + eps)
        x_hat = (row - mu) * rstd
        g = d_row * weight
        dx[r] = rstd * (g - g.mean() - x_hat * np.mean(g * x_hat))
        dw += d_row * x_hat
        db += d_row
    return {"x": dx.reshape(x.shape), "weight": dw, "bias": db}


def ln_backward_float32(dy, x, weight, eps):
    out = ln_backward(dy.astype(np.float32), x.astype(np.float32), weight.astype(np.float32), np.float32(eps))
    return {k: v.astype(np.float64) for k, v in out.items()}


def ln_forward_one_pass(x, weight, bias, eps):
    mu = x.mean(-1, keepdims=True)
    var = (x * x).mean(-1, keepdims=True) - mu * mu
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def ln_backward_rstd_squared(dy, x, weight, eps):
    out = ln_backward(dy, x, weight, eps)
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return {**out, "x": out["x"] * rstd}


def ln_backward_transposed_weight(dy, x, weight, eps):
    return ln_backward(dy, x, weight[::-1].copy(), eps) | {"weight": ln_backward(dy, x, weight, eps)["weight"]}


def ln_backward_noisy(dy, x, weight, eps):
    out = ln_backward(dy, x, weight, eps)
    return {**out, "x": out["x"] + 1e-3 * np.random.default_rng(0).standard_normal(x.shape)}


def ln_backward_no_mean(dy, x, weight, eps):
    """The classic slip: the -mean(g) term forgotten."""
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    x_hat = (x - mu) * rstd
    g = dy * weight
    axes = tuple(range(x.ndim - 1))
    return {"x": rstd * (g - x_hat * (g * x_hat).mean(-1, keepdims=True)), "weight": (dy * x_hat).sum(axes),
            "bias": dy.sum(axes)}


def ln_backward_scales_dy_in_place(dy, x, weight, eps):
    out = ln_backward(dy, x, weight, eps)
    dy *= weight                                 # g = dy; g *= weight
    return out


def ln_backward_dweight_per_row(dy, x, weight, eps):
    out = ln_backward(dy, x, weight, eps)
    mu = x.mean(-1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return {**out, "weight": dy * x_hat}


def ln_backward_dbias_flat(dy, x, weight, eps):
    return {**ln_backward(dy, x, weight, eps), "bias": dy.sum()}


# -- RMSNorm and pRMSNorm ----------------------------------------------------------------------------------
def rms_forward(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def prms_backward(dy, x, weight, eps, k):
    rstd = 1 / np.sqrt((x[..., :k] ** 2).mean(-1, keepdims=True) + eps)
    x_hat = x * rstd
    g = dy * weight
    dx = rstd * g
    dx[..., :k] -= rstd * x_hat[..., :k] * (g * x_hat).sum(-1, keepdims=True) / k
    return {"x": dx, "weight": (dy * x_hat).reshape(-1, x.shape[-1]).sum(0)}


def rms_backward(dy, x, weight, eps):
    return prms_backward(dy, x, weight, eps, x.shape[-1])


def rms_backward_with_layernorm_mean(dy, x, weight, eps):
    out = rms_backward(dy, x, weight, eps)
    rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return {**out, "x": out["x"] - rstd * (dy * weight).mean(-1, keepdims=True)}


def prms_backward_over_all(dy, x, weight, eps, k):
    rstd = 1 / np.sqrt((x[..., :k] ** 2).mean(-1, keepdims=True) + eps)
    x_hat = x * rstd
    g = dy * weight
    dx = rstd * (g - x_hat * (g * x_hat).sum(-1, keepdims=True) / k)
    return {"x": dx, "weight": (dy * x_hat).reshape(-1, x.shape[-1]).sum(0)}


# -- BatchNorm and GroupNorm -------------------------------------------------------------------------------
def _channel(a, shape):
    return a.reshape((1, -1) + (1,) * (len(shape) - 2))


def bn_forward(x, weight, bias, eps):
    axes = (0, *range(2, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _channel(weight, x.shape) + _channel(bias, x.shape)


def bn_backward(dy, x, weight, eps):
    axes = (0, *range(2, x.ndim))
    mu = x.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axes, keepdims=True) + eps)
    x_hat = (x - mu) * rstd
    g = dy * _channel(weight, x.shape)
    dx = rstd * (g - g.mean(axes, keepdims=True) - x_hat * (g * x_hat).mean(axes, keepdims=True))
    return {"x": dx, "weight": (dy * x_hat).sum(axes), "bias": dy.sum(axes)}


def bn_forward_unbiased(x, weight, bias, eps):
    axes = (0, *range(2, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True, ddof=1)
    return (x - mu) / np.sqrt(var + eps) * _channel(weight, x.shape) + _channel(bias, x.shape)


def bn_forward_per_example(x, weight, bias, eps):
    axes = tuple(range(1, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _channel(weight, x.shape) + _channel(bias, x.shape)


def bn_backward_dweight_over_batch_only(dy, x, weight, eps):
    out = bn_backward(dy, x, weight, eps)
    axes = (0, *range(2, x.ndim))
    x_hat = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return {**out, "weight": (dy * x_hat).sum(0)} if x.ndim > 2 else out


def gn_backward(dy, x, weight, num_groups, eps):
    N, C = x.shape[:2]
    xg = x.reshape(N, num_groups, -1)
    mu = xg.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(xg.var(-1, keepdims=True) + eps)
    x_hat = ((xg - mu) * rstd).reshape(x.shape)
    g = (dy * _channel(weight, x.shape)).reshape(N, num_groups, -1)
    xh = x_hat.reshape(g.shape)
    dx = rstd * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    axes = (0, *range(2, x.ndim))
    return {"x": dx.reshape(x.shape), "weight": (dy * x_hat).sum(axes), "bias": dy.sum(axes)}


def gn_backward_instance(dy, x, weight, num_groups, eps):
    return gn_backward(dy, x, weight, x.shape[1], eps)


def bn_forward_one_pass(x, weight, bias, eps):
    axes = (0, *range(2, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = (x * x).mean(axes, keepdims=True) - mu * mu
    return (x - mu) / np.sqrt(var + eps) * _channel(weight, x.shape) + _channel(bias, x.shape)
