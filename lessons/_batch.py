"""The measurements of lesson 07 (batch statistics): a fixed example in random batches, BatchNorm's
running statistics, and GroupNorm between InstanceNorm and LayerNorm. All on the NumPy backend."""
from __future__ import annotations

import numpy as np

from lessons._stats import channel_affine_residual, normalize_over, rms
from scratchnorm import BatchNorm, GroupNorm, LayerNorm, RMSNorm, batch_norm_forward

D = 16                       # features; GroupNorm sees them as (C, L) = (4, 4)
C_GN, L_GN = 4, 4
KW = dict(backend="numpy")


class Data:
    """Examples x ~ N(mean_j, std_j^2) per feature, and batches that hold one fixed example x0."""

    def __init__(self, rng):
        self.rng = rng
        self.mean = rng.uniform(-2, 2, D)
        self.std = rng.uniform(0.5, 2, D)
        self.x0 = self.sample(1)[0]

    def sample(self, n):
        return self.mean + self.std * self.rng.standard_normal((n, D))

    def batch_with_x0(self, size):
        xb = self.sample(size)
        where = self.rng.integers(size)
        xb[where] = self.x0
        return xb, where


def batch_dependence(data, sizes, repeats):
    """For each B: x0's BatchNorm outputs in `repeats` random batches, and the largest change of its
    LayerNorm, RMSNorm and GroupNorm outputs between batches."""
    others = {"LayerNorm": LayerNorm(D, **KW), "RMSNorm": RMSNorm(D, **KW), "GroupNorm": GroupNorm(2, C_GN, **KW)}
    bn_out, other_change = {}, {name: 0.0 for name in others}
    for B in sizes:
        ys, first = [], {}
        for _ in range(repeats):
            xb, i = data.batch_with_x0(B)
            ys.append(batch_norm_forward(xb)[0][i])                       # training mode: the batch's statistics
            for name, layer in others.items():
                inp = xb.reshape(B, C_GN, L_GN) if name == "GroupNorm" else xb
                y0 = layer.forward(inp).reshape(B, D)[i]
                first.setdefault(name, y0)
                other_change[name] = max(other_change[name], float(np.max(np.abs(y0 - first[name]))))
        bn_out[B] = np.array(ys)                                          # (repeats, D)
    return bn_out, other_change


def train_eval_gap(data, sizes, steps, test_batches):
    """Train BatchNorm's running statistics on `steps` batches of size B, then compare the training-mode
    output (batch statistics) with the eval-mode output (running statistics) on fresh batches."""
    gap = []
    for B in sizes:
        bn = BatchNorm(D, **KW)
        for _ in range(steps):
            bn.forward(data.sample(B))                                    # updates running_mean / running_var
        bn.eval()
        diffs = []
        for _ in range(test_batches):
            xb = data.sample(B)
            diffs.append(batch_norm_forward(xb, eps=bn.eps)[0] - bn.forward(xb))
        gap.append(rms(np.array(diffs)))
    return np.array(gap)


def groupnorm_spectrum(rng, n, C, L):
    """RMS difference of GroupNorm(G, C) (weight 1, bias 0) from the definitions of InstanceNorm
    (statistics per example and channel, over L) and of LayerNorm over (C, L) (per example, over C and L)."""
    x = rng.standard_normal((n, C, L)) * rng.uniform(0.5, 3, (1, C, 1)) + rng.uniform(-2, 2, (1, C, 1))
    inst, ln = normalize_over(x, 2), normalize_over(x, (1, 2))
    groups = [g for g in range(1, C + 1) if C % g == 0]
    to_in, to_ln = [], []
    for G in groups:
        y = GroupNorm(G, C, **KW).forward(x)
        to_in.append(rms(y - inst))
        to_ln.append(rms(y - ln))
    return x, np.array(groups), np.array(to_in), np.array(to_ln)


def groupnorm_one_group_affine(rng, x):
    """GroupNorm(1, C) with a per-channel affine against LayerNorm over (C, L) with a per-element affine."""
    n, C, L = x.shape
    gn, ln = GroupNorm(1, C, **KW), LayerNorm(C * L, **KW)
    gn.params["weight"], gn.params["bias"] = rng.uniform(0.5, 2, C), rng.normal(0, 1, C)
    y_gn = gn.forward(x)
    ln.params["weight"] = np.repeat(gn.params["weight"], L)           # the per-channel affine, spread out
    ln.params["bias"] = np.repeat(gn.params["bias"], L)
    same = rms(ln.forward(x.reshape(n, -1)).reshape(x.shape) - y_gn) / rms(y_gn)
    ln.params["weight"] = rng.uniform(0.5, 2, C * L)                  # a general per-element affine
    ln.params["bias"] = rng.normal(0, 1, C * L)
    y_ln = ln.forward(x.reshape(n, -1)).reshape(x.shape)
    # The closest per-channel affine to it, by least squares on x_hat (both layers share x_hat):
    x_hat = GroupNorm(1, C, affine=False, **KW).forward(x)
    return same, channel_affine_residual(x_hat, y_ln)
