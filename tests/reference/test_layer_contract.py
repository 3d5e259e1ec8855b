"""The layer contract: params, grads, backward's rules, dtypes, and the errors for bad input."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from layer_helpers import clear_message

import scratchnorm as sn
from scratchnorm import fast

ROWWISE = [
    lambda b: sn.LayerNorm(8, backend=b),
    lambda b: sn.RMSNorm(8, backend=b),
    lambda b: sn.PartialRMSNorm(8, p=0.5, backend=b),
    lambda b: sn.RMSNormWithBias(8, backend=b),
    lambda b: sn.RMSNormLearnableEps(8, backend=b),
    lambda b: sn.GroupRMSNorm(8, 2, backend=b),
    lambda b: sn.GemmaRMSNorm(8, backend=b),
    lambda b: sn.DyT(8, backend=b),
]


@pytest.mark.parametrize("make", ROWWISE)
def test_params_and_grads_have_the_same_keys_and_shapes(make, backend, rng):
    layer = make(backend)
    x = rng.standard_normal((3, 8))
    layer.forward(x)
    dx = layer.backward(rng.standard_normal(x.shape))
    assert dx.shape == x.shape
    assert layer.grads.keys() == layer.params.keys()
    for k in layer.params:
        assert layer.grads[k].shape == layer.params[k].shape
        assert layer.grads[k].dtype == layer.params[k].dtype


@pytest.mark.parametrize("make", ROWWISE)
def test_backward_before_forward_raises(make, backend):
    with pytest.raises(RuntimeError, match="forward") as e:
        make(backend).backward(np.zeros((2, 8)))
    clear_message(e.value)


@pytest.mark.parametrize("make", ROWWISE)
def test_second_backward_gives_the_same_result_and_does_not_accumulate(make, backend, rng):
    layer = make(backend)
    x, dy = rng.standard_normal((3, 8)), rng.standard_normal((3, 8))
    layer.forward(x)
    dx1 = layer.backward(dy).copy()
    g1 = {k: v.copy() for k, v in layer.grads.items()}
    dx2 = layer.backward(dy)
    np.testing.assert_array_equal(dx1, dx2)
    for k in g1:
        np.testing.assert_array_equal(g1[k], layer.grads[k])


@pytest.mark.parametrize("make", ROWWISE)
def test_dy_of_wrong_shape_is_an_error(make, backend, rng):
    layer = make(backend)
    layer.forward(rng.standard_normal((3, 8)))
    with pytest.raises(ValueError, match=r"dy: expected shape \(3, 8\)") as e:
        layer.backward(np.zeros((3, 7)))
    clear_message(e.value)


@pytest.mark.parametrize("make", ROWWISE)
def test_wrong_last_axis_names_d_and_the_fix(make, backend):
    with pytest.raises(ValueError) as e:
        make(backend).forward(np.zeros((3, 5)))
    msg = clear_message(e.value)
    assert "(3, 5)" in msg and "8" in msg


@pytest.mark.parametrize("make", ROWWISE)
def test_integer_input_is_rejected_with_the_cast_as_fix(make, backend):
    with pytest.raises(TypeError, match=r"astype\(np.float32\)") as e:
        make(backend).forward(np.ones((2, 8), dtype=np.int64))
    clear_message(e.value)


def test_scalar_input_is_rejected(backend):
    with pytest.raises(ValueError) as e:
        sn.RMSNorm(1, backend=backend).forward(np.float64(1.0))
    clear_message(e.value)


def test_parameter_assignment_is_checked():
    layer = sn.RMSNorm(4, backend="numpy")
    with pytest.raises(ValueError, match=r"shape \(4,\)") as e:
        layer.params["weight"] = np.ones(5)
    clear_message(e.value)
    with pytest.raises(TypeError, match="float64") as e:
        layer.params["weight"] = np.ones(4, dtype=np.float32)
    clear_message(e.value)
    with pytest.raises(TypeError) as e:
        layer.params["weight"] = np.ones(4, dtype=np.int64)
    clear_message(e.value)
    with pytest.raises(KeyError):
        layer.params["bias"] = np.zeros(4)
    layer.params["weight"] = np.full(4, 2.0)            # the right shape and dtype is fine
    assert np.all(layer.forward(np.ones((1, 4))) == pytest.approx(2.0, rel=1e-5))


@pytest.mark.parametrize("factory,arg,pattern", [
    (lambda: sn.RMSNorm(0), "d", "integer >= 1"),
    (lambda: sn.RMSNorm(4.0), "d", "integer"),
    (lambda: sn.LayerNorm(4, eps=-1e-5), "eps", "eps"),
    (lambda: sn.RMSNorm(4, eps=0.0), "eps", "eps"),
    (lambda: sn.RMSNorm(4, eps=float("nan")), "eps", "eps"),
    (lambda: sn.RMSNorm(4, eps_mode="between"), "eps_mode", "inside"),
    (lambda: sn.PartialRMSNorm(8, p=0.0), "p", r"\(0, 1\]"),
    (lambda: sn.PartialRMSNorm(8, p=1.5), "p", r"\(0, 1\]"),
    (lambda: sn.GroupRMSNorm(8, 3), "num_groups", "divisor"),
    (lambda: sn.GroupRMSNorm(8, 0), "num_groups", ">= 1"),
    (lambda: sn.GroupRMSNorm(8, -2), "num_groups", ">= 1"),
    (lambda: sn.RMSNorm(4, backend="torch"), "backend", "numpy"),
    (lambda: sn.RMSNorm(4, dtype=np.int32), "dtype", "float"),
    (lambda: sn.LayerNorm(4, elementwise_affine="yes"), "elementwise_affine", "True or False"),
])
def test_bad_construction_fails_early_with_a_clear_message(factory, arg, pattern):
    with pytest.raises((ValueError, TypeError)) as e:
        factory()
    msg = clear_message(e.value)
    assert msg.startswith(arg + ":") and re.search(pattern, msg), msg


def test_functional_api_checks_its_arguments(rng):
    x = rng.standard_normal((2, 4))
    with pytest.raises(ValueError, match="weight: expected shape"):
        sn.rms_norm_forward(x, np.ones(3))
    with pytest.raises(ValueError, match="k: expected"):
        sn.rms_norm_forward(x, k=5)
    with pytest.raises(ValueError, match="eps: expected"):
        sn.layer_norm_forward(x, eps=-1.0)
    with pytest.raises(ValueError, match="out: expected"):
        sn.rms_norm_forward(x, out=np.empty((2, 4), np.float32))


def test_out_buffer_is_filled_and_returned(rng, backend):
    fwd = sn.rms_norm_forward if backend == "numpy" else fast.rms_norm_forward
    x = rng.standard_normal((3, 8)).astype(np.float32)
    out = np.empty_like(x)
    y, _ = fwd(x, eps=1e-6, out=out)
    assert y is out
    np.testing.assert_array_equal(out, fwd(x, eps=1e-6)[0])


@pytest.mark.parametrize("make", [lambda b: sn.LayerNorm(8, elementwise_affine=False, backend=b),
                                  lambda b: sn.SimpleRMSNorm(backend=b)] + ROWWISE)
def test_output_is_not_an_alias_of_the_cache(make, backend, rng):
    """Writing into y after forward must not corrupt what backward uses. (Writing into x does
    on the numba backend: its cache refers to x, as PyTorch's does; see fast/__init__.py.)"""
    layer = make(backend)
    x, dy = rng.standard_normal((2, 8)), rng.standard_normal((2, 8))
    y = layer.forward(x)
    want = layer.backward(dy).copy()
    grads = {k: v.copy() for k, v in layer.grads.items()}
    y[...] = 0.0
    np.testing.assert_array_equal(layer.backward(dy), want)
    for k in grads:
        np.testing.assert_array_equal(layer.grads[k], grads[k])


def test_float32_layer_parameters(rng):
    layer = sn.LayerNorm(8, dtype=np.float32, backend="numpy")
    x = rng.standard_normal((3, 8))
    y = layer.forward(x)
    assert y.dtype == np.float64       # the output follows x ...
    layer.backward(rng.standard_normal(x.shape))
    assert layer.grads["weight"].dtype == np.float32    # ... the grads follow the params


def test_importing_scratchnorm_does_not_import_numba():
    code = "import sys, scratchnorm; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_layer_can_be_deep_copied_and_pickled(rng):
    import copy
    import pickle

    layer = sn.RMSNormWithBias(4, backend="numpy")
    layer.params["weight"] = rng.standard_normal(4)
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert isinstance(clone.params, type(layer.params))
        np.testing.assert_array_equal(clone.params["weight"], layer.params["weight"])
        assert not np.shares_memory(clone.params["weight"], layer.params["weight"])
        with pytest.raises(ValueError):
            clone.params["weight"] = np.ones(5)          # the checks survive the copy
