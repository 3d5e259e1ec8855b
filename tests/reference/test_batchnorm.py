"""BatchNorm: batch statistics, running statistics, the two modes, both backward passes, errors.

The reference formulas here move the channel axis last and use np.mean / np.var
per column; the library sums over axes (0, 2, 3, ...) instead.
"""
from __future__ import annotations

import numpy as np
import pytest
from layer_helpers import assert_cache_not_aliased, assert_one_rounding, clear_message, randomized

import scratchnorm as sn

SHAPES = [(6, 3), (4, 3, 5), (2, 3, 4, 5)]          # ranks 2, 3 and 4


def columns(x):
    """(N, C, *) -> (M, C): one column per channel."""
    return np.moveaxis(np.asarray(x, dtype=np.float64), 1, -1).reshape(-1, x.shape[1])


def ref_batch_norm(x, mean, var, w, b, eps):
    """(x - mean) / sqrt(var + eps) * w + b, channel by channel, on the (M, C) view."""
    cols = (columns(x) - mean) / np.sqrt(var + eps) * w + b
    moved = cols.reshape(np.moveaxis(x, 1, -1).shape)
    return np.moveaxis(moved, -1, 1)


def ref_train(x, layer):
    w, b = layer.params.get("weight", 1.0), layer.params.get("bias", 0.0)
    return ref_batch_norm(x, columns(x).mean(0), columns(x).var(0), w, b, layer.eps)


