"""Plain formulas for the row-wise family, in extended precision (np.longdouble).

These are written independently of the library: no shared code, the textbook
expressions, evaluated in 80-bit extended precision on x86 (64-bit mantissa),
so that they are a better reference than float64 for float64 inputs.
"""
from __future__ import annotations

import numpy as np

LD = np.longdouble


def case_max(a, case):
    """Each element's case maximum: max of ``a`` over the elements with the same ``case`` label (a row, a
    channel, a (sample, group) pair), broadcast back to ``a``'s shape."""
    flat, labels = np.asarray(a).ravel(), np.asarray(case).ravel()
    top = np.zeros(int(labels.max(initial=-1)) + 1, dtype=flat.dtype)
    np.maximum.at(top, labels, flat)
    return top[labels].reshape(np.shape(a))


def row_cases(shape):
    """Case labels for the row-wise family: every row (all leading axes) is one case."""
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    return np.broadcast_to(np.arange(rows).reshape(shape[:-1] + (1,)), shape)


def _rstd(ms, eps, mode):
    if mode == "inside":
        return 1 / np.sqrt(ms + LD(eps))
    if mode == "outside":
        return 1 / (np.sqrt(ms) + LD(eps))
    return 1 / np.sqrt(np.maximum(ms, LD(eps)))


def _drstd_dms(ms, r, eps, mode):
    if mode == "inside":
        return -r**3 / 2
    if mode == "outside":
        root = np.sqrt(ms)
        return np.where(root > 0, -r**2 / (2 * np.where(root > 0, root, 1)), 0)
    return np.where(ms > LD(eps), -r**3 / 2, 0)


def rms_norm(x, w, b, dy, *, eps, mode="inside", k=None):
    """y = x * rstd(mean(x[:k]^2)) * w + b and its gradients, in long double (see _pack)."""
    x, dy = x.astype(LD), dy.astype(LD)
    d = x.shape[-1]
    k = d if k is None else k
    w = np.ones(d, LD) if w is None else w.astype(LD)
    b = np.zeros(d, LD) if b is None else b.astype(LD)
    ms = np.mean(x[..., :k] ** 2, axis=-1, keepdims=True)
    r = _rstd(ms, eps, mode)
    x_hat = x * r
    y = x_hat * w + b
    g = dy * w
    dx = r * g
    dx[..., :k] += (2 / LD(k)) * np.sum(g * x, -1, keepdims=True) * _drstd_dms(ms, r, eps, mode) * x[..., :k]
    return _pack(y, dx, dy, x_hat, r * np.abs(g), np.abs(x_hat * w) + np.abs(b), case=row_cases(x.shape))


def layer_norm(x, w, b, dy, *, eps):
    """LayerNorm and its gradients, in long double (see _pack)."""
    x, dy = x.astype(LD), dy.astype(LD)
    d = x.shape[-1]
    w = np.ones(d, LD) if w is None else w.astype(LD)
    b = np.zeros(d, LD) if b is None else b.astype(LD)
    mu = np.mean(x, -1, keepdims=True)
    var = np.mean((x - mu) ** 2, -1, keepdims=True)
    r = 1 / np.sqrt(var + LD(eps))
    x_hat = (x - mu) * r
    g = dy * w
    dx = r * (g - np.mean(g, -1, keepdims=True) - x_hat * np.mean(g * x_hat, -1, keepdims=True))
    return _pack(x_hat * w + b, dx, dy, x_hat, r * np.abs(g), np.abs(x_hat * w) + np.abs(b),
                 case=row_cases(x.shape))


