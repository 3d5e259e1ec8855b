"""Inputs a user really passes that used to slip past the checks (each a regression test).

Both backends: switching a layer's backend, 0-d input to the functional API, masked arrays,
read-only ``out=``, the reference RMSNorm backward where rstd^2 overflows; the messages for a 0-d x to a
layer, a big-endian array and a gated norm without its gate; a backward given another operation's cache.
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


# -- the slow path's messages: a 0-d x to a layer, a big-endian array, a gated norm without its gate -----------
@pytest.mark.parametrize("x", [np.float64(1.0), np.array(1.0), 3.0])
@pytest.mark.parametrize("make,ok_shape", [
    (lambda b: sn.RMSNorm(4, backend=b), (4,)),
    (lambda b: sn.LayerNorm(4, backend=b), (4,)),
    (lambda b: sn.LayerNorm((2, 3), backend=b), (2, 3)),
])
def test_a_0d_input_to_a_layer_says_what_is_expected(backend, make, ok_shape, x):
    """It was told "build the layer with d=()", which the constructor rejects."""
    with pytest.raises(ValueError) as err:
        make(backend)(x)
    msg = clear_message(err.value)
    axes = "1 axis, the last of size 4" if len(ok_shape) == 1 else "2 axes, the last 2 of shape (2, 3)"
    assert msg.startswith("x:") and f"at least {axes}" in msg and "d=()" not in msg, msg
    assert f"one row: shape {ok_shape}" in msg, msg
    assert make(backend)(np.ones(ok_shape)).shape == ok_shape          # the fix works


@pytest.mark.parametrize("dtype", [">f8", ">f4"])
def test_a_big_endian_array_is_told_to_convert_its_byte_order(backend, dtype, rng):
    """It was told to cast to float32. Refused, not accepted: y has x's dtype, and a '>f8' y on the way
    out would be a surprise (dtypes.py); the fix keeps the values."""
    x = rng.standard_normal((3, 4)).astype(dtype)
    native = np.dtype(dtype).newbyteorder("=")
    f = functions(backend)
    for call in (lambda v: sn.RMSNorm(4, backend=backend)(v), lambda v: f.rms_norm_forward(v)[0],
                 lambda v: f.layer_norm_forward(v)[0]):
        with pytest.raises(TypeError) as err:
            call(x)
        msg = clear_message(err.value)
        assert msg.startswith("x:") and "byte order" in msg and "x.astype(x.dtype.newbyteorder('='))" in msg, msg
        assert f"x.astype(np.{native.name})" in msg and (native.name == "float32" or "float32" not in msg), msg
        fixed = x.astype(x.dtype.newbyteorder("="))
        assert fixed.dtype == native and np.array_equal(call(fixed), call(x.astype(native)))
    layer = sn.RMSNorm(4, backend=backend)
    layer(x.astype(native))
    with pytest.raises(TypeError) as err:                              # dy too, by its own name
        layer.backward(x)
    assert clear_message(err.value).startswith("dy:")


def test_a_gated_rmsnorm_called_without_its_gate_names_the_gate(backend, rng):
    """GatedRMSNorm(d)(x, None) was told about an object array."""
    x = rng.standard_normal((2, 4))
    for call, how in ((lambda: sn.GatedRMSNorm(4, backend=backend)(x, None), "layer(x, z)"),
                      (lambda: functions(backend).gated_rms_norm_forward(x, None), "gated_rms_norm_forward(x, z)")):
        with pytest.raises(TypeError) as err:
            call()
        msg = clear_message(err.value)
        assert msg.startswith("gate:") and "received None" in msg and how in msg and "object" not in msg, msg


# -- a cache from another operation, or from the other backend, passed to a backward ---------------------------
def _caches(f, rng):
    """forward name -> a cache of f's forward (f: scratchnorm or scratchnorm.fast)."""
    x, x4 = rng.standard_normal((3, 8)), rng.standard_normal((2, 4, 3))
    w, w4 = rng.standard_normal(8), rng.standard_normal(4)
    return {
        "layer_norm_forward": f.layer_norm_forward(x, w, w)[1],
        "rms_norm_forward": f.rms_norm_forward(x, w)[1],
        "rms_norm_forward (eps outside)": f.rms_norm_forward(x, w, eps_mode="outside")[1],
        "group_rms_norm_forward": f.group_rms_norm_forward(x, w, num_groups=2)[1],
        "add_rms_norm_forward": f.add_rms_norm_forward(x, x, w)[2],
        "gated_rms_norm_forward": f.gated_rms_norm_forward(x, x, w)[1],
        "dyt_forward": f.dyt_forward(x, 0.5, w, w)[1],
        "batch_norm_forward": f.batch_norm_forward(x4, w4, w4)[1],
        "batch_norm_eval_forward": f.batch_norm_eval_forward(x4, np.zeros(4), np.ones(4), w4, w4)[1],
        "group_norm_forward": f.group_norm_forward(x4, w4, w4, num_groups=2)[1],
    }


