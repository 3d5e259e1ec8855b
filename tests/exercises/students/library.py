"""A learner's own wrapper: the cache-contract functions of a students/ file, called through scratchnorm's
contract (forward(x, weight, bias, eps) -> y, backward(dy, x, weight, eps) -> grads) on inputs of any
number of axes. It moves axes and nothing else: the maths, and the shapes of dgamma and dbeta, are the file's
(a dgamma not summed at all, of x's shape, has its axes moved back like dx).

LayerNorm's rows are the leading axes flattened; BatchNorm's examples are N and the positions (the
course's spatial BatchNorm); GroupNorm gets (N, C, L) as (N, C, L, 1), and its (1, C, 1, 1) gradients
back as (C,)."""
from __future__ import annotations

import numpy as np


def _to_2d(name, a):
    if name == "layernorm":
        return a.reshape(-1, a.shape[-1])
    return np.moveaxis(a, 1, -1).reshape(-1, a.shape[1])          # batchnorm: (N * positions, C)


def _from_2d(name, a, shape):
    if name == "layernorm":
        return a.reshape(shape)
    moved = (shape[0], *shape[2:], shape[1])
    return np.moveaxis(a.reshape(moved), -1, 1)


def _gn(a):
    return a if a.ndim == 4 else a[..., None]


def _flat_param(a, C):
    a = np.asarray(a)
    return a.reshape(C) if a.shape == (1, C, 1, 1) else a


def as_library(module, name):
    """{"forward": f, "backward": g} in scratchnorm's contract, calling ``module``'s functions for ``name``."""
    if name == "groupnorm":
        def forward(x, weight, bias, num_groups, eps):
            C = x.shape[1]
            out, _ = module.spatial_groupnorm_forward(_gn(x), weight.reshape(1, C, 1, 1), bias.reshape(1, C, 1, 1),
                                                      num_groups, {"eps": eps})
            return out.reshape(x.shape)

        def backward(dy, x, weight, num_groups, eps):
            C = x.shape[1]
            _, cache = module.spatial_groupnorm_forward(_gn(x), weight.reshape(1, C, 1, 1), np.zeros((1, C, 1, 1)),
                                                        num_groups, {"eps": eps})
            dx, dgamma, dbeta = module.spatial_groupnorm_backward(_gn(dy), cache)
            return {"x": dx.reshape(x.shape), "weight": _flat_param(dgamma, C), "bias": _flat_param(dbeta, C)}
        return {"forward": forward, "backward": backward}

    fwd, bwd = getattr(module, f"{name}_forward"), getattr(module, f"{name}_backward")

    def forward(x, weight, bias, eps):
        out, _ = fwd(_to_2d(name, x), weight, bias, {"mode": "train", "eps": eps})
        return _from_2d(name, out, x.shape)

    def backward(dy, x, weight, eps):
        _, cache = fwd(_to_2d(name, x), weight, np.zeros_like(weight), {"mode": "train", "eps": eps})
        dx, dgamma, dbeta = bwd(_to_2d(name, dy), cache)
        back = lambda d: _from_2d(name, d, x.shape) if np.shape(d) == dx.shape else d   # noqa: E731 (not summed)
        return {"x": _from_2d(name, dx, x.shape), "weight": back(dgamma), "bias": back(dbeta)}
    return {"forward": forward, "backward": backward}
