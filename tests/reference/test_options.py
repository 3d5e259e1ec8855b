"""The drop-in options (issue 28) without PyTorch, on both backends: what each must equal in the library's
own terms. (tests/compare/ checks them against PyTorch in `make test-compare`.)"""
from __future__ import annotations

import numpy as np
import pytest

import scratchnorm as sn

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def test_normalized_shape_is_one_row_of_the_flattened_axes(backend, rng):
    x, dy = rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 3, 5))
    for make in (sn.LayerNorm, sn.RMSNorm):
        wide, flat = make((3, 5), backend=backend), make(15, backend=backend)
        for name, v in wide.params.items():
            wide.params[name] = v + rng.standard_normal(v.shape)
            flat.params[name] = wide.params[name].reshape(15)
        np.testing.assert_array_equal(wide.forward(x), flat.forward(x.reshape(4, 15)).reshape(x.shape))
        np.testing.assert_array_equal(wide.backward(dy), flat.backward(dy.reshape(4, 15)).reshape(x.shape))
        for name in wide.params:
            np.testing.assert_array_equal(wide.grads[name], flat.grads[name].reshape(3, 5))


def test_eps_none_is_the_machine_epsilon_of_the_computation(backend, rng):
    x = 1e-4 * rng.standard_normal((3, 8))
    for dtype, eps in ((np.float64, np.finfo(np.float64).eps), (np.float32, np.finfo(np.float32).eps),
                       (BF16, np.finfo(np.float32).eps)):
        got = sn.RMSNorm(8, eps=None, backend=backend).forward(x.astype(dtype))
        want = sn.RMSNorm(8, eps=float(eps), backend=backend).forward(x.astype(dtype))
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_promote_changes_the_output_dtype_not_the_backward(backend, rng):
    x, dy = rng.standard_normal((4, 8)).astype(BF16), rng.standard_normal((4, 8)).astype(BF16)
    layers = [sn.RMSNorm(8, cast="llama", promote=p, backend=backend, dtype=np.float32) for p in (True, False)]
    for layer in layers:
        layer.params["weight"] = (1 + 0.1 * rng.standard_normal(8)).astype(np.float32)
    layers[1].params["weight"] = layers[0].params["weight"]
    ys = [layer.forward(x) for layer in layers]
    assert ys[0].dtype == np.float32 and ys[1].dtype == BF16
    dxs = [layer.backward(dy.astype(y.dtype)) for layer, y in zip(layers, ys)]    # the same values of dy
    assert dxs[0].dtype == dxs[1].dtype == BF16
    assert np.array_equal(dxs[0].astype(np.float32), dxs[1].astype(np.float32))


def test_gemma_without_a_weight_is_simple_rms_norm(backend, rng):
    x = rng.standard_normal((3, 8))
    np.testing.assert_array_equal(sn.GemmaRMSNorm(8, elementwise_affine=False, backend=backend).forward(x),
                                  sn.SimpleRMSNorm(backend=backend).forward(x))


def test_bias_false_is_a_bias_of_zero(backend, rng):
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    for make in (lambda **k: sn.BatchNorm(4, **k), lambda **k: sn.GroupNorm(2, 4, **k),
                 lambda **k: sn.InstanceNorm(4, affine=True, **k), lambda **k: sn.DyT(5, **k)):
        without, with_zero = make(bias=False, backend=backend), make(backend=backend)
        assert "bias" not in without.params and "bias" in with_zero.params
        without.params["weight"] = with_zero.params["weight"] = 1 + 0.1 * rng.standard_normal(
            with_zero.params["weight"].shape)
        np.testing.assert_array_equal(without.forward(x), with_zero.forward(x))
        np.testing.assert_array_equal(without.backward(dy), with_zero.backward(dy))


def test_instance_norm_momentum_none_keeps_the_buffers_and_untracked_has_none(backend, rng):
    layer = sn.InstanceNorm(3, momentum=None, track_running_stats=True, backend=backend)
    layer.forward(5 + rng.standard_normal((2, 3, 4)))
    assert np.array_equal(layer.buffers["running_mean"], np.zeros(3))      # PyTorch's None is 0 here
    assert np.array_equal(layer.buffers["running_var"], np.ones(3))
    assert sn.InstanceNorm(3, backend=backend).buffers == {}
    tracked = sn.InstanceNorm(3, track_running_stats=True, backend=backend).eval()
    x = rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(tracked.forward(x), x / np.sqrt(1 + 1e-5), rtol=1e-15)   # buffers 0 and 1