BACKWARDS = {   # backward -> (the forward whose cache it takes, a call with a cache)
    "layer_norm_backward": ("layer_norm_forward", lambda f, c: f.layer_norm_backward(np.ones((3, 8)), c)),
    "rms_norm_backward": ("rms_norm_forward", lambda f, c: f.rms_norm_backward(np.ones((3, 8)), c)),
    "group_rms_norm_backward": ("group_rms_norm_forward", lambda f, c: f.group_rms_norm_backward(np.ones((3, 8)), c)),
    "add_rms_norm_backward": ("add_rms_norm_forward",
                              lambda f, c: f.add_rms_norm_backward(np.ones((3, 8)), np.ones((3, 8)), c)),
    "gated_rms_norm_backward": ("gated_rms_norm_forward", lambda f, c: f.gated_rms_norm_backward(np.ones((3, 8)), c)),
    "dyt_backward": ("dyt_forward", lambda f, c: f.dyt_backward(np.ones((3, 8)), c)),
    "batch_norm_backward": ("batch_norm_forward", lambda f, c: f.batch_norm_backward(np.ones((2, 4, 3)), c)),
    "batch_norm_eval_backward": ("batch_norm_eval_forward",
                                 lambda f, c: f.batch_norm_eval_backward(np.ones((2, 4, 3)), c)),
    "group_norm_backward": ("group_norm_forward", lambda f, c: f.group_norm_backward(np.ones((2, 4, 3)), c)),
}


@pytest.mark.parametrize("name", BACKWARDS)
def test_a_backward_given_another_operations_cache_names_both(backend, name, rng):
    """It gave a bare KeyError ('x_hat', 'ms'), blamed "the same backend", or (LayerNorm's backward on an
    RMSNorm cache, which has the keys it reads) ran and returned wrong gradients."""
    f, prefix = functions(backend), "scratchnorm." if backend == "numpy" else "scratchnorm.fast."
    made_by, call = BACKWARDS[name]
    caches = _caches(f, rng)
    call(f, caches[made_by])                                           # its own cache: fine
    for other, cache in caches.items():
        other_fn = other.split(" ")[0]
        if other_fn == made_by:
            continue
        with pytest.raises(TypeError) as err:
            call(f, cache)
        msg = clear_message(err.value)
        assert msg.startswith(f"cache: expected the cache returned by {prefix}{made_by};"), msg
        assert f"the cache of {prefix}{other_fn}" in msg, msg          # which operation made it ...
        assert f"{prefix}{other_fn.replace('_forward', '_backward')}" in msg.split("Fix:")[1], msg  # ... its backward


@pytest.mark.parametrize("name", BACKWARDS)
def test_a_backward_given_the_other_backends_cache_says_so(backend, name, rng):
    f, g = functions(backend), functions("numba" if backend == "numpy" else "numpy")
    made_by, call = BACKWARDS[name]
    cache = _caches(g, rng)[made_by]
    with pytest.raises(TypeError) as err:
        call(f, cache)
    msg = clear_message(err.value)
    theirs = ("scratchnorm.fast." if backend == "numpy" else "scratchnorm.") + made_by
    assert f"the cache of {theirs}" in msg and "one backend" in msg, msg
    assert theirs.replace("_forward", "_backward") in msg.split("Fix:")[1], msg


@pytest.mark.parametrize("cache", [None, {}, {"x_hat": np.ones((3, 8))}])
def test_a_backward_given_no_cache_says_how_to_get_one(backend, cache):
    with pytest.raises(TypeError) as err:
        functions(backend).rms_norm_backward(np.ones((3, 8)), cache)
    msg = clear_message(err.value)
    assert msg.startswith("cache: expected the cache returned by") and "y, cache = " in msg, msg


@pytest.mark.parametrize("staged,made_by", [
    (sn.layer_norm_backward_staged, "rms_norm_forward"), (sn.rms_norm_backward_staged, "layer_norm_forward"),
    (sn.batch_norm_backward_staged, "group_norm_forward"), (sn.gated_rms_norm_backward_staged, "rms_norm_forward"),
])
def test_the_staged_backwards_check_the_cache_too(staged, made_by, rng):
    cache = _caches(sn, rng)[made_by]
    with pytest.raises(TypeError) as err:
        staged(np.ones((3, 8)), cache)
    msg = clear_message(err.value)
    assert f"the cache of scratchnorm.{made_by}" in msg and staged.__name__ in msg, msg


@pytest.mark.parametrize("name", BACKWARDS)
def test_a_cache_copied_into_a_dict_subclass_still_works(backend, name, rng):
    """An OrderedDict (or any dict) copy of a cache keeps its tag, and the backward takes it as before."""
    from collections import OrderedDict
    f = functions(backend)
    made_by, call = BACKWARDS[name]
    cache = _caches(f, rng)[made_by]
    want, got = call(f, cache), call(f, OrderedDict(cache))
    for key in want:
        assert np.asarray(got[key]).tobytes() == np.asarray(want[key]).tobytes(), key


@pytest.mark.parametrize("tag", ["mine", "", "scratchnorm."])
def test_a_cache_with_a_foreign_tag_is_named(backend, tag):
    with pytest.raises(TypeError) as err:
        functions(backend).rms_norm_backward(np.ones((3, 8)), {"made_by": tag})
    msg = clear_message(err.value)
    assert msg.startswith("cache: expected the cache returned by") and f"the cache of {tag}" in msg, msg


def test_the_variants_backward_refuses_the_plain_kernels_cache(rng):
    """Both kernels tag their caches "scratchnorm.fast.rms_norm_forward"; the variants' backward read keys the
    plain cache lacks (a KeyError)."""
    from scratchnorm import fast
    from scratchnorm.fast import variants
    x = rng.standard_normal((3, 8))
    for forward, backward in ((fast.rms_norm_forward, variants.rms_norm_backward),
                              (fast.layer_norm_forward, variants.layer_norm_backward)):
        with pytest.raises(TypeError) as err:
            backward(np.ones((3, 8)), forward(x)[1])
        msg = clear_message(err.value)
        assert msg.startswith("cache: expected a cache of these kernels' forward") and "which reads both" in msg