def _pack(y, dx, dy, x_hat, direct, terms_y=None, *, case):
    """The results, and the scales their errors are measured against, per case (``case`` labels each
    element with its row, channel or group: the set of values one set of statistics normalizes).

    For a sum over rows, the scale is the sum of the absolute values of its terms, where x_hat counts at
    least 1 (its natural unit: a constant row has x_hat = 0 exactly, but float64 can only get it to within
    eps * |mean| * rstd); the terms themselves are returned too (terms_weight, terms_bias), so that a test
    can weight each by its own case's conditioning. dx is measured against its case's largest direct term
    rstd * |g|: dx is a difference of terms of that size, and can be far smaller than them (d = 1). y
    likewise against its case's largest |x_hat * w| + |b| where given (x_hat * w and b can nearly cancel;
    the numba forward rounds each in float32), else against its case's max |y|."""
    lead = tuple(range(y.ndim - 1))
    extra = {} if terms_y is None else {"scale_y": case_max(np.maximum(np.abs(y), terms_y), case)}
    terms_weight, terms_bias = np.abs(dy) * (np.abs(x_hat) + 1), np.abs(dy)
    return {**extra, "y": y, "x": dx, "scale_x": case_max(np.maximum(direct, np.abs(dx)), case), "case": case,
            "feature_axis": -1,
            "weight": np.sum(dy * x_hat, axis=lead), "bias": np.sum(dy, axis=lead),
            "terms_weight": terms_weight, "terms_bias": terms_bias,
            "scale_weight": np.sum(terms_weight, axis=lead), "scale_bias": np.sum(terms_bias, axis=lead)}


# -- (N, C, *) inputs: BatchNorm and GroupNorm ------------------------------------------------
# Each is "normalize over some axes, then one weight and bias per channel". The results are
# moved to channels-last so that _pack's sums over the leading axes are the per-channel sums.

def _per_channel(v, ndim):
    """A (C,) vector as (1, C, 1, ...), in long double; ones/zeros are passed for None."""
    return v.astype(LD).reshape((1, -1) + (1,) * (ndim - 2))


def _channel_results(x_hat, rstd, w, b, dy, dx_hat_to_dx, case):
    """y = x_hat * w[c] + b[c], dx = dx_hat_to_dx(g) with g = dy * w[c], packed per channel; ``case``
    labels each element with the set of values its statistics come from (a channel, a (sample, group))."""
    C, nd = x_hat.shape[1], x_hat.ndim
    w = _per_channel(np.ones(C) if w is None else w, nd)
    b = _per_channel(np.zeros(C) if b is None else b, nd)
    g = dy * w
    dx = dx_hat_to_dx(g)
    last = [np.moveaxis(a, 1, -1) for a in (x_hat * w + b, dx, dy, x_hat, rstd * np.abs(g))]
    out = _pack(*last, case=np.moveaxis(case, 1, -1))
    for k in ("y", "x", "scale_x", "case", "terms_weight", "terms_bias"):
        out[k] = np.moveaxis(out[k], -1, 1)
    out["feature_axis"] = 1
    # y is measured against its case's max |y|, with x_hat counting at least 1 (as in _pack): when all
    # the values are constant or eps dominates the variance, x_hat * w can be ~0 everywhere
    # while float64's x - mean is only good to eps * |mean| * rstd (see cond in the tests).
    out["scale_y"] = case_max(np.maximum(np.abs(out["y"]), np.broadcast_to(np.abs(w), x_hat.shape)), case)
    return out


def channel_cases(shape):
    """Case labels for BatchNorm: every channel is one case."""
    return np.broadcast_to(np.arange(shape[1]).reshape((1, -1) + (1,) * (len(shape) - 2)), shape)


def group_cases(shape, num_groups):
    """Case labels for GroupNorm: every (sample, group) pair is one case."""
    N, C = shape[0], shape[1]
    labels = np.arange(N)[:, None] * num_groups + np.arange(C)[None, :] // (C // num_groups)
    return np.broadcast_to(labels.reshape((N, C) + (1,) * (len(shape) - 2)), shape)


def batch_norm(x, w, b, dy, *, eps):
    """BatchNorm in training mode (statistics of each channel over the batch and spatial axes,
    biased variance) and its gradients, in long double."""
    x, dy = x.astype(LD), dy.astype(LD)
    axes = (0, *range(2, x.ndim))
    mu = np.mean(x, axes, keepdims=True)
    r = 1 / np.sqrt(np.mean((x - mu) ** 2, axes, keepdims=True) + LD(eps))
    x_hat = (x - mu) * r
    r = np.broadcast_to(r, x.shape)

    def dx_of(g):
        return r * (g - np.mean(g, axes, keepdims=True) - x_hat * np.mean(g * x_hat, axes, keepdims=True))
    return _channel_results(x_hat, r, w, b, dy, dx_of, channel_cases(x.shape))


