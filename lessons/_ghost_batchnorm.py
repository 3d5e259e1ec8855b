"""GhostBatchNorm: BatchNorm whose training statistics are taken over consecutive groups of a batch (lesson 25).

Ghost batches. ``GhostBatchNorm(C, ghost=g)`` trains like BatchNorm, except that a batch of N images is cut
into N / g consecutive groups of g, and each group is normalized with its own statistics: the statistics of a
batch of g, while SGD still steps once per batch of N. The groups are independent normalizations, so the
layer is BatchNorm itself applied to a view in which each (group, channel) pair is a channel of its own:

    x (N, C, *S)  ->  (N/g, g, C, *S)  ->  (g, N/g, C, *S)  ->  (g, (N/g) C, *S)

``batch_norm_forward`` without an affine on that view gives x_hat; the view's inverse brings x_hat back to
(N, C, *S), and the per-channel weight and bias follow. Backward runs the same way: dL/dx_hat = dy * weight
through the view, ``batch_norm_backward`` without an affine, the view's inverse.

The statistics it keeps (``stats``), for scoring a trained model three ways:
    "running"     training: the running mean and variance follow the groups' mean statistics (momentum 0.1),
                  as in BatchNorm; eval mode normalizes with them
    "frozen"      a forward in training mode that leaves them alone: each input normalized with the
                  statistics of its group of g (test batches of g)
    "population"  a forward in training mode sets them to this forward's mean and (biased) variance: with
                  ghost=None and the whole training set as the batch, each layer in turn takes the training
                  set's statistics, the weights fixed, the population statistics recomputed after training
                  ("PreciseBN", Wu & Johnson 2021, lessons/SOURCES.md)

A layer, not an experiment: lesson 25 builds its models and measures on its own page.
"""
from __future__ import annotations

import numpy as np

import scratchnorm as sn
from scratchnorm.backend import implementation


class GhostBatchNorm(sn.BatchNorm):
    """BatchNorm whose training statistics are taken over consecutive groups of ``ghost`` images (module
    docstring); ghost=None: over the whole batch, as BatchNorm."""

    def __init__(self, num_features, ghost=None, **kw):
        super().__init__(num_features, **kw)
        self.ghost, self.stats = ghost, "running"

    def _forward(self, x):
        if not self.training:
            return super()._forward(x)
        N, C, g = x.shape[0], x.shape[1], self.ghost or x.shape[0]
        spatial = x.shape[2:]
        x_hat, cache = implementation(self.backend, "batch_norm_forward")(_groups(x, g), eps=self.eps)  # (g, N/g C, *S)
        x_hat = _ungroup(x_hat, x.shape)                                                           # (N, C, *S)
        mean, var = cache["mean"], cache["var"]                                                    # (N/g C,)
        if N > g:                                                  # the groups' mean statistics, (C,)
            mean, var = mean.reshape(N // g, C).mean(axis=0), var.reshape(N // g, C).mean(axis=0)
        if self.stats == "running":
            sn.update_running_stats(self.buffers["running_mean"], self.buffers["running_var"], mean, var,
                                    cache["count"], self.momentum)
        elif self.stats == "population":
            self.buffers["running_mean"][...], self.buffers["running_var"][...] = mean, var
        shape = (1, C) + (1,) * len(spatial)
        y = x_hat * self.params["weight"].reshape(shape) + self.params["bias"].reshape(shape)
        return y, (cache, x_hat, g)

    def _backward(self, dy, cache):
        if not isinstance(cache[0], dict):                # eval mode: BatchNorm's own backward
            return super()._backward(dy, cache)
        inner, x_hat, g = cache
        C, spatial = dy.shape[1], dy.shape[2:]
        axes = (0,) + tuple(range(2, dy.ndim))
        d_hat = dy * self.params["weight"].reshape((1, C) + (1,) * len(spatial))                 # dL/dx_hat
        dx = implementation(self.backend, "batch_norm_backward")(_groups(d_hat, g), inner)["x"]
        return {"x": _ungroup(dx, dy.shape), "weight": np.sum(dy * x_hat, axis=axes), "bias": np.sum(dy, axis=axes)}


def _groups(x, g):
    """(N, C, *S) -> the view (g, N/g C, *S) in which each (group, channel) pair is a channel (module docstring);
    one group (g = N): x itself."""
    N = x.shape[0]
    if N == g:
        return x
    return np.ascontiguousarray(x.reshape(N // g, g, *x.shape[1:]).swapaxes(0, 1)).reshape(g, -1, *x.shape[2:])


def _ungroup(a, shape):
    """The inverse of ``_groups``: (g, N/g C, *S) -> (N, C, *S)."""
    g, N = a.shape[0], shape[0]
    if N == g:
        return a
    return a.reshape(g, N // g, *shape[1:]).swapaxes(0, 1).reshape(shape)


def batch_norms(model):
    """The GhostBatchNorm layers of ``model``, in the order the forward meets them."""
    found = []

    def walk(layer):
        if isinstance(layer, GhostBatchNorm):
            found.append(layer)
        for child in getattr(layer, "children", {}).values():
            walk(child)
    walk(model)
    return found