# -- forward ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_training_forward_matches_independent_formula(shape, affine, backend, rng):
    layer = randomized(sn.BatchNorm(3, affine=affine, backend=backend), rng)
    x = rng.standard_normal(shape) * 2 + 0.5
    y = layer.forward(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_allclose(y, ref_train(x, layer), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_eval_forward_uses_running_statistics(shape, backend, rng):
    layer = randomized(sn.BatchNorm(3, backend=backend), rng)
    layer.buffers["running_mean"][...] = rng.standard_normal(3)
    layer.buffers["running_var"][...] = rng.uniform(0.5, 2.0, 3)
    layer.eval()
    x = rng.standard_normal(shape)
    want = ref_batch_norm(x, layer.buffers["running_mean"], layer.buffers["running_var"],
                          layer.params["weight"], layer.params["bias"], layer.eps)
    np.testing.assert_allclose(layer.forward(x), want, rtol=1e-12, atol=1e-12)


def test_without_tracking_both_modes_use_the_batch(backend, rng):
    layer = randomized(sn.BatchNorm(3, track_running_stats=False, backend=backend), rng)
    assert layer.buffers == {}
    x = rng.standard_normal((5, 3, 2))
    y_train = layer.forward(x)
    np.testing.assert_allclose(layer.eval().forward(x), y_train, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y_train, ref_train(x, layer), rtol=1e-12, atol=1e-12)


def test_nan_in_one_sample_spreads_over_its_channel_in_the_whole_batch(backend, rng):
    """The batch couples samples: one NaN poisons its channel's mean, so every sample's output
    in that channel is NaN; the other channels are untouched."""
    layer = randomized(sn.BatchNorm(3, backend=backend), rng)
    x = rng.standard_normal((4, 3))
    clean = layer.forward(x)
    x[2, 1] = np.nan
    y = layer.forward(x)
    assert np.isnan(y[:, 1]).all()
    np.testing.assert_array_equal(y[:, [0, 2]], clean[:, [0, 2]])


# -- running statistics ----------------------------------------------------------------
def test_running_stats_match_a_sequence_computed_by_hand():
    """Batches of one channel: [1, 3] (mean 2, unbiased var 2), [0, 4] (mean 2, unbiased var 8),
    [5, 5] (mean 5, var 0). From running_mean 0, running_var 1, with momentum 0.1:
      mean: 0.9*0 + 0.1*2 = 0.2;  0.9*0.2 + 0.1*2 = 0.38;  0.9*0.38 + 0.1*5 = 0.842
      var:  0.9*1 + 0.1*2 = 1.1;  0.9*1.1 + 0.1*8 = 1.79;  0.9*1.79 + 0.1*0 = 1.611
    """
    layer = sn.BatchNorm(1, backend="numpy")
    want = [(0.2, 1.1), (0.38, 1.79), (0.842, 1.611)]
    for batch, (mean, var) in zip(([1.0, 3.0], [0.0, 4.0], [5.0, 5.0]), want):
        layer.forward(np.array(batch)[:, None])
        np.testing.assert_allclose(layer.buffers["running_mean"], [mean], rtol=1e-14)
        np.testing.assert_allclose(layer.buffers["running_var"], [var], rtol=1e-14)
    assert layer.buffers["num_batches_tracked"] == 3


def test_momentum_none_is_the_plain_average_of_the_batches():
    """Same three batches: means 2, 2, 5 -> 3; unbiased variances 2, 8, 0 -> 10/3."""
    layer = sn.BatchNorm(1, momentum=None, backend="numpy")
    for batch in ([1.0, 3.0], [0.0, 4.0], [5.0, 5.0]):
        layer.forward(np.array(batch)[:, None])
    np.testing.assert_allclose(layer.buffers["running_mean"], [3.0], rtol=1e-14)
    np.testing.assert_allclose(layer.buffers["running_var"], [10.0 / 3.0], rtol=1e-14)


@pytest.mark.parametrize("momentum", [0.0, 0.1, 0.5, 1.0])
def test_running_stats_after_k_random_batches(momentum, backend, rng):
    layer = sn.BatchNorm(3, momentum=momentum, backend=backend)
    mean, var = np.zeros(3), np.ones(3)
    for _ in range(5):
        x = rng.standard_normal((4, 3, 3)) * rng.uniform(0.5, 3.0) + rng.standard_normal()
        layer.forward(x)
        mean = (1 - momentum) * mean + momentum * columns(x).mean(0)
        var = (1 - momentum) * var + momentum * columns(x).var(0, ddof=1)    # unbiased
        np.testing.assert_allclose(layer.buffers["running_mean"], mean, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(layer.buffers["running_var"], var, rtol=1e-12, atol=1e-15)


def test_running_stats_are_updated_in_place_and_keep_the_layer_dtype(rng):
    layer = sn.BatchNorm(3, dtype=np.float32, backend="numpy")
    rm, rv = layer.buffers["running_mean"], layer.buffers["running_var"]
    layer.forward(rng.standard_normal((4, 3)))
    assert layer.buffers["running_mean"] is rm and layer.buffers["running_var"] is rv
    assert rm.dtype == rv.dtype == np.float32
    assert np.all(rm != 0)


def test_eval_mode_and_no_tracking_leave_running_stats_alone(rng):
    layer = sn.BatchNorm(3, backend="numpy").eval()
    layer.forward(rng.standard_normal((4, 3)))
    np.testing.assert_array_equal(layer.buffers["running_mean"], 0.0)
    np.testing.assert_array_equal(layer.buffers["running_var"], 1.0)
    assert layer.buffers["num_batches_tracked"] == 0


def test_train_and_eval_agree_once_running_stats_equal_the_batch(backend, rng):
    """With momentum 1 the running stats are the last batch's, but running_var is the UNBIASED
    variance, so eval does not reproduce training; with the biased variance it does."""
    layer = randomized(sn.BatchNorm(3, momentum=1.0, backend=backend), rng)
    x = rng.standard_normal((4, 3, 2)) * 3 + 1
    y_train = layer.forward(x)
    M = 8
    np.testing.assert_allclose(layer.buffers["running_var"], columns(x).var(0) * M / (M - 1), rtol=1e-12)
    y_eval = layer.eval().forward(x)
    assert np.max(np.abs(y_eval - y_train)) > 1e-2
    layer.buffers["running_var"][...] = columns(x).var(0)           # the biased variance
    np.testing.assert_allclose(layer.forward(x), y_train, rtol=1e-12, atol=1e-12)


# -- backward -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_staged_backward_equals_closed_form(shape, affine, rng):
    x = rng.standard_normal(shape) * 2 + 1
    w, b = (rng.standard_normal(3), rng.standard_normal(3)) if affine else (None, None)
    dy = rng.standard_normal(shape)
    _, cache = sn.batch_norm_forward(x, w, b, eps=1e-5)
    closed = sn.batch_norm_backward(dy, cache)
    staged = sn.batch_norm_backward_staged(dy, cache)
    assert closed.keys() == staged.keys() == ({"x", "weight", "bias"} if affine else {"x"})
    for k in closed:
        np.testing.assert_allclose(staged[k], closed[k], rtol=1e-10, atol=1e-13 * np.abs(closed[k]).max())


@pytest.mark.parametrize("backward", [sn.batch_norm_backward, sn.batch_norm_backward_staged])
@pytest.mark.parametrize("shape", SHAPES)
def test_functional_pairs_pass_gradcheck(backward, shape, rng):
    x = rng.standard_normal(shape)
    params = {"weight": rng.standard_normal(3), "bias": rng.standard_normal(3)}
    report = sn.gradcheck((sn.batch_norm_forward, backward), x, params=params)
    assert report.ok, str(report)


def test_eval_functional_pair_passes_gradcheck(rng):
    x = rng.standard_normal((4, 3, 2))
    stats = {"running_mean": rng.standard_normal(3), "running_var": rng.uniform(0.5, 2.0, 3)}
    report = sn.gradcheck((sn.batch_norm_eval_forward, sn.batch_norm_eval_backward), x,
                          params={"weight": rng.standard_normal(3), "bias": rng.standard_normal(3)},
                          kwargs=stats)
    assert report.ok, str(report)


def test_training_dx_sums_to_zero_and_is_orthogonal_to_x_hat_per_channel(backend, rng):
    layer = randomized(sn.BatchNorm(3, eps=1e-12, backend=backend), rng)
    x = rng.standard_normal((5, 3, 4)) * 3 + 2
    y = layer.forward(x)
    dx = layer.backward(rng.standard_normal(x.shape))
    x_hat = (y - layer.params["bias"][:, None]) / layer.params["weight"][:, None]
    scale = np.abs(dx).max() * x.size
    assert np.abs(columns(dx).sum(0)).max() < 1e-13 * scale
    assert np.abs((columns(dx) * columns(x_hat)).sum(0)).max() < 1e-12 * scale


def test_in_training_a_sample_gradient_depends_on_its_batch_mates_in_eval_not(backend, rng):
    layer = randomized(sn.BatchNorm(3, backend=backend), rng)
    x, dy = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    dy2 = dy.copy()
    dy2[1:] = rng.standard_normal((3, 3))                           # change the others' dy only
    for mode, coupled in (("train", True), ("eval", False)):
        getattr(layer, mode)()
        layer.forward(x)
        dx0, dx0_other = layer.backward(dy)[0].copy(), layer.backward(dy2)[0]
        assert (np.abs(dx0 - dx0_other).max() > 1e-3) == coupled


def test_eval_backward_is_the_fixed_affine_map(backend, rng):
    layer = randomized(sn.BatchNorm(3, backend=backend), rng)
    layer.buffers["running_var"][...] = rng.uniform(0.5, 2.0, 3)
    layer.eval().forward(rng.standard_normal((4, 3, 2)))
    dy = rng.standard_normal((4, 3, 2))
    rstd = 1.0 / np.sqrt(layer.buffers["running_var"] + layer.eps)
    np.testing.assert_allclose(layer.backward(dy), dy * (layer.params["weight"] * rstd)[:, None], rtol=1e-13)


def test_backward_follows_the_mode_of_its_forward(rng):
    """Switching to eval between forward and backward must not change which backward runs."""
    layer = randomized(sn.BatchNorm(3, backend="numpy"), rng)
    x, dy = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    layer.forward(x)
    want = layer.backward(dy).copy()
    layer.eval()
    np.testing.assert_array_equal(layer.backward(dy), want)


def test_gradcheck_does_not_corrupt_the_running_stats(rng):
    layer = randomized(sn.BatchNorm(3, backend="numpy"), rng)
    layer.buffers["running_mean"][...] = rng.standard_normal(3)
    before = {k: v.copy() for k, v in layer.buffers.items()}
    x = rng.standard_normal((4, 3, 2)) + 3.0
    report = sn.gradcheck(layer, x)               # ~2 forwards per element, all in training mode
    assert report.ok, str(report)
    for k, v in before.items():
        np.testing.assert_array_equal(layer.buffers[k], v)
    layer.forward(x)                              # while one plain forward does move them
    assert np.abs(layer.buffers["running_mean"] - before["running_mean"]).min() > 1e-3
    assert layer.buffers["num_batches_tracked"] == before["num_batches_tracked"] + 1


# -- dtypes, layouts, aliasing ------------------------------------------------------------
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 2.5e-7), (np.float16, 1e-3)])
def test_low_precision_against_float64(dtype, rtol, backend, rng):
    """One rounding at the store: within ~1 ulp of the float64 result on the same input."""
    layer = randomized(sn.BatchNorm(3, backend=backend), rng)
    x = (rng.standard_normal((8, 3, 4)) * 2 + 1).astype(dtype)
    assert_one_rounding(layer, x, rng.standard_normal(x.shape).astype(dtype), ref_train(x, layer), rtol)


