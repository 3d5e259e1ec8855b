"""Gradient-check cases for BatchNorm, InstanceNorm, GroupNorm and WeightNormLinear.

``cases.py`` adds ``batch_cases()`` to the list that ``python -m scratchnorm.gradcheck``
and the tests check. The layout is (N, C, *), so a "zero row" of the last axis
is not what matters here: ``ConstantCase`` makes one whole normalized set
constant (a BatchNorm channel, a GroupNorm group, an InstanceNorm slice), where
var = 0 and rstd = 1/sqrt(eps) is largest.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import scratchnorm as sn

from .case import Case


@dataclass(frozen=True)
class ConstantCase(Case):
    """A Case whose input has x[constant] set to one value (a channel, a group, ...)."""

    constant: tuple = ()

    def build(self, backend: str, seed: int = 0):
        layer, x = super().build(backend, seed)
        x[self.constant] = 0.7
        return layer, x


def _batch_norm_eval(backend, track=True):
    """A BatchNorm in eval mode; with running statistics far from the initial 0 and 1."""
    layer = sn.BatchNorm(3, track_running_stats=track, backend=backend)
    if track:
        rng = np.random.default_rng(7)
        layer.buffers["running_mean"][...] = rng.standard_normal(3)
        layer.buffers["running_var"][...] = rng.uniform(0.3, 3.0, 3)
    return layer.eval()


def _instance_norm(backend):
    return sn.InstanceNorm(3, affine=True, backend=backend)


def _instance_norm_eval(backend):
    """An InstanceNorm with running statistics, in eval mode: BatchNorm's eval map per channel."""
    layer = sn.InstanceNorm(3, affine=True, track_running_stats=True, backend=backend)
    rng = np.random.default_rng(8)
    layer.buffers["running_mean"][...] = rng.standard_normal(3)
    layer.buffers["running_var"][...] = rng.uniform(0.3, 3.0, 3)
    return layer.eval()


def batch_cases() -> list[Case]:
    return [
        # BatchNorm, training mode (batch statistics; running stats restored by gradcheck)
        Case("BatchNorm(3) (N, C)", lambda b: sn.BatchNorm(3, backend=b), (5, 3)),
        Case("BatchNorm(3) (N, C, L)", lambda b: sn.BatchNorm(3, backend=b), (3, 3, 4)),
        Case("BatchNorm(3) (N, C, H, W)", lambda b: sn.BatchNorm(3, backend=b), (2, 3, 2, 3)),
        Case("BatchNorm(3) N=1, L=3", lambda b: sn.BatchNorm(3, backend=b), (1, 3, 3)),
        # M = 2 values per channel, the smallest batch training allows: x_hat is nearly
        # +-1 whatever x is, and a larger eps keeps the gradient above round-off.
        Case("BatchNorm(3, eps=0.5) M=2", lambda b: sn.BatchNorm(3, eps=0.5, backend=b), (2, 3)),
        Case("BatchNorm(3, momentum=None)", lambda b: sn.BatchNorm(3, momentum=None, backend=b), (4, 3)),
        Case("BatchNorm(3, affine=False)", lambda b: sn.BatchNorm(3, affine=False, backend=b), (4, 3, 2)),
        ConstantCase("BatchNorm(3) constant channel", lambda b: sn.BatchNorm(3, backend=b), (4, 3, 2),
                     constant=(slice(None), 1)),
        # BatchNorm, eval mode: a fixed affine map per channel
        Case("BatchNorm(3) eval", _batch_norm_eval, (4, 3, 2)),
        Case("BatchNorm(3, no tracking) eval", lambda b: _batch_norm_eval(b, track=False), (4, 3, 2)),
        # InstanceNorm = GroupNorm with one channel per group
        Case("InstanceNorm(3, affine) (N, C, L)", _instance_norm, (2, 3, 5)),
        Case("InstanceNorm(3, affine) 4-D", _instance_norm, (2, 3, 2, 3)),
        Case("InstanceNorm(3)", lambda b: sn.InstanceNorm(3, backend=b), (2, 3, 4)),
        Case("InstanceNorm(3, affine, tracking) eval", _instance_norm_eval, (2, 3, 4)),
        Case("InstanceNorm(3, affine, tracking) training", lambda b: sn.InstanceNorm(
            3, affine=True, track_running_stats=True, backend=b), (2, 3, 4)),
        Case("InstanceNorm(3, affine, spatial_dims=1) unbatched (C, L)", lambda b: sn.InstanceNorm(
            3, affine=True, spatial_dims=1, backend=b), (3, 5)),
        Case("InstanceNorm(3, affine, bias=False)", lambda b: sn.InstanceNorm(3, affine=True, bias=False, backend=b),
             (2, 3, 4)),
        Case("BatchNorm(3, bias=False)", lambda b: sn.BatchNorm(3, bias=False, backend=b), (4, 3, 2)),
        Case("GroupNorm(2, 4, bias=False)", lambda b: sn.GroupNorm(2, 4, bias=False, backend=b), (2, 4, 3)),
        ConstantCase("InstanceNorm(3, affine) constant slice", _instance_norm, (2, 3, 4), constant=(0, 2)),
        # GroupNorm
        Case("GroupNorm(2, 6) (N, C)", lambda b: sn.GroupNorm(2, 6, backend=b), (3, 6)),
        Case("GroupNorm(2, 4) (N, C, L)", lambda b: sn.GroupNorm(2, 4, backend=b), (2, 4, 3)),
        Case("GroupNorm(3, 6) 4-D", lambda b: sn.GroupNorm(3, 6, backend=b), (2, 6, 2, 2)),
        Case("GroupNorm(1, 4)", lambda b: sn.GroupNorm(1, 4, backend=b), (2, 4, 3)),
        Case("GroupNorm(2, 4, affine=False)", lambda b: sn.GroupNorm(2, 4, affine=False, backend=b),
             (2, 4, 3)),
        ConstantCase("GroupNorm(2, 4) constant group", lambda b: sn.GroupNorm(2, 4, backend=b), (2, 4, 3),
                     constant=(1, slice(2, 4))),
        # WeightNormLinear
        Case("WeightNormLinear(5, 4)", lambda b: sn.WeightNormLinear(5, 4, backend=b), (3, 5)),
        Case("WeightNormLinear(5, 4) 3-D", lambda b: sn.WeightNormLinear(5, 4, backend=b), (2, 3, 5)),
        Case("WeightNormLinear(5, 4, no bias)", lambda b: sn.WeightNormLinear(5, 4, bias=False, backend=b),
             (3, 5)),
    ]
