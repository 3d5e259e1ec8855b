"""GroupNorm and InstanceNorm: statistics per sample over groups of channels.

The reference formulas loop over samples and groups and normalize each
block with np.mean / np.std; the library reshapes to (N, G, m) and calls
LayerNorm's functions.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from layer_helpers import assert_cache_not_aliased, assert_one_rounding, clear_message, randomized

import scratchnorm as sn


def ref_group_norm(x, G, w, b, eps):
    x = np.asarray(x, dtype=np.float64)
    C = x.shape[1]
    y = np.empty_like(x)
    for n in range(x.shape[0]):
        for g in range(G):
            block = x[n, g * C // G:(g + 1) * C // G]
            y[n, g * C // G:(g + 1) * C // G] = (block - block.mean()) / np.sqrt(block.std() ** 2 + eps)
    shape = (1, C) + (1,) * (x.ndim - 2)
    return y * np.broadcast_to(w, (C,)).reshape(shape) + np.broadcast_to(b, (C,)).reshape(shape)


def ref_instance_norm(x, w, b, eps):
    """Statistics over the spatial axes of each (n, c), with keepdims broadcasting."""
    x = np.asarray(x, dtype=np.float64)
    spatial = tuple(range(2, x.ndim))
    x_hat = (x - x.mean(spatial, keepdims=True)) / np.sqrt(x.var(spatial, keepdims=True) + eps)
    C = x.shape[1]
    shape = (1, C) + (1,) * (x.ndim - 2)
    return x_hat * np.broadcast_to(w, (C,)).reshape(shape) + np.broadcast_to(b, (C,)).reshape(shape)


def affine_of(layer):
    return layer.params.get("weight", 1.0), layer.params.get("bias", 0.0)


LAYERS = [   # (label, factory(backend), reference(x, layer), input shapes of rank 2, 3, 4 where allowed)
    ("GroupNorm(2, 6)", lambda b: sn.GroupNorm(2, 6, backend=b),
     lambda x, L: ref_group_norm(x, 2, *affine_of(L), L.eps), [(5, 6), (3, 6, 4), (2, 6, 3, 2)]),
    ("GroupNorm(3, 6, affine=False)", lambda b: sn.GroupNorm(3, 6, affine=False, backend=b),
     lambda x, L: ref_group_norm(x, 3, 1.0, 0.0, L.eps), [(5, 6), (3, 6, 4), (2, 6, 3, 2)]),
    ("GroupNorm(1, 6)", lambda b: sn.GroupNorm(1, 6, backend=b),
     lambda x, L: ref_group_norm(x, 1, *affine_of(L), L.eps), [(5, 6), (3, 6, 4), (2, 6, 3, 2)]),
    ("InstanceNorm(6)", lambda b: sn.InstanceNorm(6, backend=b),
     lambda x, L: ref_instance_norm(x, 1.0, 0.0, L.eps), [(3, 6, 4), (2, 6, 3, 2)]),
    ("InstanceNorm(6, affine=True)", lambda b: sn.InstanceNorm(6, affine=True, backend=b),
     lambda x, L: ref_instance_norm(x, *affine_of(L), L.eps), [(3, 6, 4), (2, 6, 3, 2)]),
]
IDS = [c[0] for c in LAYERS]


# -- forward ------------------------------------------------------------------------
@pytest.mark.parametrize("label,make,ref,shapes", LAYERS, ids=IDS)
def test_forward_matches_independent_formula(label, make, ref, shapes, backend, rng):
    layer = randomized(make(backend), rng)
    for shape in shapes:
        x = rng.standard_normal(shape) * 3 + 0.5
        y = layer.forward(x)
        assert y.shape == x.shape and y.dtype == x.dtype
        np.testing.assert_allclose(y, ref(x, layer), rtol=1e-12, atol=1e-12)


def test_instance_norm_is_group_norm_with_one_channel_per_group(backend, rng):
    gn = randomized(sn.GroupNorm(4, 4, backend=backend), rng)
    inorm = sn.InstanceNorm(4, affine=True, backend=backend)
    inorm.params.update(gn.params)
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    np.testing.assert_allclose(inorm.forward(x), gn.forward(x), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(inorm.backward(dy), gn.backward(dy), rtol=1e-14, atol=1e-14)
    for k in gn.grads:
        np.testing.assert_allclose(inorm.grads[k], gn.grads[k], rtol=1e-14)


def test_group_norm_with_one_group_is_layer_norm_with_a_per_channel_affine(backend, rng):
    """GroupNorm(1, C) normalizes each sample over (C, H, W), as LayerNorm over (C, H, W) does;
    its affine has C weights, where that LayerNorm has C * H * W (one per element)."""
    N, C, H, W = 3, 4, 2, 5
    gn = randomized(sn.GroupNorm(1, C, backend=backend), rng)
    ln = sn.LayerNorm(C * H * W, backend=backend)
    assert gn.params["weight"].shape == (C,) and ln.params["weight"].shape == (C * H * W,)
    ln.params["weight"] = np.repeat(gn.params["weight"], H * W)     # constant within each channel
    ln.params["bias"] = np.repeat(gn.params["bias"], H * W)
    x, dy = rng.standard_normal((N, C, H, W)), rng.standard_normal((N, C, H, W))
    np.testing.assert_allclose(gn.forward(x), ln.forward(x.reshape(N, -1)).reshape(x.shape), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(gn.backward(dy), ln.backward(dy.reshape(N, -1)).reshape(x.shape), rtol=1e-12,
                               atol=1e-12)
    # LayerNorm's per-element weights sum, channel by channel, to GroupNorm's per-channel one
    np.testing.assert_allclose(gn.grads["weight"], ln.grads["weight"].reshape(C, H * W).sum(1), rtol=1e-12)


def test_a_sample_does_not_depend_on_its_batch_mates(backend, rng):
    """Unlike BatchNorm, changing the other samples changes neither y[0] nor dx[0]."""
    layer = randomized(sn.GroupNorm(2, 4, backend=backend), rng)
    x, dy = rng.standard_normal((3, 4, 2)), rng.standard_normal((3, 4, 2))
    y0 = layer.forward(x)[0].copy()
    dx0 = layer.backward(dy)[0].copy()
    x[1:] = rng.standard_normal((2, 4, 2)) * 10
    dy[1:] = rng.standard_normal((2, 4, 2))
    np.testing.assert_array_equal(layer.forward(x)[0], y0)
    np.testing.assert_array_equal(layer.backward(dy)[0], dx0)


# -- backward -------------------------------------------------------------------------
@pytest.mark.parametrize("shape,G", [((4, 6), 2), ((2, 6, 3), 3), ((2, 6, 2, 2), 6)])
def test_functional_pair_passes_gradcheck(shape, G, rng):
    x = rng.standard_normal(shape)
    params = {"weight": rng.standard_normal(6), "bias": rng.standard_normal(6)}
    report = sn.gradcheck((sn.group_norm_forward, sn.group_norm_backward), x, params=params,
                          kwargs={"num_groups": G})
    assert report.ok, str(report)


def test_dx_sums_to_zero_and_is_orthogonal_to_x_hat_per_group(backend, rng):
    layer = sn.GroupNorm(2, 6, eps=1e-12, affine=False, backend=backend)
    x = rng.standard_normal((3, 6, 4)) * 2 + 1
    x_hat = layer.forward(x).reshape(3, 2, -1)
    dx = layer.backward(rng.standard_normal(x.shape)).reshape(3, 2, -1)
    scale = np.abs(dx).max() * dx.shape[-1]
    assert np.abs(dx.sum(-1)).max() < 1e-13 * scale
    assert np.abs((dx * x_hat).sum(-1)).max() < 1e-12 * scale


def test_constant_group_gives_finite_output_and_gradients(backend, rng):
    layer = randomized(sn.GroupNorm(2, 4, backend=backend), rng)
    x = rng.standard_normal((2, 4, 3))
    x[1, 2:] = 4.0
    y = layer.forward(x)
    np.testing.assert_allclose(y[1, 2:], np.broadcast_to(layer.params["bias"][2:, None], (2, 3)), atol=1e-12)
    dx = layer.backward(rng.standard_normal(x.shape))
    assert np.all(np.isfinite(dx)) and all(np.all(np.isfinite(g)) for g in layer.grads.values())


# -- dtypes and layouts ------------------------------------------------------------------
@pytest.mark.parametrize("label,make,ref,shapes", LAYERS, ids=IDS)
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2.5e-7), (np.float16, 1e-3)])
def test_low_precision_against_float64(label, make, ref, shapes, dtype, rtol, backend, rng):
    layer = randomized(make(backend), rng)
    x = (rng.standard_normal(shapes[-1]) * 2 + 1).astype(dtype)
    assert_one_rounding(layer, x, rng.standard_normal(x.shape).astype(dtype), ref(x, layer), rtol)


@pytest.mark.parametrize("label,make,ref,shapes", LAYERS, ids=IDS)
def test_non_contiguous_inputs(label, make, ref, shapes, backend, rng):
    layer = randomized(make(backend), rng)
    contiguous = make(backend)
    contiguous.params.update(layer.params)
    big = rng.standard_normal((4, 12, 6))
    for x in (big[:, ::2], np.swapaxes(rng.standard_normal((3, 5, 6)), 1, 2), big[::-1, 6:, ::3]):
        assert not x.flags.c_contiguous
        dy = rng.standard_normal(x.shape)
        np.testing.assert_allclose(layer.forward(x), ref(x, layer), rtol=1e-12, atol=1e-12)
        contiguous.forward(np.ascontiguousarray(x))
        np.testing.assert_allclose(layer.backward(dy), contiguous.backward(dy), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("label,make,ref,shapes", LAYERS, ids=IDS)
def test_output_is_not_an_alias_of_the_cache(label, make, ref, shapes, backend, rng):
    assert_cache_not_aliased(make(backend), rng.standard_normal(shapes[0]), rng.standard_normal(shapes[0]))


def test_instance_norm_without_affine_has_no_parameters(rng):
    layer = sn.InstanceNorm(3, backend="numpy")
    assert dict(layer.params) == {}
    layer.forward(rng.standard_normal((2, 3, 4)))
    layer.backward(rng.standard_normal((2, 3, 4)))
    assert layer.grads == {}


# -- errors ----------------------------------------------------------------------------
@pytest.mark.parametrize("factory,arg,pattern", [
    (lambda: sn.GroupNorm(0, 4), "num_groups", ">= 1"),
    (lambda: sn.GroupNorm(-2, 4), "num_groups", ">= 1"),
    (lambda: sn.GroupNorm(3, 4), "num_groups", r"divisor of num_channels=4 \(one of \[1, 2, 4\]\)"),
    (lambda: sn.GroupNorm(2, 0), "num_channels", ">= 1"),
    (lambda: sn.GroupNorm(2, 4, eps=0.0), "eps", "> 0"),
    (lambda: sn.GroupNorm(2, 4, eps=-1e-5), "eps", "> 0"),
    (lambda: sn.GroupNorm(2, 4, affine="yes"), "affine", "True or False"),
    (lambda: sn.InstanceNorm(0), "num_features", ">= 1"),
    (lambda: sn.InstanceNorm(3, eps=-1.0), "eps", "> 0"),
])
def test_bad_construction_fails_early(factory, arg, pattern):
    with pytest.raises((ValueError, TypeError)) as e:
        factory()
    msg = clear_message(e.value)
    assert msg.startswith(arg + ":") and re.search(pattern, msg), msg


@pytest.mark.parametrize("make,x,pattern", [
    (lambda b: sn.GroupNorm(2, 4, backend=b), np.ones((3, 6, 2)), "num_channels=4"),
    (lambda b: sn.GroupNorm(2, 4, backend=b), np.ones(4), r"\(N, C\)"),
    (lambda b: sn.GroupNorm(2, 4, backend=b), np.ones((0, 4, 2)), "non-empty"),
    (lambda b: sn.GroupNorm(4, 4, backend=b), np.ones((3, 4)), "more than one value per group"),
    (lambda b: sn.InstanceNorm(4, backend=b), np.ones((3, 5, 2)), "num_features=4"),
    (lambda b: sn.InstanceNorm(4, backend=b), np.ones((3, 4)), "at least one spatial axis"),
    (lambda b: sn.InstanceNorm(4, backend=b), np.ones((3, 4, 1, 1)), "more than one spatial position"),
    (lambda b: sn.InstanceNorm(4, backend=b), np.ones((3, 4, 0)), "non-empty"),
])
def test_bad_input_is_a_clear_error(make, x, pattern, backend):
    with pytest.raises(ValueError, match=pattern) as e:
        make(backend).forward(x)
    clear_message(e.value)


def test_functional_api_checks_its_arguments(rng):
    x = rng.standard_normal((2, 6, 3))
    with pytest.raises(ValueError, match="num_groups: expected a divisor of C=6"):
        sn.group_norm_forward(x, num_groups=4)
    with pytest.raises(ValueError, match="bias: expected shape"):
        sn.group_norm_forward(x, np.ones(6), np.ones(3), num_groups=2)
    with pytest.raises(TypeError, match="astype"):
        sn.group_norm_forward(x.astype(np.int32), num_groups=2)