def test_float32_parameters_give_float32_grads(rng):
    layer = sn.BatchNorm(3, dtype=np.float32, backend="numpy")
    y = layer.forward(rng.standard_normal((4, 3)))
    assert y.dtype == np.float64
    layer.backward(rng.standard_normal((4, 3)))
    assert layer.grads["weight"].dtype == layer.grads["bias"].dtype == np.float32


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_non_contiguous_inputs(mode, backend, rng):
    def run(x, dy):
        layer = sn.BatchNorm(3, backend=backend)
        layer.params.update(params)
        getattr(layer, mode)()
        y = layer.forward(x)
        return y, layer.backward(dy), dict(layer.grads), dict(layer.buffers)

    params = {"weight": rng.standard_normal(3), "bias": rng.standard_normal(3)}
    big = rng.standard_normal((4, 6, 5))
    for x in (big[:, ::2], np.swapaxes(rng.standard_normal((4, 5, 3)), 1, 2), big[::-1, 3:, ::2]):
        assert not x.flags.c_contiguous
        dy = rng.standard_normal(x.shape)
        got, want = run(x, dy), run(np.ascontiguousarray(x), dy)
        for a, b in zip(got[:2], want[:2]):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
        for a, b in zip(got[2:], want[2:]):
            for k in b:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-13, atol=1e-13)


