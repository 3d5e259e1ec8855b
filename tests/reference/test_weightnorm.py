"""WeightNormLinear: W = g * v / ||v|| per output unit, and its hand-derived backward.

The reference builds W with np.linalg.norm and applies it with np.einsum; the
library uses its own row norms and linear_forward.
"""
from __future__ import annotations

import numpy as np
import pytest
from layer_helpers import assert_cache_not_aliased, assert_one_rounding, clear_message, randomized

import scratchnorm as sn


def ref_weight(v, g):
    return np.asarray(g, np.float64)[:, None] * v / np.linalg.norm(v, axis=1, keepdims=True)


def ref_weight_norm_linear(x, layer):
    W = ref_weight(layer.params["weight_v"], layer.params["weight_g"])
    return np.einsum("...i,oi->...o", np.asarray(x, np.float64), W) + layer.params.get("bias", 0.0)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5), (2, 2, 3, 5)])
def test_forward_matches_independent_formula(shape, bias, rng):
    layer = randomized(sn.WeightNormLinear(5, 3, bias=bias, backend="numpy"), rng)
    x = rng.standard_normal(shape)
    y = layer.forward(x)
    assert y.shape == shape[:-1] + (3,) and y.dtype == x.dtype
    np.testing.assert_allclose(y, ref_weight_norm_linear(x, layer), rtol=1e-12, atol=1e-12)


def test_it_starts_as_the_linear_layer_with_the_same_seed(rng):
    wn, lin = sn.WeightNormLinear(6, 4, seed=3, backend="numpy"), sn.Linear(6, 4, seed=3, backend="numpy")
    row_norms = np.linalg.norm(lin.params["weight"], axis=1)
    np.testing.assert_allclose(wn.params["weight_g"], row_norms, rtol=1e-15)
    x = rng.standard_normal((5, 6))
    np.testing.assert_allclose(wn.forward(x), lin.forward(x), rtol=1e-13, atol=1e-15)
    assert set(wn.params) == {"weight_v", "weight_g", "bias"}
    assert wn.params["weight_v"].shape == (4, 6) and wn.params["weight_g"].shape == (4,)


# -- backward -------------------------------------------------------------------------
def test_dv_is_orthogonal_to_v_so_a_step_never_shrinks_it(rng):
    layer = randomized(sn.WeightNormLinear(7, 4, backend="numpy"), rng)
    x = rng.standard_normal((6, 7))
    layer.forward(x)
    layer.backward(rng.standard_normal((6, 4)))
    v, dv = layer.params["weight_v"], layer.grads["weight_v"]
    cos = (v * dv).sum(1) / (np.linalg.norm(v, axis=1) * np.linalg.norm(dv, axis=1))
    assert np.all(np.linalg.norm(dv, axis=1) > 1e-3)        # not orthogonal by being zero
    assert np.abs(cos).max() < 1e-14
    lr = 0.3
    sq_norm = lambda a: (a * a).sum(1)  # noqa: E731
    np.testing.assert_allclose(sq_norm(v - lr * dv), sq_norm(v) + lr**2 * sq_norm(dv), rtol=1e-13)


def test_scaling_a_row_of_v_changes_nothing_but_the_size_of_its_gradient(rng):
    layer = randomized(sn.WeightNormLinear(5, 3, backend="numpy"), rng)
    x, dy = rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    y = layer.forward(x)
    layer.backward(dy)
    before = {k: v.copy() for k, v in layer.grads.items()}
    delta = 7.5
    v = layer.params["weight_v"].copy()
    v[1] *= delta
    layer.params["weight_v"] = v
    np.testing.assert_allclose(layer.forward(x), y, rtol=1e-13, atol=1e-14)
    layer.backward(dy)
    np.testing.assert_allclose(layer.grads["weight_v"][1], before["weight_v"][1] / delta, rtol=1e-12)
    np.testing.assert_allclose(layer.grads["weight_v"][[0, 2]], before["weight_v"][[0, 2]], rtol=1e-12)
    np.testing.assert_allclose(layer.grads["weight_g"], before["weight_g"], rtol=1e-12)


def test_reparameterization_pair_passes_gradcheck(rng):
    v, g = rng.standard_normal((4, 6)), rng.standard_normal(4)

    def forward(v, g):                      # gradcheck's "x" is v here
        return sn.weight_norm_forward(v, g)

    def backward(dW, cache):
        grads = sn.weight_norm_backward(dW, cache)
        return {"x": grads["v"], "g": grads["g"]}

    report = sn.gradcheck((forward, backward), v, params={"g": g})
    assert report.ok, str(report)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 5)])
