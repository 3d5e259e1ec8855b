"""Constant rows far from zero: x_hat must be exactly 0, so y is exactly the bias.

A two-pass mean is one rounding off: for a row of 4.35e15, x - mean is a tiny
nonzero number, and rstd = 1/sqrt(eps) blows it up to +-1. The corrected mean
(layernorm.py) or a shift by one of the row's own values (the channel kernels)
makes it exact. Then LayerNorm's dx is rstd * (g - mean(g)): the x_hat terms vanish.
"""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn

# Magnitudes where the float64 sum of a row rounds; the seed picks mantissas.
MAGNITUDES = [float(m) * 10.0**e for e in (6, 9, 12, 15, 16) for m in (1.7, 4.35, 8.6)]


def constants(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(1.0, 10.0, n) * 10.0 ** rng.integers(5, 17, n)


@pytest.mark.parametrize("d", [5, 7, 33, 64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_layernorm_of_a_constant_row_is_exactly_the_bias(backend, d, dtype):
    layer = sn.LayerNorm(d, backend=backend, dtype=dtype)
    bias = np.linspace(-1, 1, d).astype(dtype)
    layer.params["bias"] = bias
    x = np.repeat(np.concatenate([constants(), MAGNITUDES])[:, None], d, axis=1).astype(dtype)
    y = layer.forward(x)
    assert np.array_equal(y, np.broadcast_to(bias, y.shape))


def test_a_strided_constant_row(backend):
    x = np.full((3, 128), 8.6e6)[:, ::2]                # (3, 64), not contiguous
    y = sn.LayerNorm(64, backend=backend).forward(x)
    assert np.array_equal(y, np.zeros_like(y))


def test_layernorm_dx_of_a_constant_row_is_rstd_times_centred_g(backend, rng):
    d, eps = 7, 1e-5
    x = np.repeat(np.concatenate([constants(), MAGNITUDES])[:, None], d, axis=1)
    w = rng.standard_normal(d)
    layer = sn.LayerNorm(d, eps=eps, backend=backend)
    layer.params["weight"] = w
    layer.forward(x)
    dy = rng.standard_normal(x.shape)
    g = dy * w
    want = (g - g.mean(axis=-1, keepdims=True)) / np.sqrt(eps)
    np.testing.assert_allclose(layer.backward(dy), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    np.testing.assert_array_equal(layer.grads["weight"], np.zeros(d))      # x_hat = 0


@pytest.mark.parametrize("spatial", [(5, 6), (2,)])
def test_groupnorm_of_a_constant_group_is_exactly_the_bias(backend, spatial):
    for c in constants(20, seed=1):
        x = np.full((3, 4) + spatial, c)
        x[0] += np.arange(x[0].size).reshape(x[0].shape)  # one sample that is not constant
        layer = sn.GroupNorm(2, 4, backend=backend)
        layer.params["bias"] = np.arange(4.0)
        y = layer.forward(x)
        want = np.broadcast_to(np.arange(4.0).reshape((1, 4) + (1,) * len(spatial)), y[1:].shape)
        assert np.array_equal(y[1:], want), c


@pytest.mark.parametrize("shape", [(5, 4, 3), (6, 4)])
def test_batchnorm_of_a_constant_channel_is_exactly_the_bias(backend, shape):
    for c in constants(20, seed=2):
        x = np.full(shape, c)
        x[:, 1] += np.arange(x[:, 1].size).reshape(x[:, 1].shape)     # channel 1 is not constant
        layer = sn.BatchNorm(4, backend=backend)
        layer.params["bias"] = np.arange(4.0)
        y = layer.forward(x)
        for ch in (0, 2, 3):
            assert np.all(y[:, ch] == ch), (c, ch)