def test_output_is_not_an_alias_of_the_cache(backend, rng):
    for mode in ("train", "eval"):
        layer = getattr(sn.BatchNorm(3, affine=False, backend=backend), mode)()
        assert_cache_not_aliased(layer, rng.standard_normal((4, 3)), rng.standard_normal((4, 3)))


def test_out_buffers_are_filled(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    out, dx_out = np.empty_like(x), np.empty_like(x)
    y, cache = sn.batch_norm_forward(x, out=out)
    assert y is out
    assert sn.batch_norm_backward(np.ones_like(x), cache, dx_out=dx_out)["x"] is dx_out


# -- errors ----------------------------------------------------------------------------
def test_one_value_per_channel_in_training_names_the_fixes(backend):
    for shape in ((1, 3), (1, 3, 1, 1)):
        with pytest.raises(ValueError) as e:
            sn.BatchNorm(3, backend=backend).forward(np.ones(shape))
        msg = clear_message(e.value)
        assert "eval()" in msg and "larger batch" in msg and "GroupNorm" in msg and "LayerNorm" in msg
        with pytest.raises(ValueError):
            sn.BatchNorm(3, track_running_stats=False, backend=backend).eval().forward(np.ones(shape))
        assert sn.BatchNorm(3, backend=backend).eval().forward(np.ones(shape)).shape == shape
    assert sn.BatchNorm(3, backend=backend).forward(np.arange(6.0).reshape(1, 3, 2)).shape == (1, 3, 2)


@pytest.mark.parametrize("x,pattern", [
    (np.ones((4, 5)), r"axis 1 \(channels\) of size num_features=3"),
    (np.ones((4, 5, 3)), r"axis 1 \(channels\) of size num_features=3"),
    (np.ones(3), r"\(N, C\)"),
    (np.float64(1.0), r"\(N, C\)"),
    (np.ones((0, 3)), "non-empty"),
    (np.ones((2, 3, 0)), "non-empty"),
])
def test_bad_input_is_a_clear_error(x, pattern, backend):
    with pytest.raises(ValueError, match=pattern) as e:
        sn.BatchNorm(3, backend=backend).forward(x)
    clear_message(e.value)


def test_integer_input_is_rejected(backend):
    with pytest.raises(TypeError, match=r"astype\(np.float32\)"):
        sn.BatchNorm(3, backend=backend).forward(np.ones((2, 3), dtype=np.int64))


@pytest.mark.parametrize("kwargs,arg", [
    ({"num_features": 0}, "num_features"),
    ({"num_features": 3.0}, "num_features"),
    ({"eps": 0.0}, "eps"),
    ({"eps": -1e-5}, "eps"),
    ({"momentum": -0.1}, "momentum"),
    ({"momentum": 1.5}, "momentum"),
    ({"momentum": True}, "momentum"),
    ({"affine": 1}, "affine"),
    ({"track_running_stats": "no"}, "track_running_stats"),
])
def test_bad_construction_fails_early(kwargs, arg):
    kwargs = {"num_features": 3, **kwargs}
    with pytest.raises((ValueError, TypeError)) as e:
        sn.BatchNorm(**kwargs)
    assert clear_message(e.value).startswith(arg + ":")


def test_functional_api_checks_its_arguments(rng):
    x = rng.standard_normal((4, 3))
    with pytest.raises(ValueError, match="weight: expected shape"):
        sn.batch_norm_forward(x, np.ones(2))
    with pytest.raises(ValueError, match="running_var: expected shape"):
        sn.batch_norm_eval_forward(x, np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match="count: expected"):
        sn.update_running_stats(np.zeros(3), np.ones(3), np.zeros(3), np.zeros(3), 1, 0.1)
    with pytest.raises(ValueError, match="momentum: expected"):
        sn.update_running_stats(np.zeros(3), np.ones(3), np.zeros(3), np.zeros(3), 4, 2.0)