def batch_norm_eval(x, running_mean, running_var, w, b, dy, *, eps):
    """BatchNorm in eval mode (a fixed affine map per channel) and its gradients, in long double."""
    x, dy = x.astype(LD), dy.astype(LD)
    r = np.broadcast_to(1 / np.sqrt(_per_channel(running_var, x.ndim) + LD(eps)), x.shape)
    x_hat = (x - _per_channel(running_mean, x.ndim)) * r
    return _channel_results(x_hat, r, w, b, dy, lambda g: r * g, channel_cases(x.shape))


def group_norm(x, w, b, dy, *, num_groups, eps):
    """GroupNorm (statistics of each sample over each group of C / num_groups channels and
    their positions) and its gradients, in long double. num_groups = C is InstanceNorm."""
    x, dy = x.astype(LD), dy.astype(LD)
    grouped = (x.shape[0], num_groups, -1)
    xg = x.reshape(grouped)                                         # (N, G, m)
    mu = np.mean(xg, -1, keepdims=True)
    r = 1 / np.sqrt(np.mean((xg - mu) ** 2, -1, keepdims=True) + LD(eps))
    x_hat = ((xg - mu) * r).reshape(x.shape)
    r = np.broadcast_to(r, xg.shape).reshape(x.shape)

    def dx_of(g):
        g, xh = g.reshape(grouped), x_hat.reshape(grouped)
        return (r.reshape(grouped) * (g - np.mean(g, -1, keepdims=True)
                                      - xh * np.mean(g * xh, -1, keepdims=True))).reshape(x.shape)
    return _channel_results(x_hat, r, w, b, dy, dx_of, group_cases(x.shape, num_groups))


# -- gated RMSNorm (Mamba 2, Qwen3-Next) -------------------------------------------------------
def gated_rms_norm(x, z, w, dy, *, eps, norm_before_gate, num_groups=1):
    """y = RMSNorm(x * silu(z)) * w (gate first) or RMSNorm(x) * w * silu(z) (norm first), statistics per
    group of d / num_groups features, and the gradients of x, z and w, in long double."""
    x, z, dy = x.astype(LD), z.astype(LD), dy.astype(LD)
    d = x.shape[-1]
    w = np.ones(d, LD) if w is None else w.astype(LD)
    grouped = x.shape[:-1] + (num_groups, d // num_groups)
    sig = 1 / (1 + np.exp(-z))
    s, s_prime = z * sig, sig + z * sig * (1 - sig)
    u = x if norm_before_gate else x * s
    ug = u.reshape(grouped)
    r = 1 / np.sqrt(np.mean(ug * ug, -1, keepdims=True) + LD(eps))       # (..., G, 1)
    n_hat = (ug * r).reshape(x.shape)
    y = n_hat * w * s if norm_before_gate else n_hat * w
    dn = dy * s if norm_before_gate else dy
    gw = (dn * w).reshape(grouped)
    du = (r * gw - r ** 3 * ug * np.mean(gw * ug, -1, keepdims=True)).reshape(x.shape)
    dx = du if norm_before_gate else du * s
    dz = dy * n_hat * w * s_prime if norm_before_gate else du * x * s_prime
    # Per-element scales the errors are measured against: the terms each result is a sum or product of.
    # du is r (g - n_hat a): a difference, so its scale is r (|g| + |n_hat| mean|g n_hat|), per element.
    rb = np.broadcast_to(r, grouped).reshape(x.shape)
    mean_abs = np.broadcast_to(np.mean(np.abs(gw * ug) * r, -1, keepdims=True), grouped).reshape(x.shape)
    t = rb * (np.abs(gw.reshape(x.shape)) + np.abs(n_hat) * mean_abs)
    lead = tuple(range(x.ndim - 1))
    return {"y": y, "x": dx, "gate": dz, "weight": np.sum(dn * n_hat, axis=lead),
            "scale_y": np.abs(y), "scale_x": t if norm_before_gate else t * np.abs(s),
            "scale_gate": np.abs(dz) if norm_before_gate else t * np.abs(x * s_prime),
            "scale_weight": np.sum(np.abs(dn) * (np.abs(n_hat) + 1), axis=lead)}
