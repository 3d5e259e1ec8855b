"""Inputs a user really passes that used to slip past the checks (each a regression test).

Both backends: switching a layer's backend, 0-d input to the functional API, masked arrays,
read-only ``out=``, and the reference RMSNorm backward where rstd^2 overflows.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from layer_helpers import clear_message

import scratchnorm as sn


def functions(backend):
    return sn if backend == "numpy" else importlib.import_module("scratchnorm.fast")


def test_switching_backend_between_forward_and_backward_names_backend(backend, rng):
    other = "numpy" if backend == "numba" else "numba"
    layer = sn.LayerNorm(6, backend=backend)
    x = rng.standard_normal((3, 6))
    layer.forward(x)
    layer.backend = other
    with pytest.raises(RuntimeError) as err:
        layer.backward(x)
    msg = clear_message(err.value)
    assert "backend" in msg and repr(backend) in msg
    layer.backend = backend                     # back on the forward's backend: it works
    assert layer.backward(x).shape == x.shape
    layer.backend = other                       # or after a new forward on the other one
    layer.forward(x)
    assert layer.backward(x).shape == x.shape


@pytest.mark.parametrize("bad", ["jax", "Numpy", None, 3])
def test_an_unknown_backend_is_refused_at_assignment(bad):
    layer = sn.RMSNorm(4)
    with pytest.raises(ValueError) as err:
        layer.backend = bad
    assert "backend" in clear_message(err.value)
    assert layer.backend == "numba"


@pytest.mark.parametrize("x", [np.float64(2.0), 3.0, np.array(1.5)])
@pytest.mark.parametrize("call", [
    lambda f, x: f.layer_norm_forward(x),
    lambda f, x: f.rms_norm_forward(x),
    lambda f, x: f.group_rms_norm_forward(x, num_groups=1),
])
def test_a_0d_input_to_a_row_wise_function_names_x(backend, call, x):
    with pytest.raises(ValueError) as err:
        call(functions(backend), x)
    assert clear_message(err.value).startswith("x:")


def test_a_masked_array_is_refused_with_the_fix(backend, rng):
    x = np.ma.masked_array(rng.standard_normal((2, 4)), mask=[[0, 0, 1, 0], [0, 0, 0, 0]])
    x.data[0, 2] = 1e30                          # the garbage the mask hides
    for call in (lambda: sn.LayerNorm(4, backend=backend).forward(x),
                 lambda: functions(backend).rms_norm_forward(x)):
        with pytest.raises(TypeError) as err:
            call()
        msg = clear_message(err.value)
        assert msg.startswith("x:") and "np.ma.filled" in msg and "1 masked" in msg


def test_a_read_only_out_is_named(backend, rng):
    x = rng.standard_normal((3, 5))
    out = np.empty_like(x)
    out.flags.writeable = False
    with pytest.raises(ValueError) as err:
        functions(backend).layer_norm_forward(x, out=out)
    assert clear_message(err.value).startswith("out:")
    _, cache = functions(backend).rms_norm_forward(x)
    with pytest.raises(ValueError) as err:
        functions(backend).rms_norm_backward(x, cache, dx_out=out)
    assert clear_message(err.value).startswith("dx_out:")


@pytest.mark.parametrize("eps_mode", ["inside", "outside", "clamp"])
def test_rms_norm_backward_where_rstd_squared_overflows(eps_mode, rng):
    """mean(x^2) + eps < 1e-308 (eps = 0 in the functional API): rstd > 1e154, rstd^2 is inf.
    The reference's dx is finite (it used to overflow) and agrees with the kernel's."""
    fast = importlib.import_module("scratchnorm.fast")
    x = np.full((3, 8), 1e-160) * np.arange(1, 4)[:, None]
    x[:, ::2] *= -1.0
    dy = rng.standard_normal(x.shape)
    got = {}
    for name, f in (("numpy", sn), ("numba", fast)):
        _, cache = f.rms_norm_forward(x, eps=0.0, eps_mode=eps_mode)
        with np.errstate(over="raise", invalid="raise"):
            got[name] = f.rms_norm_backward(dy, cache)["x"]
        assert np.all(np.isfinite(got[name])), name
    np.testing.assert_allclose(got["numpy"], got["numba"], rtol=1e-12)