def test_functional_pair_passes_gradcheck(shape, rng):
    params = {"weight_v": rng.standard_normal((4, 5)), "weight_g": rng.standard_normal(4),
              "bias": rng.standard_normal(4)}
    report = sn.gradcheck((sn.weight_norm_linear_forward, sn.weight_norm_linear_backward),
                          rng.standard_normal(shape), params=params)
    assert report.ok, str(report)


# -- dtypes and layouts ------------------------------------------------------------------
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2.5e-7), (np.float16, 1e-3)])
def test_low_precision_against_float64(dtype, rtol, rng):
    layer = randomized(sn.WeightNormLinear(8, 4, backend="numpy"), rng)
    x = rng.standard_normal((6, 8)).astype(dtype)
    dy = rng.standard_normal((6, 4)).astype(dtype)
    assert_one_rounding(layer, x, dy, ref_weight_norm_linear(x, layer), rtol)


def test_float32_parameters_give_float32_grads(rng):
    layer = sn.WeightNormLinear(5, 3, dtype=np.float32, backend="numpy")
    y = layer.forward(rng.standard_normal((4, 5)))
    assert y.dtype == np.float64
    layer.backward(rng.standard_normal((4, 3)))
    assert {g.dtype for g in layer.grads.values()} == {np.dtype(np.float32)}


def test_non_contiguous_inputs(rng):
    layer = randomized(sn.WeightNormLinear(5, 3, backend="numpy"), rng)
    big = rng.standard_normal((8, 10))
    for x in (big[::2, ::2], np.asfortranarray(rng.standard_normal((4, 5))), big[::-1, 5:]):
        assert not x.flags.c_contiguous
        dy = rng.standard_normal((x.shape[0], 3))
        np.testing.assert_allclose(layer.forward(x), ref_weight_norm_linear(x, layer), rtol=1e-12, atol=1e-12)
        dx, grads = layer.backward(dy), dict(layer.grads)
        layer.forward(np.ascontiguousarray(x))
        np.testing.assert_allclose(dx, layer.backward(dy), rtol=1e-13, atol=1e-13)
        for k in grads:
            np.testing.assert_allclose(grads[k], layer.grads[k], rtol=1e-13, atol=1e-13)


def test_output_is_not_an_alias_of_the_cache(rng):
    layer = randomized(sn.WeightNormLinear(5, 3, backend="numpy"), rng)
    assert_cache_not_aliased(layer, rng.standard_normal((4, 5)), rng.standard_normal((4, 3)))


# -- errors ----------------------------------------------------------------------------
@pytest.mark.parametrize("x,pattern", [
    (np.ones((4, 6)), "in_features=5"),
    (np.float64(1.0), r"\(\.\.\., 5\)"),
    (np.ones((0, 5)), "non-empty"),
])
def test_bad_input_is_a_clear_error(x, pattern):
    with pytest.raises(ValueError, match=pattern) as e:
        sn.WeightNormLinear(5, 3, backend="numpy").forward(x)
    clear_message(e.value)


def test_a_row_of_v_with_zero_norm_is_an_error_not_nan():
    layer = sn.WeightNormLinear(4, 3, backend="numpy")
    v = layer.params["weight_v"].copy()
    v[2] = 0.0
    layer.params["weight_v"] = v
    with pytest.raises(ValueError, match=r"weight_v: .*row\(s\) \[2\]") as e:
        layer.forward(np.ones((2, 4)))
    clear_message(e.value)


@pytest.mark.parametrize("kwargs,arg", [
    ({"in_features": 0}, "in_features"),
    ({"out_features": 2.5}, "out_features"),
    ({"bias": "yes"}, "bias"),
])
def test_bad_construction_fails_early(kwargs, arg):
    kwargs = {"in_features": 4, "out_features": 3, **kwargs}
    with pytest.raises((ValueError, TypeError)) as e:
        sn.WeightNormLinear(**kwargs)
    assert clear_message(e.value).startswith(arg + ":")


def test_functional_api_checks_its_arguments(rng):
    with pytest.raises(ValueError, match="weight_g: expected shape"):
        sn.weight_norm_forward(rng.standard_normal((3, 4)), np.ones(4))
    with pytest.raises(ValueError, match="weight_v: expected a 2-D array"):
        sn.weight_norm_forward(np.ones(4), np.ones(1))
