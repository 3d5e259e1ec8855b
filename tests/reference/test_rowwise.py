"""The row-wise family (LayerNorm, RMSNorm and its variants) on both backends.

Each forward is compared with a formula written out independently here, in
plain NumPy with np.linalg.norm / np.var, not with the library's code path.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from layer_helpers import randomized

import scratchnorm as sn
from scratchnorm import fast


# -- independent formulas -------------------------------------------------------
def ref_layer_norm(x, w, b, eps):
    x = x.astype(np.float64)
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def ref_rms(x, eps, mode, k=None):
    x = x.astype(np.float64)
    k = x.shape[-1] if k is None else k
    rms = np.linalg.norm(x[..., :k], axis=-1, keepdims=True) / math.sqrt(k)
    if mode == "inside":
        return x / np.sqrt(rms**2 + eps)
    if mode == "outside":
        return x / (rms + eps)
    return x / np.sqrt(np.maximum(rms**2, eps))


def layers_and_refs(d=8):
    """(label, factory(backend), reference(x, layer)) for every row-wise layer."""
    def p(layer, name):
        return layer.params[name].astype(np.float64)

    out = [
        ("LayerNorm", lambda b: sn.LayerNorm(d, backend=b),
         lambda x, L: ref_layer_norm(x, p(L, "weight"), p(L, "bias"), L.eps)),
        ("LayerNorm no affine", lambda b: sn.LayerNorm(d, elementwise_affine=False, backend=b),
         lambda x, L: ref_layer_norm(x, 1.0, 0.0, L.eps)),
        ("SimpleRMSNorm", lambda b: sn.SimpleRMSNorm(backend=b), lambda x, L: ref_rms(x, L.eps, "inside")),
        ("RMSNormWithBias", lambda b: sn.RMSNormWithBias(d, backend=b),
         lambda x, L: ref_rms(x, L.eps, "inside") * p(L, "weight") + p(L, "bias")),
        ("RMSNormLearnableEps", lambda b: sn.RMSNormLearnableEps(d, eps=0.3, backend=b),
         lambda x, L: ref_rms(x, abs(L.params["eps"][0]), "inside") * p(L, "weight")),
        ("PartialRMSNorm p=0.25", lambda b: sn.PartialRMSNorm(d, p=0.25, backend=b),
         lambda x, L: ref_rms(x, L.eps, "inside", k=math.ceil(d * 0.25)) * p(L, "weight")),
        ("GemmaRMSNorm", lambda b: sn.GemmaRMSNorm(d, backend=b),
         lambda x, L: ref_rms(x, L.eps, "inside") * (1.0 + p(L, "weight"))),
        ("DyT", lambda b: sn.DyT(d, alpha0=0.8, backend=b),
         lambda x, L: np.tanh(p(L, "alpha")[0] * x) * p(L, "weight") + p(L, "bias")),
        ("GroupRMSNorm G=2", lambda b: sn.GroupRMSNorm(d, 2, backend=b),
         lambda x, L: np.concatenate([ref_rms(x[..., :d // 2], L.eps, "inside"),
                                      ref_rms(x[..., d // 2:], L.eps, "inside")], -1) * p(L, "weight")),
    ]
    for mode in ("inside", "outside", "clamp"):
        out.append((f"RMSNorm {mode}", lambda b, m=mode: sn.RMSNorm(d, eps=1e-3, eps_mode=m, backend=b),
                    lambda x, L: ref_rms(x, L.eps, L.eps_mode) * p(L, "weight")))
    return out


CASES = layers_and_refs()
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("label,make,ref", CASES, ids=IDS)
@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 3, 8), (2, 2, 3, 8)])
def test_forward_matches_independent_formula(label, make, ref, shape, backend, rng):
    layer = make(backend)
    randomized(layer, rng)
    x = rng.standard_normal(shape) * 3 + 0.5
    y = layer.forward(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_allclose(y, ref(x, layer), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("label,make,ref", CASES, ids=IDS)
def test_non_contiguous_and_fortran_inputs(label, make, ref, backend, rng):
    layer = make(backend)
    randomized(layer, rng)
    big = rng.standard_normal((6, 16))
    for x in (big[::2, ::2], np.asfortranarray(rng.standard_normal((4, 8))), big[::-1, 8:]):
        assert not x.flags.c_contiguous
        np.testing.assert_allclose(layer.forward(x), ref(x, layer), rtol=1e-12, atol=1e-12)
        dy = rng.standard_normal(x.shape)
        dx = layer.backward(dy)
        dx_c = make(backend)
        dx_c.params.update({k: v.copy() for k, v in layer.params.items()})
        dx_c.forward(np.ascontiguousarray(x))
        np.testing.assert_allclose(dx, dx_c.backward(dy), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("label,make,ref", CASES, ids=IDS)
def test_float32_and_float16_against_float64(label, make, ref, backend, rng):
    """float32: within 4 float32 epsilons (2 * 2.5e-7) of the largest float64 value (the reference
    rounds once; the numba forward computes y in float32: fast/layernorm.py, rmsnorm.py, variants.py).
    float16: within 1e-3 relative (one float16 rounding, eps16 = 9.8e-4)."""
    layer = make(backend)
    randomized(layer, rng)
    x64 = rng.standard_normal((16, 8)) * 2
    dy64 = rng.standard_normal(x64.shape)
    y64 = layer.forward(x64)
    dx64 = layer.backward(dy64)
    g64 = dict(layer.grads)
    for dtype, rtol in ((np.float32, 2.5e-7), (np.float16, 1e-3)):
        x = x64.astype(dtype)
        y = layer.forward(x)
        assert y.dtype == dtype
        ref64 = make("numpy")
        ref64.params.update({k: v.copy() for k, v in layer.params.items()})
        want = ref64.forward(x.astype(np.float64))     # same (rounded) input, in float64
        scale = np.abs(want).max()
        assert np.max(np.abs(y.astype(np.float64) - want)) <= 2 * rtol * scale
        dx = layer.backward(dy64.astype(dtype))
        assert dx.dtype == dtype
        ref64.forward(x.astype(np.float64))
        want_dx = ref64.backward(dy64.astype(dtype).astype(np.float64))    # same rounded inputs, float64
        row_scale = np.abs(want_dx).max(axis=-1, keepdims=True)            # each row on its own scale
        assert np.all(np.abs(dx.astype(np.float64) - want_dx) <= 4 * rtol * row_scale)
    # and the float64 run is unchanged by the lower-precision runs in between
    np.testing.assert_array_equal(layer.forward(x64), y64)
    np.testing.assert_array_equal(layer.backward(dy64), dx64)
    for k in g64:
        np.testing.assert_array_equal(layer.grads[k], g64[k])


def row_dx_by_differences(ref, layer, x, dy, row, h=None):
    """dx of one row from the independent formula ``ref``, by central differences: sum_i dy_i dy_i/dx_j.

    The step ``h`` defaults to 1e-6 of the layer's eps (at most 1e-6), the scale an all-zero row bends on: its
    statistic is eps (for eps "outside", |x| has a kink at 0 that a step of eps / 1e6 barely sees). A row of
    ordinary size takes h = 1e-6."""
    if h is None:
        eps = getattr(layer, "eps", None)
        eps = float(abs(layer.params["eps"][0])) if eps is None and "eps" in layer.params else (eps or 1.0)
        h = 1e-6 * min(1.0, eps)
    dx = np.zeros(x.shape[-1])
    for j in range(x.shape[-1]):
        plus, minus = x.copy(), x.copy()
        plus[row, j] += h
        minus[row, j] -= h
        dx[j] = np.sum(dy[row] * (ref(plus, layer)[row] - ref(minus, layer)[row])) / (2 * h)
    return dx


@pytest.mark.parametrize("label,make,ref", CASES, ids=IDS)
def test_zero_rows_give_the_known_output_and_gradient(label, make, ref, backend, rng):
    """An all-zero row: x_hat = 0, so y is exactly the bias (0 without one), bit for bit; dx is what the
    independent formula gives by central differences (the direct term alone: the others carry a factor x)."""
    layer = make(backend)
    randomized(layer, rng)
    x = rng.standard_normal((3, 8))
    x[1] = 0.0
    dy = rng.standard_normal(x.shape)
    y = layer.forward(x)
    assert np.array_equal(y[1], ref(x, layer)[1])
    dx = layer.backward(dy)
    want = row_dx_by_differences(ref, layer, x, dy, row=1)
    np.testing.assert_allclose(dx[1], want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))
    assert all(np.all(np.isfinite(g)) for g in layer.grads.values())


@pytest.mark.parametrize("label,make,ref", CASES, ids=IDS)
def test_nan_and_inf_propagate_like_pytorch(label, make, ref, backend, rng):
    """A NaN or Inf in a row makes that row's output NaN (its statistic is NaN or Inf);
    the other rows are untouched. PyTorch's layer_norm / rms_norm behave the same way.
    DyT has no statistic: the NaN stays in its element, and tanh(alpha * inf) = sign(alpha)."""
    layer = make(backend)
    randomized(layer, rng)
    x = rng.standard_normal((3, 8))
    clean = layer.forward(x)
    x[0, 2], x[2, 5] = np.nan, np.inf
    with np.errstate(invalid="ignore", over="ignore"):   # NumPy warns about inf - inf; that is fine here
        y = layer.forward(x)
    if label == "DyT":
        p = {k: v.astype(np.float64) for k, v in layer.params.items()}
        assert np.isnan(y[0, 2]) and np.isfinite(np.delete(y, [2, 21])).all()
        assert y[2, 5] == np.sign(p["alpha"][0]) * p["weight"][5] + p["bias"][5]
    else:
        assert np.isnan(y[0]).any() and not np.isfinite(y[2]).all()
    np.testing.assert_array_equal(y[1], clean[1])


# -- exact properties at eps = 0 ----------------------------------------------------
@pytest.mark.parametrize("mode", ["inside", "outside", "clamp"])
def test_rms_norm_is_scale_invariant_at_eps_zero(mode, backend, rng):
    fwd = sn.rms_norm_forward if backend == "numpy" else fast.rms_norm_forward
    x = rng.standard_normal((4, 16))
    y, _ = fwd(x, eps=0.0, eps_mode=mode)
    for k in (1e-3, 0.5, 7.0, 1e4):
        np.testing.assert_allclose(fwd(k * x, eps=0.0, eps_mode=mode)[0], y, rtol=1e-13, atol=1e-14)
    # with eps > 0 it is only approximate, and fails at small scale
    y_eps, _ = fwd(1e-4 * x, eps=1e-6, eps_mode=mode)
    assert np.max(np.abs(y_eps - y)) > 1e-2


def test_layer_norm_is_shift_invariant_at_eps_zero(backend, rng):
    fwd = sn.layer_norm_forward if backend == "numpy" else fast.layer_norm_forward
    x = rng.standard_normal((4, 16))
    y, _ = fwd(x, eps=0.0)
    for c in (-3.0, 0.25, 100.0):
        np.testing.assert_allclose(fwd(x + c, eps=0.0)[0], y, rtol=1e-12, atol=1e-12)


# -- gradient structure ---------------------------------------------------------
@pytest.mark.parametrize("mode", ["inside", "outside", "clamp"])
def test_rms_norm_gradient_is_orthogonal_to_x(mode, backend, rng):
    layer = sn.RMSNorm(32, eps=1e-12, eps_mode=mode, elementwise_affine=False, backend=backend)
    x = rng.standard_normal((6, 32))
    layer.forward(x)
    dx = layer.backward(rng.standard_normal(x.shape))
    dots = np.sum(dx * x, -1) / (np.linalg.norm(dx, axis=-1) * np.linalg.norm(x, axis=-1))
    assert np.max(np.abs(dots)) < 1e-10


def test_layer_norm_gradient_is_orthogonal_to_ones_and_x_hat(backend, rng):
    layer = sn.LayerNorm(32, eps=1e-12, elementwise_affine=False, backend=backend)
    x = rng.standard_normal((6, 32)) + 2.0
    y = layer.forward(x)
    dx = layer.backward(rng.standard_normal(x.shape))
    scale = np.linalg.norm(dx, axis=-1)
    assert np.max(np.abs(dx.sum(-1)) / scale) < 1e-12
    assert np.max(np.abs(np.sum(dx * y, -1)) / (scale * np.linalg.norm(y, axis=-1))) < 1e-10


@pytest.mark.parametrize("mode", ["inside", "outside", "clamp"])
@pytest.mark.parametrize("k", [None, 3])
def test_rms_norm_staged_backward_equals_closed_form(mode, k, rng):
    x = rng.standard_normal((5, 12)) * 0.05   # small rows, so "clamp" hits both branches
    w, b = rng.standard_normal(12), rng.standard_normal(12)
    _, cache = sn.rms_norm_forward(x, w, b, eps=1e-3, eps_mode=mode, k=k)
    dy = rng.standard_normal(x.shape)
    closed, staged = sn.rms_norm_backward(dy, cache), sn.rms_norm_backward_staged(dy, cache)
    assert closed.keys() == staged.keys() == {"x", "weight", "bias", "eps"}
    for name in closed:
        np.testing.assert_allclose(closed[name], staged[name], rtol=1e-12, atol=1e-13)


def test_rms_norm_closed_form_matches_papers_folded_formula(rng):
    """For eps inside and k = d: dx = rstd * (g - x_hat * mean(g * x_hat))."""
    x, w, dy = rng.standard_normal((5, 12)), rng.standard_normal(12), rng.standard_normal((5, 12))
    _, cache = sn.rms_norm_forward(x, w, eps=1e-5)
    g, x_hat, rstd = dy * w, cache["x_hat"], cache["rstd"]
    folded = rstd * (g - x_hat * np.mean(g * x_hat, -1, keepdims=True))
    np.testing.assert_allclose(sn.rms_norm_backward(dy, cache)["x"], folded, rtol=1e-12, atol=1e-13)


def test_layer_norm_staged_backward_equals_closed_form(rng):
    x = rng.standard_normal((5, 12)) + 4.0
    w, b = rng.standard_normal(12), rng.standard_normal(12)
    _, cache = sn.layer_norm_forward(x, w, b)
    dy = rng.standard_normal(x.shape)
    closed, staged = sn.layer_norm_backward(dy, cache), sn.layer_norm_backward_staged(dy, cache)
    for name in ("x", "weight", "bias"):
        np.testing.assert_allclose(closed[name], staged[name], rtol=1e-12, atol=1e-13)


# -- eps placements and the partial count ---------------------------------------------
def test_eps_placements_give_the_documented_numbers():
    """ms = 1e-6, eps = 1e-6: inside 1/sqrt(2e-6), outside 1/(1e-3 + 1e-6), clamp 1/sqrt(1e-6)."""
    x = np.full((1, 4), 1e-3)
    got = {m: sn.rms_norm_forward(x, eps=1e-6, eps_mode=m)[0][0, 0] / 1e-3 for m in ("inside", "outside", "clamp")}
    assert got["inside"] == pytest.approx(1 / math.sqrt(2e-6), rel=1e-12)
    assert got["outside"] == pytest.approx(1 / (1e-3 + 1e-6), rel=1e-12)
    assert got["clamp"] == pytest.approx(1 / math.sqrt(1e-6), rel=1e-12)


@pytest.mark.parametrize("d,p,k", [(100, 0.07, 7), (8, 0.01, 1), (16, 0.0625, 1), (512, 0.0625, 32),
                                   (10, 1.0, 10), (3, 0.34, 2), (1000, 0.001, 1)])
def test_partial_count_is_ceil_robust_to_round_off(d, p, k):
    assert sn.partial_count(d, p) == k


def test_partial_rms_uses_only_the_prefix_for_the_statistic(backend, rng):
    layer = sn.PartialRMSNorm(16, p=0.25, elementwise_affine=False, backend=backend)
    x = rng.standard_normal((3, 16))
    y = layer.forward(x)
    x2 = x.copy()
    x2[:, 4:] *= 100.0     # outside the first k = 4: the statistic does not move
    np.testing.assert_allclose(layer.forward(x2)[:, :4], y[:, :4], rtol=1e-13)
    layer.forward(x)
    dy = rng.standard_normal(x.shape)
    dx = layer.backward(dy)
    for row in range(3):                                                      # every row, on its own scale
        want = row_dx_by_differences(lambda v, L: ref_rms(v, L.eps, "inside", k=4), layer, x, dy, row, h=1e-6)
        np.testing.assert_allclose(dx[row], want, rtol=1e-6, atol=1e-7 * np.max(np.abs(want)))


def test_learnable_eps_gradient_sign_follows_abs(rng):
    layer = sn.RMSNormLearnableEps(6, eps=0.2, backend="numpy")
    x, dy = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    layer.forward(x)
    layer.backward(dy)
    g_pos = layer.grads["eps"].copy()
    layer.params["eps"] = -layer.params["eps"]          # same |eps|, same output
    layer.forward(x)
    layer.backward(dy)
    np.testing.assert_allclose(layer.grads["eps"], -g_pos, rtol=1e-14)
    assert layer.grads["eps"].shape == (1,)


def test_group_rms_norm_with_one_group_is_rms_norm(backend, rng):
    x = rng.standard_normal((4, 12))
    g = sn.GroupRMSNorm(12, 1, backend=backend)
    r = sn.RMSNorm(12, backend=backend)
    w = rng.standard_normal(12)
    g.params["weight"] = w
    r.params["weight"] = w
    np.testing.assert_allclose(g.forward(x), r.forward(x), rtol=1e-14)
    dy = rng.standard_normal(x.shape)
    np.testing.assert_allclose(g.backward(dy), r.backward(dy), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g.grads["weight"], r.grads["weight"], rtol=1e-12)
