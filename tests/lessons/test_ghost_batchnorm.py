"""Lesson 25's GhostBatchNorm (lessons/_ghost_batchnorm.py): BatchNorm over consecutive groups of a batch, and
the three kinds of statistics it keeps for scoring (running, frozen, population)."""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn
from lessons._ghost_batchnorm import GhostBatchNorm, batch_norms

BACKENDS = ("numpy", "numba")


def feature_map(seed=0, shape=(8, 3, 2, 2)):
    """Channels of different scales and offsets, so that a wrong axis gives different statistics."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * rng.uniform(0.3, 4, (1, shape[1], 1, 1)) + rng.normal(0, 3, (1, shape[1], 1, 1))


def with_weights(layer, seed=1):
    rng = np.random.default_rng(seed)
    layer.params["weight"][...] = rng.uniform(0.5, 2.0, layer.num_features)
    layer.params["bias"][...] = rng.normal(0, 1, layer.num_features)
    return layer


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(8, 3, 2, 2), (8, 5)])
def test_without_a_ghost_it_is_batchnorm(backend, shape):
    x, dy = feature_map(0, shape), feature_map(2, shape)
    ghost = with_weights(GhostBatchNorm(shape[1], backend=backend))
    plain = with_weights(sn.BatchNorm(shape[1], backend=backend))
    np.testing.assert_allclose(ghost.forward(x), plain.forward(x), rtol=0, atol=1e-13)
    np.testing.assert_allclose(ghost.backward(dy), plain.backward(dy), rtol=0, atol=1e-13)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(ghost.grads[name], plain.grads[name], rtol=0, atol=1e-12)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(ghost.buffers[name], plain.buffers[name], rtol=0, atol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("g", [2, 4])
def test_each_group_is_normalized_alone(backend, g):
    """Per group, per channel: the output of a group of g is BatchNorm's of those g images alone, and the input
    gradient too (a group's backward sees only its own images)."""
    x, dy = feature_map(3), feature_map(4)
    ghost = with_weights(GhostBatchNorm(3, g, backend=backend))
    y, dx = ghost.forward(x), ghost.backward(dy)
    for start in range(0, 8, g):
        alone = with_weights(sn.BatchNorm(3, backend=backend))
        rows = slice(start, start + g)
        for c in range(3):
            np.testing.assert_allclose(y[rows, c], alone.forward(x[rows])[:, c], rtol=0, atol=1e-12)
            np.testing.assert_allclose(dx[rows, c], alone.backward(dy[rows])[:, c], rtol=0, atol=1e-12)


@pytest.mark.parametrize("g", [2, 4])
def test_gradient_check(g):
    report = sn.gradcheck(with_weights(GhostBatchNorm(3, g, backend="numpy")), feature_map(5))
    assert report.ok, str(report)


def test_the_statistics_it_keeps():
    """frozen: a training-mode forward leaves the running statistics alone; population: one forward sets them to
    the batch's mean and biased variance per channel; eval mode then normalizes with them."""
    x = feature_map(6)
    layer = GhostBatchNorm(3, 2)
    layer.stats = "frozen"
    layer.forward(x)
    np.testing.assert_array_equal(layer.buffers["running_mean"], np.zeros(3))
    np.testing.assert_array_equal(layer.buffers["running_var"], np.ones(3))
    layer.ghost, layer.stats = None, "population"
    layer.forward(x)
    for c in range(3):
        np.testing.assert_allclose(layer.buffers["running_mean"][c], x[:, c].mean(), rtol=1e-13)
        np.testing.assert_allclose(layer.buffers["running_var"][c], x[:, c].var(), rtol=1e-13)
    layer.eval()
    expected = (x - x.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(x.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(layer.forward(x), expected, rtol=0, atol=1e-12)


def test_batch_norms_finds_them_in_order():
    from scratchnorm import nn
    model = nn.Sequential(GhostBatchNorm(4), nn.ReLU(), nn.OverChannels(lambda c: GhostBatchNorm(c, 2), 4))
    found = batch_norms(model)
    assert [layer.ghost for layer in found] == [None, 2]
